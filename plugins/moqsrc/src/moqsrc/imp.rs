use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use gst::glib;
use gst::prelude::*;
use gst::subclass::prelude::*;
use gst_base::prelude::*;
use gst_base::subclass::base_src::CreateSuccess;
use gst_base::subclass::prelude::*;
use h264::FrameKind;
use moq_media::catalog::Catalog;
use moq_media::reorder::{Frame, Popped, Pushed};
use moq_media::{PlayoutClock, ReorderBuffer};
use moq_session::MoqUrl;
use moq_session::blocking::Canceller;
use moq_session::tls::{self, Trust};
use tokio::sync::{mpsc, watch};

use super::receiver::{self, Control, ITEM_QUEUE, Item, Received, ReceiverConfig};
use super::stats::ReceiverStats;
use crate::RUNTIME;

static CAT: LazyLock<gst::DebugCategory> = LazyLock::new(|| {
    gst::DebugCategory::new(
        "moqsrc",
        gst::DebugColorFlags::empty(),
        Some("Media over QUIC source"),
    )
});

const DEFAULT_TRACK: &str = "video";
const DEFAULT_TIMEOUT_S: u32 = 10;
const DEFAULT_LATENCY_MS: u32 = 100;

#[derive(Debug, Clone)]
struct Settings {
    url: Option<String>,
    namespace: Option<String>,
    track: String,
    tls_fingerprint: Option<String>,
    tls_insecure: bool,
    timeout_s: u32,
    latency_ms: u32,
    skip_forward: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            url: None,
            namespace: None,
            track: DEFAULT_TRACK.into(),
            tls_fingerprint: None,
            tls_insecure: false,
            timeout_s: DEFAULT_TIMEOUT_S,
            latency_ms: DEFAULT_LATENCY_MS,
            skip_forward: true,
        }
    }
}

/// What a buffered frame carries: its access unit, and the received object it came in,
/// which keeps its bytes counted against the session's receive budget until output.
type Payload = Received;

/// Shared between threads; locked only briefly.
struct Started {
    worker: tokio::task::JoinHandle<()>,
    controls: watch::Sender<Control>,
}

/// The streaming thread's state. `create()` takes it out of its mutex for as long as it
/// runs, so no lock is held while it waits for data, sets caps or posts messages.
struct Streaming {
    items: mpsc::Receiver<Item>,
    reorder: ReorderBuffer<Payload>,
    playout: PlayoutClock,
    /// Monotonic origin for arrival times given to the reorder buffer.
    epoch: Instant,
    catalog: Option<Catalog>,
    caps_pending: bool,
    eos: bool,
    /// Frames output so far: the first one's re-anchoring is not a rebuffer.
    outputs: u64,
    /// Epoch of the media subscriptions whose frames are wanted.
    media_epoch: u64,
    /// Resumes of the element those subscriptions were made after.
    media_resumes: u64,
}

#[derive(Default)]
pub struct MoqSrc {
    settings: Mutex<Settings>,
    started: Mutex<Option<Started>>,
    streaming: Mutex<Option<Streaming>>,
    stats: Mutex<ReceiverStats>,
    canceller: Canceller,
    /// Paused after playing: on resume, frames from before the pause are stale.
    paused_after_playing: AtomicBool,
    /// Resumes after a pause so far: frames count only from subscriptions made after the
    /// latest one.
    resumes: AtomicU64,
}

fn unix_now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn ns_since(epoch: Instant, t: Instant) -> u64 {
    u64::try_from(t.saturating_duration_since(epoch).as_nanos()).unwrap_or(u64::MAX)
}

/// A time in ns as a `ClockTime`, saturated below `NONE` (which is `u64::MAX`).
fn clock_ns(ns: u64) -> gst::ClockTime {
    gst::ClockTime::from_nseconds(ns.min(gst::ClockTime::MAX.nseconds()))
}

/// A time in µs as a `ClockTime`, saturated rather than overflowing.
fn clock_us(us: u64) -> gst::ClockTime {
    clock_ns(us.saturating_mul(1_000))
}

impl MoqSrc {
    fn config(&self) -> Result<(ReceiverConfig, Settings), gst::ErrorMessage> {
        let settings = lock(&self.settings).clone();
        let text = settings.url.clone().ok_or_else(|| {
            gst::error_msg!(
                gst::ResourceError::Settings,
                ["no url set (moqt://HOST:PORT/NAMESPACE)"]
            )
        })?;
        let url = MoqUrl::parse(&text)
            .map_err(|e| gst::error_msg!(gst::ResourceError::Settings, ["invalid url: {e}"]))?;
        let trust = match (&settings.tls_fingerprint, settings.tls_insecure) {
            (Some(fp), _) => Trust::Fingerprint(
                tls::parse_fingerprint(fp)
                    .map_err(|e| gst::error_msg!(gst::ResourceError::Settings, ["{e}"]))?,
            ),
            (None, true) => Trust::Insecure,
            (None, false) => {
                return Err(gst::error_msg!(
                    gst::ResourceError::Settings,
                    [
                        "{url}: set tls-fingerprint (the publisher's tls-fingerprint) or tls-insecure=true"
                    ]
                ));
            }
        };
        Ok((
            ReceiverConfig {
                namespace: match &settings.namespace {
                    Some(ns) => moq_session::parse_namespace(ns)
                        .map_err(|e| gst::error_msg!(gst::ResourceError::Settings, ["{e}"]))?,
                    None => url
                        .namespace()
                        .map_err(|e| gst::error_msg!(gst::ResourceError::Settings, ["{e}"]))?,
                },
                url,
                track: settings.track.clone(),
                trust,
                timeout: Duration::from_secs(settings.timeout_s.into()),
            },
            settings,
        ))
    }

    /// Caps from a catalog (validated when parsed; out-of-range values are left out).
    fn caps_for(catalog: &Catalog) -> gst::Caps {
        let mut caps = gst::Caps::builder("video/x-h264")
            .field("stream-format", "byte-stream")
            .field("alignment", "au");
        let positive = |v: u32| i32::try_from(v).ok().filter(|v| *v > 0);
        if let (Some(w), Some(h)) = (
            positive(catalog.video.width),
            positive(catalog.video.height),
        ) {
            caps = caps.field("width", w).field("height", h);
        }
        if let Some([n, d]) = catalog.video.framerate
            && let (Some(n), Some(d)) = (positive(n), positive(d))
        {
            caps = caps.field("framerate", gst::Fraction::new(n, d));
        }
        caps.build()
    }

    fn post_message(&self, s: gst::Structure) {
        let _ = self
            .obj()
            .post_message(gst::message::Element::builder(s).src(&*self.obj()).build());
    }

    /// Handles one item from the network side; `Err` ends streaming.
    fn handle_item(&self, state: &mut Streaming, item: Item) -> Result<(), gst::FlowError> {
        match item {
            Item::Connected { peer, attempt } => {
                gst::info!(
                    CAT,
                    imp = self,
                    "connected to {peer} (connection {attempt})"
                );
                if attempt > 0 {
                    // A new session starts at the live edge, maybe of a restarted
                    // publisher: forget the old timeline and play the first frame at once.
                    state.reorder.clear();
                    state.playout.reset();
                }
                self.post_message(
                    gst::Structure::builder("moq-connected")
                        .field("address", peer.to_string())
                        .field("reconnections", attempt)
                        .build(),
                );
            }
            Item::Disconnected(reason) => {
                gst::warning!(CAT, imp = self, "{reason}; reconnecting");
                self.post_message(
                    gst::Structure::builder("moq-disconnected")
                        .field("reason", reason)
                        .build(),
                );
            }
            Item::Catalog(catalog) => {
                gst::debug!(CAT, imp = self, "catalog {catalog:?}");
                if state
                    .catalog
                    .as_ref()
                    .is_some_and(|c| c.epoch != catalog.epoch)
                {
                    // The publisher restarted behind a relay: its indices and timestamps
                    // start afresh, so the old timeline means nothing.
                    gst::info!(
                        CAT,
                        imp = self,
                        "publisher restarted (epoch {})",
                        catalog.epoch
                    );
                    state.reorder.clear();
                    state.playout.reset();
                }
                if state.catalog.as_ref() != Some(&catalog) {
                    state.catalog = Some(catalog);
                    state.caps_pending = true;
                }
            }
            Item::Subscribed { epoch, resumes } => {
                gst::debug!(CAT, imp = self, "media subscriptions, epoch {epoch}");
                state.media_epoch = epoch;
                if resumes > state.media_resumes {
                    // Resumed at the live edge: the old timeline means nothing.
                    state.reorder.clear();
                    state.playout.reset();
                }
                state.media_resumes = resumes;
            }
            Item::Frame(received)
                if received.epoch != state.media_epoch
                    || state.media_resumes < self.resumes.load(Ordering::Relaxed) =>
            {
                gst::trace!(CAT, imp = self, "dropping a frame received before a pause");
            }
            Item::Frame(received) => {
                let header = received.header;
                let bytes = received.au.len();
                let arrival_us = unix_now_us()
                    - i64::try_from(received.received.elapsed().as_micros()).unwrap_or(0);
                let frame = Frame {
                    header,
                    layer: received.layer,
                    arrival: ns_since(state.epoch, received.received),
                    data: received,
                };
                match state.reorder.push(frame) {
                    Pushed::Buffered { out_of_order } => {
                        lock(&self.stats).arrived(&header, bytes, arrival_us, out_of_order);
                    }
                    Pushed::Dropped(frame, reason) => {
                        let mut stats = lock(&self.stats);
                        stats.arrived(&header, bytes, arrival_us, false);
                        stats.dropped(reason);
                        gst::debug!(
                            CAT,
                            imp = self,
                            "dropped frame {} on arrival: {reason:?}",
                            frame.header.decode_index
                        );
                    }
                }
            }
            Item::GroupEnd { epoch, .. } if epoch != state.media_epoch => {}
            Item::GroupEnd {
                group, complete, ..
            } => {
                if !complete {
                    gst::debug!(CAT, imp = self, "group {group} was reset");
                    state.reorder.group_lost(group);
                }
            }
            Item::Eos => state.eos = true,
            Item::Malformed(reason) => {
                gst::warning!(CAT, imp = self, "ignoring malformed data: {reason}")
            }
            Item::Error(msg) => {
                gst::element_imp_error!(self, gst::ResourceError::Read, ("{msg}"));
                return Err(gst::FlowError::Error);
            }
        }
        Ok(())
    }

    fn stats(&self) -> gst::Structure {
        let stats = lock(&self.stats).clone();
        let mut s = gst::Structure::builder("moqsrc-stats");
        for (i, kind) in ["key", "reference", "non-reference"].iter().enumerate() {
            s = s
                .field(format!("frames-received-{kind}"), stats.frames_received[i])
                .field(format!("bytes-received-{kind}"), stats.bytes_received[i]);
        }
        s.field("frames-output", stats.frames_output)
            .field("frames-late", stats.frames_late)
            .field("frames-skipped", stats.frames_skipped)
            .field("frames-duplicate", stats.frames_duplicate)
            .field("jumps", stats.jumps)
            .field("groups-skipped", stats.groups_skipped)
            .field("skipped-ms", stats.skipped_ms)
            .field("rebuffers", stats.rebuffers)
            .field("reorder-events", stats.reorder_events)
            .field("latency-p50-ms", stats.latency_ms(0.5).unwrap_or(-1.0))
            .field("latency-p95-ms", stats.latency_ms(0.95).unwrap_or(-1.0))
            .field("jitter-ms", stats.jitter_ms())
            .field("ts-df-ms", stats.ts_df_ms().unwrap_or(-1.0))
            .build()
    }

    fn make_buffer(&self, state: &mut Streaming, frame: Frame<Payload>, jump: bool) -> gst::Buffer {
        // A live source stamps data with when it arrived, not when downstream let us push
        // it: time spent blocked behind the decoder and sink is covered by their latency.
        let now = self
            .obj()
            .current_running_time()
            .map_or(0, |t| t.nseconds());
        let waited = ns_since(state.epoch, Instant::now()).saturating_sub(frame.arrival);
        let arrival = now.saturating_sub(waited);
        let h = frame.header;
        let stamped = state.playout.stamp_with(h.dts, h.pts, arrival, jump);
        let rebuffered = stamped.discont && !jump && state.outputs > 0;
        lock(&self.stats).output(&h, unix_now_us(), rebuffered);
        state.outputs += 1;
        gst::log!(
            CAT,
            imp = self,
            "frame {} arrived at {arrival} (now {now}): dts {} discont {}",
            h.decode_index,
            stamped.dts,
            stamped.discont
        );
        // The object's budget is released with it: the buffer is downstream's now.
        let mut buffer = gst::Buffer::from_slice(frame.data.au);
        if let Some(buffer) = buffer.get_mut() {
            buffer.set_dts(clock_ns(stamped.dts));
            buffer.set_pts(clock_ns(stamped.pts));
            buffer.set_duration(clock_us(h.duration));
            // Counted from the publisher's first frame (its epoch).
            let epoch = state.catalog.as_ref().map_or(0, |c| c.epoch);
            buffer.set_offset(h.decode_index.saturating_sub(epoch));
            if stamped.discont {
                buffer.set_flags(gst::BufferFlags::DISCONT);
            }
            if h.kind != FrameKind::Key {
                buffer.set_flags(gst::BufferFlags::DELTA_UNIT);
            }
            static UNIX: LazyLock<gst::Caps> =
                LazyLock::new(|| gst::Caps::new_empty_simple("timestamp/x-unix"));
            gst::ReferenceTimestampMeta::add(
                buffer,
                &UNIX,
                clock_us(h.availability_us),
                gst::ClockTime::NONE,
            );
        }
        buffer
    }
}

#[glib::object_subclass]
impl ObjectSubclass for MoqSrc {
    const NAME: &'static str = "GstMoqSrc";
    type Type = super::MoqSrc;
    type ParentType = gst_base::PushSrc;
}

impl ObjectImpl for MoqSrc {
    fn constructed(&self) {
        self.parent_constructed();
        let obj = self.obj();
        obj.set_live(true);
        obj.set_format(gst::Format::Time);
        obj.set_do_timestamp(false);
    }

    fn properties() -> &'static [glib::ParamSpec] {
        static PROPERTIES: LazyLock<Vec<glib::ParamSpec>> = LazyLock::new(|| {
            vec![
                glib::ParamSpecString::builder("url")
                    .nick("URL")
                    .blurb("MoQ publisher or relay to subscribe to: moqt://HOST:PORT/NAMESPACE")
                    .mutable_ready()
                    .build(),
                glib::ParamSpecString::builder("namespace")
                    .nick("Namespace")
                    .blurb("Track namespace ('/' separates fields); unset: the URL path. Through moq-relay the URL path is the relay's root (e.g. /anon) and this the broadcast under it (e.g. live)")
                    .mutable_ready()
                    .build(),
                glib::ParamSpecString::builder("track")
                    .nick("Track")
                    .blurb("Name of the video track (the base layer; its enhancement track is found in the catalog)")
                    .default_value(Some(DEFAULT_TRACK))
                    .mutable_ready()
                    .build(),
                glib::ParamSpecString::builder("tls-fingerprint")
                    .nick("TLS fingerprint")
                    .blurb("Accept only a server certificate with this SHA-256 fingerprint (hex, as moqsink reports it)")
                    .mutable_ready()
                    .build(),
                glib::ParamSpecBoolean::builder("tls-insecure")
                    .nick("TLS insecure")
                    .blurb("Accept any server certificate (testing only)")
                    .default_value(false)
                    .mutable_ready()
                    .build(),
                glib::ParamSpecUInt::builder("timeout")
                    .nick("Timeout")
                    .blurb("Seconds without media (connecting, subscribing, reconnecting) before failing with an error naming what failed (unreachable, refused, no such namespace or track, no catalog)")
                    .minimum(1)
                    .maximum(3600)
                    .default_value(DEFAULT_TIMEOUT_S)
                    .mutable_ready()
                    .build(),
                glib::ParamSpecBoolean::builder("skip-forward")
                    .nick("Skip forward")
                    .blurb("Drop frames of GoPs older than the one playing and jump to newer media at once after a stall (re-anchored timestamps, DISCONT, a moq-skip message); false plays every frame late instead, so latency only grows")
                    .default_value(true)
                    .mutable_ready()
                    .build(),
                glib::ParamSpecBoxed::builder::<gst::Structure>("stats")
                    .nick("Statistics")
                    .blurb("Frames and bytes received per kind, frames output, late, skipped, jumps, rebuffers, reorder events, latency p50/p95 over the last second, RFC 3550 jitter, TS-DF (ms)")
                    .read_only()
                    .build(),
                glib::ParamSpecUInt::builder("latency")
                    .nick("Latency")
                    .blurb("Buffering in ms: how long frames may wait for missing ones before the reorder buffer moves on; reported as the source's latency")
                    .maximum(60_000)
                    .default_value(DEFAULT_LATENCY_MS)
                    .mutable_ready()
                    .build(),
            ]
        });
        PROPERTIES.as_ref()
    }

    fn set_property(&self, _id: usize, value: &glib::Value, pspec: &glib::ParamSpec) {
        // GObject checked the value's type against the pspec before calling us.
        let mut settings = lock(&self.settings);
        match pspec.name() {
            "url" => settings.url = value.get().unwrap_or_default(),
            "namespace" => settings.namespace = value.get().unwrap_or_default(),
            "track" => {
                settings.track = value
                    .get::<Option<String>>()
                    .unwrap_or_default()
                    .unwrap_or_else(|| DEFAULT_TRACK.into())
            }
            "tls-fingerprint" => settings.tls_fingerprint = value.get().unwrap_or_default(),
            "tls-insecure" => settings.tls_insecure = value.get().unwrap_or_default(),
            "timeout" => settings.timeout_s = value.get().unwrap_or(DEFAULT_TIMEOUT_S),
            "latency" => settings.latency_ms = value.get().unwrap_or(DEFAULT_LATENCY_MS),
            "skip-forward" => settings.skip_forward = value.get().unwrap_or(true),
            other => unreachable!("unknown property {other}"),
        }
    }

    fn property(&self, _id: usize, pspec: &glib::ParamSpec) -> glib::Value {
        let settings = lock(&self.settings);
        match pspec.name() {
            "url" => settings.url.to_value(),
            "namespace" => settings.namespace.to_value(),
            "track" => settings.track.to_value(),
            "tls-fingerprint" => settings.tls_fingerprint.to_value(),
            "tls-insecure" => settings.tls_insecure.to_value(),
            "timeout" => settings.timeout_s.to_value(),
            "latency" => settings.latency_ms.to_value(),
            "skip-forward" => settings.skip_forward.to_value(),
            "stats" => {
                drop(settings);
                self.stats().to_value()
            }
            other => unreachable!("unknown property {other}"),
        }
    }
}

impl GstObjectImpl for MoqSrc {}

impl ElementImpl for MoqSrc {
    fn metadata() -> Option<&'static gst::subclass::ElementMetadata> {
        static METADATA: LazyLock<gst::subclass::ElementMetadata> = LazyLock::new(|| {
            gst::subclass::ElementMetadata::new(
                "MoQ Source",
                "Source/Network",
                "Subscribes to an H.264 track over Media over QUIC Transport (draft-14)",
                "moqsink developers",
            )
        });
        Some(&*METADATA)
    }

    fn change_state(
        &self,
        transition: gst::StateChange,
    ) -> Result<gst::StateChangeSuccess, gst::StateChangeError> {
        match transition {
            gst::StateChange::PlayingToPaused => {
                // A live source captures nothing while paused: no media is wanted.
                self.paused_after_playing.store(true, Ordering::Relaxed);
                self.control(|c| c.paused = true);
            }
            gst::StateChange::PausedToPlaying
                if self.paused_after_playing.swap(false, Ordering::Relaxed) =>
            {
                // Resume at the live edge, not with what was queued before the pause.
                let resumes = self.resumes.fetch_add(1, Ordering::Relaxed) + 1;
                self.control(|c| {
                    c.paused = false;
                    c.resumes = resumes;
                });
            }
            gst::StateChange::ReadyToNull | gst::StateChange::PausedToReady => {
                self.paused_after_playing.store(false, Ordering::Relaxed);
            }
            _ => {}
        }
        self.parent_change_state(transition)
    }

    // Static caps and names: creating the template cannot fail.
    #[allow(clippy::expect_used)]
    fn pad_templates() -> &'static [gst::PadTemplate] {
        static TEMPLATES: LazyLock<Vec<gst::PadTemplate>> = LazyLock::new(|| {
            let caps = gst::Caps::builder("video/x-h264")
                .field("stream-format", "byte-stream")
                .field("alignment", "au")
                .build();
            vec![
                gst::PadTemplate::new(
                    "src",
                    gst::PadDirection::Src,
                    gst::PadPresence::Always,
                    &caps,
                )
                .expect("valid pad template"),
            ]
        });
        TEMPLATES.as_ref()
    }
}

impl BaseSrcImpl for MoqSrc {
    fn start(&self) -> Result<(), gst::ErrorMessage> {
        let (config, settings) = self.config()?;
        let latency_ns = u64::from(settings.latency_ms) * 1_000_000;
        let (tx, items) = mpsc::channel(ITEM_QUEUE);
        let (controls, control_rx) = watch::channel(Control {
            resumes: self.resumes.load(Ordering::Relaxed),
            ..Control::default()
        });
        let worker = RUNTIME.spawn(receiver::run(config, tx, control_rx));
        *lock(&self.stats) = ReceiverStats::default();
        *lock(&self.streaming) = Some(Streaming {
            items,
            reorder: ReorderBuffer::new(latency_ns, settings.skip_forward),
            playout: PlayoutClock::new(latency_ns),
            epoch: Instant::now(),
            catalog: None,
            caps_pending: false,
            eos: false,
            outputs: 0,
            media_epoch: 0,
            media_resumes: self.resumes.load(Ordering::Relaxed),
        });
        *lock(&self.started) = Some(Started { worker, controls });
        Ok(())
    }

    fn stop(&self) -> Result<(), gst::ErrorMessage> {
        if let Some(started) = lock(&self.started).take() {
            started.worker.abort();
        }
        lock(&self.streaming).take();
        Ok(())
    }

    fn is_seekable(&self) -> bool {
        false
    }

    fn query(&self, query: &mut gst::QueryRef) -> bool {
        if let gst::QueryViewMut::Latency(q) = query.view_mut() {
            let latency = gst::ClockTime::from_mseconds(lock(&self.settings).latency_ms.into());
            q.set(true, latency, gst::ClockTime::NONE);
            return true;
        }
        BaseSrcImplExt::parent_query(self, query)
    }

    fn unlock(&self) -> Result<(), gst::ErrorMessage> {
        self.canceller.cancel();
        Ok(())
    }

    fn unlock_stop(&self) -> Result<(), gst::ErrorMessage> {
        self.canceller.reset();
        Ok(())
    }
}

impl PushSrcImpl for MoqSrc {
    fn create(
        &self,
        _buffer: Option<&mut gst::BufferRef>,
    ) -> Result<CreateSuccess, gst::FlowError> {
        // The streaming thread owns its state while it runs; put back whatever happens.
        let mut state = lock(&self.streaming)
            .take()
            .ok_or(gst::FlowError::Flushing)?;
        let result = self.produce(&mut state);
        *lock(&self.streaming) = Some(state);
        result.map(CreateSuccess::NewBuffer)
    }
}

impl MoqSrc {
    /// Waits for the next frame to output; no lock is held meanwhile.
    fn produce(&self, state: &mut Streaming) -> Result<gst::Buffer, gst::FlowError> {
        loop {
            if state.caps_pending {
                if let Some(catalog) = &state.catalog {
                    let caps = Self::caps_for(catalog);
                    gst::info!(CAT, imp = self, "caps {caps}");
                    self.obj()
                        .set_caps(&caps)
                        .map_err(|_| gst::FlowError::NotNegotiated)?;
                }
                state.caps_pending = false;
            }
            let now = ns_since(state.epoch, Instant::now());
            let drain_all = state.eos && state.items.is_empty();
            match state.reorder.pop(if drain_all { u64::MAX } else { now }) {
                Some(Popped::Frame { frame, jump }) => {
                    if let Some(jump) = &jump {
                        lock(&self.stats).jumped(jump);
                        self.control(|c| {
                            c.skip_before = c.skip_before.max(frame.header.base_group)
                        });
                        self.post_message(
                            gst::Structure::builder("moq-skip")
                                .field("skipped-ms", jump.skipped_us / 1000)
                                .field("skipped-base-frames", jump.skipped_base_frames)
                                .build(),
                        );
                    }
                    return Ok(self.make_buffer(state, frame, jump.is_some()));
                }
                Some(Popped::Dropped { frame, reason }) => {
                    lock(&self.stats).dropped(reason);
                    gst::debug!(
                        CAT,
                        imp = self,
                        "dropped frame {}: {reason:?}",
                        frame.header.decode_index
                    );
                    continue;
                }
                None if drain_all => return Err(gst::FlowError::Eos),
                None => {}
            }
            let deadline = state
                .reorder
                .deadline(now)
                .map(|d| state.epoch + Duration::from_nanos(d));
            let items = &mut state.items;
            let next = self.canceller.block_on(RUNTIME.handle(), async {
                match deadline {
                    Some(at) => tokio::time::timeout_at(at.into(), items.recv()).await.ok(),
                    None => Some(items.recv().await),
                }
            });
            match next {
                Err(_) => return Err(gst::FlowError::Flushing),
                Ok(None) => {}
                Ok(Some(Some(item))) => self.handle_item(state, item)?,
                Ok(Some(None)) => {
                    // The worker ended without an EOS or error item: it was stopped.
                    if !state.eos {
                        return Err(gst::FlowError::Flushing);
                    }
                }
            }
        }
    }

    /// Tells the network side what the streaming thread wants; never waits.
    fn control(&self, change: impl FnOnce(&mut Control)) {
        if let Some(started) = lock(&self.started).as_ref() {
            started.controls.send_modify(change);
        }
    }
}
