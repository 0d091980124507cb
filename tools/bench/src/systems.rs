//! The systems compared: our four delivery modes (with the receiver settings that go with
//! each), SRT at two latencies, RTP over UDP with a jitter buffer, moq-gst through
//! moq-relay, and WebRTC (gst-plugins-rs's webrtcsink → webrtcsrc, GCC driving the encoder).

use std::net::SocketAddr;

use crate::{moq_gst, webrtc};

/// Receiver buffering, ms, for every system that has one to set (moqsrc `latency`,
/// rtpjitterbuffer `latency`, webrtcbin `latency`).
pub const RECEIVER_LATENCY_MS: u32 = 100;

/// moqsink's backlog budget in the benchmark: high enough never to bind, so our modes
/// behave as the source thesis's (the in-order baseline's latency grows without bound); the
/// default budget is a memory safety net the source thesis did not have.
pub const MAX_BACKLOG_MS: u32 = 600_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum System {
    Moq {
        delivery: &'static str,
        skip_forward: bool,
        delivery_timeout_ms: u32,
        /// moqsink's `congestion-control`.
        congestion: &'static str,
    },
    Srt {
        latency_ms: u32,
    },
    Rtp,
    /// moq-dev's plugin (moq-lite) publishing to a moq-relay at the sender's address.
    MoqGst,
    /// Ours with the encoder in the loop: the reference pictures are encoded live by
    /// `encoder`, whose bitrate moqsink drives (`rate-control=encoder`), skip-gops delivery,
    /// with this QUIC congestion controller.
    Adaptive {
        congestion: &'static str,
        encoder: Encoder,
    },
    /// Ours in the default mode (skip-gops) with a live 64 kbit/s Opus track beside the
    /// reference video: audio gaps and A/V skew, and what audio costs the video.
    MoqAv,
    /// Ours with renditions: the reference pictures encoded live by `encoder` at each bitrate of
    /// [`ABR_LADDER_KBIT`] into moqsink's video pads as one alternate group; moqsrc chooses
    /// among them by its path (`abr=auto`).
    Abr {
        encoder: Encoder,
    },
    /// WebRTC as users run it for low latency: gst-plugins-rs's `webrtcsink` encoding the
    /// decoded reference pictures live with the same x264 settings as [`System::Adaptive`],
    /// its bitrate driven by Google Congestion Control (`rtpgccbwe`), to a `webrtcsrc`
    /// (webrtcbin's jitter buffer, NACK/RTX) through their signalling server ([`webrtc`]).
    WebRtc,
}

/// The live encoder of a system that encodes the reference pictures again (`moq-adaptive*`,
/// `moq-abr*`): what users run, from the lowest-latency x264 settings to the defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Encoder {
    /// x264 `tune=zerolatency`: no B frames, no lookahead (the systems' unsuffixed names).
    #[default]
    ZeroLatency,
    /// The README's publish line: x264's defaults (preset medium, 3 B frames, 40 frames of
    /// lookahead: the encoder alone delays a frame by about 0.9 s at 24 fps).
    Default,
    /// openh264enc in its bitrate mode, at the lowest complexity (no B frames), with
    /// `qp-min=1`: its default 0 leaves openh264 a quantizer range too narrow to go much below
    /// ~550 kbit/s on the reference, whatever the target (moqsink warns of it).
    OpenH264,
}

impl Encoder {
    pub const ALL: [Encoder; 3] = [Encoder::ZeroLatency, Encoder::Default, Encoder::OpenH264];

    /// What a system's name ends with for this encoder.
    pub fn suffix(self) -> &'static str {
        match self {
            Encoder::ZeroLatency => "",
            Encoder::Default => "-default",
            Encoder::OpenH264 => "-openh264",
        }
    }

    /// The encoder element named `name` at `kbit` kbit/s, GoP 15 as the reference's, no
    /// scene-cut keyframes.
    pub fn element(self, name: &str, kbit: u32) -> String {
        match self {
            Encoder::ZeroLatency => format!("x264enc name={name} bitrate={kbit} {LIVE_X264}"),
            Encoder::Default => format!(
                "x264enc name={name} bitrate={kbit} bframes=3 key-int-max=15 \
                 option-string=scenecut=0"
            ),
            Encoder::OpenH264 => format!(
                "openh264enc name={name} bitrate={} rate-control=bitrate gop-size=15 \
                 complexity=low scene-change-detection=false qp-min=1",
                kbit * 1000
            ),
        }
    }

    /// The unit of the element's `bitrate` property, in bit/s.
    pub fn bitrate_unit(self) -> u64 {
        match self {
            Encoder::OpenH264 => 1,
            _ => 1000,
        }
    }
}

/// The renditions of `moq-abr`, kbit/s, on `video_0`.. (catalog tracks `video`,
/// `video-1`, ..), all at the reference's size.
pub const ABR_LADDER_KBIT: [u32; 3] = [250, 600, 1200];

/// The nominal bitrate (kbit/s) of a `moq-abr` rendition by its track name.
pub fn abr_rendition_kbit(track: &str) -> Option<u32> {
    let index = match track {
        "video" => 0,
        other => other.strip_prefix("video-")?.parse().ok()?,
    };
    ABR_LADDER_KBIT.get(index).copied()
}

/// The x264enc settings of every live encoder, tuned for latency as a live encoder is: no
/// B frames, no lookahead, GoP 15 as the reference's, and a rate-control buffer of 120 ms
/// (webrtcsink's for x264enc) instead of x264enc's 600 ms, in which x264 takes about as
/// long to follow a lower bitrate. The bitrate is set beside them.
pub const LIVE_X264: &str = "tune=zerolatency key-int-max=15 speed-preset=veryfast \
    vbv-buf-capacity=120 option-string=scenecut=0";

/// The live audio beside the reference video in `moq-av`: 64 kbit/s Opus, 20 ms frames.
const AV_AUDIO: &str = "audiotestsrc is-live=true wave=ticks ! audio/x-raw,rate=48000,channels=2 \
    ! audioconvert ! opusenc bitrate=64000 frame-size=20";

/// Encoder settings of the adaptive systems (kbit/s): start, floor and ceiling.
pub const ADAPTIVE_START_KBIT: u32 = 600;
pub const ADAPTIVE_MIN_KBIT: u32 = 150;
pub const ADAPTIVE_MAX_KBIT: u32 = 1200;

/// How a system's media crosses the link emulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// The sender listens behind linkem's forward side; media flows downstream.
    SenderServes,
    /// The sender pushes into linkem's listen side; media flows upstream.
    SenderPushes,
}

/// What the receiver needs to reach the sender.
#[derive(Debug, Clone)]
pub struct Endpoints {
    /// Where the sender listens (or, when it pushes, where it sends).
    pub sender: SocketAddr,
    /// Where the receiver connects (or, when the sender pushes, listens).
    pub receiver: SocketAddr,
    pub fingerprint: String,
}

impl System {
    pub fn moq(delivery: &'static str) -> System {
        System::Moq {
            delivery,
            skip_forward: matches!(delivery, "skip-gops" | "combined"),
            delivery_timeout_ms: 0,
            congestion: "cubic",
        }
    }

    /// Our four modes, with the receiver the source thesis paired them with.
    pub fn ours() -> Vec<System> {
        ["baseline", "deprioritize-b", "skip-gops", "combined"]
            .into_iter()
            .map(System::moq)
            .collect()
    }

    /// Ours with rate adaptation, per congestion controller worth comparing, with the
    /// lowest-latency encoder.
    pub fn adaptive() -> Vec<System> {
        ["cubic", "delay"]
            .into_iter()
            .map(|congestion| System::Adaptive {
                congestion,
                encoder: Encoder::ZeroLatency,
            })
            .collect()
    }

    /// The systems with the encoder in the loop (adaptive and renditions) with the other
    /// encoders: run on the congested profiles beside their zerolatency form.
    pub fn encoder_variants() -> Vec<System> {
        let mut variants = Vec::new();
        for encoder in Encoder::ALL.into_iter().skip(1) {
            for congestion in ["cubic", "delay"] {
                variants.push(System::Adaptive {
                    congestion,
                    encoder,
                });
            }
            variants.push(System::Abr { encoder });
        }
        variants
    }

    /// The live encoder of a system that encodes again, if it is one.
    pub fn encoder(&self) -> Option<Encoder> {
        match self {
            System::Adaptive { encoder, .. } | System::Abr { encoder } => Some(*encoder),
            _ => None,
        }
    }

    /// Everything compared on the congested profiles.
    pub fn all() -> Vec<System> {
        let mut all = System::ours();
        // The fixed-rate mode that skips, over the delay-aware controller: what the default
        // controller would change without rate control.
        all.push(System::Moq {
            delivery: "skip-gops",
            skip_forward: true,
            delivery_timeout_ms: 0,
            congestion: "delay",
        });
        all.extend(System::adaptive());
        all.push(System::MoqAv);
        all.push(System::Abr {
            encoder: Encoder::ZeroLatency,
        });
        all.extend(System::encoder_variants());
        all.push(System::Srt { latency_ms: 125 });
        all.push(System::Srt { latency_ms: 500 });
        all.push(System::Rtp);
        all.push(System::WebRtc);
        all
    }

    /// The receiver's pipeline ends in `tsdemux name=demux`, whose pads the run links
    /// itself: tsdemux replaces them when a program is announced again.
    pub fn demuxes_ts(&self) -> bool {
        matches!(self, System::Srt { .. })
    }

    /// The sender reports when QUIC took each object (moqsink `sink`'s `object-handoff`)
    /// and the receiver when it had each whole: the stages of our modes' delay.
    pub fn reports_stages(&self) -> bool {
        matches!(self, System::Moq { .. })
    }

    /// The buffering its receiver is set to, ms: moqsrc's, rtpjitterbuffer's and webrtcbin's
    /// `latency`, SRT's (the sender's, which the connection negotiates; the receiver adds none).
    /// moq-gst's player has none to set.
    pub fn configured_latency_ms(&self) -> Option<u32> {
        match self {
            System::Srt { latency_ms } => Some(*latency_ms),
            System::MoqGst => None,
            _ => Some(RECEIVER_LATENCY_MS),
        }
    }

    /// How much earlier than its timestamps the receiver's sink renders, ms. mpegtsmux
    /// writes every PCR a fixed 125 ms behind the PTS (TSMUX_PCR_OFFSET), and tsdemux
    /// times frames by the PCR, so they would wait that long for nothing. tsdemux's
    /// `ignore-pcr=true` avoids the wait too, but in GStreamer 1.22 it takes the PMT after
    /// every loss for a new program and loses the frame under way.
    pub fn render_offset_ms(&self) -> i64 {
        match self {
            System::Srt { .. } => -125,
            _ => 0,
        }
    }

    /// The system carries audio beside the video (its receiver decodes both).
    pub fn has_audio(&self) -> bool {
        matches!(self, System::MoqAv)
    }

    /// The encoder is in the loop: the sender re-encodes the reference pictures live, its
    /// bitrate set by moqsink.
    pub fn is_adaptive(&self) -> bool {
        matches!(self, System::Adaptive { .. })
    }

    /// The sender encodes the decoded reference pictures live (its frames are not the
    /// reference's AUs): with named taggers ([`System::live_taggers`]), or inside webrtcsink.
    pub fn encodes_live(&self) -> bool {
        !self.live_taggers().is_empty() || *self == System::WebRtc
    }

    /// The names of the sender's identities that tag live-encoded AUs, one per encoder;
    /// none when the reference AUs are sent as they are.
    pub fn live_taggers(&self) -> Vec<String> {
        match self {
            System::Adaptive { .. } => vec!["tagger".into()],
            System::Abr { .. } => (0..ABR_LADDER_KBIT.len())
                .map(|i| format!("tagger{i}"))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Compared on the loss × RTT grid (partial reliability; its loss-free cells are where
    /// each comparator's settings are checked).
    pub fn loss_grid() -> Vec<System> {
        vec![
            System::moq("baseline"),
            System::Moq {
                delivery: "baseline",
                skip_forward: true,
                delivery_timeout_ms: 500,
                congestion: "cubic",
            },
            System::Srt { latency_ms: 125 },
            System::Srt { latency_ms: 500 },
            System::Rtp,
        ]
    }

    /// The grid's systems on its loss-free cell (`idle` true) or on any other. The loss-free
    /// cell also runs the fixed-rate `skip-gops` mode, the adaptive systems and WebRTC: rate
    /// adaptation must not cost latency where the path is not the limit.
    pub fn grid_cell(idle: bool) -> Vec<System> {
        let mut systems = System::loss_grid();
        if idle {
            systems.push(System::moq("skip-gops"));
            systems.extend(System::adaptive());
            systems.push(System::WebRtc);
        }
        systems
    }

    pub fn name(&self) -> String {
        match self {
            System::Moq {
                delivery,
                delivery_timeout_ms: 0,
                congestion: "cubic",
                ..
            } => format!("moq-{delivery}"),
            System::Moq {
                delivery,
                delivery_timeout_ms: 0,
                congestion,
                ..
            } => format!("moq-{delivery}-{congestion}"),
            System::Moq {
                delivery,
                delivery_timeout_ms,
                ..
            } => format!("moq-{delivery}-timeout{delivery_timeout_ms}"),
            System::Srt { latency_ms } => format!("srt-{latency_ms}ms"),
            System::Rtp => "rtp-udp".into(),
            System::MoqGst => "moq-gst".into(),
            System::Adaptive {
                congestion: "cubic",
                encoder,
            } => format!("moq-adaptive{}", encoder.suffix()),
            System::Adaptive {
                congestion,
                encoder,
            } => format!("moq-adaptive-{congestion}{}", encoder.suffix()),
            System::MoqAv => "moq-av".into(),
            System::Abr { encoder } => format!("moq-abr{}", encoder.suffix()),
            System::WebRtc => "webrtc-gcc".into(),
        }
    }

    pub fn from_name(name: &str) -> Option<System> {
        System::all()
            .into_iter()
            .chain(System::loss_grid())
            .chain([System::MoqGst])
            .find(|s| s.name() == name)
    }

    pub fn direction(&self) -> Direction {
        match self {
            System::Rtp => Direction::SenderPushes,
            _ => Direction::SenderServes,
        }
    }

    /// The sender's pipeline after `appsrc name=src` (H.264 byte-stream AUs, live).
    /// `cert`/`key` are PEM files for moqsink.
    pub fn sender(&self, at: &Endpoints, cert: &str, key: &str) -> String {
        match self {
            System::Moq {
                delivery,
                delivery_timeout_ms,
                congestion,
                ..
            } => format!(
                "h264parse ! moqsink name=sink listen={} delivery={delivery} delivery-timeout={delivery_timeout_ms} \
                 congestion-control={congestion} max-backlog={MAX_BACKLOG_MS} signal-object-handoffs=true \
                 tls-cert-file={cert} tls-key-file={key} sync=false",
                at.sender
            ),
            System::MoqAv => format!(
                "h264parse ! m.video_0 {AV_AUDIO} ! m.audio_0 \
                 moqsink name=m listen={} delivery=skip-gops congestion-control=cubic \
                 max-backlog={MAX_BACKLOG_MS} tls-cert-file={cert} tls-key-file={key} sync=false",
                at.sender
            ),
            System::Srt { latency_ms } => format!(
                "h264parse config-interval=-1 ! mpegtsmux alignment=7 \
                 ! srtsink uri=srt://{}?mode=listener latency={latency_ms} wait-for-connection=false sync=false",
                at.sender
            ),
            System::Rtp => format!(
                "h264parse config-interval=-1 ! rtph264pay config-interval=-1 pt=96 mtu=1200 \
                 ! udpsink host={} port={} sync=false",
                at.sender.ip(),
                at.sender.port()
            ),
            System::MoqGst => format!(
                "h264parse ! moqsink url=https://{}/anon broadcast={} tls-disable-verify=true",
                at.sender,
                moq_gst::BROADCAST
            ),
            // As `Adaptive`: `raw` is where the sender logs availability; webrtcsink makes
            // the encoder, which the run sets up and tags ([`webrtc::configure_sender`]).
            System::WebRtc => format!(
                "h264parse ! avdec_h264 max-threads=1 ! identity name=raw ! {}",
                webrtc::sender_element()
            ),
            // The reference is decoded, then encoded again live at the rate moqsink sets.
            // `raw` and `tagger` are where the sender logs availability and tags frames.
            System::Adaptive {
                congestion,
                encoder,
            } => format!(
                "h264parse ! avdec_h264 max-threads=1 ! identity name=raw ! {} ! h264parse \
                 ! identity name=tagger ! moqsink name=sink listen={} delivery=skip-gops \
                 congestion-control={congestion} rate-control=encoder encoder-start-bitrate={} \
                 encoder-min-bitrate={} encoder-max-bitrate={} tls-cert-file={cert} tls-key-file={key} sync=false",
                encoder.element("enc", ADAPTIVE_START_KBIT),
                at.sender,
                ADAPTIVE_START_KBIT * 1000,
                ADAPTIVE_MIN_KBIT * 1000,
                ADAPTIVE_MAX_KBIT * 1000,
            ),
            // The decoded reference into one encoder per rendition, tagged after each.
            System::Abr { encoder } => {
                let mut description = String::from(
                    "h264parse ! avdec_h264 max-threads=1 ! identity name=raw ! tee name=t ",
                );
                let mut pads = String::new();
                for (i, kbit) in ABR_LADDER_KBIT.iter().enumerate() {
                    description.push_str(&format!(
                        "t. ! queue ! {} ! h264parse ! identity name=tagger{i} ! sink.video_{i} ",
                        encoder.element(&format!("enc{i}"), *kbit)
                    ));
                    pads.push_str(&format!(
                        "video_{i}::alt-group=1 video_{i}::bitrate={} ",
                        kbit * 1000
                    ));
                }
                description.push_str(&format!(
                    "moqsink name=sink listen={} delivery=skip-gops {pads}\
                     tls-cert-file={cert} tls-key-file={key} sync=false",
                    at.sender
                ));
                description
            }
        }
    }

    /// The receiver's pipeline up to H.264 AUs in byte-stream (the caller appends the
    /// probe point, decoder and sink, linked to tsdemux by the caller where
    /// [`System::demuxes_ts`]). tsdemux would add 700 ms of its own by default; SRT's
    /// latency already covers retransmission, so it gets none.
    pub fn receiver(&self, at: &Endpoints) -> String {
        match self {
            // `src` is the element whose `stats` the run records at the end.
            System::Moq { skip_forward, .. } => format!(
                "moqsrc name=src url=moqt://{}/live tls-fingerprint={} latency={RECEIVER_LATENCY_MS} skip-forward={skip_forward} media-timeout=20000",
                at.receiver, at.fingerprint
            ),
            System::Adaptive { .. } => format!(
                "moqsrc name=src url=moqt://{}/live tls-fingerprint={} latency={RECEIVER_LATENCY_MS} skip-forward=true media-timeout=20000",
                at.receiver, at.fingerprint
            ),
            // The run also reads the rendition playing from `src`.
            System::Abr { .. } => format!(
                "moqsrc name=src url=moqt://{}/live tls-fingerprint={} latency={RECEIVER_LATENCY_MS} \
                 skip-forward=true media-timeout=20000 abr=auto",
                at.receiver, at.fingerprint
            ),
            // The audio branch is `adec` (where the run records audio), the video follows.
            System::MoqAv => format!(
                "moqsrc name=src url=moqt://{}/live tls-fingerprint={} latency={RECEIVER_LATENCY_MS} \
                 skip-forward=true media-timeout=20000 src. ! opusdec name=adec ! fakesink sync=true src.",
                at.receiver, at.fingerprint
            ),
            // srtsrc's own latency adds to the one negotiated with the sender (transit is
            // both plus a frame): at 0, SRT holds packets for the sender's latency only.
            // tsdemux times frames by the PCR (see `render_offset_ms`).
            System::Srt { .. } => format!(
                "srtsrc uri=srt://{}?mode=caller latency=0 ! tsdemux name=demux latency=0",
                at.receiver
            ),
            System::Rtp => format!(
                "udpsrc address={} port={} caps=\"application/x-rtp,media=video,clock-rate=90000,encoding-name=H264,payload=96\" \
                 ! rtpjitterbuffer latency={RECEIVER_LATENCY_MS} ! rtph264depay",
                at.receiver.ip(),
                at.receiver.port()
            ),
            System::MoqGst => format!(
                "moqsrc url=https://{}/anon broadcast={} tls-disable-verify=true",
                at.receiver,
                moq_gst::BROADCAST
            ),
            // webrtcsrc hands out RTP when asked for it (no decoding inside); the run points
            // it at the signalling server and at linkem ([`webrtc::configure_receiver`]).
            System::WebRtc => format!("{} ! rtph264depay", webrtc::receiver_element()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abr_renditions_are_known_by_their_track_names() {
        assert_eq!(abr_rendition_kbit("video"), Some(ABR_LADDER_KBIT[0]));
        assert_eq!(abr_rendition_kbit("video-2"), Some(ABR_LADDER_KBIT[2]));
        assert_eq!(abr_rendition_kbit("video-3"), None);
        assert_eq!(abr_rendition_kbit("audio"), None);
    }

    #[test]
    fn only_the_idle_grid_cell_runs_the_adaptive_systems_beside_fixed_rate_skip_gops() {
        let lossy = System::grid_cell(false);
        assert_eq!(lossy, System::loss_grid());
        let idle: Vec<String> = System::grid_cell(true).iter().map(System::name).collect();
        for name in [
            "moq-skip-gops",
            "moq-adaptive",
            "moq-adaptive-delay",
            "webrtc-gcc",
            "srt-125ms",
        ] {
            assert!(idle.iter().any(|n| n == name), "{name} on the idle cell");
        }
        assert_eq!(idle.len(), lossy.len() + 4);
    }

    #[test]
    fn encoder_variants_are_named_by_a_suffix_and_the_plain_names_keep_zerolatency() {
        for (name, congestion, encoder) in [
            ("moq-adaptive", "cubic", Encoder::ZeroLatency),
            ("moq-adaptive-delay", "delay", Encoder::ZeroLatency),
            ("moq-adaptive-default", "cubic", Encoder::Default),
            ("moq-adaptive-delay-default", "delay", Encoder::Default),
            ("moq-adaptive-openh264", "cubic", Encoder::OpenH264),
            ("moq-adaptive-delay-openh264", "delay", Encoder::OpenH264),
        ] {
            let system = System::Adaptive {
                congestion,
                encoder,
            };
            assert_eq!(System::from_name(name), Some(system));
        }
        for encoder in Encoder::ALL {
            let name = format!("moq-abr{}", encoder.suffix());
            assert_eq!(System::from_name(&name), Some(System::Abr { encoder }));
        }
        // Every variant runs on the congested profiles, and the encoder it names is the
        // one its sender runs.
        let at = Endpoints {
            sender: "127.0.0.1:1".parse().unwrap(),
            receiver: "127.0.0.1:2".parse().unwrap(),
            fingerprint: String::new(),
        };
        let all = System::all();
        for system in System::encoder_variants() {
            assert!(all.contains(&system), "{}", system.name());
            let sender = system.sender(&at, "c", "k");
            let (element, absent) = match system.encoder() {
                Some(Encoder::OpenH264) => ("openh264enc", "x264enc"),
                Some(Encoder::Default) => ("bframes=3", "zerolatency"),
                other => panic!("{other:?} is not a variant"),
            };
            assert!(
                sender.contains(element) && !sender.contains(absent),
                "{sender}"
            );
        }
    }

    #[test]
    fn names_are_unique_and_round_trip() {
        let all: Vec<_> = System::all()
            .into_iter()
            .chain(System::loss_grid())
            .chain([System::MoqGst])
            .collect();
        for s in &all {
            assert_eq!(System::from_name(&s.name()).as_ref(), Some(s));
        }
        // Systems on the grid and elsewhere count once; no two others share a name.
        let mut distinct: Vec<&System> = Vec::new();
        for s in &all {
            if !distinct.contains(&s) {
                distinct.push(s);
            }
        }
        let mut names: Vec<_> = distinct.iter().map(|s| s.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), distinct.len());
    }
}
