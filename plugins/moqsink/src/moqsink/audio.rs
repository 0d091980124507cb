//! One audio track: encoded frames (Opus packets, raw AAC frames) mapped to short groups
//! on the broadcast, above every video stream. Free of GStreamer.

use std::time::Duration;

use bytes::Bytes;
use h264::{FrameKind, SliceType};
use moq_media::FrameHeader;
use moq_media::audio::AudioMapper;
use moq_media::catalog::MediaFormat;
use moq_media::catalog::{self, TrackEntry, TrackKind};
use moq_media::mapping::priority;
use moq_session::{
    Broadcast, GroupOrder, GroupWriter, Payload, TrackDelivery, TrackProducer, TrackStats,
};

use super::frame::{AuTiming, Dropped, TrackSetup, frame_prefix, session_priority};

/// Media an audio group spans: a few frames share a stream, so a lost packet delays
/// only the frames of its group behind it, and the per-stream overhead is shared.
pub const AUDIO_GROUP: Duration = Duration::from_millis(100);

/// In the modes that skip old GoPs, audio older than this is dropped at the sender: the
/// receiver would skip it with the video it belonged to.
pub const AUDIO_MAX_AGE: Duration = Duration::from_secs(1);

/// What the caps say about an audio stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AudioParams {
    /// Catalog codec string: `opus`, `mp4a.40.2`, ...
    pub codec: String,
    pub sample_rate: u32,
    pub channels: u32,
    /// OpusHead or AudioSpecificConfig.
    pub config: Vec<u8>,
    /// From the pad's properties: a name for track pickers, for the catalog.
    pub label: Option<String>,
}

/// Frames and bytes published, and frames refused.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AudioPublished {
    pub frames: u64,
    pub bytes: u64,
    pub dropped: u64,
}

#[derive(Debug)]
pub struct AudioTrack {
    format: MediaFormat,
    producer: TrackProducer,
    mapper: AudioMapper,
    params: Option<AudioParams>,
    open_group: Option<GroupWriter>,
    published: AudioPublished,
    /// The longest frame so far, µs: what a frame waits at the publisher.
    longest_frame_us: u64,
}

impl AudioTrack {
    /// An audio track called `name`; group IDs and sequence numbers start at the epoch.
    pub fn new(broadcast: &Broadcast, name: &str, setup: TrackSetup) -> AudioTrack {
        let max_age = match setup.delivery_timeout {
            Some(timeout) => Some(timeout),
            None => setup.mode.newest_group_first().then_some(AUDIO_MAX_AGE),
        };
        let producer = broadcast.create_track(
            name,
            TrackDelivery {
                group_order: GroupOrder::Ascending,
                max_age,
                ..TrackDelivery::default()
            },
        );
        AudioTrack {
            format: setup.format,
            producer,
            mapper: AudioMapper::new(AUDIO_GROUP.as_micros() as u64, setup.epoch),
            params: None,
            open_group: None,
            published: AudioPublished::default(),
            longest_frame_us: 0,
        }
    }

    pub fn name(&self) -> &str {
        self.producer.name()
    }

    pub fn set_params(&mut self, params: AudioParams) {
        self.params = Some(params);
    }

    /// Publishes one encoded frame, shared by every subscriber, never copied.
    pub fn push(&mut self, frame: Bytes, timing: AuTiming) -> Result<(), Dropped> {
        if self.params.is_none() {
            self.published.dropped += 1;
            return Err(Dropped::NotConfigured);
        }
        if frame.is_empty() {
            self.published.dropped += 1;
            return Err(Dropped::Malformed("empty audio frame".into()));
        }
        let placement = self.mapper.place(timing.pts);
        let header = FrameHeader {
            kind: FrameKind::Key,
            slice_type: SliceType::I,
            decode_index: placement.sequence,
            dts: timing.pts,
            pts: timing.pts,
            duration: timing.duration,
            availability_us: timing.availability_us,
            base_group: placement.group,
            base_index: placement.sequence,
        };
        let prefix = frame_prefix(self.format, &header);
        if placement.starts_group {
            self.open_group = Some(self.producer.create_group(
                placement.group,
                session_priority(priority::audio(placement.group)),
            ));
        }
        self.published.frames += 1;
        self.published.bytes += frame.len() as u64;
        self.longest_frame_us = self.longest_frame_us.max(timing.duration);
        if let Some(group) = &self.open_group {
            group.write(Payload::from_parts(vec![prefix, frame]));
        }
        Ok(())
    }

    pub fn catalog_entry(&self) -> Option<TrackEntry> {
        let params = self.params.as_ref()?;
        Some(TrackEntry {
            codec: Some(params.codec.clone()),
            sample_rate: Some(params.sample_rate),
            channels: Some(params.channels),
            config: (!params.config.is_empty()).then(|| catalog::hex_encode(&params.config)),
            label: params.label.clone(),
            jitter_us: (self.longest_frame_us > 0).then_some(self.longest_frame_us),
            ..TrackEntry::new(self.name(), TrackKind::Audio)
        })
    }

    /// No more frames: subscriptions finish once they have everything.
    pub fn finish(&self) {
        self.producer.finish();
    }

    pub fn stats(&self) -> (AudioPublished, TrackStats) {
        (self.published, self.producer.stats())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use moq_session::TrackNamespace;

    fn timing(pts: i64) -> AuTiming {
        AuTiming {
            pts,
            dts: pts,
            duration: 20_000,
            availability_us: 1_000,
            marked_key: true,
        }
    }

    #[test]
    fn frames_wait_for_the_caps_then_carry_a_key_frame_header() {
        let broadcast = Broadcast::new(TrackNamespace(vec![b"live".to_vec()]));
        let setup = TrackSetup {
            format: MediaFormat::Native,
            mode: moq_media::DeliveryMode::SkipGops,
            delivery_timeout: None,
            epoch: 7,
        };
        let mut track = AudioTrack::new(&broadcast, "audio", setup);
        assert_eq!(
            track.push(Bytes::from_static(b"x"), timing(0)),
            Err(Dropped::NotConfigured)
        );
        assert!(track.catalog_entry().is_none());
        track.set_params(AudioParams {
            codec: "opus".into(),
            sample_rate: 48_000,
            channels: 2,
            config: moq_media::audio::OpusHead::simple(2, 48_000).to_bytes(),
            label: Some("English".into()),
        });
        for i in 0..10 {
            track
                .push(Bytes::from_static(b"opus"), timing(i * 20_000))
                .unwrap();
        }
        let (published, _) = track.stats();
        assert_eq!(
            (published.frames, published.bytes, published.dropped),
            (10, 40, 1)
        );
        let entry = track.catalog_entry().unwrap();
        assert_eq!(entry.kind, TrackKind::Audio);
        assert_eq!(entry.known_codec(), Some(catalog::Codec::Opus));
        // A frame waits its own duration at the sender: hang's players buffer that much.
        assert_eq!(
            (entry.label.as_deref(), entry.jitter_us),
            (Some("English"), Some(20_000))
        );
        assert_eq!(
            entry.config_bytes().unwrap(),
            moq_media::audio::OpusHead::simple(2, 48_000).to_bytes()
        );
        assert!(matches!(
            track.push(Bytes::new(), timing(200_000)),
            Err(Dropped::Malformed(_))
        ));
    }
}
