//! A broadcast's player: for each track, reorder → hold → timeline, with one timeline
//! for all of them so they stay in sync.
//!
//! The element around it owns the pads, their threads and the channels from the network
//! side; it hands each track's [`Item`]s to [`Player::push`], asks [`Player::pop`] for the
//! next frame to output, and waits until [`Player::wake_at`] or the next item. Every call
//! carries the time ([`Now`]): the pipeline's running time, which the timeline maps media
//! onto, and the wall clock, which the sender's availability times and the receive stamps
//! are on. Nothing here reads a clock or blocks, so the whole receiver runs in virtual
//! time in the tests below.

use std::collections::VecDeque;

use moq_media::FrameHeader;
use moq_media::catalog::{MediaKind, TrackRole};

use crate::audio::AudioBuffer;
use crate::delay::DelayEstimator;
use crate::item::{Incoming, Item};
use crate::playout::{Adapted, Need, Timeline, TrackPlayout};
use crate::reorder::{DropReason, Frame, Jump, Popped, Pushed, ReorderBuffer};
use crate::stats::ReceiverStats;

/// How often a track holding an early frame looks again: another track may move the
/// timeline meanwhile.
pub const HOLD_POLL_NS: u64 = 10_000_000;

/// The time of a call, on both clocks the player uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Now {
    /// Running time, ns: what buffers are stamped in.
    pub running: u64,
    /// Wall clock, µs since the UNIX epoch.
    pub unix_us: i64,
}

impl Now {
    /// The running time at which something stamped `unix_us` on the wall clock happened.
    fn running_at(&self, unix_us: i64) -> u64 {
        let ago_us = u64::try_from(self.unix_us.saturating_sub(unix_us)).unwrap_or(0);
        self.running.saturating_sub(ago_us.saturating_mul(1_000))
    }
}

/// The element's settings that shape playback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlayerConfig {
    /// How long frames wait for missing ones, and the buffering reported downstream, ns.
    pub latency_ns: u64,
    /// Drop what is too old and jump to newer media (else every frame plays, late).
    pub skip_forward: bool,
    /// The playout offset follows what the frames need: it grows at once when they come
    /// late and drains when they come early (else it moves only when a frame comes later
    /// than the latency allows, or playback jumps).
    pub adaptive: bool,
}

/// A track of the player.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TrackId(usize);

/// What happened that the element reports (messages, logs, the network side).
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Playback of `track` jumped over missing media to a keyframe of base group `group`:
    /// older groups are no longer wanted.
    Jumped {
        track: TrackId,
        group: u64,
        jump: Jump,
    },
    /// A frame will not be output.
    Dropped {
        track: TrackId,
        decode_index: u64,
        reason: DropReason,
    },
    /// The adaptive playout's target changed much since last told.
    Playout(Playout),
}

/// Where an adaptive playout stands, as buffering a frame gets when it arrives as fast as
/// the recent fastest ones: the downstream `latency` and the playout offset above their
/// transit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Playout {
    /// Now, ms.
    pub delay_ms: f64,
    /// Where it is going, ms.
    pub target_ms: f64,
    /// Times it grew, and by how much in all.
    pub grows: u64,
    pub grown_ms: f64,
    /// How much it drained in all.
    pub drained_ms: f64,
}

/// A new target is reported when it moved by this much, or [`REPORT_SHARE`] of it,
/// whichever is more, since the last report.
const REPORT_MIN_NS: i64 = 20_000_000;
const REPORT_SHARE: f64 = 0.2;

/// Events kept for the element at most; it takes them after every call, so only an
/// element that never does loses the oldest. One call may drop a track's whole buffer,
/// each frame with its event: room for twice that.
const MAX_EVENTS: usize = 2 * crate::reorder::MAX_BUFFERED;

/// A frame to output, stamped on the timeline.
#[derive(Debug)]
pub struct Output<T> {
    pub header: FrameHeader,
    /// Running time, ns.
    pub dts: u64,
    pub pts: u64,
    /// The timeline moved or playback jumped: the buffer is a discontinuity.
    pub discont: bool,
    /// When the object was whole (wall clock µs).
    pub received_us: i64,
    pub data: T,
}

/// What a buffered frame carries besides its header.
#[derive(Debug)]
struct Carried<T> {
    received_us: i64,
    data: T,
}

/// What each kind of track reorders with.
#[derive(Debug)]
enum Reorder<T> {
    Video(ReorderBuffer<Carried<T>>),
    Audio(AudioBuffer<Carried<T>>),
}

/// A frame that left the reorder buffer before its slot on the timeline.
#[derive(Debug)]
struct Held<T> {
    frame: Frame<Carried<T>>,
    jump: bool,
    /// When it may leave, running time ns.
    until: u64,
}

#[derive(Debug)]
struct Track<T> {
    name: String,
    kind: MediaKind,
    reorder: Reorder<T>,
    playout: TrackPlayout,
    /// The catalog track whose caps the output has: its own, or the video rendition
    /// playing.
    rendition: String,
    /// The rendition to play from a frame on (decode index), once that frame goes out.
    next_rendition: Option<(u64, String)>,
    /// The publisher ended the track.
    eos: bool,
    /// Frames output so far: the first one's anchoring is not a rebuffer.
    outputs: u64,
    /// Epoch of the media subscriptions whose frames are wanted.
    media_epoch: u64,
    /// Resumes of the element those subscriptions were made after.
    media_resumes: u64,
    stats: ReceiverStats,
    /// The next frame, early: it waits for its slot.
    held: Option<Held<T>>,
    /// How late its frames come.
    delay: DelayEstimator,
}

impl<T> Track<T> {
    fn buffered(&self) -> usize {
        let reordering = match &self.reorder {
            Reorder::Video(r) => r.len(),
            Reorder::Audio(a) => a.len(),
        };
        reordering + usize::from(self.held.is_some())
    }
}

/// The player of one broadcast.
#[derive(Debug)]
pub struct Player<T> {
    config: PlayerConfig,
    timeline: Timeline,
    /// The latest timeline reset applied: every track is told of each reset, and the
    /// first to act on it resets the timeline for all.
    generation: u64,
    /// Resumes of the element after a pause: frames count only from subscriptions made
    /// after the latest one.
    resumes: u64,
    tracks: Vec<Track<T>>,
    events: VecDeque<Event>,
    /// The adaptive playout's target last reported (buffering, ns).
    reported_target: Option<i64>,
    grows: u64,
    grown_ns: u64,
    drained_ns: u64,
}

impl<T> Player<T> {
    pub fn new(config: PlayerConfig) -> Player<T> {
        let mut timeline = Timeline::new(config.latency_ns);
        timeline.set_adaptive(config.adaptive);
        Player {
            config,
            timeline,
            generation: 0,
            resumes: 0,
            tracks: Vec::new(),
            events: VecDeque::new(),
            reported_target: None,
            grows: 0,
            grown_ns: 0,
            drained_ns: 0,
        }
    }

    /// A track to play, catalog track `name`.
    pub fn add_track(&mut self, name: &str, kind: MediaKind) -> TrackId {
        let latency = self.config.latency_ns;
        let reorder = match kind {
            MediaKind::Video => {
                Reorder::Video(ReorderBuffer::new(latency, self.config.skip_forward))
            }
            // Audio frames arrive in order; a missing one is waited for briefly, so what
            // follows it still plays within the latency.
            MediaKind::Audio => Reorder::Audio(AudioBuffer::new(latency / 2)),
        };
        match kind {
            MediaKind::Audio => self.timeline.set_audio_leads(self.config.skip_forward),
            MediaKind::Video => self.timeline.set_has_video(true),
        }
        self.tracks.push(Track {
            name: name.to_owned(),
            kind,
            reorder,
            playout: TrackPlayout::default(),
            rendition: name.to_owned(),
            next_rendition: None,
            eos: false,
            outputs: 0,
            media_epoch: 0,
            media_resumes: self.resumes,
            stats: ReceiverStats::default(),
            held: None,
            delay: DelayEstimator::default(),
        });
        TrackId(self.tracks.len() - 1)
    }

    /// The element resumed after a pause for the `resumes`th time: frames of the
    /// subscriptions made before are stale.
    pub fn resumed(&mut self, resumes: u64) {
        self.resumes = self.resumes.max(resumes);
    }

    pub fn name(&self, track: TrackId) -> &str {
        &self.tracks[track.0].name
    }

    pub fn kind(&self, track: TrackId) -> MediaKind {
        self.tracks[track.0].kind
    }

    /// The catalog track whose caps the track's output has now.
    pub fn rendition(&self, track: TrackId) -> &str {
        &self.tracks[track.0].rendition
    }

    pub fn stats(&self, track: TrackId) -> &ReceiverStats {
        &self.tracks[track.0].stats
    }

    /// Frames the track holds (reordering or waiting for their slot).
    pub fn buffered(&self, track: TrackId) -> usize {
        self.tracks[track.0].buffered()
    }

    /// The publisher ended the track.
    pub fn ended(&self, track: TrackId) -> bool {
        self.tracks[track.0].eos
    }

    /// The next event to report.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    fn event(&mut self, event: Event) {
        if self.events.len() >= MAX_EVENTS {
            self.events.pop_front();
        }
        self.events.push_back(event);
    }

    fn dropped(&mut self, track: TrackId, header: &FrameHeader, reason: DropReason) {
        self.tracks[track.0].stats.dropped(reason);
        self.event(Event::Dropped {
            track,
            decode_index: header.decode_index,
            reason,
        });
    }

    /// Takes one input of `track`.
    pub fn push(&mut self, track: TrackId, item: Item<T>, now: Now) {
        let resumes = self.resumes;
        let t = &mut self.tracks[track.0];
        match item {
            Item::Reset { generation } => {
                t.held = None;
                match &mut t.reorder {
                    Reorder::Video(r) => r.clear(),
                    Reorder::Audio(a) => a.clear(),
                }
                if generation > self.generation {
                    self.generation = generation;
                    self.timeline.reset();
                    for t in &mut self.tracks {
                        t.delay.clear();
                    }
                }
            }
            Item::Subscribed { epoch, resumes } => {
                t.media_epoch = epoch;
                t.media_resumes = resumes;
            }
            // Sent before a pause, or on subscriptions replaced since.
            Item::Frame(incoming)
                if incoming.epoch != t.media_epoch || t.media_resumes < resumes => {}
            Item::Frame(incoming) => self.push_frame(track, incoming, now),
            Item::GroupEnd { epoch, .. } if epoch != t.media_epoch => {}
            Item::GroupEnd {
                group,
                complete,
                last,
                ..
            } => {
                if let Reorder::Video(r) = &mut t.reorder {
                    if !complete {
                        r.group_lost(group);
                    } else if let Some(last) = last {
                        r.group_ended(group, last);
                    }
                }
            }
            Item::Rendition { name, from: None } if t.outputs == 0 => {
                t.stats.rendition(name.clone());
                t.rendition = name;
            }
            Item::Rendition { name, from } => t.next_rendition = Some((from.unwrap_or(0), name)),
            Item::Eos => t.eos = true,
        }
    }

    fn push_frame(&mut self, track: TrackId, incoming: Incoming<T>, now: Now) {
        let Incoming {
            header,
            layer,
            size,
            received_us,
            data,
            ..
        } = incoming;
        let arrival = now.running_at(received_us);
        let frame = Frame {
            header,
            layer,
            arrival,
            data: Carried { received_us, data },
        };
        let t = &mut self.tracks[track.0];
        let (refused, out_of_order) = match &mut t.reorder {
            Reorder::Video(r) => match r.push(frame) {
                Pushed::Buffered { out_of_order } => (None, out_of_order),
                Pushed::Dropped(_, reason) => (Some(reason), false),
            },
            Reorder::Audio(a) => match a.push(frame) {
                Ok(()) => (None, false),
                Err((_, reason)) => (Some(reason), false),
            },
        };
        t.stats.arrived(&header, size, received_us, out_of_order);
        if let Some(reason) = refused {
            self.dropped(track, &header, reason);
            return;
        }
        // The base layer tells how late the frames that must play come; enhancement
        // frames may come late by design.
        if layer == TrackRole::Base {
            t.delay.on_frame(arrival, header.dts, size as u64);
            let need = t
                .delay
                .need()
                .zip(t.delay.floor())
                .map(|(offset, floor)| Need {
                    offset,
                    floor,
                    settled: t.delay.settled(),
                });
            self.timeline.set_need(t.kind, need);
            self.report_playout();
        }
    }

    /// Where the adaptive playout stands; `None` with a fixed one, or before it knows.
    pub fn playout(&self) -> Option<Playout> {
        let (floor, target) = self.timeline.on_time()?;
        let buffering = |offset: i64| {
            let latency = i64::try_from(self.config.latency_ns).unwrap_or(i64::MAX);
            offset.saturating_sub(floor).saturating_add(latency) as f64 / 1e6
        };
        Some(Playout {
            delay_ms: buffering(self.timeline.offset()?),
            target_ms: buffering(target),
            grows: self.grows,
            grown_ms: self.grown_ns as f64 / 1e6,
            drained_ms: self.drained_ns as f64 / 1e6,
        })
    }

    /// Tells of a target that moved much since last told.
    fn report_playout(&mut self) {
        let Some((floor, target)) = self.timeline.on_time() else {
            return;
        };
        let target = target.saturating_sub(floor);
        let moved = self.reported_target.is_none_or(|last| {
            let threshold = REPORT_MIN_NS.max((last.abs() as f64 * REPORT_SHARE) as i64);
            (target - last).abs() >= threshold
        });
        if moved && let Some(playout) = self.playout() {
            self.reported_target = Some(target);
            self.event(Event::Playout(playout));
        }
    }

    /// When waiting alone can next change what [`Player::pop`] returns (running time, ns);
    /// `None` when only a new item can.
    pub fn wake_at(&self, track: TrackId, now: Now) -> Option<u64> {
        let t = &self.tracks[track.0];
        match (&t.held, &t.reorder) {
            (Some(held), _) => Some(held.until.min(now.running.saturating_add(HOLD_POLL_NS))),
            (None, Reorder::Video(r)) => r.deadline(now.running),
            (None, Reorder::Audio(a)) => a.deadline(now.running),
        }
    }

    /// The track's next frame to output at `now`, if one is ready.
    pub fn pop(&mut self, track: TrackId, now: Now) -> Option<Output<T>> {
        self.next_output(track, now, false)
    }

    /// The track's next frame when no more input will come (end of stream): nothing is
    /// waited for.
    pub fn pop_remaining(&mut self, track: TrackId, now: Now) -> Option<Output<T>> {
        self.next_output(track, now, true)
    }

    fn next_output(&mut self, track: TrackId, now: Now, draining: bool) -> Option<Output<T>> {
        loop {
            let held = self.tracks[track.0].held.take();
            let (frame, jump) = match held {
                Some(held) => (held.frame, held.jump),
                None => self.next_frame(track, now, draining)?,
            };
            let t = &mut self.tracks[track.0];
            let h = frame.header;
            // After a jump moved the timeline, audio that no longer has a place on it
            // goes with the media skipped.
            if t.kind == MediaKind::Audio && self.timeline.is_passed(&t.playout, h.dts, h.duration)
            {
                self.dropped(track, &h, DropReason::Skipped);
                continue;
            }
            if !draining
                && let Some(until) =
                    self.timeline
                        .hold_until(t.kind, h.dts, frame.arrival, now.running, jump)
            {
                t.held = Some(Held { frame, jump, until });
                return None;
            }
            if !jump
                && t.kind == MediaKind::Audio
                && self.timeline.drain_audio(h.dts, frame.arrival, h.duration)
            {
                self.drained_ns = self
                    .drained_ns
                    .saturating_add(h.duration.saturating_mul(1_000));
                self.dropped(track, &h, DropReason::Drained);
                continue;
            }
            if !jump {
                match self
                    .timeline
                    .adapt(t.kind, h.dts, frame.arrival, h.duration)
                {
                    Some(Adapted::Grew(ns)) => {
                        self.grows += 1;
                        self.grown_ns = self.grown_ns.saturating_add(ns);
                    }
                    Some(Adapted::Drained(ns)) => {
                        self.drained_ns = self.drained_ns.saturating_add(ns)
                    }
                    None => {}
                }
            }
            let t = &mut self.tracks[track.0];
            if let Some((from, _)) = &t.next_rendition
                && h.decode_index >= *from
                && let Some((_, name)) = t.next_rendition.take()
            {
                t.stats.rendition(name.clone());
                t.rendition = name;
            }
            let stamped = self.timeline.stamp(
                t.kind,
                &mut t.playout,
                h.dts,
                h.pts,
                frame.arrival,
                h.duration,
                jump,
            );
            let rebuffered = stamped.reanchored && !jump && t.outputs > 0;
            t.stats.output(&h, now.unix_us, rebuffered);
            t.outputs += 1;
            return Some(Output {
                header: h,
                dts: stamped.dts,
                pts: stamped.pts,
                discont: stamped.discont || jump,
                received_us: frame.data.received_us,
                data: frame.data.data,
            });
        }
    }

    /// The next frame the track's reorder buffer releases, and whether playback jumps to
    /// it.
    fn next_frame(
        &mut self,
        track: TrackId,
        now: Now,
        draining: bool,
    ) -> Option<(Frame<Carried<T>>, bool)> {
        let at = if draining { u64::MAX } else { now.running };
        loop {
            let t = &mut self.tracks[track.0];
            let popped = match &mut t.reorder {
                Reorder::Video(reorder) => reorder.pop(at)?,
                Reorder::Audio(buffer) => {
                    return buffer.pop(at).map(|frame| (frame, false));
                }
            };
            match popped {
                Popped::Frame { frame, jump } => {
                    if let Some(jump) = jump {
                        t.stats.jumped(&jump);
                        // What came before the jump is media the player gave up on.
                        t.delay.clear();
                        self.timeline.set_need(t.kind, None);
                        let group = frame.header.base_group;
                        self.event(Event::Jumped { track, group, jump });
                    }
                    return Some((frame, jump.is_some()));
                }
                Popped::Dropped { frame, reason } => self.dropped(track, &frame.header, reason),
            }
        }
    }
}

#[cfg(test)]
mod tests;
