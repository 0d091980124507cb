//! The receiver's decisions: `moq_player::Player`, the code `moqsrc` runs, driven by a
//! scenario of arrivals, pops, deadlines, lost groups and resets (see
//! `moq_fuzz_harness::receive`), with frame header fields anywhere in their range: pushed as
//! they are, or first through the header's wire encoding as `moqsrc` receives them
//! (`Scenario::wire`), with a fixed or an adaptive playout.
//!
//! Properties, besides "no panic":
//! - output frames leave in strictly increasing decode index between resets;
//! - the first frame output after a reset is a keyframe, and after a base-layer frame was
//!   dropped (not a copy of one held or already output) the next base-layer frame output is
//!   a keyframe;
//! - only keyframes follow a jump;
//! - stamped DTS never decreases while the timeline is kept, and PTS is never before DTS;
//! - every frame pushed is output, dropped (with an event saying so) or still held;
//! - a wake-up time is not in the past (one of now means something is ready), and before it
//!   waiting never changes a decision by itself.

#![no_main]

use std::collections::{HashMap, HashSet};

use h264::FrameKind;
use libfuzzer_sys::fuzz_target;
use moq_fuzz_harness::receive::{HeaderSpec, INITIAL, Op, Scenario};
use moq_media::FrameHeader;
use moq_media::catalog::{MediaKind, TrackRole};
use moq_player::player::Event;
use moq_player::reorder::DropReason;
use moq_player::{Incoming, Item, Now, Player, PlayerConfig, TrackId};

/// The wall clock at running time 0, µs.
const UNIX0: i64 = 1_700_000_000_000_000;

struct Receiver {
    player: Player<u64>,
    track: TrackId,
    /// Headers pass through the wire encoding first.
    wire: bool,
    now: u64,
    /// The last pushed header, which relative fields of the next one refer to.
    previous: FrameHeader,
    pushed: u64,
    /// Frames pushed and not yet output or dropped, by our count.
    held: usize,
    /// The layer of the frames pushed, by decode index (the latest with that index).
    layers: HashMap<u64, TrackRole>,
    /// Decode indices pushed on both layers (a hostile stream): which of them a drop or
    /// an output was is not known, so they are not checked for decodability.
    mixed: HashSet<u64>,
    generation: u64,
    last_output: Option<u64>,
    need_key: bool,
    last_stamped_dts: Option<u64>,
}

fn now_at(t: u64) -> Now {
    Now {
        running: t,
        unix_us: UNIX0.saturating_add((t / 1_000) as i64),
    }
}

impl Receiver {
    fn new(scenario: &Scenario) -> Self {
        let mut player = Player::new(PlayerConfig {
            latency_ns: scenario.latency_ns,
            skip_forward: scenario.skip_forward,
            adaptive: scenario.adaptive,
        });
        let track = player.add_track("video", MediaKind::Video);
        player.push(
            track,
            Item::Subscribed {
                epoch: 0,
                resumes: 0,
            },
            now_at(0),
        );
        Receiver {
            player,
            track,
            wire: scenario.wire,
            now: 0,
            previous: INITIAL,
            pushed: 0,
            held: 0,
            layers: HashMap::new(),
            mixed: HashSet::new(),
            generation: 0,
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
        self.held += 1;
        let replaced = self.layers.insert(header.decode_index, layer);
        if replaced.is_some_and(|r| r != layer) {
            self.mixed.insert(header.decode_index);
        }
        let now = now_at(self.now);
        let frame = Incoming {
            epoch: 0,
            group: header.base_group,
            header,
            layer,
            size: (self.pushed % 20_000) as usize,
            received_us: now.unix_us,
            data: self.pushed,
        };
        self.player.push(self.track, Item::Frame(frame), now);
        if self.events(None) == Some(header.decode_index) {
            // The copy went; the frame held under that index keeps its layer.
            if let Some(layer) = replaced {
                self.layers.insert(header.decode_index, layer);
            }
        }
    }

    /// Whether the frame with this decode index is known to be of the base layer.
    fn is_base(&self, decode_index: u64) -> bool {
        self.layers.get(&decode_index) == Some(&TrackRole::Base)
            && !self.mixed.contains(&decode_index)
    }

    /// Accounts for the player's events; `output` is the frame a pop just output. Returns
    /// the decode index of a duplicate the player dropped, if it dropped one.
    fn events(&mut self, output: Option<&FrameHeader>) -> Option<u64> {
        let mut jumped = false;
        let mut duplicate = None;
        while let Some(event) = self.player.poll_event() {
            match event {
                Event::Dropped {
                    decode_index,
                    reason: DropReason::Duplicate,
                    ..
                } => {
                    // A second copy of a frame held: nothing is missing from the stream.
                    assert!(self.held > 0, "a frame dropped that was not held");
                    self.held -= 1;
                    duplicate = Some(decode_index);
                }
                Event::Dropped { decode_index, .. } => {
                    assert!(self.held > 0, "a frame dropped that was not held");
                    self.held -= 1;
                    // Behind the last output it is a copy of a frame already out, or one
                    // the stream has already passed: nothing ahead is missing.
                    let base = self.is_base(decode_index);
                    if base && self.last_output.is_some_and(|last| decode_index > last) {
                        self.need_key = true;
                    }
                }
                Event::Jumped { .. } => jumped = true,
                Event::Playout(p) => {
                    assert!(p.delay_ms.is_finite() && p.target_ms.is_finite());
                }
            }
        }
        if jumped {
            let key = output.is_some_and(|h| h.kind == FrameKind::Key);
            assert!(key, "only a keyframe follows a jump");
        }
        duplicate
    }

    /// One `pop`; false when nothing happened (no output, no drop).
    fn pop(&mut self) -> bool {
        let before = self.held;
        let Some(out) = self.player.pop(self.track, now_at(self.now)) else {
            self.events(None);
            return self.held != before;
        };
        assert!(self.held > 0, "output from an empty buffer");
        self.held -= 1;
        self.events(Some(&out.header));
        let h = out.header;
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
        if key {
            self.need_key = false;
        } else if self.is_base(h.decode_index) {
            assert!(
                !self.need_key,
                "base frame output without a keyframe since a drop"
            );
        }
        self.last_output = Some(h.decode_index);
        if let Some(last) = self.last_stamped_dts {
            assert!(out.dts >= last, "DTS went back: {} < {last}", out.dts);
        } else {
            assert!(
                out.discont,
                "the first stamp after a reset anchors the timeline"
            );
        }
        assert!(out.pts >= out.dts);
        self.last_stamped_dts = Some(out.dts);
        true
    }

    /// `pop` just found nothing to do: until the wake-up time (or forever, without one)
    /// only new events can change that. Popping at a later time leaves the player alone
    /// as long as nothing happens.
    fn check_waiting(&mut self) {
        let until = match self.player.wake_at(self.track, now_at(self.now)) {
            Some(at) => at.saturating_sub(1).max(self.now),
            None => u64::MAX,
        };
        for t in [self.now, until] {
            let held = self.held;
            assert!(
                self.player.pop(self.track, now_at(t)).is_none(),
                "a frame became ready at {t} with no event since {}",
                self.now
            );
            self.events(None);
            assert_eq!(
                self.held, held,
                "a drop at {t} with no event since {}",
                self.now
            );
        }
    }

    /// A reset of the track: `new_timeline` when it is the first track to see it.
    fn reset(&mut self, new_timeline: bool) {
        if new_timeline {
            self.generation += 1;
            self.last_stamped_dts = None;
        }
        let generation = self.generation;
        self.player
            .push(self.track, Item::Reset { generation }, now_at(self.now));
        self.events(None);
        self.held = 0;
        self.last_output = None;
        self.need_key = true;
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
                // Every pop that does something removes a frame, so this ends.
                let mut pops = 0;
                while self.pop() {
                    pops += 1;
                    assert!(pops <= self.pushed, "pop never stops");
                }
            }
            Op::Deadline(at) => {
                self.now = at.resolve(self.now);
                if let Some(at) = self.player.wake_at(self.track, now_at(self.now)) {
                    assert!(at >= self.now, "wake-up at {at} is before now");
                    if at == self.now {
                        assert!(self.pop(), "nothing to do at a wake-up of now");
                    }
                }
            }
            Op::GroupLost(step) => {
                let group = step.resolve(self.previous.base_group);
                let lost = Item::GroupEnd {
                    epoch: 0,
                    group,
                    complete: false,
                    last: None,
                };
                self.player.push(self.track, lost, now_at(self.now));
            }
            Op::Clear => self.reset(true),
            Op::ResetClock => self.reset(false),
        }
        assert_eq!(self.player.buffered(self.track), self.held);
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
