//! `webrtc-gcc`, WebRTC as the benchmark's comparator: gst-plugins-rs's `webrtcsink` (which
//! encodes the pictures itself, Google Congestion Control — `rtpgccbwe` — setting its
//! encoder's bitrate) to `webrtcsrc` (webrtcbin's jitter buffer, NACK/RTX), meeting through
//! gst-plugins-rs's signalling server. `pipelines/install-webrtc.sh` builds the three
//! (gst-plugin-webrtc, gst-plugin-rtp, gst-plugin-webrtc-signalling) into one directory.
//!
//! The encoder is the one `moq-adaptive` runs: webrtcsink picks x264enc for H.264 and emits
//! `encoder-setup` for it, where the run sets [`LIVE_X264`] and the start bitrate and stops
//! webrtcsink's own defaults (ultrafast, a 2560-frame GoP, a 120 ms VBV). webrtcsink's
//! mitigation modes (halving the frame rate below 500 kbit/s, scaling the picture down) are
//! off: as for `moq-adaptive`, the encoder's bitrate is the only thing adapted. webrtcsink
//! asks x264 for H.264's constrained-baseline profile (CAVLC, no B frames), the profile WebRTC
//! offers for H.264; the rate the encoder is set to, which the benchmark measures, is the same.
//!
//! How the media crosses linkem. Both ICE agents (webrtcbin's libnice agent) gather on
//! 127.0.0.1 only (`add-local-ip-address`), over UDP only, with no STUN or TURN server. The
//! sender's agent binds one port, the one linkem forwards to (`min-rtp-port` =
//! `max-rtp-port`). The receiver is told the sender's candidate with linkem's listen address
//! instead of the sender's, and the sender is told none of the receiver's candidates: it
//! learns the receiver's address from the connectivity checks that reach it through linkem (a
//! peer-reflexive candidate, as behind a NAT). So the only candidate pair that can succeed
//! runs through linkem both ways, media downstream and RTCP (transport-wide feedback, NACKs)
//! upstream. Candidates are rewritten where webrtcbin takes them: a handler on its
//! `add-ice-candidate` action signal runs before webrtcbin's own, stops the emission and emits
//! it again with the candidate changed. The run also checks that linkem carried the media.
//!
//! One change to webrtcsink's chain. x264's `tune=zerolatency` cuts each picture into slices
//! (one per thread), and GStreamer 1.22's `rtph264pay` with `config-interval=-1` (as
//! webrtcsink sets it) sends SPS and PPS again before every IDR slice, not once per picture.
//! An SPS after a slice starts a new access unit in H.264, so `rtph264depay` cuts each
//! keyframe in two (a picture missing its other slices, then a stray one); a browser, which
//! assembles a frame from the packets of one RTP timestamp, would not notice. The SPS and PPS
//! are put in once per keyframe by webrtcsink's `h264parse` instead (`config-interval=-1`),
//! the payloader adding none (`config-interval=0`, its other settings webrtcsink's: MTU 1200,
//! `aggregate-mode=zero-latency`).

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gst::glib;
use gst::prelude::*;

use crate::systems::{
    ADAPTIVE_MAX_KBIT, ADAPTIVE_MIN_KBIT, ADAPTIVE_START_KBIT, LIVE_X264, RECEIVER_LATENCY_MS,
};

/// The plugin libraries `pipelines/install-webrtc.sh` builds.
pub const PLUGINS: [&str; 2] = ["libgstrswebrtc.so", "libgstrsrtp.so"];
/// The signalling server's binary, beside the plugins.
pub const SERVER: &str = "gst-webrtc-signalling-server";
/// Tells the sender and receiver children where the signalling server listens.
const SIGNALLING_ENV: &str = "MOQ_BENCH_WEBRTC_SIGNALLING";
/// The only address the ICE agents gather on.
const LOOPBACK: &str = "127.0.0.1";

/// Where the WebRTC plugins and the signalling server are.
#[derive(Debug, Clone)]
pub struct WebRtc {
    pub dir: PathBuf,
}

impl WebRtc {
    /// Checks that `dir` holds both plugins and the signalling server.
    pub fn locate(dir: &Path) -> Result<WebRtc, String> {
        for file in PLUGINS.iter().chain([&SERVER]) {
            if !dir.join(file).is_file() {
                return Err(format!(
                    "{}: no {file} (pipelines/install-webrtc.sh builds it)",
                    dir.display()
                ));
            }
        }
        Ok(WebRtc {
            dir: dir.to_path_buf(),
        })
    }

    /// The given directory, else what `pipelines/install-webrtc.sh` builds (or has built)
    /// and prints; the script's output goes to `log`.
    pub fn find(dir: Option<&Path>, workspace: &Path, log: &Path) -> Result<WebRtc, String> {
        if let Some(dir) = dir {
            return WebRtc::locate(dir);
        }
        let script = workspace.join("pipelines/install-webrtc.sh");
        eprintln!(
            "building the WebRTC plugins with {} (once; its output in {})",
            script.display(),
            log.display()
        );
        let stderr = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
        let output = Command::new("bash")
            .arg(&script)
            .stderr(stderr)
            .output()
            .map_err(|e| format!("{} does not run: {e}", script.display()))?;
        if !output.status.success() {
            return Err(format!(
                "{} failed ({}); see {}",
                script.display(),
                output.status,
                log.display()
            ));
        }
        WebRtc::locate(Path::new(String::from_utf8_lossy(&output.stdout).trim()))
    }

    /// Points a child's GStreamer at the WebRTC plugins (own registry file under `out`) and
    /// tells it the signalling server's address.
    pub fn environment<'c>(
        &self,
        command: &'c mut Command,
        out: &Path,
        signalling: &str,
    ) -> &'c mut Command {
        command
            .env("GST_PLUGIN_PATH", &self.dir)
            .env("GST_REGISTRY", out.join("webrtc-registry.bin"))
            .env(SIGNALLING_ENV, signalling)
    }

    /// Starts the signalling server on a free loopback port; returns once it accepts.
    pub fn start_signalling(&self) -> Result<Signalling, String> {
        let port = TcpListener::bind((LOOPBACK, 0))
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let binary = self.dir.join(SERVER);
        let child = Command::new(&binary)
            .args(["--host", LOOPBACK, "--port", &port.to_string()])
            .env("WEBRTCSINK_SIGNALLING_SERVER_LOG", "error")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
        let mut server = Signalling {
            child,
            uri: format!("ws://{LOOPBACK}:{port}"),
        };
        let at = SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect_timeout(&at, Duration::from_millis(200)).is_err() {
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(format!("the signalling server exited at start ({status})"));
            }
            if Instant::now() > deadline {
                return Err(format!("the signalling server did not listen on {at}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(server)
    }
}

/// A running signalling server, stopped when dropped.
pub struct Signalling {
    child: Child,
    pub uri: String,
}

impl Drop for Signalling {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The sender's element, after the decoded pictures: H.264 only, GCC between the
/// `moq-adaptive` floor and ceiling from its start rate, no mitigation modes (see the
/// module's documentation); FEC and retransmission as webrtcsink's defaults.
pub fn sender_element() -> String {
    format!(
        "webrtcsink name=ws congestion-control=gcc video-caps=video/x-h264 \
         start-bitrate={} min-bitrate={} max-bitrate={} enable-mitigation-modes=none",
        ADAPTIVE_START_KBIT * 1000,
        ADAPTIVE_MIN_KBIT * 1000,
        ADAPTIVE_MAX_KBIT * 1000,
    )
}

/// The receiver's element, up to RTP: webrtcsrc plays the first producer the signalling
/// server knows (the benchmark's sender is the only one). It asks the server once, when it
/// connects: the run starts it after the sender is registered ([`configure_sender`]).
pub fn receiver_element() -> String {
    "webrtcsrc name=wsrc connect-to-first-producer=true \
     ! application/x-rtp,media=video,encoding-name=H264"
        .to_owned()
}

/// The signalling server's address, from the environment [`WebRtc::environment`] set.
fn signalling_uri() -> Result<String, String> {
    std::env::var(SIGNALLING_ENV)
        .map_err(|_| format!("{SIGNALLING_ENV} is not set (the run sets it for its children)"))
}

/// Points a WebRTC element at the signalling server, without a STUN server (there is no
/// other host to ask).
fn set_up_element(element: &gst::Element) -> Result<(), String> {
    element.set_property("stun-server", None::<&str>);
    let signaller = element.property::<glib::Object>("signaller");
    signaller.set_property("uri", signalling_uri()?);
    Ok(())
}

/// Restricts a webrtcbin's ICE agent to UDP on 127.0.0.1 and, if given, to one port.
fn restrict_ice(webrtcbin: &gst::Element, port: Option<u16>) {
    let ice = webrtcbin.property::<gst::Object>("ice-agent");
    if !ice.emit_by_name::<bool>("add-local-ip-address", &[&LOOPBACK]) {
        eprintln!("webrtc: the ICE agent refused {LOOPBACK} as its local address");
    }
    ice.set_property_from_str("ice-tcp", "false");
    if let Some(port) = port {
        // Both bounds, the maximum first: each is checked against the other.
        ice.set_property_from_str("max-rtp-port", &port.to_string());
        ice.set_property_from_str("min-rtp-port", &port.to_string());
    }
}

/// Replaces every remote candidate a webrtcbin is given by `rewrite`'s answer (none drops
/// it), before webrtcbin takes it.
fn filter_remote_candidates(
    webrtcbin: &gst::Element,
    rewrite: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
) {
    webrtcbin.connect("add-ice-candidate", false, move |values| {
        let (Ok(bin), Ok(mline), Ok(candidate)) = (
            values[0].get::<gst::Element>(),
            values[1].get::<u32>(),
            values[2].get::<Option<String>>(),
        ) else {
            return None;
        };
        // The end of the candidates (none or an empty one) goes through as it is.
        let candidate = candidate.filter(|c| !c.is_empty())?;
        let replacement = rewrite(&candidate);
        if replacement.as_deref() == Some(candidate.as_str()) {
            return None;
        }
        bin.stop_signal_emission_by_name("add-ice-candidate");
        if let Some(replacement) = replacement {
            bin.emit_by_name::<()>("add-ice-candidate", &[&mline, &replacement]);
        }
        None
    });
}

/// An ICE candidate attribute (`candidate:…`, with or without `a=`) with its connection
/// address and port replaced by `to`; none unless it is a UDP host candidate.
pub fn rewrite_candidate(candidate: &str, to: SocketAddr) -> Option<String> {
    // foundation component transport priority address port "typ" type ...
    let mut fields: Vec<String> = candidate.split_whitespace().map(str::to_owned).collect();
    if fields.len() < 8
        || !fields[2].eq_ignore_ascii_case("udp")
        || fields[6] != "typ"
        || fields[7] != "host"
    {
        return None;
    }
    fields[4] = to.ip().to_string();
    fields[5] = to.port().to_string();
    Some(fields.join(" "))
}

/// Sets up the sender's webrtcsink `ws`: signalling, ICE on `ice_port` of 127.0.0.1 only,
/// the receiver's candidates dropped, x264 with [`LIVE_X264`]. `on_registered` is called
/// when the signalling server has welcomed the sender, which then announces itself as a
/// producer (webrtcsink connects once it has encoded its first pictures); `on_encoder` gets
/// each session's encoder (not the one webrtcsink runs to discover caps) once set up,
/// `on_gcc` each session's `rtpgccbwe`.
pub fn configure_sender(
    pipeline: &gst::Pipeline,
    ice_port: u16,
    on_registered: impl Fn() + Send + Sync + 'static,
    on_encoder: impl Fn(&gst::Element) + Send + Sync + 'static,
    on_gcc: impl Fn(&gst::Element) + Send + Sync + 'static,
) -> Result<(), String> {
    let sink = pipeline
        .by_name("ws")
        .ok_or("webrtc sender: no webrtcsink ws")?;
    set_up_element(&sink)?;
    sink.property::<glib::Object>("signaller")
        .connect_notify(Some("client-id"), move |_, _| on_registered());
    sink.connect("encoder-setup", false, move |values| {
        let consumer = values[1].get::<String>().unwrap_or_default();
        let encoder = values[3].get::<gst::Element>().ok()?;
        let factory = encoder.factory().map(|f| f.name().to_string());
        if factory.as_deref() != Some("x264enc") {
            eprintln!(
                "webrtc sender: webrtcsink chose {factory:?}, not x264enc: the comparison \
                 with moq-adaptive does not hold"
            );
            return Some(false.to_value());
        }
        encoder.set_property("bitrate", ADAPTIVE_START_KBIT);
        for setting in LIVE_X264.split_whitespace() {
            let (name, value) = setting.split_once('=').expect("name=value");
            encoder.set_property_from_str(name, value);
        }
        if consumer != "discovery" {
            on_encoder(&encoder);
        }
        // Configured: webrtcsink's defaults for x264enc do not apply.
        Some(true.to_value())
    });
    // SPS and PPS once per keyframe, from the parser (see the module's documentation).
    sink.connect("payloader-setup", false, |values| {
        let payloader = values[3].get::<gst::Element>().ok()?;
        if payloader.factory().is_none_or(|f| f.name() != "rtph264pay") {
            return Some(false.to_value());
        }
        payloader.set_property_from_str("mtu", "1200");
        payloader.set_property_from_str("aggregate-mode", "zero-latency");
        payloader.set_property_from_str("config-interval", "0");
        Some(true.to_value())
    });
    let on_gcc = Arc::new(on_gcc);
    sink.connect("consumer-pipeline-created", false, move |values| {
        let pipeline = values[2].get::<gst::Pipeline>().ok()?;
        let on_gcc = on_gcc.clone();
        pipeline.connect_deep_element_added(move |_, _, element| {
            match element.factory().map(|f| f.name()).as_deref() {
                Some("rtpgccbwe") => on_gcc(element),
                Some("h264parse") => element.set_property_from_str("config-interval", "-1"),
                _ => {}
            }
        });
        None
    });
    sink.connect("consumer-added", false, move |values| {
        let webrtcbin = values[2].get::<gst::Element>().ok()?;
        restrict_ice(&webrtcbin, Some(ice_port));
        // Only checks arriving through linkem tell the sender where the receiver is.
        filter_remote_candidates(&webrtcbin, |_| None);
        None
    });
    Ok(())
}

/// Sets up the receiver's webrtcsrc `wsrc`: signalling, ICE on 127.0.0.1, the sender's
/// candidates moved to linkem's address `through`, the jitter buffer's latency as the other
/// systems' receivers.
pub fn configure_receiver(pipeline: &gst::Pipeline, through: SocketAddr) -> Result<(), String> {
    let src = pipeline
        .by_name("wsrc")
        .ok_or("webrtc receiver: no webrtcsrc wsrc")?;
    set_up_element(&src)?;
    pipeline.connect_deep_element_added(move |_, _, element| {
        if element.factory().is_none_or(|f| f.name() != "webrtcbin") {
            return;
        }
        element.set_property_from_str("latency", &RECEIVER_LATENCY_MS.to_string());
        restrict_ice(element, None);
        filter_remote_candidates(element, move |c| rewrite_candidate(c, through));
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_candidates_move_to_the_link_and_others_are_dropped() {
        let to: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        assert_eq!(
            rewrite_candidate("candidate:1 1 UDP 2015363327 127.0.0.1 35111 typ host", to)
                .as_deref(),
            Some("candidate:1 1 UDP 2015363327 127.0.0.1 40000 typ host")
        );
        assert_eq!(
            rewrite_candidate(
                "a=candidate:3 1 udp 2015363327 ::1 35111 typ host generation 0",
                to
            )
            .as_deref(),
            Some("a=candidate:3 1 udp 2015363327 127.0.0.1 40000 typ host generation 0")
        );
        for other in [
            "candidate:2 1 TCP 1015021823 127.0.0.1 9 typ host tcptype active",
            "candidate:5 1 UDP 1679819007 127.0.0.1 35111 typ srflx raddr 0.0.0.0 rport 0",
            "candidate:1 1 UDP",
        ] {
            assert_eq!(rewrite_candidate(other, to), None, "{other}");
        }
    }

    #[test]
    fn the_elements_use_the_adaptive_systems_rates() {
        let sender = sender_element();
        for expected in [
            "congestion-control=gcc",
            "start-bitrate=600000",
            "min-bitrate=150000",
            "max-bitrate=1200000",
            "enable-mitigation-modes=none",
        ] {
            assert!(sender.contains(expected), "{expected} in {sender}");
        }
        assert!(receiver_element().starts_with("webrtcsrc name=wsrc"));
    }
}
