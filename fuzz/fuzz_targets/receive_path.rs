//! The receiver's decisions: `ReorderBuffer` and `PlayoutClock` driven by a scenario of
//! arrivals, pops, deadlines, lost groups and flushes (see `moq_fuzz_harness::receive`), with
//! frame header fields anywhere in their range: pushed as they are, or first through the
//! header's wire encoding as `moqsrc` receives them (`Scenario::wire`).
//!
//! Properties, besides "no panic":
//! - output frames leave in strictly increasing decode index between flushes;
//! - the first frame output after a flush is a keyframe, and after a base-layer frame was
//!   dropped the next base-layer frame output is a keyframe;
//! - only keyframes carry a jump;
//! - stamped DTS never decreases between clock resets, and PTS is never before DTS;
//! - the buffer holds exactly the frames pushed and not yet popped;
//! - a deadline is not in the past (a deadline of now means a frame is ready), and before
//!   it waiting never changes a decision by itself.

#![no_main]

use libfuzzer_sys::fuzz_target;
use moq_fuzz_harness::receive::{HeaderSpec, INITIAL, Op, Scenario};
use moq_media::catalog::TrackRole;
use moq_player::reorder::{Frame, Popped, Pushed};
use moq_media::FrameHeader;
use moq_player::{PlayoutClock, ReorderBuffer, TrackPlayout};

use h264::FrameKind;

struct Receiver {
    buffer: ReorderBuffer<u64>,
    clock: PlayoutClock,
    playout: TrackPlayout,
    /// Headers pass through the wire encoding first.
    wire: bool,
    now: u64,
    /// The last pushed header, which relative fields of the next one refer to.
    previous: FrameHeader,
    pushed: u64,
    /// Frames in the buffer by our count.
    held: usize,
    last_output: Option<u64>,
    need_key: bool,
    last_stamped_dts: Option<u64>,
}

impl Receiver {
    fn new(scenario: &Scenario) -> Self {
        Receiver {
            buffer: ReorderBuffer::new(scenario.target_ns, scenario.skip_forward),
            clock: PlayoutClock::new(scenario.latency_ns),
            playout: TrackPlayout::default(),
            wire: scenario.wire,
            now: 0,
            previous: INITIAL,
            pushed: 0,
            held: 0,
            last_output: None,
            need_key: true,
            last_stamped_dts: None,
        }
    }

    /// The header of the next frame, as the receiver gets it.
    fn receive(&self, spec: &HeaderSpec) -> FrameHeader {
        let header = spec.resolve(&self.previous);
        if !self.wire {
            return header;
        }
        let mut payload = Vec::new();
        header.encode(&mut payload);
        FrameHeader::decode(&payload)
            .expect("an encoded header decodes")
            .0
    }

    fn push(&mut self, header: FrameHeader, layer: TrackRole) {
        self.previous = header;
        self.pushed += 1;
        let frame = Frame {
            header,
            layer,
            arrival: self.now,
            data: self.pushed,
        };
        match self.buffer.push(frame) {
            Pushed::Buffered { .. } => self.held += 1,
            Pushed::Dropped(frame, _) => {
                // A refused frame comes back untouched.
                assert_eq!(frame.header, header);
                assert_eq!(frame.data, self.pushed);
            }
        }
    }

    /// One `pop`; false when nothing was ready.
    fn pop(&mut self) -> bool {
        let Some(popped) = self.buffer.pop(self.now) else {
            return false;
        };
        assert!(self.held > 0, "popped from an empty buffer");
        self.held -= 1;
        match popped {
            Popped::Frame { frame, jump } => self.output(frame, jump.is_some()),
            Popped::Dropped { frame, .. } => {
                if frame.layer == TrackRole::Base && self.last_output.is_some() {
                    self.need_key = true;
                }
            }
        }
        true
    }

    fn output(&mut self, frame: Frame<u64>, jump: bool) {
        let h = frame.header;
        let key = h.kind == FrameKind::Key;
        if let Some(last) = self.last_output {
            assert!(
                h.decode_index > last,
                "decode index {} output after {last}",
                h.decode_index
            );
        } else {
            assert!(key, "playback starts at a keyframe");
        }
        assert!(!jump || key, "only a keyframe jumps");
        if key {
            self.need_key = false;
        } else if frame.layer == TrackRole::Base {
            assert!(
                !self.need_key,
                "base frame output without a keyframe since a drop"
            );
        }
        self.last_output = Some(h.decode_index);

        let stamped = if jump {
            self.clock
                .stamp_with(&mut self.playout, h.dts, h.pts, self.now, true)
        } else {
            self.clock.stamp(&mut self.playout, h.dts, h.pts, self.now)
        };
        if let Some(last) = self.last_stamped_dts {
            assert!(
                stamped.dts >= last,
                "DTS went back: {} < {last}",
                stamped.dts
            );
        } else {
            assert!(
                stamped.discont,
                "the first stamp after a reset anchors the timeline"
            );
        }
        if jump {
            assert!(stamped.discont, "a jump re-anchors");
        }
        assert!(stamped.pts >= stamped.dts);
        self.last_stamped_dts = Some(stamped.dts);
    }

    /// `pop` just found nothing ready: until the deadline (or forever, without one) only
    /// new events can change that. Popping at a later time leaves the buffer alone as long
    /// as it returns nothing.
    fn check_waiting(&mut self) {
        let until = match self.buffer.deadline(self.now) {
            Some(deadline) => deadline.saturating_sub(1).max(self.now),
            None => u64::MAX,
        };
        for t in [self.now, until] {
            assert!(
                self.buffer.pop(t).is_none(),
                "a frame became ready at {t} with no event since {}",
                self.now
            );
        }
    }

    fn run(&mut self, op: &Op) {
        match op {
            Op::Push {
                at,
                header,
                enhancement,
            } => {
                self.now = at.resolve(self.now);
                self.push(self.receive(header), layer(*enhancement));
            }
            Op::Burst {
                at,
                header,
                enhancement,
                count,
            } => {
                self.now = at.resolve(self.now);
                for _ in 0..*count {
                    self.push(self.receive(header), layer(*enhancement));
                }
            }
            Op::Pop(at) => {
                self.now = at.resolve(self.now);
                if !self.pop() {
                    self.check_waiting();
                }
            }
            Op::Drain(at) => {
                self.now = at.resolve(self.now);
                // Every successful pop removes a frame, so this ends.
                let mut pops = 0;
                while self.pop() {
                    pops += 1;
                    assert!(pops <= self.pushed, "pop never stops");
                }
            }
            Op::Deadline(at) => {
                self.now = at.resolve(self.now);
                if let Some(deadline) = self.buffer.deadline(self.now) {
                    assert!(deadline >= self.now, "deadline {deadline} is before now");
                    if deadline == self.now {
                        assert!(self.pop(), "nothing to do at a deadline of now");
                    }
                }
            }
            Op::GroupLost(step) => {
                let group = step.resolve(self.previous.base_group);
                self.buffer.group_lost(group);
            }
            Op::Clear => {
                self.buffer.clear();
                self.clock.reset();
                self.held = 0;
                self.last_output = None;
                self.need_key = true;
                self.last_stamped_dts = None;
            }
            Op::ResetClock => {
                self.clock.reset();
                self.last_stamped_dts = None;
            }
        }
        assert_eq!(self.buffer.len(), self.held);
        assert_eq!(self.buffer.is_empty(), self.held == 0);
    }
}

fn layer(enhancement: bool) -> TrackRole {
    if enhancement {
        TrackRole::Enhancement
    } else {
        TrackRole::Base
    }
}

fuzz_target!(|scenario: Scenario| {
    let mut receiver = Receiver::new(&scenario);
    for op in &scenario.ops {
        receiver.run(op);
    }
});
