//! Receiver statistics behind moqsrc's `stats` property. Free of GStreamer.

use crate::reorder::{DropReason, Jump};
use h264::FrameKind;
use moq_media::FrameHeader;
use moq_media::metrics::{InterarrivalJitter, LatencyWindow, TsDf, transit_us};

const SECOND_US: i64 = 1_000_000;

#[derive(Debug, Clone)]
pub struct ReceiverStats {
    /// Per frame kind (key, reference, non-reference).
    pub frames_received: [u64; 3],
    pub bytes_received: [u64; 3],
    pub frames_output: u64,
    pub frames_late: u64,
    /// Dropped as part of skipping forward (old GoP, skipped over, or undecodable).
    pub frames_skipped: u64,
    pub frames_duplicate: u64,
    /// Dropped to bring an adaptive playout earlier.
    pub frames_drained: u64,
    pub jumps: u64,
    pub groups_skipped: u64,
    pub skipped_ms: u64,
    /// Playback re-anchored because data arrived later than the latency allows.
    pub rebuffers: u64,
    pub reorder_events: u64,
    /// The video rendition playing, when the video has several.
    pub rendition: Option<String>,
    /// Switches from one rendition to another.
    pub rendition_switches: u64,
    jitter: InterarrivalJitter,
    ts_df: TsDf,
    latency: LatencyWindow,
}

impl Default for ReceiverStats {
    fn default() -> Self {
        ReceiverStats {
            frames_received: [0; 3],
            bytes_received: [0; 3],
            frames_output: 0,
            frames_late: 0,
            frames_skipped: 0,
            frames_duplicate: 0,
            frames_drained: 0,
            jumps: 0,
            groups_skipped: 0,
            skipped_ms: 0,
            rebuffers: 0,
            reorder_events: 0,
            rendition: None,
            rendition_switches: 0,
            jitter: InterarrivalJitter::default(),
            ts_df: TsDf::new(SECOND_US),
            latency: LatencyWindow::new(SECOND_US),
        }
    }
}

pub fn kind_index(kind: FrameKind) -> usize {
    match kind {
        FrameKind::Key => 0,
        FrameKind::Reference => 1,
        FrameKind::NonReference => 2,
    }
}

impl ReceiverStats {
    /// A frame arrived (`arrival_us`: wall clock, µs since the UNIX epoch).
    pub fn arrived(
        &mut self,
        header: &FrameHeader,
        bytes: usize,
        arrival_us: i64,
        out_of_order: bool,
    ) {
        let k = kind_index(header.kind);
        self.frames_received[k] += 1;
        self.bytes_received[k] += bytes as u64;
        self.reorder_events += u64::from(out_of_order);
        // 0: the sender's format says nothing of when the frame was made.
        if header.availability_us > 0 {
            let sent = i64::try_from(header.availability_us).unwrap_or(i64::MAX);
            self.jitter.push(sent, arrival_us);
            self.ts_df.push(sent, arrival_us);
        }
    }

    /// Output is rendition `name` from now on.
    pub fn rendition(&mut self, name: String) {
        self.rendition_switches += u64::from(self.rendition.is_some());
        self.rendition = Some(name);
    }

    pub fn dropped(&mut self, reason: DropReason) {
        match reason {
            DropReason::Late => self.frames_late += 1,
            DropReason::Duplicate => self.frames_duplicate += 1,
            DropReason::OldGroup
            | DropReason::Undecodable
            | DropReason::Skipped
            | DropReason::Overflow => self.frames_skipped += 1,
            DropReason::Drained => self.frames_drained += 1,
        }
    }

    pub fn jumped(&mut self, jump: &Jump) {
        self.jumps += 1;
        // Both come from header fields a peer chose.
        self.groups_skipped = self.groups_skipped.saturating_add(jump.skipped_groups);
        self.skipped_ms = self.skipped_ms.saturating_add(jump.skipped_us / 1000);
    }

    /// A frame was output at wall clock `now_us`; `rebuffered` when playback re-anchored
    /// without a jump.
    pub fn output(&mut self, header: &FrameHeader, now_us: i64, rebuffered: bool) {
        self.frames_output += 1;
        self.rebuffers += u64::from(rebuffered);
        if header.availability_us > 0 {
            self.latency
                .push(now_us, transit_us(header.availability_us, now_us));
        }
    }

    /// Latency quantile over the last second, ms.
    pub fn latency_ms(&self, q: f64) -> Option<f64> {
        self.latency.quantile(q).map(|us| us as f64 / 1000.0)
    }

    pub fn jitter_ms(&self) -> f64 {
        self.jitter.value_us() / 1000.0
    }

    pub fn ts_df_ms(&self) -> Option<f64> {
        self.ts_df.last_us().map(|us| us as f64 / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use h264::SliceType;

    fn header(kind: FrameKind, availability_us: u64) -> FrameHeader {
        FrameHeader {
            kind,
            slice_type: SliceType::P,
            decode_index: 0,
            dts: 0,
            pts: 0,
            duration: 41_667,
            availability_us,
            base_group: 0,
            base_index: 0,
        }
    }

    #[test]
    fn counts_by_kind_reason_and_jump() {
        let mut s = ReceiverStats::default();
        s.arrived(&header(FrameKind::Key, 1_000), 1000, 51_000, false);
        s.arrived(&header(FrameKind::NonReference, 41_000), 100, 96_000, true);
        assert_eq!(s.frames_received, [1, 0, 1]);
        assert_eq!(s.bytes_received, [1000, 0, 100]);
        assert_eq!(s.reorder_events, 1);
        assert!((s.jitter_ms() - 5.0 / 16.0).abs() < 1e-9);
        for reason in [
            DropReason::Late,
            DropReason::OldGroup,
            DropReason::Skipped,
            DropReason::Undecodable,
        ] {
            s.dropped(reason);
        }
        assert_eq!((s.frames_late, s.frames_skipped), (1, 3));
        s.jumped(&Jump {
            skipped_us: 1_250_000,
            skipped_base_frames: 20,
            skipped_groups: 2,
        });
        assert_eq!((s.jumps, s.groups_skipped, s.skipped_ms), (1, 2, 1250));
        s.output(&header(FrameKind::Key, 1_000), 121_000, false);
        s.output(&header(FrameKind::Reference, 1_000), 131_000, true);
        assert_eq!((s.frames_output, s.rebuffers), (2, 1));
        assert_eq!(s.latency_ms(0.5), Some(120.0));
        assert_eq!(s.latency_ms(0.95), Some(130.0));
        // A frame whose format carries no availability time (0) has no latency.
        s.output(&header(FrameKind::Reference, 0), 140_000, false);
        s.arrived(&header(FrameKind::Reference, 0), 100, 140_000, false);
        assert_eq!(s.latency_ms(0.95), Some(130.0));
        assert!((s.jitter_ms() - 5.0 / 16.0).abs() < 1e-9);
    }

    #[test]
    fn the_first_rendition_is_no_switch() {
        let mut s = ReceiverStats::default();
        s.rendition("video-2".into());
        assert_eq!(s.rendition_switches, 0);
        s.rendition("video-1".into());
        assert_eq!(
            (s.rendition.as_deref(), s.rendition_switches),
            (Some("video-1"), 1)
        );
    }
}
