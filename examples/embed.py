#!/usr/bin/env python3
"""Embedding moqsink and moqsrc in a Python (PyGObject) application.

The same shape as examples/embed.rs: the application makes its own pictures and pushes
them through `appsrc ! x264enc ! h264parse ! moqsink`, served on 127.0.0.1; a second
pipeline, `moqsrc ! appsink`, receives the access units and reads, for each, the time it
reached moqsink (the `timestamp/x-unix` reference meta), printing the latency.

    GST_PLUGIN_PATH=target/release python3 examples/embed.py [SECONDS]

Needs python3-gi, gir1.2-gstreamer-1.0 and gir1.2-gst-plugins-base-1.0 (pipelines/setup.sh
installs them) and the plugins built (cargo build --release). Exits non-zero if nothing
arrived.
"""

import socket
import sys
import threading
import time

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstApp", "1.0")
from gi.repository import Gst  # noqa: E402

WIDTH, HEIGHT, FPS = 320, 240, 24


def free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    seconds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    Gst.init(None)
    for factory in ("moqsink", "moqsrc"):
        if Gst.ElementFactory.find(factory) is None:
            sys.exit(f"{factory} not found: build the plugins and set GST_PLUGIN_PATH")

    port = free_udp_port()
    sender = Gst.parse_launch(
        "appsrc name=frames is-live=true format=time "
        f"caps=video/x-raw,format=GRAY8,width={WIDTH},height={HEIGHT},framerate={FPS}/1 "
        "! videoconvert ! video/x-raw,format=I420 "
        "! x264enc tune=zerolatency key-int-max=48 ! h264parse "
        f"! moqsink name=sink listen=127.0.0.1:{port}"
    )
    sender.set_state(Gst.State.READY)
    fingerprint = sender.get_by_name("sink").get_property("tls-cert-fingerprint")
    frames = sender.get_by_name("frames")
    sender.set_state(Gst.State.PLAYING)

    receiver = Gst.parse_launch(
        f"moqsrc url=moqt://127.0.0.1:{port}/live tls-fingerprint={fingerprint} "
        "! appsink name=out sync=false emit-signals=true"
    )
    unix = Gst.Caps.new_empty_simple("timestamp/x-unix")
    latencies = []
    lock = threading.Lock()

    def on_sample(sink):
        sample = sink.emit("pull-sample")
        buffer = sample.get_buffer()
        meta = buffer.get_reference_timestamp_meta(unix)
        if meta is not None:
            ms = (time.time_ns() - meta.timestamp) / 1e6
            key = "   " if buffer.has_flags(Gst.BufferFlags.DELTA_UNIT) else "key"
            print(f"frame {buffer.offset:>5}  {buffer.get_size():>6} bytes  {key}  latency {ms:6.1f} ms")
            with lock:
                latencies.append(ms)
        return Gst.FlowReturn.OK

    receiver.get_by_name("out").connect("new-sample", on_sample)
    receiver.set_state(Gst.State.PLAYING)

    # The application's frames, pushed at the frame rate.
    start = time.monotonic()
    for n in range(seconds * FPS):
        picture = bytes(((i % WIDTH + i // WIDTH + n * 4) % 256) for i in range(WIDTH * HEIGHT))
        buffer = Gst.Buffer.new_wrapped(picture)
        buffer.pts = n * Gst.SECOND // FPS
        buffer.duration = Gst.SECOND // FPS
        frames.emit("push-buffer", buffer)
        wait = n / FPS - (time.monotonic() - start)
        if wait > 0:
            time.sleep(wait)
    frames.emit("end-of-stream")
    time.sleep(0.5)
    receiver.set_state(Gst.State.NULL)
    sender.set_state(Gst.State.NULL)

    with lock:
        if not latencies:
            sys.exit("no frame arrived")
        mean = sum(latencies) / len(latencies)
        print(f"{len(latencies)} frames received, mean latency {mean:.1f} ms (to moqsrc's output, no decoding)")


if __name__ == "__main__":
    main()
