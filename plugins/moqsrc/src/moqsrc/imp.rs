use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use gst::glib;
use gst::prelude::*;
use gst::subclass::prelude::*;
use h264::FrameKind;
use moq_media::audio::{AacConfig, OpusHead};
use moq_media::catalog::{Catalog, Codec, MediaFormat, TrackEntry};
use moq_player::player::Event as PlayerEvent;
use moq_player::renditions::AbrPrefs;
use moq_player::select::{Choice, MediaKind, TrackPrefs};
use moq_player::stats::ReceiverStats;
use moq_player::{Now, Player, PlayerConfig, TrackId};
use moq_session::Versions;
use moq_session::blocking::{Canceller, runtime};
use moqt_common::connection::{Connection, Endpoint, Side, text};
use moqt_common::lock;
use moqt_common::renamed::{Deprecations, Renamed};
use tokio::sync::{mpsc, watch};

use super::receiver::{self, Control, EVENT_QUEUE, Event, Item, TrackFeed};
use super::upstream::{Payload, ReceiverConfig, Server};

static CAT: LazyLock<gst::DebugCategory> = LazyLock::new(|| {
    gst::DebugCategory::new(
        "moqsrc",
        gst::DebugColorFlags::empty(),
        Some("Media over QUIC source"),
    )
});

/// Caps of the reference timestamp meta holding when moqsrc had an object's last byte
/// (UNIX epoch, as `timestamp/x-unix`).
const RECEIVED_META: &str = "timestamp/x-moq-received";
const DEFAULT_MEDIA_TIMEOUT_MS: u32 = 10_000;

/// Old property names, kept for a release.
static RENAMED: [Renamed; 2] = [
    Renamed::seconds("timeout", "media-timeout", DEFAULT_MEDIA_TIMEOUT_MS),
    Renamed::uint("max-bitrate", "abr-max-bitrate", 0, 0),
];
const DEFAULT_LATENCY_MS: u32 = 100;

#[derive(Debug, Clone)]
struct Settings {
    connection: Connection,
    video_track: Choice,
    audio_track: Choice,
    media_timeout_ms: u32,
    latency_ms: u32,
    skip_forward: bool,
    playout: super::Playout,
    abr: super::Abr,
    rendition: Option<String>,
    /// bit/s; 0: no cap.
    max_bitrate: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            connection: Connection::default(),
            video_track: Choice::First,
            audio_track: Choice::First,
            media_timeout_ms: DEFAULT_MEDIA_TIMEOUT_MS,
            latency_ms: DEFAULT_LATENCY_MS,
            skip_forward: true,
            playout: super::Playout::Adaptive,
            abr: super::Abr::Auto,
            rendition: None,
            max_bitrate: 0,
        }
    }
}

/// The network side and its channels, while the element runs.
struct Started {
    worker: tokio::task::JoinHandle<()>,
    events: tokio::task::JoinHandle<()>,
    controls: watch::Sender<Control>,
}

/// An output pad, as the element keeps track of it.
struct OutputPad {
    pad: gst::Pad,
    track: TrackId,
}

/// Frames a pad's player takes from its channel ahead of need: enough to see past a gap,
/// few enough that the channel still pushes back on the network side.
const REORDER_FILL: usize = 128;

/// A pad's streaming state, owned by its task: no lock is held while it waits.
struct TrackStream {
    track: TrackId,
    name: String,
    items: mpsc::Receiver<Item>,
    /// The catalog generation and track whose caps were pushed.
    caps_from: (u64, String),
    /// stream-start and segment went out.
    started: bool,
}

#[derive(Default)]
pub struct MoqSrc {
    settings: Mutex<Settings>,
    started: Mutex<Option<Started>>,
    /// Lock order: `outputs` before `player`, `catalog`, `combiner`; none is held
    /// while waiting or pushing.
    outputs: Mutex<Vec<OutputPad>>,
    /// The broadcast's player while the element runs.
    player: Mutex<Option<Player<Payload>>>,
    /// The latest catalog and how many have been seen.
    catalog: Mutex<(u64, Option<Catalog>)>,
    combiner: Mutex<gst_base::UniqueFlowCombiner>,
    group_id: Mutex<Option<gst::GroupId>>,
    canceller: Canceller,
    /// Paused after playing: on resume, frames from before the pause are stale.
    paused_after_playing: AtomicBool,
    /// Resumes after a pause so far: frames count only from subscriptions made after the
    /// latest one.
    resumes: AtomicU64,
    /// Old property names used, to warn about on the bus.
    deprecations: Deprecations,
}

/// A time in ns as a `ClockTime`, saturated below `NONE` (which is `u64::MAX`).
fn clock_ns(ns: u64) -> gst::ClockTime {
    gst::ClockTime::from_nseconds(ns.min(gst::ClockTime::MAX.nseconds()))
}

/// A time in µs as a `ClockTime`, saturated rather than overflowing.
fn clock_us(us: u64) -> gst::ClockTime {
    clock_ns(us.saturating_mul(1_000))
}

/// Caps for a track of the catalog (validated when parsed; out-of-range values are left
/// out).
fn caps_for(entry: &TrackEntry) -> Option<gst::Caps> {
    let positive = |v: Option<u32>| v.and_then(|v| i32::try_from(v).ok()).filter(|v| *v > 0);
    match entry.known_codec()? {
        Codec::H264 => {
            let mut caps = gst::Caps::builder("video/x-h264")
                .field("stream-format", "byte-stream")
                .field("alignment", "au");
            if let (Some(w), Some(h)) = (positive(entry.width), positive(entry.height)) {
                caps = caps.field("width", w).field("height", h);
            }
            if let Some([n, d]) = entry.framerate
                && let (Some(n), Some(d)) = (positive(Some(n)), positive(Some(d)))
            {
                caps = caps.field("framerate", gst::Fraction::new(n, d));
            }
            Some(caps.build())
        }
        Codec::Opus => {
            let rate = positive(entry.sample_rate).unwrap_or(48_000);
            let channels = entry
                .channels
                .and_then(|c| u8::try_from(c).ok())
                .unwrap_or(2);
            let head = entry
                .config_bytes()
                .and_then(|b| OpusHead::parse(&b).ok())
                .unwrap_or_else(|| OpusHead::simple(channels, rate as u32));
            let mut caps = gst::Caps::builder("audio/x-opus")
                .field("rate", rate)
                .field("channels", i32::from(head.channels))
                .field("channel-mapping-family", i32::from(head.mapping_family))
                .field("stream-count", i32::from(head.stream_count))
                .field("coupled-count", i32::from(head.coupled_count));
            if head.mapping_family != 0 {
                let mapping = head.mapping.iter().map(|&m| i32::from(m));
                caps = caps.field("channel-mapping", gst::Array::new(mapping));
            }
            Some(caps.build())
        }
        Codec::Aac => {
            let asc = entry.config_bytes()?;
            let config = AacConfig::parse(&asc).ok()?;
            let rate =
                positive(entry.sample_rate).or_else(|| i32::try_from(config.sample_rate).ok())?;
            let channels =
                positive(entry.channels).unwrap_or(i32::from(config.channel_count()).max(1));
            Some(
                gst::Caps::builder("audio/mpeg")
                    .field("mpegversion", 4i32)
                    .field("stream-format", "raw")
                    .field("framed", true)
                    .field("rate", rate)
                    .field("channels", channels)
                    .field("codec_data", gst::Buffer::from_slice(asc))
                    .build(),
            )
        }
    }
}

/// Where one URL leads and how its certificate is checked: the URL's own settings (a URI
/// handed to playbin carries them in its query) before the element's properties. Also
/// returns the drafts the query names, if it names any.
/// Where to subscribe: `text` with the connection properties.
fn locate_server(
    text: &str,
    connection: &Connection,
) -> Result<(Server, Versions), gst::ErrorMessage> {
    let settings_error = |e: String| gst::error_msg!(gst::ResourceError::Settings, ["{e}"]);
    let Endpoint {
        url,
        trust,
        versions,
    } = connection.endpoint(text).map_err(settings_error)?;
    let located = url
        .locate(connection.namespace.as_deref())
        .map_err(|e| settings_error(e.to_string()))?;
    let server = Server {
        url,
        setup_path: located.setup_path,
        namespace: located.namespace,
        trust,
    };
    Ok((server, versions))
}

impl Settings {
    fn abr_prefs(&self) -> AbrPrefs {
        AbrPrefs {
            auto: self.abr == super::Abr::Auto,
            rendition: self.rendition.clone(),
            max_bps: (self.max_bitrate > 0).then_some(self.max_bitrate),
        }
    }
}

impl MoqSrc {
    fn config(&self) -> Result<(ReceiverConfig, Settings), gst::ErrorMessage> {
        let settings = lock(&self.settings).clone();
        let connection = &settings.connection;
        let text = connection.url.clone().ok_or_else(|| {
            gst::error_msg!(
                gst::ResourceError::Settings,
                ["no url set (moqt://HOST:PORT/NAMESPACE)"]
            )
        })?;
        let (server, versions) = locate_server(&text, connection)?;
        let backups = connection
            .backups()
            .map(|t| locate_server(t, connection).map(|(server, _)| server))
            .collect::<Result<Vec<_>, _>>()?;
        if settings.video_track == Choice::Off && settings.audio_track == Choice::Off {
            return Err(gst::error_msg!(
                gst::ResourceError::Settings,
                ["video-track and audio-track are both none: nothing to play"]
            ));
        }
        Ok((
            ReceiverConfig {
                server,
                backups,
                auth_token: connection.auth_token.clone(),
                versions,
                prefs: TrackPrefs {
                    video: settings.video_track.clone(),
                    audio: settings.audio_track.clone(),
                },
                timeout: Duration::from_millis(settings.media_timeout_ms.into()),
            },
            settings,
        ))
    }

    fn post_message(&self, s: gst::Structure) {
        let _ = self
            .obj()
            .post_message(gst::message::Element::builder(s).src(&*self.obj()).build());
    }

    /// Starts the network side (READY → PAUSED).
    fn start(&self) -> Result<(), gst::ErrorMessage> {
        let (config, settings) = self.config()?;
        let latency_ns = u64::from(settings.latency_ms) * 1_000_000;
        let (events_tx, events) = mpsc::channel(EVENT_QUEUE);
        let (controls, control_rx) = watch::channel(Control {
            resumes: self.resumes.load(Ordering::Relaxed),
            abr: settings.abr_prefs(),
            auth_token: config.auth_token.clone(),
            ..Control::default()
        });
        self.canceller.reset();
        let mut player = Player::new(PlayerConfig {
            latency_ns,
            skip_forward: settings.skip_forward,
            adaptive: settings.playout == super::Playout::Adaptive,
        });
        player.resumed(self.resumes.load(Ordering::Relaxed));
        *lock(&self.player) = Some(player);
        *lock(&self.catalog) = (0, None);
        *lock(&self.group_id) = Some(gst::GroupId::next());
        let worker = runtime().spawn(receiver::run(config, events_tx, control_rx));
        let events = runtime().spawn(handle_events(self.obj().downgrade(), events));
        *lock(&self.started) = Some(Started {
            worker,
            events,
            controls,
        });
        Ok(())
    }

    /// Stops the network side and the pads' tasks, and removes the pads (PAUSED → READY).
    fn stop(&self) {
        if let Some(started) = lock(&self.started).take() {
            started.worker.abort();
            started.events.abort();
        }
        self.canceller.cancel();
        let outputs = std::mem::take(&mut *lock(&self.outputs));
        for output in outputs {
            let _ = output.pad.set_active(false);
            let _ = output.pad.stop_task();
            let _ = self.obj().remove_pad(&output.pad);
        }
        lock(&self.combiner).clear();
        *lock(&self.player) = None;
    }

    /// Acts on one event of the network side (on a runtime thread).
    fn handle_event(&self, event: Event) {
        match event {
            Event::Connected {
                url,
                peer,
                version,
                attempt,
            } => {
                gst::info!(
                    CAT,
                    imp = self,
                    "connected to {url} at {peer} with {version} (connection {attempt})"
                );
                self.post_message(
                    gst::Structure::builder("moq-connected")
                        .field("url", url)
                        .field("address", peer.to_string())
                        .field("draft", version.draft())
                        .field("reconnections", attempt)
                        .build(),
                );
            }
            Event::Moved {
                from,
                url,
                peer,
                version,
                why,
            } => {
                gst::info!(
                    CAT,
                    imp = self,
                    "moved from {from} to {url} at {peer} with {version} ({})",
                    why.as_str()
                );
                self.post_message(
                    gst::Structure::builder("moq-moved")
                        .field("from", from)
                        .field("url", url)
                        .field("address", peer.to_string())
                        .field("draft", version.draft())
                        .field("reason", why.as_str())
                        .build(),
                );
            }
            Event::Disconnected(reason) => {
                gst::warning!(CAT, imp = self, "{reason}; reconnecting");
                self.post_message(
                    gst::Structure::builder("moq-disconnected")
                        .field("reason", reason)
                        .build(),
                );
            }
            Event::Retrying(reason) => {
                gst::info!(CAT, imp = self, "{reason}; trying again");
            }
            Event::Resubscribed(reason) => {
                gst::info!(
                    CAT,
                    imp = self,
                    "{reason}; subscribed again on the same session"
                );
                self.post_message(
                    gst::Structure::builder("moq-resubscribed")
                        .field("reason", reason)
                        .build(),
                );
            }
            Event::Catalog(catalog) => {
                gst::debug!(CAT, imp = self, "catalog {catalog:?}");
                let mut current = lock(&self.catalog);
                if current.1.as_ref() != Some(&catalog) {
                    current.0 += 1;
                    current.1 = Some(catalog);
                }
            }
            Event::Track(feed) => self.add_output(feed),
            Event::TracksComplete => self.obj().no_more_pads(),
            Event::Unplayable { name, codec } => {
                gst::element_imp_warning!(
                    self,
                    gst::StreamError::CodecNotFound,
                    ("track {name:?} has codec {codec:?}, which moqsrc does not carry: no pad for it")
                );
            }
            Event::Malformed(reason) => {
                gst::warning!(CAT, imp = self, "ignoring malformed data: {reason}")
            }
            Event::Rendition {
                track,
                from,
                to,
                bitrate,
                reason,
            } => {
                gst::info!(
                    CAT,
                    imp = self,
                    "{track}: rendition {from} -> {to} ({bitrate} bit/s): {reason}"
                );
                self.post_message(
                    gst::Structure::builder("moq-rendition")
                        .field("track", track)
                        .field("from", from)
                        .field("to", to)
                        .field("bitrate", bitrate)
                        .field("reason", reason)
                        .build(),
                );
            }
            Event::Error(msg) => {
                gst::element_imp_error!(self, gst::ResourceError::Read, ("{msg}"));
                // The pads' tasks stop waiting; the application tears down.
                self.canceller.cancel();
            }
        }
    }

    /// A pad for a new track, with a streaming task of its own.
    fn add_output(&self, feed: TrackFeed) {
        let TrackFeed { track, items } = feed;
        let mut outputs = lock(&self.outputs);
        if lock(&self.started).is_none() {
            return;
        }
        let index = (0..)
            .find(|i| {
                let name = format!("{}_{i}", track.kind.prefix());
                !outputs.iter().any(|o| o.pad.name() == name)
            })
            .unwrap_or(0);
        let templ_name = format!("{}_%u", track.kind.prefix());
        let Some(templ) = self.obj().pad_template(&templ_name) else {
            return;
        };
        let pad = gst::Pad::builder_from_template(&templ)
            .name(format!("{}_{index}", track.kind.prefix()))
            .query_function(|pad, parent, query| {
                MoqSrc::catch_panic_pad_function(parent, || false, |imp| imp.src_query(pad, query))
            })
            .build();
        let Some(id) = lock(&self.player)
            .as_mut()
            .map(|p| p.add_track(&track.name, track.kind))
        else {
            return;
        };
        let mut stream = TrackStream {
            track: id,
            name: track.name.clone(),
            items,
            caps_from: (0, String::new()),
            started: false,
        };
        outputs.push(OutputPad {
            pad: pad.clone(),
            track: id,
        });
        drop(outputs);
        lock(&self.combiner).add_pad(&pad);
        let _ = pad.set_active(true);
        gst::info!(
            CAT,
            imp = self,
            "track {:?} on pad {}",
            track.name,
            pad.name()
        );
        // Linked here by whoever handles pad-added (gst-launch's delayed links, decodebin).
        if self.obj().add_pad(&pad).is_err() {
            return;
        }
        let element = self.obj().downgrade();
        let task_pad = pad.clone();
        let started = pad.start_task(move || {
            let Some(element) = element.upgrade() else {
                let _ = task_pad.pause_task();
                return;
            };
            element.imp().stream_once(&task_pad, &mut stream);
        });
        if started.is_err() {
            gst::warning!(CAT, imp = self, "cannot start the task of {}", pad.name());
        }
    }

    fn src_query(&self, pad: &gst::Pad, query: &mut gst::QueryRef) -> bool {
        if let gst::QueryViewMut::Latency(q) = query.view_mut() {
            let latency = gst::ClockTime::from_mseconds(lock(&self.settings).latency_ms.into());
            q.set(true, latency, gst::ClockTime::NONE);
            return true;
        }
        gst::Pad::query_default(pad, Some(&*self.obj()), query)
    }

    /// One turn of a pad's task: output a frame, or end the stream.
    fn stream_once(&self, pad: &gst::Pad, stream: &mut TrackStream) {
        let flow = match self.produce(pad, stream) {
            Ok(buffer) => pad.push(buffer),
            Err(flow) => Err(flow),
        };
        let combined = lock(&self.combiner).update_pad_flow(pad, flow);
        match (flow, combined) {
            (Ok(_), _) | (Err(gst::FlowError::NotLinked), Ok(_)) => {}
            (Err(gst::FlowError::Eos), _) => {
                gst::debug!(CAT, imp = self, "{}: end of stream", stream.name);
                pad.push_event(gst::event::Eos::new());
                let _ = pad.pause_task();
            }
            (Err(gst::FlowError::Flushing), _) => {
                let _ = pad.pause_task();
            }
            (Err(err), _) => {
                if !matches!(combined, Err(gst::FlowError::Flushing)) {
                    gst::element_imp_error!(
                        self,
                        gst::StreamError::Failed,
                        ("streaming stopped on {}: {err:?}", pad.name())
                    );
                    pad.push_event(gst::event::Eos::new());
                }
                let _ = pad.pause_task();
            }
        }
    }

    /// Pushes the events a pad owes downstream before its next buffer.
    fn sticky_events(
        &self,
        pad: &gst::Pad,
        stream: &mut TrackStream,
    ) -> Result<(), gst::FlowError> {
        if !stream.started {
            let stream_id = pad.create_stream_id(&*self.obj(), Some(&stream.name));
            let mut start = gst::event::StreamStart::builder(&stream_id);
            if let Some(group) = *lock(&self.group_id) {
                start = start.group_id(group);
            }
            pad.push_event(start.build());
        }
        let rendition = self
            .with_player(|p| p.rendition(stream.track).to_owned())
            .ok_or(gst::FlowError::Flushing)?;
        let (generation, caps) = {
            let catalog = lock(&self.catalog);
            let caps = catalog
                .1
                .as_ref()
                .and_then(|c| c.track(&rendition))
                .and_then(caps_for);
            (catalog.0, caps)
        };
        if (generation, &rendition) != (stream.caps_from.0, &stream.caps_from.1) {
            stream.caps_from = (generation, rendition);
            if let Some(caps) = caps
                && pad.current_caps().as_ref() != Some(&caps)
            {
                gst::info!(CAT, imp = self, "{}: caps {caps}", stream.name);
                if !pad.push_event(gst::event::Caps::new(&caps)) {
                    return Err(gst::FlowError::NotNegotiated);
                }
            }
        }
        if !stream.started {
            stream.started = true;
            let segment = gst::FormattedSegment::<gst::ClockTime>::new();
            pad.push_event(gst::event::Segment::new(&segment));
        }
        Ok(())
    }

    /// The time now on the player's clocks. A live source stamps data with when it
    /// arrived, in running time; before the pipeline plays, running time is 0.
    fn now(&self) -> Now {
        Now {
            running: self
                .obj()
                .current_running_time()
                .map_or(0, |t| t.nseconds()),
            unix_us: moq_media::clock::unix_now_us_i64(),
        }
    }

    /// Runs `f` on the player, then reports what it did; `None` once the element stopped.
    fn with_player<R>(&self, f: impl FnOnce(&mut Player<Payload>) -> R) -> Option<R> {
        let (result, events) = {
            let mut guard = lock(&self.player);
            let player = guard.as_mut()?;
            let result = f(player);
            let mut events: Vec<(PlayerEvent, String)> = Vec::new();
            while let Some(event) = player.poll_event() {
                let track = match &event {
                    PlayerEvent::Jumped { track, .. } | PlayerEvent::Dropped { track, .. } => {
                        player.name(*track).to_owned()
                    }
                    PlayerEvent::Playout(_) => String::new(),
                };
                events.push((event, track));
            }
            (result, events)
        };
        for (event, track) in events {
            self.report(event, &track);
        }
        Some(result)
    }

    /// Tells the application and the network side what the player did.
    fn report(&self, event: PlayerEvent, track: &str) {
        match event {
            PlayerEvent::Jumped { group, jump, .. } => {
                self.control(|c| c.skip_before = c.skip_before.max(group));
                self.post_message(
                    gst::Structure::builder("moq-skip")
                        .field("track", track)
                        .field("skipped-ms", jump.skipped_us / 1000)
                        .field("skipped-base-frames", jump.skipped_base_frames)
                        .build(),
                );
            }
            PlayerEvent::Dropped {
                decode_index,
                reason,
                ..
            } => {
                gst::debug!(
                    CAT,
                    imp = self,
                    "{track}: dropped frame {decode_index}: {reason:?}"
                )
            }
            PlayerEvent::Playout(playout) => {
                gst::debug!(CAT, imp = self, "playout {playout:?}");
                self.post_message(
                    gst::Structure::builder("moq-playout")
                        .field("target-ms", playout.target_ms)
                        .field("delay-ms", playout.delay_ms)
                        .build(),
                );
            }
        }
    }

    /// Waits for the pad's next frame to output; no lock is held meanwhile.
    fn produce(
        &self,
        pad: &gst::Pad,
        stream: &mut TrackStream,
    ) -> Result<gst::Buffer, gst::FlowError> {
        let track = stream.track;
        loop {
            self.sticky_events(pad, stream)?;
            // What has already arrived is in the player before it decides that a frame is
            // missing: frames can wait in the channel while downstream holds the pad (a
            // sink keeping audio in sync with slower video).
            while self
                .with_player(|p| p.buffered(track) < REORDER_FILL)
                .ok_or(gst::FlowError::Flushing)?
                && let Ok(item) = stream.items.try_recv()
            {
                let now = self.now();
                self.with_player(|p| p.push(track, item, now));
            }
            let now = self.now();
            let drain_all =
                self.with_player(|p| p.ended(track)) == Some(true) && stream.items.is_empty();
            let (output, wake_at) = self
                .with_player(|p| match drain_all {
                    true => (p.pop_remaining(track, now), None),
                    false => (p.pop(track, now), p.wake_at(track, now)),
                })
                .ok_or(gst::FlowError::Flushing)?;
            if let Some(output) = output {
                // The new caps of a rendition that starts with this frame go first.
                self.sticky_events(pad, stream)?;
                return Ok(self.make_buffer(track, output));
            }
            if drain_all {
                return Err(gst::FlowError::Eos);
            }
            let deadline = wake_at
                .map(|at| Instant::now() + Duration::from_nanos(at.saturating_sub(now.running)));
            let items = &mut stream.items;
            let next = self.canceller.block_on(runtime().handle(), async {
                match deadline {
                    Some(at) => tokio::time::timeout_at(at.into(), items.recv()).await.ok(),
                    None => Some(items.recv().await),
                }
            });
            match next {
                Err(_) => return Err(gst::FlowError::Flushing),
                Ok(None) => {}
                Ok(Some(Some(item))) => {
                    let now = self.now();
                    self.with_player(|p| p.push(track, item, now));
                }
                Ok(Some(None)) => {
                    // The network side ended without an EOS: it was stopped or failed.
                    if self.with_player(|p| p.ended(track)) != Some(true) {
                        return Err(gst::FlowError::Flushing);
                    }
                }
            }
        }
    }

    fn stats(&self) -> gst::Structure {
        let tracks: Vec<(gst::Pad, TrackId)> = lock(&self.outputs)
            .iter()
            .map(|o| (o.pad.clone(), o.track))
            .collect();
        let outputs: Vec<(String, MediaKind, ReceiverStats)> = self
            .with_player(|p| {
                tracks
                    .iter()
                    .map(|(_, t)| (p.name(*t).to_owned(), p.kind(*t), p.stats(*t).clone()))
                    .collect()
            })
            .unwrap_or_default();
        let playout = self.with_player(|p| p.playout()).flatten();
        let mut s = gst::Structure::builder("moqsrc-stats")
            .field("playout-delay-ms", playout.map_or(-1.0, |p| p.delay_ms))
            .field("playout-target-ms", playout.map_or(-1.0, |p| p.target_ms))
            .field("playout-grows", playout.map_or(0, |p| p.grows))
            .field("playout-grown-ms", playout.map_or(0.0, |p| p.grown_ms))
            .field("playout-drained-ms", playout.map_or(0.0, |p| p.drained_ms));
        // The first video track's figures at the top level, as before tracks were pads.
        if let Some((_, _, video)) = outputs.iter().find(|(_, k, _)| *k == MediaKind::Video) {
            for (i, kind) in ["key", "reference", "non-reference"].iter().enumerate() {
                s = s
                    .field(format!("frames-received-{kind}"), video.frames_received[i])
                    .field(format!("bytes-received-{kind}"), video.bytes_received[i]);
            }
            s = stat_fields(s, video);
        }
        let tracks: Vec<gst::Structure> = outputs
            .iter()
            .map(|(name, kind, stats)| {
                let t = gst::Structure::builder("moqsrc-track")
                    .field("name", name)
                    .field("kind", kind.prefix())
                    .field("frames-received", stats.frames_received.iter().sum::<u64>())
                    .field("bytes-received", stats.bytes_received.iter().sum::<u64>());
                stat_fields(t, stats).build()
            })
            .collect();
        s.field("tracks", gst::Array::new(tracks)).build()
    }

    /// The buffer for a frame the player output.
    fn make_buffer(&self, track: TrackId, output: moq_player::Output<Payload>) -> gst::Buffer {
        let h = output.header;
        gst::log!(
            CAT,
            imp = self,
            "{track:?}: frame {} out: dts {} discont {}",
            h.decode_index,
            output.dts,
            output.discont
        );
        let kind = self.with_player(|p| p.kind(track));
        // The object's budget is released with it: the buffer is downstream's now.
        let mut buffer = gst::Buffer::from_slice(output.data.au);
        if let Some(buffer) = buffer.get_mut() {
            buffer.set_dts(clock_ns(output.dts));
            buffer.set_pts(clock_ns(output.pts));
            buffer.set_duration(clock_us(h.duration));
            // Counted from the publisher's first frame (its epoch); hang numbers frames
            // by group and object.
            let epoch = lock(&self.catalog)
                .1
                .as_ref()
                .filter(|c| c.format == MediaFormat::Native)
                .map_or(0, |c| c.epoch);
            buffer.set_offset(h.decode_index.saturating_sub(epoch));
            if output.discont {
                buffer.set_flags(gst::BufferFlags::DISCONT);
            }
            if kind == Some(MediaKind::Video) && h.kind != FrameKind::Key {
                buffer.set_flags(gst::BufferFlags::DELTA_UNIT);
            }
            static UNIX: LazyLock<gst::Caps> =
                LazyLock::new(|| gst::Caps::new_empty_simple("timestamp/x-unix"));
            static RECEIVED: LazyLock<gst::Caps> =
                LazyLock::new(|| gst::Caps::new_empty_simple(RECEIVED_META));
            // 0: unknown (a format without a clock).
            if h.availability_us > 0 {
                gst::ReferenceTimestampMeta::add(
                    buffer,
                    &UNIX,
                    clock_us(h.availability_us),
                    gst::ClockTime::NONE,
                );
            }
            // With the availability time, the delay splits into before and after moqsrc.
            gst::ReferenceTimestampMeta::add(
                buffer,
                &RECEIVED,
                clock_us(output.received_us.max(0) as u64),
                gst::ClockTime::NONE,
            );
        }
        buffer
    }

    /// Tells the network side what the streaming threads want; never waits.
    fn control(&self, change: impl FnOnce(&mut Control)) {
        if let Some(started) = lock(&self.started).as_ref() {
            started.controls.send_modify(change);
        }
    }
}

/// The figures every track reports in `stats`.
fn stat_fields(s: gst::structure::Builder, stats: &ReceiverStats) -> gst::structure::Builder {
    s.field("frames-output", stats.frames_output)
        .field("frames-late", stats.frames_late)
        .field("frames-skipped", stats.frames_skipped)
        .field("frames-duplicate", stats.frames_duplicate)
        .field("frames-drained", stats.frames_drained)
        .field("jumps", stats.jumps)
        .field("groups-skipped", stats.groups_skipped)
        .field("skipped-ms", stats.skipped_ms)
        .field("rebuffers", stats.rebuffers)
        .field("reorder-events", stats.reorder_events)
        .field("latency-p50-ms", stats.latency_ms(0.5).unwrap_or(-1.0))
        .field("latency-p95-ms", stats.latency_ms(0.95).unwrap_or(-1.0))
        .field("jitter-ms", stats.jitter_ms())
        .field("ts-df-ms", stats.ts_df_ms().unwrap_or(-1.0))
        // The video's renditions: the one playing ("" with a single one), and switches.
        .field("rendition", stats.rendition.clone().unwrap_or_default())
        .field("rendition-switches", stats.rendition_switches)
}

/// Acts on the network side's events until it stops.
async fn handle_events(element: glib::WeakRef<super::MoqSrc>, mut events: mpsc::Receiver<Event>) {
    while let Some(event) = events.recv().await {
        let Some(element) = element.upgrade() else {
            return;
        };
        element.imp().handle_event(event);
    }
}

#[glib::object_subclass]
impl ObjectSubclass for MoqSrc {
    const NAME: &'static str = "GstMoqSrc";
    type Type = super::MoqSrc;
    type ParentType = gst::Element;
    type Interfaces = (gst::URIHandler,);
}

impl URIHandlerImpl for MoqSrc {
    const URI_TYPE: gst::URIType = gst::URIType::Src;

    fn protocols() -> &'static [&'static str] {
        &["moqt"]
    }

    fn uri(&self) -> Option<String> {
        lock(&self.settings).connection.url.clone()
    }

    fn set_uri(&self, uri: &str) -> Result<(), glib::Error> {
        let running = self.obj().current_state() > gst::State::Ready;
        lock(&self.settings).connection.set_uri(uri, running)
    }
}

impl ObjectImpl for MoqSrc {
    fn constructed(&self) {
        self.parent_constructed();
        self.obj().set_element_flags(gst::ElementFlags::SOURCE);
    }

    fn properties() -> &'static [glib::ParamSpec] {
        static PROPERTIES: LazyLock<Vec<glib::ParamSpec>> = LazyLock::new(|| {
            let own = vec![
                glib::ParamSpecString::builder("video-track")
                    .nick("Video track")
                    .blurb("Video track to play (a pad video_0; its enhancement track is found in the catalog); unset: the first H.264 track of the catalog; none: no video")
                    .mutable_ready()
                    .build(),
                glib::ParamSpecString::builder("audio-track")
                    .nick("Audio track")
                    .blurb("Audio track to play (a pad audio_0); unset: the first Opus or AAC track of the catalog; none: no audio")
                    .mutable_ready()
                    .build(),
                glib::ParamSpecUInt::builder("media-timeout")
                    .nick("Media timeout")
                    .blurb("ms without media (connecting, subscribing, reconnecting) before failing with an error naming what failed (unreachable, refused, no such namespace or track, no catalog)")
                    .minimum(1000)
                    .maximum(3_600_000)
                    .default_value(DEFAULT_MEDIA_TIMEOUT_MS)
                    .mutable_ready()
                    .build(),
                glib::ParamSpecBoolean::builder("skip-forward")
                    .nick("Skip forward")
                    .blurb("Drop frames of GoPs older than the one playing and jump to newer media at once after a stall (re-anchored timestamps, DISCONT, a moq-skip message; a jump that brings playback earlier takes the audio with it); false plays every frame late instead, so latency only grows")
                    .default_value(true)
                    .mutable_ready()
                    .build(),
                glib::ParamSpecEnum::builder_with_default("playout", super::Playout::Adaptive)
                    .nick("Playout")
                    .blurb("How the timeline's offset moves. adaptive: it targets what the frames need (their delay variation, a keyframe's transfer expected from its size), growing at once when frames come late and draining by up to a tenth of the media time when they come early (video slots shortened, an audio frame dropped now and then, no hole), never buffering less than latency; posts moq-playout when its target moves much. fixed: the first frame's offset stays until a frame comes later than latency allows (a rebuffer) or playback jumps")
                    .mutable_ready()
                    .build(),
                glib::ParamSpecEnum::builder_with_default("abr", super::Abr::Auto)
                    .nick("Adaptive bitrate")
                    .blurb("When the catalog lists renditions of the video (an alternate group, as moqsink's alt-group pad property makes): auto starts on the lowest, switches down when the path cannot carry the one playing (a standing queue or a skip) and up one step after seconds of measured room; off stays on the one selected. Switches land on a keyframe with no gap and post moq-rendition. Changeable while playing")
                    .mutable_playing()
                    .build(),
                glib::ParamSpecString::builder("rendition")
                    .nick("Rendition")
                    .blurb("Play this rendition (a track of the video's alternate group), whatever abr says; unset: abr chooses. Changeable while playing: the switch is seamless")
                    .mutable_playing()
                    .build(),
                glib::ParamSpecUInt64::builder("abr-max-bitrate")
                    .nick("ABR maximum bitrate")
                    .blurb("bit/s: abr never chooses a rendition above it (the lowest stays allowed); 0: no cap. Changeable while playing")
                    .mutable_playing()
                    .build(),
                glib::ParamSpecBoxed::builder::<gst::Structure>("stats")
                    .nick("Statistics")
                    .blurb("Per track (`tracks`): name, kind, frames and bytes received, output, late, skipped, drained, jumps, rebuffers, latency p50/p95 over the last second, RFC 3550 jitter, TS-DF (ms), the video rendition playing and its switches; the first video track's figures, with frames and bytes per kind, also at the top level; and the playout: its buffering now and its target (ms beyond the fastest recent frames' transit, latency included; -1 when fixed or not yet known), how often it grew, by how much in all, and how much it drained")
                    .read_only()
                    .build(),
                glib::ParamSpecUInt::builder("latency")
                    .nick("Latency")
                    .blurb("Buffering in ms: how long frames may wait for missing ones before the reorder buffer moves on, and how late a frame may come before playback moves; reported as the source's latency. With playout=adaptive, the least buffering: the timeline adds what the frames need above it")
                    .maximum(60_000)
                    .default_value(DEFAULT_LATENCY_MS)
                    .mutable_ready()
                    .build(),
            ];
            moqt_common::properties(own, Side::Subscriber, &RENAMED)
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
        if settings.connection.set(pspec.name(), value) {
            if pspec.name() == "auth-token" {
                let token = settings.connection.auth_token.clone();
                drop(settings);
                self.control(|c| c.auth_token = token);
            }
            return;
        }
        match pspec.name() {
            "video-track" => settings.video_track = Choice::from_property(text().as_deref()),
            "audio-track" => settings.audio_track = Choice::from_property(text().as_deref()),
            "media-timeout" => {
                settings.media_timeout_ms = value.get().unwrap_or(DEFAULT_MEDIA_TIMEOUT_MS)
            }
            "latency" => settings.latency_ms = value.get().unwrap_or(DEFAULT_LATENCY_MS),
            "skip-forward" => settings.skip_forward = value.get().unwrap_or(true),
            "playout" => settings.playout = value.get().unwrap_or_default(),
            "abr" => settings.abr = value.get().unwrap_or_default(),
            "rendition" => settings.rendition = text(),
            "abr-max-bitrate" => settings.max_bitrate = value.get().unwrap_or(0),
            other => unreachable!("unknown property {other}"),
        }
        if matches!(pspec.name(), "abr" | "rendition" | "abr-max-bitrate") {
            let prefs = settings.abr_prefs();
            drop(settings);
            self.control(|c| c.abr = prefs);
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
        if let Some(value) = settings.connection.get(pspec.name()) {
            return value;
        }
        match pspec.name() {
            "video-track" => settings.video_track.to_property().to_value(),
            "audio-track" => settings.audio_track.to_property().to_value(),
            "media-timeout" => settings.media_timeout_ms.to_value(),
            "latency" => settings.latency_ms.to_value(),
            "skip-forward" => settings.skip_forward.to_value(),
            "playout" => settings.playout.to_value(),
            "abr" => settings.abr.to_value(),
            "rendition" => settings.rendition.to_value(),
            "abr-max-bitrate" => settings.max_bitrate.to_value(),
            "stats" => self.stats().to_value(),
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
                "Subscribes to H.264 video and Opus or AAC audio tracks over Media over QUIC Transport (draft-22, -20, -16 or -14)",
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
            gst::StateChange::NullToReady => {
                for warning in self.deprecations.to_post() {
                    gst::element_imp_warning!(self, gst::LibraryError::Settings, ("{warning}"));
                }
            }
            gst::StateChange::ReadyToPaused => {
                if let Err(err) = self.start() {
                    self.post_error_message(err);
                    return Err(gst::StateChangeError);
                }
            }
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
                self.with_player(|p| p.resumed(resumes));
                self.control(|c| {
                    c.paused = false;
                    c.resumes = resumes;
                });
            }
            gst::StateChange::PausedToReady => {
                self.paused_after_playing.store(false, Ordering::Relaxed);
                self.stop();
            }
            _ => {}
        }
        let result = self.parent_change_state(transition)?;
        // A live source: nothing to preroll.
        Ok(match transition {
            gst::StateChange::ReadyToPaused | gst::StateChange::PlayingToPaused => {
                gst::StateChangeSuccess::NoPreroll
            }
            _ => result,
        })
    }

    // Static caps and names: creating the templates cannot fail.
    #[allow(clippy::expect_used)]
    fn pad_templates() -> &'static [gst::PadTemplate] {
        static TEMPLATES: LazyLock<Vec<gst::PadTemplate>> = LazyLock::new(|| {
            let video = gst::Caps::builder("video/x-h264")
                .field("stream-format", "byte-stream")
                .field("alignment", "au")
                .build();
            let mut audio = gst::Caps::new_empty_simple("audio/x-opus");
            audio.merge(
                gst::Caps::builder("audio/mpeg")
                    .field("mpegversion", 4i32)
                    .field("stream-format", "raw")
                    .build(),
            );
            [("video_%u", video), ("audio_%u", audio)]
                .into_iter()
                .map(|(name, caps)| {
                    gst::PadTemplate::new(
                        name,
                        gst::PadDirection::Src,
                        gst::PadPresence::Sometimes,
                        &caps,
                    )
                    .expect("valid pad template")
                })
                .collect()
        });
        TEMPLATES.as_ref()
    }
}
