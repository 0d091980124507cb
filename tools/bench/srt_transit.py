#!/usr/bin/python3
"""Where SRT's idle-link latency goes, on loopback.

Runs a live H.264 stream through `mpegtsmux alignment=7 ! srtsink` and `srtsrc ! tsdemux`
in one process and times each MPEG-TS packet that carries a PCR twice, by wall clock: as
srtsink receives it and as srtsrc outputs it. The PCR value identifies the packet on both
sides, so the difference is SRT's own transit (library and elements), independent of any
timestamp the elements compute. Prints the median per pair of latencies.

    /usr/bin/python3 tools/bench/srt_transit.py            # the default matrix
    /usr/bin/python3 tools/bench/srt_transit.py 125:125 500:500
      (receiver latency : sender latency, ms)
"""

import socket
import sys
import time

import gi

gi.require_version("Gst", "1.0")
from gi.repository import GLib, Gst  # noqa: E402

RUN_SECONDS = 10
# Packets of the first seconds are left out: the connection and the decoder settle.
SKIP_FIRST = 0.25


def free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pcr_fields(data):
    """The PCR bytes of every TS packet in `data` that carries one."""
    for at in range(0, len(data) - 187, 188):
        packet = data[at:at + 188]
        has_adaptation = packet[3] & 0x20
        if packet[0] == 0x47 and has_adaptation and packet[4] > 0 and packet[5] & 0x10:
            yield bytes(packet[6:12])


def transit(receiver_ms, sender_ms):
    """Median srtsink-in to srtsrc-out time (ms) of PCR packets, and their count."""
    port = free_udp_port()
    sender = Gst.parse_launch(
        "videotestsrc is-live=true pattern=ball ! video/x-raw,width=320,height=240,framerate=24/1 "
        "! x264enc tune=zerolatency bitrate=600 speed-preset=ultrafast key-int-max=24 "
        "! h264parse config-interval=-1 ! mpegtsmux alignment=7 "
        f"! srtsink name=out uri=srt://127.0.0.1:{port}?mode=listener latency={sender_ms} "
        "wait-for-connection=false sync=false")
    receiver = Gst.parse_launch(
        f"srtsrc name=in uri=srt://127.0.0.1:{port}?mode=caller latency={receiver_ms} "
        "! tsdemux latency=0 ! h264parse ! avdec_h264 ! fakesink sync=true")
    clock = Gst.SystemClock.obtain()
    seen = {"sent": {}, "received": {}}

    def record(side):
        def probe(_pad, info):
            now = clock.get_time()
            if info.type & Gst.PadProbeType.BUFFER_LIST:
                group = info.get_buffer_list()
                buffers = [group.get(i) for i in range(group.length())]
            else:
                buffers = [info.get_buffer()]
            for buffer in buffers:
                ok, mapped = buffer.map(Gst.MapFlags.READ)
                if ok:
                    for pcr in pcr_fields(mapped.data):
                        seen[side].setdefault(pcr, now)
                    buffer.unmap(mapped)
            return Gst.PadProbeReturn.OK
        return probe

    kinds = Gst.PadProbeType.BUFFER | Gst.PadProbeType.BUFFER_LIST
    sender.get_by_name("out").get_static_pad("sink").add_probe(kinds, record("sent"))
    receiver.get_by_name("in").get_static_pad("src").add_probe(kinds, record("received"))
    sender.set_state(Gst.State.PLAYING)
    time.sleep(0.5)
    receiver.set_state(Gst.State.PLAYING)
    loop = GLib.MainLoop()
    GLib.timeout_add(RUN_SECONDS * 1000, loop.quit)
    loop.run()
    receiver.set_state(Gst.State.NULL)
    sender.set_state(Gst.State.NULL)
    received = sorted(seen["received"].items(), key=lambda kv: kv[1])
    received = received[int(len(received) * SKIP_FIRST):]
    delays = sorted((t - seen["sent"][pcr]) / 1e6 for pcr, t in received if pcr in seen["sent"])
    if not delays:
        raise SystemExit(f"no PCR packet went through SRT ({receiver_ms}:{sender_ms})")
    return delays[len(delays) // 2], len(delays)


def main():
    Gst.init(None)
    pairs = sys.argv[1:] or ["125:125", "500:500", "0:125", "125:0", "250:125"]
    print("receiver latency | sender latency | srtsink in -> srtsrc out, median | packets")
    for pair in pairs:
        receiver_ms, sender_ms = (int(x) for x in pair.split(":"))
        median, count = transit(receiver_ms, sender_ms)
        print(f"{receiver_ms:>8} ms | {sender_ms:>8} ms | {median:8.1f} ms | {count}")


if __name__ == "__main__":
    main()
