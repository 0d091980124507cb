//! The receiver's small reorder window for an audio track.
//!
//! Audio frames travel in order on few streams and each decodes on its own, so the
//! window only puts a frame that overtook another back behind it, and gives up on a
//! missing one after a short wait so what follows still plays within the latency.

use std::collections::BTreeMap;

use crate::reorder::{DropReason, Frame, MAX_BUFFERED};

/// The receiver's reorder window for one audio track. Frames are keyed by their sequence
/// number (the decode index of their header). The next frame in sequence leaves at once; a
/// frame behind a gap waits at most `window` after its arrival for the missing ones,
/// which are late if they come after it. No clock is read: callers pass times in ns.
#[derive(Debug)]
pub struct AudioBuffer<T> {
    window_ns: u64,
    buffer: BTreeMap<u64, Frame<T>>,
    last: Option<u64>,
}

impl<T> AudioBuffer<T> {
    pub fn new(window_ns: u64) -> AudioBuffer<T> {
        AudioBuffer {
            window_ns,
            buffer: BTreeMap::new(),
            last: None,
        }
    }

    pub fn len(&self) -> usize {
        self.buffer.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buffer.is_empty()
    }

    /// Forgets everything: the next frame to arrive plays first.
    pub fn clear(&mut self) {
        self.buffer.clear();
        self.last = None;
    }

    /// Buffers a frame, or hands it back with the reason it cannot play.
    pub fn push(&mut self, frame: Frame<T>) -> Result<(), (Frame<T>, DropReason)> {
        let sequence = frame.header.decode_index;
        if self.last.is_some_and(|l| sequence <= l) {
            return Err((frame, DropReason::Late));
        }
        if self.buffer.contains_key(&sequence) {
            return Err((frame, DropReason::Duplicate));
        }
        self.buffer.insert(sequence, frame);
        Ok(())
    }

    /// When waiting alone can next release a frame (ns); `None` when only a new frame can.
    pub fn deadline(&self, now: u64) -> Option<u64> {
        let (&sequence, front) = self.buffer.first_key_value()?;
        if self.is_next(sequence) || self.buffer.len() > MAX_BUFFERED {
            return Some(now);
        }
        Some(front.arrival.saturating_add(self.window_ns))
    }

    fn is_next(&self, sequence: u64) -> bool {
        self.last.is_none_or(|l| l.checked_add(1) == Some(sequence))
    }

    /// The next frame to play at `now`, if one is ready.
    pub fn pop(&mut self, now: u64) -> Option<Frame<T>> {
        let (&sequence, front) = self.buffer.first_key_value()?;
        let overflow = self.buffer.len() > MAX_BUFFERED;
        let ready = self.is_next(sequence) || now >= front.arrival.saturating_add(self.window_ns);
        if !ready && !overflow {
            return None;
        }
        let (_, frame) = self.buffer.pop_first()?;
        self.last = Some(sequence);
        Some(frame)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use h264::{FrameKind, SliceType};
    use moq_media::FrameHeader;
    use moq_media::catalog::TrackRole;

    fn frame(sequence: u64, arrival: u64) -> Frame<()> {
        Frame {
            header: FrameHeader {
                kind: FrameKind::Key,
                slice_type: SliceType::I,
                decode_index: sequence,
                dts: sequence as i64 * 20_000,
                pts: sequence as i64 * 20_000,
                duration: 20_000,
                availability_us: 0,
                base_group: sequence,
                base_index: sequence,
            },
            layer: TrackRole::Base,
            arrival,
            data: (),
        }
    }

    const MS: u64 = 1_000_000;

    fn popped(buffer: &mut AudioBuffer<()>, now: u64) -> Vec<u64> {
        std::iter::from_fn(|| buffer.pop(now).map(|f| f.header.decode_index)).collect()
    }

    #[test]
    fn frames_in_sequence_leave_at_once_and_a_gap_waits_the_window() {
        let mut b = AudioBuffer::new(50 * MS);
        b.push(frame(10, 0)).unwrap();
        b.push(frame(11, MS)).unwrap();
        assert_eq!(popped(&mut b, MS), [10, 11]);
        // 12 is missing: 13 waits for it until 50 ms after its own arrival.
        b.push(frame(13, 100 * MS)).unwrap();
        assert_eq!(b.deadline(100 * MS), Some(150 * MS));
        assert!(popped(&mut b, 149 * MS).is_empty());
        b.push(frame(12, 120 * MS)).unwrap();
        assert_eq!(popped(&mut b, 120 * MS), [12, 13]);
        // Another gap, and this time the missing frame comes after the wait: late.
        b.push(frame(15, 200 * MS)).unwrap();
        assert_eq!(popped(&mut b, 250 * MS), [15]);
        assert!(matches!(
            b.push(frame(14, 260 * MS)),
            Err((_, DropReason::Late))
        ));
        b.push(frame(16, 270 * MS)).unwrap();
        assert!(matches!(
            b.push(frame(16, 271 * MS)),
            Err((_, DropReason::Duplicate))
        ));
        assert_eq!(b.deadline(271 * MS), Some(271 * MS));
    }

    #[test]
    fn clear_restarts_at_the_next_frame() {
        let mut b = AudioBuffer::new(50 * MS);
        for s in 0..3 {
            b.push(frame(s, 0)).unwrap();
        }
        assert_eq!(popped(&mut b, 0), [0, 1, 2]);
        b.clear();
        b.push(frame(1, 0)).unwrap();
        assert_eq!(popped(&mut b, 0), [1]);
    }

    #[test]
    fn memory_stays_bounded_when_a_gap_never_fills() {
        let mut b = AudioBuffer::new(u64::MAX);
        b.push(frame(0, 0)).unwrap();
        assert_eq!(popped(&mut b, 0), [0]);
        for s in 2..(MAX_BUFFERED as u64 + 3) {
            b.push(frame(s, 0)).unwrap();
        }
        let out = popped(&mut b, 0);
        assert!(!out.is_empty());
        assert!(b.len() <= MAX_BUFFERED);
    }
}
