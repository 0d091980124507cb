//! The broadcast as the element publishes it: a media track per sink pad, and the
//! catalog that lists them. Free of GStreamer so the element only translates buffers,
//! caps and events.
//!
//! The catalog is first published once every track with caps can describe itself (video
//! needs a keyframe for its parameter sets), or [`CATALOG_HOLD`] after the first one
//! could, so one slow track does not hide the others; afterwards on every change, e.g. a
//! pad added while playing or new parameter sets.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
pub use moq_media::catalog::MediaKind;
use moq_media::catalog::{self, Catalog, MediaFormat, TrackEntry};
use moq_media::mapping::priority;
use moq_media::{DeliveryMode, hang};
use moq_session::{Broadcast, TrackDelivery, TrackProducer};

use super::audio::{AudioParams, AudioTrack};
use super::frame::session_priority;
pub use super::frame::{AuTiming, Dropped, TrackId, TrackSetup};
use super::video::{Placed, StreamParams, VideoTrack};

/// How long the first catalog waits for tracks that cannot describe themselves yet.
pub const CATALOG_HOLD: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub enum MediaTrack {
    Video(Box<VideoTrack>),
    Audio(AudioTrack),
}

impl MediaTrack {
    pub fn name(&self) -> &str {
        match self {
            MediaTrack::Video(v) => v.name(),
            MediaTrack::Audio(a) => a.name(),
        }
    }

    fn catalog_entries(&self) -> Option<Vec<TrackEntry>> {
        match self {
            MediaTrack::Video(v) => v.catalog_entries(),
            MediaTrack::Audio(a) => a.catalog_entry().map(|e| vec![e]),
        }
    }

    fn finish(&self) {
        match self {
            MediaTrack::Video(v) => v.finish(),
            MediaTrack::Audio(a) => a.finish(),
        }
    }

    /// The names it uses on the broadcast.
    fn track_names(&self) -> Vec<String> {
        match self {
            MediaTrack::Video(v) => v.track_names(),
            MediaTrack::Audio(a) => vec![a.name().to_owned()],
        }
    }
}

#[derive(Debug)]
pub struct Publisher {
    broadcast: Broadcast,
    format: MediaFormat,
    mode: DeliveryMode,
    delivery_timeout: Option<Duration>,
    /// Start of this run, ms since the UNIX epoch: the first group ID and decode index of
    /// every track, so IDs keep increasing across restarts.
    epoch: u64,
    catalog: TrackProducer,
    next_catalog_group: u64,
    /// What the last catalog listed; `None` before the first one.
    published: Option<Vec<TrackEntry>>,
    /// When a track could first describe itself (µs since the UNIX epoch).
    first_ready_us: Option<u64>,
    /// Wall clock (µs since the UNIX epoch) at media time 0, from the first frame: hang's
    /// catalog clock, as its frames carry no availability time.
    wall_at_zero_us: Option<u64>,
    tracks: BTreeMap<TrackId, MediaTrack>,
    /// Tracks that reached the end of their stream.
    ended: Vec<TrackId>,
}

impl Publisher {
    /// `delivery_timeout`: data not handed to QUIC within it is dropped (all tracks). In
    /// the hang format, `mode` falls back to its base-layer behaviour
    /// ([`DeliveryMode::base_layer_only`]).
    pub fn new(
        broadcast: &Broadcast,
        format: MediaFormat,
        mode: DeliveryMode,
        delivery_timeout: Option<Duration>,
    ) -> Publisher {
        let epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let (catalog_track, mode) = match format {
            MediaFormat::Native => (catalog::CATALOG_TRACK, mode),
            MediaFormat::Hang => (hang::CATALOG_TRACK, mode.base_layer_only()),
        };
        let catalog = broadcast.create_track(catalog_track, TrackDelivery::default());
        Publisher {
            broadcast: broadcast.clone(),
            format,
            mode,
            delivery_timeout,
            epoch,
            catalog,
            next_catalog_group: epoch,
            published: None,
            first_ready_us: None,
            wall_at_zero_us: None,
            tracks: BTreeMap::new(),
            ended: Vec::new(),
        }
    }

    /// Whether `name` is free for a new track (the catalog and every track in use keep
    /// theirs).
    fn name_free(&self, name: &str) -> bool {
        name != catalog::CATALOG_TRACK
            && name != hang::CATALOG_TRACK
            && !self
                .tracks
                .values()
                .any(|t| t.track_names().iter().any(|n| n == name))
    }

    /// Creates the track of a pad, called `name`, so subscribers can ask for it before
    /// its first frame. Pads that exist at start get theirs then, later ones on their
    /// first caps.
    pub fn add_track(&mut self, id: TrackId, kind: MediaKind, name: &str) -> Result<(), String> {
        if self.tracks.contains_key(&id) {
            return Ok(());
        }
        let mut names = vec![name.to_owned()];
        if kind == MediaKind::Video {
            names.push(super::video::enhancement_name(name));
        }
        if let Some(taken) = names.iter().find(|n| !self.name_free(n)) {
            return Err(format!("track name {taken:?} is already used"));
        }
        let setup = TrackSetup {
            format: self.format,
            mode: self.mode,
            delivery_timeout: self.delivery_timeout,
            epoch: self.epoch,
        };
        let track = match kind {
            MediaKind::Video => {
                MediaTrack::Video(Box::new(VideoTrack::new(&self.broadcast, name, setup)))
            }
            MediaKind::Audio => MediaTrack::Audio(AudioTrack::new(&self.broadcast, name, setup)),
        };
        self.tracks.insert(id, track);
        Ok(())
    }

    /// New caps on a video pad (its track is created if it was not).
    pub fn set_video_stream(
        &mut self,
        id: TrackId,
        name: &str,
        params: StreamParams,
        codec_data: Option<&[u8]>,
    ) -> Result<(), String> {
        self.add_track(id, MediaKind::Video, name)?;
        let Some(MediaTrack::Video(track)) = self.tracks.get_mut(&id) else {
            return Err("not a video track".into());
        };
        track.set_stream(params, codec_data)
    }

    /// New caps on an audio pad (its track is created if it was not).
    pub fn set_audio_stream(
        &mut self,
        id: TrackId,
        name: &str,
        params: AudioParams,
        now_us: u64,
    ) -> Result<(), String> {
        self.add_track(id, MediaKind::Audio, name)?;
        let Some(MediaTrack::Audio(track)) = self.tracks.get_mut(&id) else {
            return Err("not an audio track".into());
        };
        track.set_params(params);
        self.refresh_catalog(now_us);
        Ok(())
    }

    /// Publishes one access unit of a video pad.
    pub fn push_video(
        &mut self,
        id: TrackId,
        au: Bytes,
        timing: AuTiming,
    ) -> Result<Placed, Dropped> {
        let Some(MediaTrack::Video(track)) = self.tracks.get_mut(&id) else {
            return Err(Dropped::NotConfigured);
        };
        self.wall_at_zero_us.get_or_insert(
            timing
                .availability_us
                .saturating_sub(timing.pts.max(0) as u64),
        );
        let result = track.push(au, timing);
        let keyframe = matches!(&result, Ok(placed) if placed.info.kind == h264::FrameKind::Key);
        if keyframe || self.published.is_none() {
            self.refresh_catalog(timing.availability_us);
        }
        result
    }

    /// Publishes one frame of an audio pad.
    pub fn push_audio(
        &mut self,
        id: TrackId,
        frame: Bytes,
        timing: AuTiming,
    ) -> Result<(), Dropped> {
        let Some(MediaTrack::Audio(track)) = self.tracks.get_mut(&id) else {
            return Err(Dropped::NotConfigured);
        };
        self.wall_at_zero_us.get_or_insert(
            timing
                .availability_us
                .saturating_sub(timing.pts.max(0) as u64),
        );
        let result = track.push(frame, timing);
        if self.published.is_none() {
            self.refresh_catalog(timing.availability_us);
        }
        result
    }

    /// Whether a new subscriber's keyframe request for video track `id` at `now_us` (wall
    /// clock) should go to its encoder: at most once per GoP.
    pub fn allow_keyframe_request(&mut self, id: TrackId, now_us: u64) -> bool {
        match self.tracks.get_mut(&id) {
            Some(MediaTrack::Video(track)) => track.allow_keyframe_request(now_us),
            _ => false,
        }
    }

    /// The video track whose base track is called `name`.
    pub fn video_track_named(&self, name: &str) -> Option<TrackId> {
        self.tracks
            .iter()
            .find(|(_, t)| matches!(t, MediaTrack::Video(v) if v.name() == name))
            .map(|(id, _)| *id)
    }

    pub fn track(&self, id: TrackId) -> Option<&MediaTrack> {
        self.tracks.get(&id)
    }

    pub fn tracks(&self) -> impl Iterator<Item = (&TrackId, &MediaTrack)> {
        self.tracks.iter()
    }

    /// The pad's stream ended: its track is finished. Returns whether every track has.
    pub fn end_track(&mut self, id: TrackId) -> bool {
        if let Some(track) = self.tracks.get(&id) {
            track.finish();
        }
        if !self.ended.contains(&id) {
            self.ended.push(id);
        }
        self.tracks.keys().all(|id| self.ended.contains(id))
    }

    /// The pad went away: its track leaves the broadcast and the catalog.
    pub fn remove_track(&mut self, id: TrackId, now_us: u64) {
        if let Some(track) = self.tracks.remove(&id) {
            track.finish();
            for name in track.track_names() {
                self.broadcast.remove_track(&name);
            }
        }
        self.ended.retain(|e| *e != id);
        if self.published.is_some() {
            self.refresh_catalog(now_us);
        }
    }

    /// Publishes a new catalog if what it would list changed (see the module docs).
    fn refresh_catalog(&mut self, now_us: u64) {
        let described: Vec<Option<Vec<TrackEntry>>> = self
            .tracks
            .values()
            .map(MediaTrack::catalog_entries)
            .collect();
        let ready = described.iter().filter(|d| d.is_some()).count();
        if ready == 0 && self.published.is_none() {
            return;
        }
        let first_ready = *self.first_ready_us.get_or_insert(now_us);
        let waiting = ready < described.len();
        if self.published.is_none()
            && waiting
            && now_us.saturating_sub(first_ready) < CATALOG_HOLD.as_micros() as u64
        {
            return;
        }
        let entries: Vec<TrackEntry> = described.into_iter().flatten().flatten().collect();
        // A catalog without media is no broadcast: the last one stays until a track returns.
        if entries.is_empty() || self.published.as_ref() == Some(&entries) {
            return;
        }
        let doc = Catalog {
            format: self.format,
            wall_at_zero_us: self.wall_at_zero_us,
            ..Catalog::native(self.mode.name(), self.epoch, entries.clone())
        };
        let json = match self.format {
            MediaFormat::Native => doc.to_json(),
            MediaFormat::Hang => hang::catalog_to_json(&doc),
        };
        self.catalog
            .create_group(self.next_catalog_group, session_priority(priority::CATALOG))
            .write(Bytes::from(json));
        self.next_catalog_group += 1;
        self.published = Some(entries);
    }

    /// Ends every track and the catalog.
    pub fn finish(&self) {
        self.broadcast.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use moq_session::TrackNamespace;

    fn opus() -> AudioParams {
        AudioParams {
            codec: "opus".into(),
            sample_rate: 48_000,
            channels: 2,
            config: moq_media::audio::OpusHead::simple(2, 48_000).to_bytes(),
            label: None,
        }
    }

    fn publisher() -> (Broadcast, Publisher) {
        let broadcast = Broadcast::new(TrackNamespace(vec![b"live".to_vec()]));
        let publisher = Publisher::new(
            &broadcast,
            MediaFormat::Native,
            DeliveryMode::Combined,
            None,
        );
        (broadcast, publisher)
    }

    #[test]
    fn names_are_unique_across_tracks_and_layers() {
        let (_, mut p) = publisher();
        p.set_video_stream(0, "video", StreamParams::default(), None)
            .unwrap();
        assert!(p.set_audio_stream(1, "video-enh", opus(), 0).is_err());
        assert!(p.set_audio_stream(1, "catalog", opus(), 0).is_err());
        assert!(
            p.set_video_stream(2, "video", StreamParams::default(), None)
                .is_err()
        );
        p.set_audio_stream(1, "audio", opus(), 0).unwrap();
        assert_eq!(p.video_track_named("video"), Some(0));
        assert_eq!(p.video_track_named("audio"), None);
        // A track's own caps may change.
        p.set_audio_stream(1, "audio", opus(), 0).unwrap();
    }

    #[test]
    fn the_first_catalog_waits_a_moment_for_video_then_lists_what_is_ready() {
        let (_, mut p) = publisher();
        p.set_video_stream(0, "video", StreamParams::default(), None)
            .unwrap();
        p.set_audio_stream(1, "audio", opus(), 1_000_000).unwrap();
        let timing = |us: u64| AuTiming {
            pts: 0,
            dts: 0,
            duration: 20_000,
            availability_us: us,
            marked_key: true,
        };
        p.push_audio(1, Bytes::from_static(b"a"), timing(1_500_000))
            .unwrap();
        assert!(p.published.is_none(), "video may still come");
        p.push_audio(1, Bytes::from_static(b"a"), timing(2_000_000))
            .unwrap();
        let listed = p.published.clone().expect("published after the hold");
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].name, "audio");
        // Ending tracks: only the last one ends the broadcast.
        assert!(!p.end_track(1));
        assert!(p.end_track(0));
        p.remove_track(1, 3_000_000);
        assert_eq!(p.published.as_ref().map(Vec::len), Some(1));
    }
}
