//! One video track: access units validated, classified and mapped to groups and objects
//! of its base track (and, in the modes that split layers, its enhancement track). Free
//! of GStreamer so the element only translates buffers, caps and events.

use std::time::Duration;

use bytes::Bytes;
use h264::{AuInfo, FrameKind, StreamFormat, StreamParser};
use moq_media::catalog::{self, MediaFormat, TrackEntry, TrackKind, TrackRole};
use moq_media::mapping::priority;
use moq_media::{DeliveryMode, FrameHeader, KeyframeRequests, Mapper};
use moq_session::{Broadcast, GroupWriter, Payload, TrackDelivery, TrackProducer, TrackStats};

use super::frame::{AuTiming, Dropped, TrackSetup, frame_prefix, session_priority};

/// Without a delivery timeout, non-reference frames still expire after this long: past
/// it they would reach a receiver after their display time.
pub const ENHANCEMENT_MAX_AGE: Duration = Duration::from_millis(500);

/// Frames and bytes published, per frame kind (index: key, reference, non-reference).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Published {
    pub frames: [u64; 3],
    pub bytes: [u64; 3],
    /// Access units refused: before the first keyframe, or not parseable.
    pub dropped: u64,
}

fn kind_index(kind: FrameKind) -> usize {
    match kind {
        FrameKind::Key => 0,
        FrameKind::Reference => 1,
        FrameKind::NonReference => 2,
    }
}

/// Per-stream parameters from the caps.
#[derive(Debug, Clone, Default)]
pub struct StreamParams {
    pub format: Option<StreamFormat>,
    pub framerate: Option<[u32; 2]>,
    /// From the pad's properties: the nominal bitrate (bit/s) and alternate group of a
    /// rendition, for the catalog.
    pub bitrate: Option<u64>,
    pub alt_group: Option<u32>,
    /// From the pad's properties: a name for track pickers, for the catalog.
    pub label: Option<String>,
}

#[derive(Debug)]
pub struct VideoTrack {
    format: MediaFormat,
    mode: DeliveryMode,
    base: TrackProducer,
    enhancement: Option<TrackProducer>,
    stream: StreamParams,
    /// Validates every access unit and keeps the parameter sets the stream uses now.
    parser: StreamParser,
    mapper: Mapper,
    open_group: Option<GroupWriter>,
    decode_index: u64,
    published: Published,
    keyframe_requests: KeyframeRequests,
    /// A keyframe was refused: pictures until the next good one cannot decode.
    gop_broken: bool,
    /// How long frames wait for their turn at the sender (hang's `jitter`).
    wait: FrameWait,
}

/// The longest a frame waits at the sender before it is sent, relative to the frame that
/// waits least: how much earlier than another, relative to their presentation times, the
/// encoder's reordering puts one frame's output (the spread of PTS − DTS), plus a frame's
/// own duration. A player buffers that much to show every frame on time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FrameWait {
    /// The least and most PTS − DTS seen, µs.
    reorder_us: Option<(i64, i64)>,
    longest_frame_us: u64,
}

impl FrameWait {
    pub fn observe(&mut self, pts: i64, dts: i64, duration_us: u64) {
        let ahead = pts.saturating_sub(dts);
        let (least, most) = self.reorder_us.get_or_insert((ahead, ahead));
        *least = (*least).min(ahead);
        *most = (*most).max(ahead);
        self.longest_frame_us = self.longest_frame_us.max(duration_us);
    }

    /// µs, once a frame was seen.
    pub fn bound_us(&self) -> Option<u64> {
        let (least, most) = self.reorder_us?;
        Some(most.abs_diff(least).saturating_add(self.longest_frame_us))
    }
}

/// Where one access unit went.
#[derive(Debug)]
pub struct Placed {
    pub info: AuInfo,
    pub role: TrackRole,
    pub group: u64,
}

impl VideoTrack {
    /// A video track called `name` (its enhancement layer `name-enh`). Group IDs and
    /// decode indices start at the epoch.
    pub fn new(broadcast: &Broadcast, name: &str, setup: TrackSetup) -> VideoTrack {
        let TrackSetup {
            format,
            mode,
            delivery_timeout,
            epoch,
        } = setup;
        let base = broadcast.create_track(
            name,
            TrackDelivery::base_layer(mode.newest_group_first(), delivery_timeout),
        );
        let enhancement = mode.splits_layers().then(|| {
            broadcast.create_track(
                &enhancement_name(name),
                TrackDelivery::enhancement_layer(delivery_timeout.unwrap_or(ENHANCEMENT_MAX_AGE)),
            )
        });
        VideoTrack {
            format,
            mode,
            base,
            enhancement,
            stream: StreamParams::default(),
            parser: StreamParser::new(),
            mapper: Mapper::starting_at(mode, epoch),
            open_group: None,
            decode_index: epoch,
            published: Published::default(),
            keyframe_requests: KeyframeRequests::default(),
            gop_broken: false,
            wait: FrameWait::default(),
        }
    }

    /// Whether a new subscriber's keyframe request at `now_us` (wall clock) should go to
    /// the encoder: at most once per GoP.
    pub fn allow_keyframe_request(&mut self, now_us: u64) -> bool {
        self.keyframe_requests.request(now_us)
    }

    /// New caps: stream format, size, rate, and for `avc` the parameter sets in `codec_data`.
    pub fn set_stream(
        &mut self,
        params: StreamParams,
        codec_data: Option<&[u8]>,
    ) -> Result<(), String> {
        if let Some(avcc) = codec_data {
            self.parser
                .load_avcc(avcc)
                .map_err(|e| format!("invalid codec_data: {e}"))?;
        }
        self.stream = params;
        Ok(())
    }

    /// Frames published so far, and delivery counters of the base and enhancement tracks.
    pub fn stats(&self) -> (Published, TrackStats, Option<TrackStats>) {
        (
            self.published,
            self.base.stats(),
            self.enhancement.as_ref().map(TrackProducer::stats),
        )
    }

    /// Publishes one access unit. In byte-stream format its bytes are sent as they are,
    /// shared by every subscriber, never copied.
    pub fn push(&mut self, au: Bytes, timing: AuTiming) -> Result<Placed, Dropped> {
        let result = self.place(&au, timing);
        match &result {
            Ok(placed) => {
                let k = kind_index(placed.info.kind);
                self.published.frames[k] += 1;
                self.published.bytes[k] += au.len() as u64;
            }
            Err(_) => self.published.dropped += 1,
        }
        result
    }

    fn place(&mut self, au: &Bytes, timing: AuTiming) -> Result<Placed, Dropped> {
        let format = self.stream.format.unwrap_or(StreamFormat::ByteStream);
        // Pictures whose parameter sets never came cannot start a stream; anything else
        // that does not parse is malformed, and none of its parameter sets are kept.
        let parsed = match self.parser.push(au, format) {
            Ok(parsed) => parsed,
            Err(e) if e.is_missing_parameter_set() && self.parser.active().is_none() => {
                return Err(Dropped::NoKeyframeYet);
            }
            Err(e) => {
                // Upstream's own word that this was the keyframe the next pictures use.
                self.gop_broken |= timing.marked_key;
                return Err(Dropped::Malformed(e.to_string()));
            }
        };
        let info = parsed.info;
        if info.kind == FrameKind::Key {
            self.gop_broken = false;
        } else if self.gop_broken {
            return Err(Dropped::AfterRefusedKeyframe);
        }
        if info.kind == FrameKind::Key {
            self.keyframe_requests.keyframe(timing.availability_us);
        }
        let placement = self.mapper.place(info.kind).ok_or(Dropped::NoKeyframeYet)?;
        let header = FrameHeader {
            kind: info.kind,
            slice_type: info.slice_type,
            decode_index: self.decode_index,
            dts: timing.dts,
            pts: timing.pts,
            duration: timing.duration,
            availability_us: timing.availability_us,
            base_group: placement.base_group,
            base_index: placement.base_index,
        };
        let mut parts = vec![frame_prefix(self.format, &header)];
        // Objects always carry Annex B, and keyframes their own SPS/PPS, so any group is
        // a self-contained join point whatever the input format.
        if info.kind == FrameKind::Key
            && !parsed.carries_active_sets
            && let Some(active) = self.parser.active()
        {
            parts.push(Bytes::copy_from_slice(active.annexb_prefix()));
        }
        parts.push(match format {
            StreamFormat::ByteStream => au.clone(),
            StreamFormat::Avc { length_size } => Bytes::from(
                h264::avc_to_annexb(au, length_size)
                    .map_err(|e| Dropped::Malformed(e.to_string()))?,
            ),
        });
        self.decode_index += 1;
        self.wait.observe(timing.pts, timing.dts, timing.duration);
        let payload = Payload::from_parts(parts);
        match placement.role {
            TrackRole::Base => {
                if placement.starts_group {
                    self.open_group = Some(self.base.create_group(
                        placement.group,
                        session_priority(priority::base(self.mode, placement.group)),
                    ));
                }
                if let Some(group) = &self.open_group {
                    group.write(payload);
                }
            }
            TrackRole::Enhancement => {
                // Only the modes that split layers place frames here, and they create it.
                if let Some(track) = &self.enhancement {
                    track
                        .create_group(
                            placement.group,
                            session_priority(priority::enhancement(placement.group)),
                        )
                        .write(payload);
                }
            }
        }
        Ok(Placed {
            info,
            role: placement.role,
            group: placement.group,
        })
    }

    pub fn name(&self) -> &str {
        self.base.name()
    }

    /// Its catalog entries (the base track, and the enhancement track if any), once a
    /// keyframe has shown which parameter sets the stream uses.
    pub fn catalog_entries(&self) -> Option<Vec<TrackEntry>> {
        let active = self.parser.active()?;
        let sps = active.sps_info();
        let enhancement = self.enhancement.as_ref().map(|t| t.name().to_owned());
        let mut entries = vec![TrackEntry {
            codec: Some(sps.codec_string()),
            width: Some(sps.width),
            height: Some(sps.height),
            framerate: self.stream.framerate,
            avcc: Some(catalog::hex_encode(active.avcc())),
            bitrate: self.stream.bitrate,
            alt_group: self.stream.alt_group,
            enhancement: enhancement.clone(),
            label: self.stream.label.clone(),
            jitter_us: self.wait.bound_us(),
            ..TrackEntry::new(self.name(), TrackKind::Video)
        }];
        if let Some(enhancement) = enhancement {
            entries.push(TrackEntry {
                base: Some(self.name().to_owned()),
                ..TrackEntry::new(enhancement, TrackKind::VideoEnhancement)
            });
        }
        Some(entries)
    }

    /// No more frames: subscriptions finish once they have everything.
    pub fn finish(&self) {
        self.base.finish();
        if let Some(enhancement) = &self.enhancement {
            enhancement.finish();
        }
    }

    /// The names of its tracks on the broadcast.
    pub fn track_names(&self) -> Vec<String> {
        std::iter::once(&self.base)
            .chain(&self.enhancement)
            .map(|t| t.name().to_owned())
            .collect()
    }
}

/// The name of the enhancement track of video track `name`.
pub fn enhancement_name(name: &str) -> String {
    format!("{name}-enh")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_waits_its_duration_plus_the_spread_of_its_reordering() {
        let mut wait = FrameWait::default();
        assert_eq!(wait.bound_us(), None);
        // No reordering at 25 fps: a frame's own duration.
        for i in 0..5 {
            wait.observe(i * 40_000, i * 40_000, 40_000);
        }
        assert_eq!(wait.bound_us(), Some(40_000));
        // x264 with three B-frames at 24 fps: DTS starts two frames early, and a P frame
        // goes out up to five frames before its presentation time, a B frame at it.
        let frame = 41_667;
        let (pts, dts) = ([0, 1, 5, 3, 2, 4], [-2, -1, 0, 1, 2, 3]);
        let mut wait = FrameWait::default();
        for (p, d) in pts.iter().zip(dts) {
            wait.observe(p * frame, d * frame, frame as u64);
        }
        assert_eq!(wait.bound_us(), Some(6 * frame as u64));
    }
}
