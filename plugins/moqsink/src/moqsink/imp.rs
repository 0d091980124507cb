use std::collections::{HashMap, HashSet};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use gst::glib;
use gst::prelude::*;
use gst::subclass::prelude::*;
use h264::FrameKind;
use moq_media::keyframes::AlignedKeyframes;
use moq_media::rate_control::RateConfig;
use moq_session::tls::{self, ServerIdentity};
use moq_session::{
    Broadcast, EVENT_QUEUE, Handoff, HandoffHook, Located, PublishLimits, RelayEvent,
    RelayPublisher, RelayTarget, Server, ServerEvent, ServerLimits, SessionConfig, TrackNamespace,
};
use tokio::sync::mpsc;

use super::adapt::{self, Adaptation, Target};
use super::audio::AudioParams;
use super::caps::{self, MediaKind};
use super::encoder::Encoder;
use super::frame::unix_now_us;
use super::publisher::{AuTiming, Dropped, MediaTrack, Publisher, TrackId};
use super::track_sink::TrackSink;
use super::video::ENHANCEMENT_MAX_AGE;
use super::{CongestionControl, Delivery, Format, MoqSinkPad, RateControl, RatePolicy};
use moq_session::blocking::runtime;
use moqt_common::connection::{Connection, Endpoint, Side, text};
use moqt_common::lock;
use moqt_common::renamed::{Deprecations, Renamed};

static CAT: LazyLock<gst::DebugCategory> = LazyLock::new(|| {
    gst::DebugCategory::new(
        "moqsink",
        gst::DebugColorFlags::empty(),
        Some("Media over QUIC sink"),
    )
});

const DEFAULT_LISTEN: &str = "0.0.0.0:4443";
const DEFAULT_NAMESPACE: &str = "live";
const DEFAULT_MAX_SUBSCRIBERS: u32 = 1000;
const DEFAULT_MAX_BACKLOG_MS: u32 = 3000;
const DEFAULT_SUBSCRIBER_STALL_TIMEOUT_MS: u32 = 10_000;
/// Malformed access units are reported on the bus at most this often (with a count).
/// Longest a stop waits for the listening port to be free again (closed connections
/// drain first), so that the element can listen on it again at once.
const PORT_RELEASE: Duration = Duration::from_secs(2);
const MALFORMED_REPORT_INTERVAL: Duration = Duration::from_secs(10);
const DEFAULT_ENCODER_MIN: u64 = 150_000;
const DEFAULT_ENCODER_MAX: u64 = 2_000_000;
/// The least bitrate rate control may be told to keep the encoder above.
const ENCODER_BITRATE_FLOOR: u64 = 10_000;

/// Old property names, kept for a release.
static RENAMED: [Renamed; 5] = [
    Renamed::seconds(
        "subscriber-timeout",
        "subscriber-stall-timeout",
        DEFAULT_STALL_MS,
    ),
    Renamed::uint(
        "target-min-bitrate",
        "encoder-min-bitrate",
        TARGET_FLOOR,
        TARGET_MIN,
    ),
    Renamed::uint(
        "target-max-bitrate",
        "encoder-max-bitrate",
        TARGET_FLOOR,
        TARGET_MAX,
    ),
    Renamed::uint("target-start-bitrate", "encoder-start-bitrate", 0, 0),
    Renamed::read_only("certificate-fingerprint", "tls-cert-fingerprint"),
];
/// The old guint names' bounds and defaults.
const DEFAULT_STALL_MS: u32 = DEFAULT_SUBSCRIBER_STALL_TIMEOUT_MS;
const TARGET_FLOOR: u32 = ENCODER_BITRATE_FLOOR as u32;
const TARGET_MIN: u32 = DEFAULT_ENCODER_MIN as u32;
const TARGET_MAX: u32 = DEFAULT_ENCODER_MAX as u32;
/// Start without an `encoder-start-bitrate` nor an encoder to read one from.
const FALLBACK_TARGET_START: u64 = 1_000_000;
/// How often the path estimates are read and the target updated.
const ADAPT_INTERVAL: Duration = Duration::from_millis(100);
/// `estimated-bitrate` notifies when it moves by more than this share.
const NOTIFY_CHANGE: f64 = 0.02;

#[derive(Debug, Clone)]
struct Settings {
    /// Set explicitly; `None` listens on the default unless `url` is set.
    listen: Option<String>,
    /// With `url`, the relay to publish through; the namespace's default is `live` when
    /// listening.
    connection: Connection,
    tls_cert_file: Option<PathBuf>,
    tls_key_file: Option<PathBuf>,
    format: Format,
    delivery: Delivery,
    delivery_timeout_ms: u32,
    /// Listening: how long stopping waits for subscribers to move after GOAWAY, ms.
    drain_timeout_ms: u32,
    keyframe_on_subscribe: bool,
    /// Emit `object-handoff` for every object QUIC takes.
    signal_object_handoffs: bool,
    max_subscribers: u32,
    max_backlog_ms: u32,
    subscriber_stall_timeout_ms: u32,
    congestion: CongestionControl,
    rate_control: RateControl,
    rate_policy: RatePolicy,
    encoder_min_bps: u64,
    encoder_max_bps: u64,
    /// 0: the encoder's own bitrate.
    encoder_start_bps: u64,
    /// The pads' sinks synchronise on the clock.
    sync: bool,
}

/// Where the broadcast goes, from `listen`, `url` and `namespace`.
enum Destination {
    Listen {
        addr: String,
        namespace: TrackNamespace,
    },
    Relay {
        endpoint: Endpoint,
        located: Located,
    },
}

impl Settings {
    fn destination(&self) -> Result<Destination, gst::ErrorMessage> {
        let settings_error =
            |e: &dyn std::fmt::Display| gst::error_msg!(gst::ResourceError::Settings, ["{e}"]);
        let connection = &self.connection;
        match (&connection.url, &self.listen) {
            (Some(_), Some(listen)) => Err(gst::error_msg!(
                gst::ResourceError::Settings,
                [
                    "both listen ({listen}) and url are set: a sink either serves subscribers or publishes through a relay"
                ]
            )),
            (Some(text), None) => {
                let endpoint = connection.endpoint(text).map_err(|e| settings_error(&e))?;
                let located = endpoint
                    .url
                    .locate(connection.namespace.as_deref())
                    .map_err(|e| settings_error(&e))?;
                Ok(Destination::Relay { endpoint, located })
            }
            (None, listen) => Ok(Destination::Listen {
                addr: listen.clone().unwrap_or_else(|| DEFAULT_LISTEN.into()),
                namespace: moq_session::parse_namespace(
                    connection.namespace.as_deref().unwrap_or(DEFAULT_NAMESPACE),
                )
                .map_err(|e| settings_error(&e))?,
            }),
        }
    }

    /// The subscribers' path estimates drive something (the encoder, or the delay-aware
    /// controller's window), so they must acknowledge promptly.
    fn prompt_acks(&self) -> bool {
        self.rate_control == RateControl::Encoder
            || self.congestion.resolve(self.rate_control)
                == moq_session::congestion::CongestionControl::Delay
    }

    fn publish_limits(&self) -> PublishLimits {
        PublishLimits {
            max_backlog: Duration::from_millis(self.max_backlog_ms.into()),
            stall_timeout: Duration::from_millis(self.subscriber_stall_timeout_ms.into()),
        }
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            listen: None,
            connection: Connection::default(),
            tls_cert_file: None,
            tls_key_file: None,
            format: Format::default(),
            delivery: Delivery::default(),
            delivery_timeout_ms: 0,
            drain_timeout_ms: 0,
            keyframe_on_subscribe: true,
            signal_object_handoffs: false,
            max_subscribers: DEFAULT_MAX_SUBSCRIBERS,
            max_backlog_ms: DEFAULT_MAX_BACKLOG_MS,
            subscriber_stall_timeout_ms: DEFAULT_SUBSCRIBER_STALL_TIMEOUT_MS,
            congestion: CongestionControl::default(),
            rate_control: RateControl::default(),
            rate_policy: RatePolicy::default(),
            encoder_min_bps: DEFAULT_ENCODER_MIN,
            encoder_max_bps: DEFAULT_ENCODER_MAX,
            encoder_start_bps: 0,
            sync: true,
        }
    }
}

/// How subscribers reach us.
enum Link {
    /// We are the server.
    Listen(Server),
    /// We publish through a relay.
    Relay(RelayPublisher),
}

struct Started {
    link: Link,
    broadcast: Broadcast,
    publisher: Publisher,
    /// Tracks already warned about frames before their first keyframe.
    warned_no_keyframe: HashSet<TrackId>,
    malformed: MalformedReports,
    /// With `rate-control=encoder`.
    adaptation: Option<Adaptation>,
    encoder: Option<Encoder>,
    warned_no_encoder: bool,
    rate_policy: RatePolicy,
    adapting: Option<tokio::task::JoinHandle<()>>,
    /// Video tracks by alternate group: their keyframes are kept aligned.
    renditions: HashMap<u32, AlignedKeyframes<TrackId>>,
}

impl Started {
    /// Puts video track `id` in alternate group `group` (None: in none).
    fn set_alt_group(&mut self, id: TrackId, group: Option<u32>) {
        for aligned in self.renditions.values_mut() {
            aligned.remove(id);
        }
        if let Some(group) = group {
            self.renditions.entry(group).or_default().add(id);
        }
    }
}

/// Malformed frames, reported on the bus without flooding it: the first at once, then at
/// most one report per interval with the count since the last one.
#[derive(Default)]
struct MalformedReports {
    unreported: u64,
    last_report: Option<Instant>,
}

impl MalformedReports {
    /// Counts one; returns how many to report now, if a report is due.
    fn count(&mut self, now: Instant) -> Option<u64> {
        self.unreported += 1;
        let due = self
            .last_report
            .is_none_or(|t| now.duration_since(t) >= MALFORMED_REPORT_INTERVAL);
        if !due {
            return None;
        }
        self.last_report = Some(now);
        Some(std::mem::take(&mut self.unreported))
    }
}

/// A request pad and the sink behind it.
#[derive(Debug, Clone)]
struct PadEntry {
    id: TrackId,
    kind: MediaKind,
    /// `n` of `video_n` / `audio_n`.
    index: u32,
    pad: MoqSinkPad,
    sink: TrackSink,
}

impl PadEntry {
    /// The pad's `track` property, or the name its index gives.
    fn track_name(&self) -> String {
        self.pad
            .track()
            .unwrap_or_else(|| self.kind.default_track_name(self.index))
    }
}

#[derive(Default)]
pub struct MoqSink {
    settings: Mutex<Settings>,
    /// The TLS identity, created on first use so `tls-fingerprint` can be read before start.
    identity: Mutex<Option<Arc<ServerIdentity>>>,
    state: Mutex<Option<Started>>,
    /// Lock order: `pads` is never taken while `state` is held, nor the reverse.
    pads: Mutex<Vec<PadEntry>>,
    next_track_id: AtomicU32,
    /// The subscribers' delivery rate under the rate policy, bit/s (0: unknown).
    estimated_bps: AtomicU64,
    /// The encoder target last set, bit/s (0: none).
    target_bps: AtomicU64,
    /// Old property names used, to warn about on the bus.
    deprecations: Deprecations,
    /// The UDP port listened on while running (0: none).
    current_port: AtomicU32,
}

impl MoqSink {
    /// The TLS identity. Lock order: `settings` is copied first and released, then
    /// `identity` is taken; nothing holds `identity` while taking `settings`.
    fn identity(&self) -> Result<Arc<ServerIdentity>, gst::ErrorMessage> {
        let settings = lock(&self.settings).clone();
        let mut identity = lock(&self.identity);
        if let Some(id) = identity.as_ref() {
            return Ok(id.clone());
        }
        let id = match (&settings.tls_cert_file, &settings.tls_key_file) {
            (Some(cert), Some(key)) => ServerIdentity::from_pem_files(cert, key),
            (None, None) => {
                ServerIdentity::self_signed(&["localhost".into(), "127.0.0.1".into(), "::1".into()])
            }
            _ => {
                return Err(gst::error_msg!(
                    gst::ResourceError::Settings,
                    ["tls-cert-file and tls-key-file must be set together"]
                ));
            }
        }
        .map_err(|e| gst::error_msg!(gst::ResourceError::Settings, ["{e}"]))?;
        let id = Arc::new(id);
        *identity = Some(id.clone());
        Ok(id)
    }

    /// Serves subscribers directly, or publishes through the relay at `url`.
    fn start_link(
        &self,
        settings: &Settings,
        destination: Destination,
        broadcast: &Broadcast,
    ) -> Result<Link, gst::ErrorMessage> {
        let _guard = runtime().enter();
        let settings_error =
            |e: &dyn std::fmt::Display| gst::error_msg!(gst::ResourceError::Settings, ["{e}"]);
        let connection = &settings.connection;
        let addr = match destination {
            Destination::Relay {
                endpoint:
                    Endpoint {
                        url,
                        trust,
                        versions,
                    },
                located,
            } => {
                let (events_tx, events_rx) = mpsc::channel(EVENT_QUEUE);
                gst::info!(
                    CAT,
                    imp = self,
                    "publishing {} through {url}",
                    located.namespace.to_path()
                );
                runtime().spawn(forward_relay_events(
                    self.obj().downgrade(),
                    url.to_string(),
                    events_rx,
                ));
                let config = SessionConfig {
                    publish: Some(broadcast.clone()),
                    limits: settings.publish_limits(),
                    congestion: settings.congestion.resolve(settings.rate_control),
                    prompt_acks: settings.prompt_acks(),
                    path: Some(located.setup_path),
                    auth_token: connection.auth_token.clone(),
                    versions,
                };
                let mut relays = vec![RelayTarget { url, trust }];
                for text in connection.backups() {
                    let backup = connection.endpoint(text).map_err(|e| settings_error(&e))?;
                    relays.push(RelayTarget {
                        url: backup.url,
                        trust: backup.trust,
                    });
                }
                return Ok(Link::Relay(RelayPublisher::start(
                    relays, config, events_tx,
                )));
            }
            Destination::Listen { addr, .. } => addr,
        };
        let addr: SocketAddr = addr
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| {
                settings_error(&format!(
                    "invalid listen address {addr:?}: expected HOST:PORT"
                ))
            })?;
        let identity = self.identity()?;
        let (events_tx, events_rx) = mpsc::channel(EVENT_QUEUE);
        let limits = ServerLimits {
            max_sessions: settings.max_subscribers as usize,
            publish: settings.publish_limits(),
            congestion: settings.congestion.resolve(settings.rate_control),
            prompt_acks: settings.prompt_acks(),
            versions: connection.versions().map_err(|e| settings_error(&e))?,
        };
        let server =
            Server::bind(addr, &identity, broadcast.clone(), limits, events_tx).map_err(|e| {
                gst::error_msg!(
                    gst::ResourceError::OpenWrite,
                    ["cannot listen on {addr}: {e}"]
                )
            })?;
        let bound = server.local_addr();
        self.current_port
            .store(u32::from(bound.port()), Ordering::Relaxed);
        let fingerprint = tls::fingerprint_hex(&identity.fingerprint());
        gst::info!(
            CAT,
            imp = self,
            "listening on {bound}, certificate SHA-256 {fingerprint}"
        );
        runtime().spawn(forward_server_events(self.obj().downgrade(), events_rx));
        self.post_message(
            "moq-listening",
            &[
                ("address", &bound.to_string()),
                ("fingerprint", &fingerprint),
            ],
        );
        Ok(Link::Listen(server))
    }

    /// Asks the encoder upstream of video track `track` for a keyframe, so a new viewer
    /// starts without waiting for a GoP; at most once per GoP, however many viewers join.
    fn request_keyframe(&self, track: &str) -> bool {
        let decision = lock(&self.state).as_mut().and_then(|s| {
            let id = s.publisher.video_track_named(track)?;
            Some((id, s.publisher.allow_keyframe_request(id, unix_now_us())))
        });
        let id = match decision {
            Some((id, true)) => id,
            Some((_, false)) => {
                gst::debug!(
                    CAT,
                    imp = self,
                    "{track}: keyframe requested less than a GoP ago"
                );
                return false;
            }
            // Not a video track: nothing to ask for.
            None => return false,
        };
        self.force_keyframe(id, track)
    }

    /// Sends a keyframe request upstream of the pad of track `id` (`track` names it):
    /// whether upstream took it.
    fn force_keyframe(&self, id: TrackId, track: &str) -> bool {
        let Some(entry) = self.pad_entry(id) else {
            return false;
        };
        let event = gst::event::CustomUpstream::new(
            gst::Structure::builder("GstForceKeyUnit")
                .field("all-headers", true)
                .build(),
        );
        let taken = entry.pad.push_event(event);
        if !taken {
            gst::debug!(
                CAT,
                imp = self,
                "{track}: upstream did not handle the keyframe request"
            );
        }
        taken
    }

    fn post_message(&self, name: &str, fields: &[(&str, &(dyn ToSendValue + Sync))]) {
        let mut s = gst::Structure::builder(name);
        for (k, v) in fields {
            s = s.field(*k, v.to_send_value());
        }
        let _ = self.obj().post_message(
            gst::message::Element::builder(s.build())
                .src(&*self.obj())
                .build(),
        );
    }

    /// Reads the paths, updates `estimated-bitrate` and, with `rate-control=encoder`, the
    /// encoder's target. False once the element stopped.
    fn adapt_once(&self) -> bool {
        let (sessions, policy) = {
            let state = lock(&self.state);
            let Some(started) = state.as_ref() else {
                return false;
            };
            let sessions = match &started.link {
                Link::Listen(server) => server.sessions(),
                Link::Relay(relay) => relay.session().into_iter().collect(),
            };
            (sessions, started.rate_policy)
        };
        let reports: Vec<_> = sessions
            .iter()
            .filter_map(|s| Some(adapt::path_report(&s.path_estimate()?, s.send_queue())))
            .collect();
        gst::trace!(CAT, imp = self, "paths {reports:?}");
        let estimated = adapt::combined_rate(&reports, policy.into()).unwrap_or(0);
        let previous = self.estimated_bps.swap(estimated, Ordering::Relaxed);
        let moved = (estimated as f64 - previous as f64).abs() > NOTIFY_CHANGE * previous as f64;
        if moved || (previous == 0) != (estimated == 0) {
            self.obj().notify("estimated-bitrate");
        }
        let target = lock(&self.state)
            .as_mut()
            .and_then(|s| s.adaptation.as_mut())
            .and_then(|a| a.update(unix_now_us(), &reports));
        if let Some(target) = target {
            self.apply_target(target);
        }
        true
    }

    /// The encoder upstream of the first video pad, found once; a warning the first time
    /// there is none.
    fn encoder(&self) -> Option<Encoder> {
        let known = lock(&self.state).as_ref()?.encoder.clone();
        if known.is_some() {
            return known;
        }
        let found = self
            .first_video_pad()
            .and_then(|pad| Encoder::find_upstream(&pad));
        let mut state = lock(&self.state);
        let started = state.as_mut()?;
        started.encoder = found.clone();
        if found.is_none() && !std::mem::replace(&mut started.warned_no_encoder, true) {
            drop(state);
            gst::element_imp_warning!(
                self,
                gst::CoreError::NotImplemented,
                ("rate-control=encoder: no encoder with a bitrate property upstream; the target is only posted as moq-target-bitrate")
            );
        }
        found
    }

    /// The first video pad, as a pad upstream elements link to.
    fn first_video_pad(&self) -> Option<gst::Pad> {
        lock(&self.pads)
            .iter()
            .filter(|e| e.kind == MediaKind::Video)
            .min_by_key(|e| e.index)
            .map(|e| e.pad.clone().upcast())
    }

    /// Sets the encoder to `target` and tells the application.
    fn apply_target(&self, target: Target) {
        self.target_bps.store(target.bitrate, Ordering::Relaxed);
        let encoder = self.encoder();
        if let Some(encoder) = &encoder {
            encoder.set_bitrate(target.bitrate);
        }
        gst::debug!(
            CAT,
            imp = self,
            "target {} bit/s ({}), encoder {:?}",
            target.bitrate,
            target.reason,
            encoder.as_ref().map(Encoder::name)
        );
        self.post_message(
            "moq-target-bitrate",
            &[
                ("bitrate", &target.bitrate),
                (
                    "estimated-bitrate",
                    &self.estimated_bps.load(Ordering::Relaxed),
                ),
                ("reason", &target.reason),
                (
                    "encoder",
                    &encoder.as_ref().map(Encoder::name).unwrap_or_default(),
                ),
            ],
        );
        self.obj().notify("target-bitrate");
    }

    /// The rate controller for `settings`, and the encoder set to its start.
    fn start_adaptation(&self, settings: &Settings) -> Option<(Adaptation, Option<Encoder>)> {
        if settings.rate_control != RateControl::Encoder {
            return None;
        }
        let encoder = self
            .first_video_pad()
            .and_then(|pad| Encoder::find_upstream(&pad));
        let start = match settings.encoder_start_bps {
            0 => encoder
                .as_ref()
                .and_then(Encoder::bitrate)
                .unwrap_or(FALLBACK_TARGET_START),
            start => start,
        };
        let adaptation = Adaptation::new(RateConfig {
            min_bps: settings.encoder_min_bps,
            max_bps: settings.encoder_max_bps,
            start_bps: start,
            policy: settings.rate_policy.into(),
        });
        let start = adaptation.target_bps();
        if let Some(encoder) = &encoder {
            encoder.set_bitrate(start);
            gst::info!(
                CAT,
                imp = self,
                "driving {} from {start} bit/s",
                encoder.name()
            );
            if let Some(caveat) = encoder.rate_caveat() {
                gst::element_imp_warning!(
                    self,
                    gst::LibraryError::Settings,
                    ("rate-control=encoder: {caveat}")
                );
            }
        }
        self.target_bps.store(start, Ordering::Relaxed);
        Some((adaptation, encoder))
    }

    fn stats(&self) -> gst::Structure {
        let state = lock(&self.state);
        let mut s = gst::Structure::builder("moqsink-stats");
        let Some(started) = state.as_ref() else {
            return s.build();
        };
        // The first video track's figures at the top level, as before tracks were pads.
        let first_video = started.publisher.tracks().find_map(|(_, t)| match t {
            MediaTrack::Video(v) => Some(v),
            MediaTrack::Audio(_) => None,
        });
        if let Some(video) = first_video {
            let (published, base, enh) = video.stats();
            for (i, kind) in ["key", "reference", "non-reference"].iter().enumerate() {
                s = s
                    .field(format!("frames-{kind}"), published.frames[i])
                    .field(format!("bytes-{kind}"), published.bytes[i]);
            }
            s = s.field("frames-refused", published.dropped);
            for (layer, stats) in [("base", Some(base)), ("enhancement", enh)] {
                let t = stats.unwrap_or_default();
                s = s
                    .field(format!("{layer}-objects-sent"), t.objects_sent)
                    .field(format!("{layer}-bytes-sent"), t.bytes_sent)
                    .field(format!("{layer}-objects-dropped"), t.objects_dropped)
                    .field(format!("{layer}-groups-superseded"), t.groups_superseded)
                    .field(format!("{layer}-groups-expired"), t.groups_expired)
                    .field(format!("{layer}-groups-over-budget"), t.groups_over_budget)
                    .field(format!("{layer}-groups-missed"), t.groups_missed)
                    .field(format!("{layer}-streams-reset"), t.streams_reset);
            }
        }
        let tracks: Vec<gst::Structure> = started
            .publisher
            .tracks()
            .map(|(_, track)| track_stats(track))
            .collect();
        s = s.field("tracks", gst::Array::new(tracks)).field(
            "subscribers",
            match &started.link {
                Link::Listen(server) => server.session_count() as u32,
                Link::Relay(relay) => u32::from(relay.is_announced()),
            },
        );
        let sessions = match &started.link {
            Link::Listen(server) => server.sessions(),
            Link::Relay(relay) => relay.session().into_iter().collect(),
        };
        let (output, lag_us, ratio) = started
            .adaptation
            .as_ref()
            .map_or((None, 0, None), |a| a.encoder(unix_now_us()));
        drop(state);
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let per_session: Vec<gst::Structure> = sessions
            .iter()
            .map(|session| {
                let path = session.path_stats();
                let estimate = session.path_estimate().unwrap_or_default();
                gst::Structure::builder("moqsink-session")
                    .field("address", session.remote_address().to_string())
                    .field("rtt-ms", ms(path.rtt))
                    .field("min-rtt-ms", estimate.min_rtt.map_or(-1.0, ms))
                    .field("queue-delay-ms", ms(estimate.queue_delay))
                    .field("send-queue-ms", ms(session.send_queue().standing))
                    .field("cwnd", path.cwnd)
                    .field("lost-packets", path.lost_packets)
                    .field("estimated-bitrate", estimate.delivery_rate.unwrap_or(0))
                    .field("loss-rate", estimate.loss_rate)
                    .build()
            })
            .collect();
        s.field(
            "estimated-bitrate",
            self.estimated_bps.load(Ordering::Relaxed),
        )
        .field("target-bitrate", self.target_bps.load(Ordering::Relaxed))
        .field("encoder-output-bitrate", output.unwrap_or(0))
        .field("encoder-lag-ms", lag_us as f64 / 1000.0)
        .field("encoder-ratio", ratio.unwrap_or(0.0))
        .field("sessions", gst::Array::new(per_session))
        .build()
    }

    /// Emits `object-handoff` for a hand-off, its instants as wall clock.
    fn handoff_signal(&self) -> HandoffHook {
        let element = self.obj().downgrade();
        let (origin, origin_us) = (Instant::now(), unix_now_us());
        let unix_us = move |at: Instant| {
            origin_us.saturating_add(at.saturating_duration_since(origin).as_micros() as u64)
        };
        Arc::new(move |track: &str, h: Handoff| {
            if let Some(element) = element.upgrade() {
                element.emit_by_name::<()>(
                    "object-handoff",
                    &[
                        &track,
                        &h.group,
                        &h.object,
                        &unix_us(h.written),
                        &unix_us(h.taken),
                    ],
                );
            }
        })
    }

    /// Binds or connects, ready for the pads' tracks (READY → PAUSED).
    fn start(&self) -> Result<(), gst::ErrorMessage> {
        let settings = lock(&self.settings).clone();
        let destination = settings.destination()?;
        let namespace = match &destination {
            Destination::Listen { namespace, .. } => namespace.clone(),
            Destination::Relay { located, .. } => located.namespace.clone(),
        };
        let broadcast = Broadcast::new(namespace);
        if settings.signal_object_handoffs {
            broadcast.on_handoff(self.handoff_signal());
        }
        let timeout = (settings.delivery_timeout_ms > 0)
            .then(|| Duration::from_millis(settings.delivery_timeout_ms.into()));
        let mut publisher = Publisher::new(
            &broadcast,
            settings.format.into(),
            settings.delivery.into(),
            timeout,
        );
        // The pads' tracks exist from the start, so early subscribers find them.
        for entry in lock(&self.pads).iter() {
            publisher
                .add_track(entry.id, entry.kind, &entry.track_name())
                .map_err(|e| {
                    gst::error_msg!(
                        gst::ResourceError::Settings,
                        ["pad {}: {e}", entry.pad.name()]
                    )
                })?;
        }
        if settings.keyframe_on_subscribe {
            let element = self.obj().downgrade();
            broadcast.on_subscribe(Arc::new(move |track: &str| {
                element.upgrade().is_some_and(|element| {
                    gst::debug!(CAT, obj = element, "subscriber joined {track}");
                    element.imp().request_keyframe(track)
                })
            }));
        }
        let link = self.start_link(&settings, destination, &broadcast)?;
        self.estimated_bps.store(0, Ordering::Relaxed);
        self.target_bps.store(0, Ordering::Relaxed);
        let (adaptation, encoder) = self.start_adaptation(&settings).unzip();
        *lock(&self.state) = Some(Started {
            link,
            broadcast,
            publisher,
            warned_no_keyframe: HashSet::new(),
            malformed: MalformedReports::default(),
            adaptation,
            encoder: encoder.flatten(),
            warned_no_encoder: false,
            rate_policy: settings.rate_policy,
            adapting: None,
            renditions: HashMap::new(),
        });
        let adapting = runtime().spawn(adapt_loop(self.obj().downgrade()));
        if let Some(started) = lock(&self.state).as_mut() {
            started.adapting = Some(adapting);
        }
        Ok(())
    }

    fn stop(&self) {
        self.current_port.store(0, Ordering::Relaxed);
        if let Some(started) = lock(&self.state).take() {
            if let Some(adapting) = &started.adapting {
                adapting.abort();
            }
            // Stopped without EOS is no end of the stream: the tracks are not ended, so
            // viewers treat it as a publisher gone (to come back, or to move from) rather
            // than end their streams.
            if let Link::Listen(server) = &started.link {
                let drain = Duration::from_millis(lock(&self.settings).drain_timeout_ms.into());
                if !drain.is_zero() && server.session_count() > 0 {
                    for session in server.sessions() {
                        session.go_away("");
                    }
                    let deadline = std::time::Instant::now() + drain;
                    while server.session_count() > 0 && std::time::Instant::now() < deadline {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                }
            }
            if let Link::Listen(server) = started.link {
                server.close_and_release(PORT_RELEASE);
            }
        }
    }

    /// Sends GOAWAY (naming `uri`, or none when empty) to every direct subscriber.
    fn drain(&self, uri: &str) {
        let sessions = match lock(&self.state).as_ref().map(|s| &s.link) {
            Some(Link::Listen(server)) => server.sessions(),
            _ => {
                gst::warning!(CAT, imp = self, "drain: not listening, nobody to drain");
                return;
            }
        };
        gst::info!(
            CAT,
            imp = self,
            "draining {} subscriber session(s) to {uri:?}",
            sessions.len()
        );
        for session in sessions {
            session.go_away(uri);
        }
    }

    fn pad_entry(&self, id: TrackId) -> Option<PadEntry> {
        lock(&self.pads).iter().find(|e| e.id == id).cloned()
    }

    /// New caps on a pad (from its sink's `set_caps`): the track is created on the first.
    pub(super) fn track_caps(&self, id: TrackId, caps: &gst::Caps) -> Result<(), String> {
        let entry = self.pad_entry(id).ok_or("the pad was released")?;
        let s = caps.structure(0).ok_or("empty caps")?;
        let name = entry.track_name();
        let mut state = lock(&self.state);
        let started = state.as_mut().ok_or("caps before the element started")?;
        let result = match entry.kind {
            MediaKind::Video => {
                let (mut params, avcc) = caps::video_params(s)?;
                let pad = entry.pad.settings();
                if pad.alt_group != 0 && pad.bitrate == 0 {
                    return Err(format!(
                        "pad {} is in alternate group {} without a bitrate: set its bitrate \
                         (bit/s) so receivers can choose among the renditions",
                        entry.pad.name(),
                        pad.alt_group
                    ));
                }
                params.bitrate = (pad.bitrate > 0).then_some(pad.bitrate);
                params.alt_group = (pad.alt_group > 0).then_some(pad.alt_group);
                params.label = pad.label;
                started.set_alt_group(id, params.alt_group);
                let map = avcc.as_ref().and_then(|b| b.map_readable().ok());
                started
                    .publisher
                    .set_video_stream(id, &name, params, map.as_deref())
            }
            MediaKind::Audio => {
                let params = AudioParams {
                    label: entry.pad.settings().label,
                    ..caps::audio_params(s)?
                };
                started
                    .publisher
                    .set_audio_stream(id, &name, params, unix_now_us())
            }
        };
        result.map_err(|e| format!("track {name:?}: {e}"))
    }

    /// Whether `id` is the track of the first video pad, whose encoder rate control drives.
    fn drives_rate(&self, id: TrackId) -> bool {
        lock(&self.pads)
            .iter()
            .filter(|e| e.kind == MediaKind::Video)
            .min_by_key(|e| e.index)
            .is_some_and(|e| e.id == id)
    }

    /// Publishes one frame of the pad's track (from its sink's `render`).
    pub(super) fn track_render(&self, id: TrackId, buffer: &gst::Buffer, timing: AuTiming) {
        // Taken before the state: `pads` is never locked while `state` is held.
        let drives_rate = self.drives_rate(id);
        // The frame is shared with every subscriber as it is, not copied.
        let Ok(map) = buffer.clone().into_mapped_buffer_readable() else {
            gst::warning!(CAT, imp = self, "cannot map a buffer");
            return;
        };
        let data = Bytes::from_owner(map);
        let len = data.len();
        let mut state = lock(&self.state);
        let Some(started) = state.as_mut() else {
            return;
        };
        let kind = started
            .publisher
            .track(id)
            .map(|t| matches!(t, MediaTrack::Video(_)));
        let name = started
            .publisher
            .track(id)
            .map_or_else(String::new, |t| t.name().to_owned());
        // Renditions whose encoders should start a group with this one.
        let mut align = Vec::new();
        let result = match kind {
            Some(true) => started
                .publisher
                .push_video(id, data, timing)
                .map(|placed| {
                    gst::trace!(
                        CAT,
                        imp = self,
                        "{name}: {:?} AU → {:?} group {}",
                        placed.info.kind,
                        placed.role,
                        placed.group
                    );
                    let key = placed.info.kind == FrameKind::Key;
                    if drives_rate && let Some(adaptation) = started.adaptation.as_mut() {
                        // What the encoder made of its target, as it reaches the sink.
                        adaptation.on_frame(unix_now_us(), len as u64, key);
                    }
                    if key {
                        let now = unix_now_us();
                        align = started
                            .renditions
                            .values_mut()
                            .flat_map(|aligned| aligned.keyframe(id, now))
                            .collect();
                    }
                }),
            Some(false) => started.publisher.push_audio(id, data, timing),
            None => Err(Dropped::NotConfigured),
        };
        let report = match result {
            Ok(()) => None,
            Err(Dropped::NoKeyframeYet) => started.warned_no_keyframe.insert(id).then(|| {
                format!("{name}: dropping access units until a keyframe with SPS/PPS arrives")
            }),
            Err(Dropped::AfterRefusedKeyframe) => {
                gst::debug!(
                    CAT,
                    imp = self,
                    "{name}: dropping an AU that depends on a refused keyframe"
                );
                None
            }
            Err(Dropped::NotConfigured) => {
                gst::debug!(CAT, imp = self, "dropping a frame of a pad without caps");
                None
            }
            Err(Dropped::Malformed(reason)) => {
                gst::debug!(
                    CAT,
                    imp = self,
                    "{name}: malformed frame ({len} bytes): {reason}"
                );
                started.malformed.count(Instant::now()).map(|n| {
                    format!(
                        "{name}: dropped {n} malformed frame(s), the last of {len} bytes: {reason}"
                    )
                })
            }
        };
        drop(state);
        for other in align {
            gst::debug!(
                CAT,
                imp = self,
                "{name} started a group: aligning {other:?}"
            );
            self.force_keyframe(other, &name);
        }
        // Posted without holding the state: bus handlers may call back into the element.
        if let Some(text) = report {
            gst::element_imp_warning!(self, gst::StreamError::Decode, ("{text}"));
        }
    }

    /// The pad's stream ended (its sink got EOS). Once every pad's has, the broadcast
    /// ends: returned so the caller waits, cancellably, for subscribers to drain it.
    pub(super) fn track_eos(&self, id: TrackId) -> Option<Broadcast> {
        let mut state = lock(&self.state);
        let started = state.as_mut()?;
        if !started.publisher.end_track(id) {
            return None;
        }
        started.publisher.finish();
        Some(started.broadcast.clone())
    }

    /// A new request pad: a sink for it, inside the bin, behind a ghost pad.
    fn add_track_pad(
        &self,
        templ: &gst::PadTemplate,
        kind: MediaKind,
        name: Option<&str>,
    ) -> Option<gst::Pad> {
        let entry = {
            let mut pads = lock(&self.pads);
            let taken = |i: u32| pads.iter().any(|e| e.kind == kind && e.index == i);
            let index = match name {
                Some(name) => {
                    let index = name
                        .strip_prefix(kind.prefix())
                        .and_then(|rest| rest.strip_prefix('_'))
                        .and_then(|n| n.parse::<u32>().ok())?;
                    if taken(index) {
                        gst::warning!(CAT, imp = self, "pad {name} already exists");
                        return None;
                    }
                    index
                }
                None => (0..).find(|i| !taken(*i))?,
            };
            let id = self.next_track_id.fetch_add(1, Ordering::Relaxed);
            let pad_name = format!("{}_{index}", kind.prefix());
            let sink = TrackSink::new(id, kind, &format!("{pad_name}-sink"));
            let pad = glib::Object::builder::<MoqSinkPad>()
                .property("name", &pad_name)
                .property("direction", gst::PadDirection::Sink)
                .property("template", templ)
                .build();
            let entry = PadEntry {
                id,
                kind,
                index,
                pad,
                sink,
            };
            pads.push(entry.clone());
            entry
        };
        let sync = lock(&self.settings).sync;
        entry.sink.set_property("sync", sync);
        // A publisher has nothing to preroll. Prerolling, a pad's first frame waits for the
        // first frame of every other pad (a live audio pad for the video encoder's
        // lookahead, ~0.7 s with x264's defaults), which delays it and the catalog clock it
        // sets; and a sink joining a running pipeline would take the pipeline back to
        // PAUSED, where a live source upstream produces nothing.
        entry.sink.set_property("async", false);
        let attached = self.obj().add(&entry.sink).is_ok()
            && entry
                .sink
                .static_pad("sink")
                .is_some_and(|target| entry.pad.set_target(Some(&target)).is_ok())
            && self.obj().add_pad(&entry.pad).is_ok();
        if !attached {
            lock(&self.pads).retain(|e| e.id != entry.id);
            let _ = self.obj().remove(&entry.sink);
            return None;
        }
        let _ = entry.sink.sync_state_with_parent();
        // gst-launch sets `video_0::bitrate=…` on a pad it has not requested yet when it
        // hears of the pad here.
        self.obj()
            .child_added(entry.pad.upcast_ref::<glib::Object>(), &entry.pad.name());
        gst::debug!(CAT, imp = self, "added pad {}", entry.pad.name());
        Some(entry.pad.upcast())
    }
}
#[glib::object_subclass]
impl ObjectSubclass for MoqSink {
    const NAME: &'static str = "GstMoqSink";
    type Type = super::MoqSink;
    type ParentType = gst::Bin;
    type Interfaces = (gst::URIHandler, gst::ChildProxy);
}

/// The children an application addresses are the request pads, whose properties describe
/// their tracks (`moqsink video_0::bitrate=600000`); the sinks inside are not its business.
impl ChildProxyImpl for MoqSink {
    fn child_by_index(&self, index: u32) -> Option<glib::Object> {
        lock(&self.pads)
            .get(index as usize)
            .map(|e| e.pad.clone().upcast())
    }

    fn child_by_name(&self, name: &str) -> Option<glib::Object> {
        lock(&self.pads)
            .iter()
            .find(|e| e.pad.name() == name)
            .map(|e| e.pad.clone().upcast())
    }

    fn children_count(&self) -> u32 {
        lock(&self.pads).len() as u32
    }
}

impl URIHandlerImpl for MoqSink {
    const URI_TYPE: gst::URIType = gst::URIType::Sink;

    fn protocols() -> &'static [&'static str] {
        &["moqt"]
    }

    fn uri(&self) -> Option<String> {
        lock(&self.settings).connection.url.clone()
    }

    /// A URI publishes through a relay there (`url`).
    fn set_uri(&self, uri: &str) -> Result<(), glib::Error> {
        let running = self.obj().current_state() > gst::State::Ready;
        lock(&self.settings).connection.set_uri(uri, running)
    }
}

impl ObjectImpl for MoqSink {
    fn signals() -> &'static [glib::subclass::Signal] {
        static SIGNALS: LazyLock<Vec<glib::subclass::Signal>> = LazyLock::new(|| {
            vec![
                // Asks every direct subscriber to move elsewhere (GOAWAY, naming the
                // session URI given, or none): moqsrc viewers open a new session there
                // (this moqsink, or another publishing the same stream), take over from the
                // last frame played and leave this one. Listening only.
                glib::subclass::Signal::builder("drain")
                    .param_types([Option::<String>::static_type()])
                    .action()
                    .class_handler(|values| {
                        if let Ok(sink) = values[0].get::<super::MoqSink>() {
                            let uri = values[1].get::<Option<String>>().ok().flatten();
                            sink.imp().drain(uri.as_deref().unwrap_or(""));
                        }
                        None
                    })
                    .build(),
                // track, group, object, when moqsink wrote it and when QUIC took its last
                // byte (µs since the UNIX epoch). Emitted from the network thread.
                glib::subclass::Signal::builder("object-handoff")
                    .param_types([
                        String::static_type(),
                        u64::static_type(),
                        u64::static_type(),
                        u64::static_type(),
                        u64::static_type(),
                    ])
                    .build(),
            ]
        });
        SIGNALS.as_ref()
    }

    fn properties() -> &'static [glib::ParamSpec] {
        static PROPERTIES: LazyLock<Vec<glib::ParamSpec>> = LazyLock::new(|| {
            let own = vec![
                glib::ParamSpecString::builder("listen")
                    .nick("Listen address")
                    .blurb("HOST:PORT to accept MoQ subscribers on (UDP, QUIC with ALPN moqt-22, moqt-20, moqt-16 or moq-00, see versions); unset: 0.0.0.0:4443 without url. Setting both listen and url is an error. Stopping frees the port (after up to 2 s for closed connections to drain), so the element can listen on it again at once")
                    .mutable_ready()
                    .build(),
                glib::ParamSpecString::builder("tls-cert-fingerprint")
                    .nick("TLS certificate fingerprint")
                    .blurb("Listening: SHA-256 (hex) of this sink's certificate, for receivers to pin (tls-fingerprint on moqsrc); known from the READY state on, also posted in the moq-listening message")
                    .read_only()
                    .build(),
                glib::ParamSpecUInt::builder("current-port")
                    .nick("Current port")
                    .blurb("Listening: the UDP port subscribers reach this sink on while it runs (listen=HOST:0 picks a free one; also in the moq-listening message); 0 otherwise")
                    .maximum(u32::from(u16::MAX))
                    .read_only()
                    .build(),
                glib::ParamSpecString::builder("tls-cert-file")
                    .nick("TLS certificate file")
                    .blurb("PEM certificate chain; with tls-key-file. Unset: a self-signed certificate is generated")
                    .mutable_ready()
                    .build(),
                glib::ParamSpecString::builder("tls-key-file")
                    .nick("TLS key file")
                    .blurb("PEM private key for tls-cert-file")
                    .mutable_ready()
                    .build(),
                glib::ParamSpecEnum::builder_with_default("format", Format::default())
                    .nick("Format")
                    .blurb("Media format: native (ours, every delivery mode) or hang (moq-dev's, for moq-gst and the moq-dev players); moqsrc plays both")
                    .mutable_ready()
                    .build(),
                glib::ParamSpecEnum::builder_with_default("delivery", Delivery::default())
                    .nick("Delivery")
                    .blurb("How frames map to QUIC streams and priorities; see the enum values")
                    .mutable_ready()
                    .build(),
                glib::ParamSpecUInt::builder("drain-timeout")
                    .nick("Drain timeout")
                    .blurb("ms: listening, stopping first sends GOAWAY to every subscriber and waits up to this long for them to leave (moqsrc viewers move to a new session before closing this one); 0: close at once. The drain action signal sends GOAWAY while playing")
                    .maximum(600_000)
                    .default_value(0)
                    .mutable_ready()
                    .build(),
                glib::ParamSpecUInt::builder("delivery-timeout")
                    .nick("Delivery timeout")
                    .blurb(&format!(
                        "ms: data not handed to QUIC within this time after it arrived is dropped, and its \
                         group's stream reset if started (0 = never; non-reference frames still expire after {} ms)",
                        ENHANCEMENT_MAX_AGE.as_millis()
                    ))
                    .maximum(600_000)
                    .default_value(0)
                    .mutable_ready()
                    .build(),
                glib::ParamSpecBoxed::builder::<gst::Structure>("stats")
                    .nick("Statistics")
                    .blurb("Per track (`tracks`): name, kind, frames, bytes, frames refused, objects sent and dropped, streams reset, subscribers (open sessions subscribed to it); for the first video track at the top level: frames and bytes per kind, frames refused (malformed or before the first keyframe), and per layer objects sent and dropped, groups superseded, expired, over the backlog budget or missed, streams reset, subscribers, estimated and target bitrate, with rate-control=encoder what the encoder produces (encoder-output-bitrate, bit/s over its last whole GoPs), its lag before a new target shows in its output (encoder-lag-ms) and its output over its target (encoder-ratio, 0 until measured), and per session (`sessions`) its address, RTT, minimum RTT, queue delay, congestion window, lost packets, delivery-rate estimate and loss rate")
                    .read_only()
                    .build(),
                glib::ParamSpecBoolean::builder("keyframe-on-subscribe")
                    .nick("Keyframe on subscribe")
                    .blurb("Ask upstream for a keyframe (force-key-unit) when a subscriber joins the video track, so it need not wait for the next GoP; at most once per GoP. A largest-object subscription (a relay's) whose request upstream took starts at that keyframe's group, not in the group under way")
                    .default_value(true)
                    .mutable_ready()
                    .build(),
                glib::ParamSpecBoolean::builder("signal-object-handoffs")
                    .nick("Signal object hand-offs")
                    .blurb("Emit object-handoff each time QUIC takes an object whole for a subscriber, with how long moqsink held it (for measuring delay per stage; costs a signal per object and subscriber)")
                    .default_value(false)
                    .mutable_ready()
                    .build(),
                glib::ParamSpecUInt::builder("max-subscribers")
                    .nick("Maximum subscribers")
                    .blurb("Listening: sessions served at once (handshakes included); more are refused")
                    .minimum(1)
                    .maximum(100_000)
                    .default_value(DEFAULT_MAX_SUBSCRIBERS)
                    .mutable_ready()
                    .build(),
                glib::ParamSpecUInt::builder("max-backlog")
                    .nick("Maximum backlog")
                    .blurb("ms: data a subscriber has not taken this long after it was published is dropped, oldest GoP first (its stream reset), in every delivery mode; bounds what a slow subscriber costs")
                    .minimum(100)
                    .maximum(600_000)
                    .default_value(DEFAULT_MAX_BACKLOG_MS)
                    .mutable_ready()
                    .build(),
                glib::ParamSpecEnum::builder_with_default("congestion-control", CongestionControl::default())
                    .nick("Congestion control")
                    .blurb("QUIC congestion controller toward subscribers (or the relay): cubic fills the bottleneck queue before backing off; delay keeps it near 40 ms; auto is delay with rate-control=encoder, cubic otherwise")
                    .mutable_ready()
                    .build(),
                glib::ParamSpecEnum::builder_with_default("rate-control", RateControl::default())
                    .nick("Rate control")
                    .blurb("encoder: set the upstream encoder's bitrate from the subscribers' path estimate and from what the encoder produces (cut at once and hold for the encoder's lag, rise toward a measured rate, probe a path the stream does not fill), and post moq-target-bitrate; none: leave it alone")
                    .mutable_ready()
                    .build(),
                glib::ParamSpecEnum::builder_with_default("rate-policy", RatePolicy::default())
                    .nick("Rate policy")
                    .blurb("Which subscriber's path sets the target when there are several: the slowest, or the median one (slower ones rely on skip-forward)")
                    .mutable_ready()
                    .build(),
                glib::ParamSpecUInt64::builder("encoder-min-bitrate")
                    .nick("Encoder minimum bitrate")
                    .blurb("bit/s: rate control never sets the encoder below this")
                    .minimum(ENCODER_BITRATE_FLOOR)
                    .default_value(DEFAULT_ENCODER_MIN)
                    .mutable_ready()
                    .build(),
                glib::ParamSpecUInt64::builder("encoder-max-bitrate")
                    .nick("Encoder maximum bitrate")
                    .blurb("bit/s: rate control never sets the encoder above this")
                    .minimum(ENCODER_BITRATE_FLOOR)
                    .default_value(DEFAULT_ENCODER_MAX)
                    .mutable_ready()
                    .build(),
                glib::ParamSpecUInt64::builder("encoder-start-bitrate")
                    .nick("Encoder start bitrate")
                    .blurb("bit/s: the encoder's bitrate at start with rate-control=encoder; 0 keeps the encoder's own")
                    .default_value(0)
                    .mutable_ready()
                    .build(),
                glib::ParamSpecUInt64::builder("estimated-bitrate")
                    .nick("Estimated bitrate")
                    .blurb("bit/s the subscribers' paths deliver, as the rate policy combines them (0: not measured yet); notifies when it changes")
                    .read_only()
                    .build(),
                glib::ParamSpecUInt64::builder("target-bitrate")
                    .nick("Target bitrate")
                    .blurb("bit/s last set on the encoder by rate control (0: none); notifies when it changes")
                    .read_only()
                    .build(),
                glib::ParamSpecBoolean::builder("sync")
                    .nick("Sync")
                    .blurb("Publish each frame at its running time on the clock (as any sink with sync); false publishes frames as soon as they arrive")
                    .default_value(true)
                    .mutable_playing()
                    .build(),
                glib::ParamSpecUInt::builder("subscriber-stall-timeout")
                    .nick("Subscriber stall timeout")
                    .blurb("ms a subscriber may take no data at all (it does not read) before it is disconnected")
                    .minimum(1000)
                    .maximum(3_600_000)
                    .default_value(DEFAULT_SUBSCRIBER_STALL_TIMEOUT_MS)
                    .mutable_ready()
                    .build(),
            ];
            moqt_common::properties(own, Side::Publisher, &RENAMED)
        });
        PROPERTIES.as_ref()
    }

    fn set_property(&self, _id: usize, value: &glib::Value, pspec: &glib::ParamSpec) {
        let obj = self.obj();
        if self
            .deprecations
            .before_set(&RENAMED, obj.upcast_ref(), pspec, value, *CAT)
        {
            return;
        }
        let text = || text(value);
        let mut settings = lock(&self.settings);
        let mut identity_changed = false;
        if settings.connection.set(pspec.name(), value) {
            if pspec.name() == "auth-token" {
                let token = settings.connection.auth_token.clone();
                drop(settings);
                if let Some(Started {
                    link: Link::Relay(relay),
                    ..
                }) = lock(&self.state).as_ref()
                {
                    relay.set_auth_token(token);
                }
            }
            return;
        }
        match pspec.name() {
            "listen" => settings.listen = text(),
            "tls-cert-file" => {
                settings.tls_cert_file = text().map(PathBuf::from);
                identity_changed = true;
            }
            "tls-key-file" => {
                settings.tls_key_file = text().map(PathBuf::from);
                identity_changed = true;
            }
            "keyframe-on-subscribe" => {
                settings.keyframe_on_subscribe = value.get().unwrap_or_default()
            }
            "signal-object-handoffs" => {
                settings.signal_object_handoffs = value.get().unwrap_or_default()
            }
            "format" => settings.format = value.get().unwrap_or_default(),
            "delivery" => settings.delivery = value.get().unwrap_or_default(),
            "delivery-timeout" => settings.delivery_timeout_ms = value.get().unwrap_or_default(),
            "drain-timeout" => settings.drain_timeout_ms = value.get().unwrap_or_default(),
            "max-subscribers" => {
                settings.max_subscribers = value.get().unwrap_or(DEFAULT_MAX_SUBSCRIBERS)
            }
            "max-backlog" => {
                settings.max_backlog_ms = value.get().unwrap_or(DEFAULT_MAX_BACKLOG_MS)
            }
            "subscriber-stall-timeout" => {
                settings.subscriber_stall_timeout_ms =
                    value.get().unwrap_or(DEFAULT_SUBSCRIBER_STALL_TIMEOUT_MS)
            }
            "congestion-control" => settings.congestion = value.get().unwrap_or_default(),
            "rate-control" => settings.rate_control = value.get().unwrap_or_default(),
            "rate-policy" => settings.rate_policy = value.get().unwrap_or_default(),
            "encoder-min-bitrate" => {
                settings.encoder_min_bps = value.get().unwrap_or(DEFAULT_ENCODER_MIN)
            }
            "encoder-max-bitrate" => {
                settings.encoder_max_bps = value.get().unwrap_or(DEFAULT_ENCODER_MAX)
            }
            "encoder-start-bitrate" => settings.encoder_start_bps = value.get().unwrap_or_default(),
            "sync" => settings.sync = value.get().unwrap_or(true),
            other => unreachable!("unknown property {other}"),
        }
        let sync = settings.sync;
        drop(settings);
        if pspec.name() == "sync" {
            for entry in lock(&self.pads).iter() {
                entry.sink.set_property("sync", sync);
            }
        }
        // Never nested in `settings` (see `identity`).
        if identity_changed {
            *lock(&self.identity) = None;
        }
    }

    fn property(&self, _id: usize, pspec: &glib::ParamSpec) -> glib::Value {
        if let Some((value, warning)) =
            self.deprecations
                .get(&RENAMED, self.obj().upcast_ref(), pspec.name())
        {
            gst::warning!(CAT, imp = self, "{warning}");
            return value;
        }
        let settings = lock(&self.settings).clone();
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        if let Some(value) = settings.connection.get(pspec.name()) {
            return value;
        }
        match pspec.name() {
            "listen" => settings
                .listen
                .clone()
                .or_else(|| {
                    settings
                        .connection
                        .url
                        .is_none()
                        .then(|| DEFAULT_LISTEN.into())
                })
                .to_value(),
            "tls-cert-file" => path(&settings.tls_cert_file).to_value(),
            "tls-key-file" => path(&settings.tls_key_file).to_value(),
            "format" => settings.format.to_value(),
            "delivery" => settings.delivery.to_value(),
            "delivery-timeout" => settings.delivery_timeout_ms.to_value(),
            "drain-timeout" => settings.drain_timeout_ms.to_value(),
            "stats" => self.stats().to_value(),
            "keyframe-on-subscribe" => settings.keyframe_on_subscribe.to_value(),
            "signal-object-handoffs" => settings.signal_object_handoffs.to_value(),
            "max-subscribers" => settings.max_subscribers.to_value(),
            "max-backlog" => settings.max_backlog_ms.to_value(),
            "subscriber-stall-timeout" => settings.subscriber_stall_timeout_ms.to_value(),
            "congestion-control" => settings.congestion.to_value(),
            "rate-control" => settings.rate_control.to_value(),
            "rate-policy" => settings.rate_policy.to_value(),
            "encoder-min-bitrate" => settings.encoder_min_bps.to_value(),
            "encoder-max-bitrate" => settings.encoder_max_bps.to_value(),
            "encoder-start-bitrate" => settings.encoder_start_bps.to_value(),
            "sync" => settings.sync.to_value(),
            "estimated-bitrate" => self.estimated_bps.load(Ordering::Relaxed).to_value(),
            "current-port" => self.current_port.load(Ordering::Relaxed).to_value(),
            "target-bitrate" => self.target_bps.load(Ordering::Relaxed).to_value(),
            // Only an identity that exists: reading never generates a certificate.
            "tls-cert-fingerprint" => lock(&self.identity)
                .as_ref()
                .map(|id| tls::fingerprint_hex(&id.fingerprint()))
                .to_value(),
            other => unreachable!("unknown property {other}"),
        }
    }
}

impl GstObjectImpl for MoqSink {}

impl ElementImpl for MoqSink {
    fn metadata() -> Option<&'static gst::subclass::ElementMetadata> {
        static METADATA: LazyLock<gst::subclass::ElementMetadata> = LazyLock::new(|| {
            gst::subclass::ElementMetadata::new(
                "MoQ Sink",
                "Sink/Network",
                "Publishes H.264 video and Opus or AAC audio as Media over QUIC Transport (draft-22, -20, -16 or -14) tracks",
                "moqsink developers",
            )
        });
        Some(&*METADATA)
    }

    // Static caps and names: creating the templates cannot fail.
    #[allow(clippy::expect_used)]
    fn pad_templates() -> &'static [gst::PadTemplate] {
        static TEMPLATES: LazyLock<Vec<gst::PadTemplate>> = LazyLock::new(|| {
            [MediaKind::Video, MediaKind::Audio]
                .into_iter()
                .map(|kind| {
                    gst::PadTemplate::with_gtype(
                        &format!("{}_%u", kind.prefix()),
                        gst::PadDirection::Sink,
                        gst::PadPresence::Request,
                        &caps::pad_caps(kind),
                        MoqSinkPad::static_type(),
                    )
                    .expect("valid pad template")
                })
                .collect()
        });
        TEMPLATES.as_ref()
    }

    fn request_new_pad(
        &self,
        templ: &gst::PadTemplate,
        name: Option<&str>,
        _caps: Option<&gst::Caps>,
    ) -> Option<gst::Pad> {
        let kind = MediaKind::of_template(templ.name_template())?;
        self.add_track_pad(templ, kind, name)
    }

    fn release_pad(&self, pad: &gst::Pad) {
        let entry = {
            let mut pads = lock(&self.pads);
            let Some(at) = pads
                .iter()
                .position(|e| e.pad.upcast_ref::<gst::Pad>() == pad)
            else {
                return;
            };
            pads.remove(at)
        };
        if let Some(started) = lock(&self.state).as_mut() {
            started.publisher.remove_track(entry.id, unix_now_us());
            started.set_alt_group(entry.id, None);
        }
        let _ = entry.sink.set_state(gst::State::Null);
        let _ = self.obj().remove(&entry.sink);
        let _ = pad.set_active(false);
        let _ = self.obj().remove_pad(pad);
        self.obj()
            .child_removed(pad.upcast_ref::<glib::Object>(), &pad.name());
        gst::debug!(CAT, imp = self, "released pad {}", pad.name());
    }

    fn change_state(
        &self,
        transition: gst::StateChange,
    ) -> Result<gst::StateChangeSuccess, gst::StateChangeError> {
        if transition == gst::StateChange::NullToReady {
            for warning in self.deprecations.to_post() {
                gst::element_imp_warning!(self, gst::LibraryError::Settings, ("{warning}"));
            }
        }
        // The certificate of a listening sink exists from READY on, so applications can
        // read its fingerprint before they start the pipeline.
        if transition == gst::StateChange::NullToReady
            && lock(&self.settings).connection.url.is_none()
            && let Err(err) = self.identity()
        {
            self.post_error_message(err);
            return Err(gst::StateChangeError);
        }
        if transition == gst::StateChange::ReadyToPaused
            && let Err(err) = self.start()
        {
            self.post_error_message(err);
            return Err(gst::StateChangeError);
        }
        let result = self.parent_change_state(transition);
        if transition == gst::StateChange::PausedToReady || result.is_err() {
            self.stop();
        }
        result
    }
}

impl BinImpl for MoqSink {}

/// A track's delivery figures, for `stats`.
fn track_stats(track: &MediaTrack) -> gst::Structure {
    match track {
        MediaTrack::Video(video) => {
            let (published, base, _) = video.stats();
            gst::Structure::builder("moqsink-track")
                .field("name", video.name())
                .field("kind", "video")
                .field("frames", published.frames.iter().sum::<u64>())
                .field("bytes", published.bytes.iter().sum::<u64>())
                .field("frames-refused", published.dropped)
                .field("objects-sent", base.objects_sent)
                .field("objects-dropped", base.objects_dropped)
                .field("streams-reset", base.streams_reset)
                .field("subscribers", base.sessions)
                .build()
        }
        MediaTrack::Audio(audio) => {
            let (published, t) = audio.stats();
            gst::Structure::builder("moqsink-track")
                .field("name", audio.name())
                .field("kind", "audio")
                .field("frames", published.frames)
                .field("bytes", published.bytes)
                .field("frames-refused", published.dropped)
                .field("objects-sent", t.objects_sent)
                .field("objects-dropped", t.objects_dropped)
                .field("streams-reset", t.streams_reset)
                .field("subscribers", t.sessions)
                .build()
        }
    }
}

/// Reads the path estimates and adapts the rate until the element stops.
async fn adapt_loop(element: glib::WeakRef<super::MoqSink>) {
    let mut tick = tokio::time::interval(ADAPT_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(element) = element.upgrade() else {
            return;
        };
        if !element.imp().adapt_once() {
            return;
        }
    }
}

/// Turns subscriber connections into element messages and log lines.
async fn forward_server_events(
    element: glib::WeakRef<super::MoqSink>,
    mut events: mpsc::Receiver<ServerEvent>,
) {
    while let Some(event) = events.recv().await {
        let Some(element) = element.upgrade() else {
            return;
        };
        let imp = element.imp();
        match event {
            ServerEvent::Connected(peer) => {
                gst::info!(CAT, imp = imp, "subscriber {peer} connected");
                imp.post_message(
                    "moq-subscriber-connected",
                    &[("address", &peer.to_string())],
                );
            }
            ServerEvent::Rejected(peer, reason) => {
                gst::warning!(CAT, imp = imp, "session with {peer} failed: {reason}");
            }
            ServerEvent::Disconnected(peer, reason) => {
                gst::info!(CAT, imp = imp, "subscriber {peer} disconnected: {reason}");
                imp.post_message(
                    "moq-subscriber-disconnected",
                    &[
                        ("address", &peer.to_string()),
                        ("reason", &reason.to_string()),
                    ],
                );
            }
        }
    }
}

/// Turns relay connection changes into element messages; a refusal is an element error.
async fn forward_relay_events(
    element: glib::WeakRef<super::MoqSink>,
    url: String,
    mut events: mpsc::Receiver<RelayEvent>,
) {
    while let Some(event) = events.recv().await {
        let Some(element) = element.upgrade() else {
            return;
        };
        let imp = element.imp();
        match event {
            RelayEvent::Announced { peer, attempt } => {
                gst::info!(
                    CAT,
                    imp = imp,
                    "announced on {url} ({peer}), connection {attempt}"
                );
                imp.post_message(
                    "moq-connected",
                    &[("address", &peer.to_string()), ("reconnections", &attempt)],
                );
            }
            RelayEvent::Disconnected(reason) => {
                gst::warning!(CAT, imp = imp, "{url}: {reason}; reconnecting");
                imp.post_message("moq-disconnected", &[("reason", &reason.to_string())]);
            }
            RelayEvent::Moved {
                from,
                url,
                peer,
                why,
            } => {
                gst::info!(
                    CAT,
                    imp = imp,
                    "the broadcast is announced on {url} ({peer}) now, not {from} ({})",
                    why.as_str()
                );
                imp.post_message(
                    "moq-moved",
                    &[
                        ("from", &from),
                        ("url", &url),
                        ("address", &peer.to_string()),
                        ("reason", &why.as_str()),
                    ],
                );
            }
            RelayEvent::Refused(reason) => {
                let advice = reason
                    .advice()
                    .map(|a| format!("; {a}"))
                    .unwrap_or_default();
                gst::element_imp_error!(
                    imp,
                    gst::ResourceError::NotAuthorized,
                    ("{url} refused the publisher: {reason}{advice}")
                );
            }
        }
    }
}
