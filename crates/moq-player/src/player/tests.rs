//! The player in virtual time: a simulated sender and path feed it, and the tests read
//! what it outputs and when.

use super::*;
use h264::{FrameKind, SliceType};
use moq_media::catalog::TrackRole;

const MS: u64 = 1_000_000;
/// The wall clock at running time 0, µs.
const UNIX0: i64 = 1_700_000_000_000_000;
const VIDEO_FRAME_US: i64 = 41_667;
const AUDIO_FRAME_US: i64 = 20_000;
const GOP: u64 = 15;

/// A frame as output, with when.
#[derive(Debug, Clone, Copy)]
struct Out {
    track: TrackId,
    decode_index: u64,
    /// Media time, µs.
    media: i64,
    dts: u64,
    pts: u64,
    discont: bool,
    /// Running time it left the player.
    at: u64,
}

/// A player fed by a simulated sender over a simulated path, in virtual time.
struct Sim {
    player: Player<()>,
    latency_ns: u64,
    /// Items in flight: running time of arrival, track, item.
    in_flight: Vec<(u64, TrackId, Item<()>)>,
    t: u64,
    out: Vec<Out>,
    events: Vec<Event>,
}

fn now_at(t: u64) -> Now {
    Now {
        running: t,
        unix_us: UNIX0 + (t / 1_000) as i64,
    }
}

fn video_header(index: u64, media: i64) -> FrameHeader {
    let key = index.is_multiple_of(GOP);
    FrameHeader {
        kind: if key {
            FrameKind::Key
        } else {
            FrameKind::Reference
        },
        slice_type: if key { SliceType::I } else { SliceType::P },
        decode_index: index,
        dts: media,
        pts: media,
        duration: VIDEO_FRAME_US as u64,
        availability_us: (UNIX0 + media) as u64,
        base_group: index / GOP,
        base_index: index,
    }
}

fn audio_header(index: u64, media: i64) -> FrameHeader {
    FrameHeader {
        kind: FrameKind::Key,
        slice_type: SliceType::I,
        decode_index: index,
        dts: media,
        pts: media,
        duration: AUDIO_FRAME_US as u64,
        availability_us: (UNIX0 + media) as u64,
        base_group: index / 5,
        base_index: index,
    }
}

impl Sim {
    /// A fixed playout, as before adaptation.
    fn new(latency_ms: u64, skip_forward: bool) -> Sim {
        Sim::with(latency_ms, skip_forward, false)
    }

    fn adaptive(latency_ms: u64) -> Sim {
        Sim::with(latency_ms, true, true)
    }

    fn with(latency_ms: u64, skip_forward: bool, adaptive: bool) -> Sim {
        Sim {
            player: Player::new(PlayerConfig {
                latency_ns: latency_ms * MS,
                skip_forward,
                adaptive,
            }),
            latency_ns: latency_ms * MS,
            in_flight: Vec::new(),
            t: 0,
            out: Vec::new(),
            events: Vec::new(),
        }
    }

    fn track(&mut self, name: &str, kind: MediaKind) -> TrackId {
        let id = self.player.add_track(name, kind);
        self.send_at(
            0,
            id,
            Item::Subscribed {
                epoch: 0,
                resumes: 0,
            },
        );
        id
    }

    fn send_at(&mut self, at: u64, track: TrackId, item: Item<()>) {
        self.in_flight.push((at, track, item));
    }

    /// A frame captured at its media time (running time = media time) that arrives
    /// `delay` later.
    fn frame(&mut self, track: TrackId, header: FrameHeader, size: usize, delay: u64) {
        self.frame_at(track, header, size, header.dts as u64 * 1_000 + delay);
    }

    /// A frame that arrives at running time `arrival`, whatever its media time (the
    /// receiver's pipeline started later than the sender's: its running time is behind).
    fn frame_at(&mut self, track: TrackId, header: FrameHeader, size: usize, arrival: u64) {
        let incoming = Incoming {
            epoch: 0,
            group: header.base_group,
            header,
            layer: TrackRole::Base,
            size,
            received_us: UNIX0 + (arrival / 1_000) as i64,
            data: (),
        };
        self.send_at(arrival, track, Item::Frame(incoming));
    }

    /// Video frames `range` of a 24 fps stream, each `delay(index)` on the path.
    fn video(&mut self, track: TrackId, range: std::ops::Range<u64>, delay: impl Fn(u64) -> u64) {
        for i in range {
            let media = i as i64 * VIDEO_FRAME_US;
            self.frame(track, video_header(i, media), 1_000, delay(i));
        }
    }

    /// 20 ms audio frames `range`, each `delay(index)` on the path.
    fn audio(&mut self, track: TrackId, range: std::ops::Range<u64>, delay: impl Fn(u64) -> u64) {
        for i in range {
            let media = i as i64 * AUDIO_FRAME_US;
            self.frame(track, audio_header(i, media), 160, delay(i));
        }
    }

    /// Runs the receiver until running time `end`: items arrive, every track outputs what
    /// it can, and time moves to the next arrival or wake-up.
    fn run_until(&mut self, end: u64) {
        self.in_flight.sort_by_key(|(at, ..)| *at);
        let tracks: Vec<TrackId> = (0..self.player.tracks.len()).map(TrackId).collect();
        loop {
            while self.in_flight.first().is_some_and(|(at, ..)| *at <= self.t) {
                let (_, track, item) = self.in_flight.remove(0);
                self.player.push(track, item, now_at(self.t));
            }
            for &track in &tracks {
                while let Some(o) = self.player.pop(track, now_at(self.t)) {
                    self.out.push(Out {
                        track,
                        decode_index: o.header.decode_index,
                        media: o.header.dts,
                        dts: o.dts,
                        pts: o.pts,
                        discont: o.discont,
                        at: self.t,
                    });
                }
            }
            self.events
                .extend(std::iter::from_fn(|| self.player.poll_event()));
            let next = tracks
                .iter()
                .filter_map(|&t| self.player.wake_at(t, now_at(self.t)))
                .chain(self.in_flight.first().map(|(at, ..)| *at))
                .min();
            match next {
                Some(next) if next <= end => self.t = next.max(self.t + 1),
                _ => break,
            }
        }
        self.t = self.t.max(end);
    }

    fn outputs(&self, track: TrackId) -> Vec<Out> {
        self.out
            .iter()
            .copied()
            .filter(|o| o.track == track)
            .collect()
    }

    /// A frame's latency as a sink renders it: its slot plus the buffering reported
    /// downstream, from its capture (running time = media time), ms.
    fn latency_ms(&self, o: &Out) -> f64 {
        (o.pts + self.latency_ns) as f64 / MS as f64 - o.media as f64 / 1_000.0
    }

    /// The mean latency of the track's frames output from `from_ms` to `to_ms` of media.
    fn mean_latency_ms(&self, track: TrackId, from_ms: i64, to_ms: i64) -> f64 {
        let window: Vec<f64> = self
            .outputs(track)
            .iter()
            .filter(|o| (from_ms * 1_000..to_ms * 1_000).contains(&o.media))
            .map(|o| self.latency_ms(o))
            .collect();
        assert!(!window.is_empty(), "no frames from {from_ms} to {to_ms} ms");
        window.iter().sum::<f64>() / window.len() as f64
    }

    /// Frames output later than their slot plus the downstream buffering: late at the
    /// sink.
    fn late(&self, track: TrackId) -> usize {
        self.outputs(track)
            .iter()
            .filter(|o| o.at > o.dts + self.latency_ns)
            .count()
    }
}

#[test]
fn video_plays_at_one_x_from_its_first_frame() {
    let mut sim = Sim::new(100, true);
    let v = sim.track("video", MediaKind::Video);
    // 50 ms on the path, give or take 20.
    sim.video(v, 0..48, |i| (50 + (i * 7) % 21 - 10) * MS);
    sim.run_until(3_000 * MS);
    let out = sim.outputs(v);
    assert_eq!(out.len(), 48);
    assert!(out[0].discont && out[1..].iter().all(|o| !o.discont));
    for o in &out {
        let slot = out[0].dts + (o.media - out[0].media) as u64 * 1_000;
        assert_eq!(o.dts, slot, "frame {} off its slot", o.decode_index);
        assert_eq!(o.pts, o.dts, "no B-frames: presented as decoded");
        assert!(
            o.at <= o.dts + sim.latency_ns,
            "frame {} late",
            o.decode_index
        );
    }
}

#[test]
fn a_missing_frame_holds_the_next_for_the_latency_then_playback_jumps() {
    let mut sim = Sim::new(100, true);
    let v = sim.track("video", MediaKind::Video);
    // Frame 5 never comes: 6..14 cannot decode; 15 starts the next group.
    sim.video(v, 0..5, |_| 20 * MS);
    sim.video(v, 6..30, |_| 20 * MS);
    sim.run_until(2_000 * MS);
    let out = sim.outputs(v);
    let indices: Vec<u64> = out.iter().map(|o| o.decode_index).collect();
    assert_eq!(indices[..5], [0, 1, 2, 3, 4]);
    assert_eq!(indices[5], 15, "playback resumes at the next keyframe");
    assert!(out[5].discont);
    assert!(
        sim.events
            .iter()
            .any(|e| matches!(e, Event::Jumped { group: 1, .. }))
    );
    let undecodable = sim
        .events
        .iter()
        .filter(|e| {
            matches!(
                e,
                Event::Dropped {
                    reason: DropReason::Undecodable,
                    ..
                }
            )
        })
        .count();
    assert_eq!(undecodable, 9);
    assert_eq!(sim.player.stats(v).jumps, 1);
}

#[test]
fn audio_and_video_play_on_one_timeline() {
    let mut sim = Sim::new(100, true);
    let v = sim.track("video", MediaKind::Video);
    let a = sim.track("audio", MediaKind::Audio);
    sim.video(v, 0..72, |_| 60 * MS);
    sim.audio(a, 0..150, |_| 30 * MS);
    sim.run_until(4_000 * MS);
    let (video, audio) = (sim.outputs(v), sim.outputs(a));
    assert_eq!(video.len(), 72);
    assert_eq!(audio.len(), 150);
    // One media → running-time offset for both: the same instant plays at once on both.
    let offset = |o: &Out| o.dts as i64 - o.media * 1_000;
    let video_offset = offset(&video[10]);
    for o in video.iter().chain(&audio[5..]) {
        assert_eq!(offset(o), video_offset, "{:?} off the shared timeline", o);
    }
    // The first audio waited for the video to anchor the timeline.
    assert!(audio[0].at >= video[0].at);
}

#[test]
fn a_reset_restarts_the_timeline_once_for_every_track() {
    let mut sim = Sim::new(100, true);
    let v = sim.track("video", MediaKind::Video);
    let a = sim.track("audio", MediaKind::Audio);
    sim.video(v, 0..24, |_| 20 * MS);
    sim.audio(a, 0..50, |_| 20 * MS);
    sim.run_until(1_200 * MS);
    let before = sim.outputs(v).len();
    // The publisher restarted: numbering and timestamps begin again, an hour earlier.
    for track in [v, a] {
        sim.send_at(1_300 * MS, track, Item::Reset { generation: 1 });
    }
    let restart = 1_400 * MS;
    for i in 0..24 {
        let mut h = video_header(i, i as i64 * VIDEO_FRAME_US - 3_600_000_000);
        h.availability_us = (UNIX0 + (restart / 1_000) as i64) as u64;
        let arrival = restart + i * VIDEO_FRAME_US as u64 * 1_000;
        let incoming = Incoming {
            epoch: 0,
            group: h.base_group,
            header: h,
            layer: TrackRole::Base,
            size: 1_000,
            received_us: UNIX0 + (arrival / 1_000) as i64,
            data: (),
        };
        sim.send_at(arrival, v, Item::Frame(incoming));
    }
    sim.run_until(3_000 * MS);
    let after: Vec<Out> = sim.outputs(v)[before..].to_vec();
    assert_eq!(after.len(), 24);
    assert!(after[0].discont);
    assert!(
        after[0].dts >= restart,
        "the new timeline starts at its first frame"
    );
    assert!(after.windows(2).all(|w| w[1].dts > w[0].dts));
}

#[test]
fn frames_of_subscriptions_from_before_a_resume_are_ignored() {
    let mut sim = Sim::new(100, true);
    let v = sim.track("video", MediaKind::Video);
    sim.player.resumed(1);
    sim.video(v, 0..10, |_| 10 * MS);
    sim.run_until(1_000 * MS);
    assert!(sim.outputs(v).is_empty());
    sim.send_at(
        1_000 * MS,
        v,
        Item::Subscribed {
            epoch: 1,
            resumes: 1,
        },
    );
    for i in 30..40 {
        let media = i as i64 * VIDEO_FRAME_US;
        let mut h = video_header(i, media);
        h.kind = if i == 30 { FrameKind::Key } else { h.kind };
        sim.send_at(
            media as u64 * 1_000 + 10 * MS,
            v,
            Item::Frame(Incoming {
                epoch: 1,
                group: h.base_group,
                header: h,
                layer: TrackRole::Base,
                size: 1_000,
                received_us: UNIX0 + media + 10_000,
                data: (),
            }),
        );
    }
    sim.run_until(3_000 * MS);
    let out = sim.outputs(v);
    assert_eq!(out.len(), 10);
    assert_eq!(out[0].decode_index, 30);
}

#[test]
fn a_rendition_takes_over_at_the_frame_it_starts_with() {
    let mut sim = Sim::new(100, true);
    let v = sim.track("video", MediaKind::Video);
    sim.send_at(
        0,
        v,
        Item::Rendition {
            name: "video".into(),
            from: None,
        },
    );
    sim.video(v, 0..20, |_| 10 * MS);
    sim.send_at(
        0,
        v,
        Item::Rendition {
            name: "video-1".into(),
            from: Some(15),
        },
    );
    sim.run_until(400 * MS);
    assert_eq!(sim.player.rendition(v), "video");
    sim.run_until(1_000 * MS);
    assert_eq!(sim.player.rendition(v), "video-1");
    let stats = sim.player.stats(v);
    assert_eq!(stats.rendition.as_deref(), Some("video-1"));
    assert_eq!(stats.rendition_switches, 1);
}

#[test]
fn at_the_end_of_the_stream_nothing_is_waited_for() {
    let mut sim = Sim::new(500, true);
    let v = sim.track("video", MediaKind::Video);
    // Frame 10 never comes: 11..13 would wait 500 ms for it.
    sim.video(v, 0..10, |_| 10 * MS);
    sim.video(v, 11..14, |_| 10 * MS);
    sim.send_at(600 * MS, v, Item::Eos);
    sim.run_until(610 * MS);
    assert!(sim.player.ended(v));
    assert_eq!(sim.outputs(v).len(), 10);
    assert_eq!(sim.player.buffered(v), 3);
    assert!(
        sim.player
            .wake_at(v, now_at(610 * MS))
            .is_some_and(|t| t > 900 * MS)
    );
    // With no more input to come, they are decided at once: they cannot decode.
    assert!(sim.player.pop_remaining(v, now_at(610 * MS)).is_none());
    assert_eq!(sim.player.buffered(v), 0);
    assert_eq!(sim.player.stats(v).frames_skipped, 3);
}

#[test]
fn a_pad_blocked_downstream_stamps_frames_with_when_they_arrived() {
    let mut sim = Sim::new(100, true);
    let v = sim.track("video", MediaKind::Video);
    sim.video(v, 0..3, |_| 10 * MS);
    // Nothing is popped until 300 ms: the frames waited in the channel.
    sim.in_flight.sort_by_key(|(at, ..)| *at);
    let items: Vec<_> = std::mem::take(&mut sim.in_flight);
    for (_, track, item) in items {
        sim.player.push(track, item, now_at(300 * MS));
    }
    let first = sim.player.pop(v, now_at(300 * MS)).expect("the keyframe");
    assert_eq!(first.dts, 10 * MS, "stamped with its arrival, not with now");
}

/// A bottleneck of `kbit` kbit/s with `queue_ms(t)` of standing queue in front of it at
/// media time `t` (ms), for frames of `size(i)` bytes sent at 24 fps.
fn through_link(
    sim: &mut Sim,
    track: TrackId,
    range: std::ops::Range<u64>,
    kbit: u64,
    size: impl Fn(u64) -> usize,
    queue_ms: impl Fn(u64) -> u64,
) {
    let mut free_at = 0u64;
    for i in range {
        let media = i as i64 * VIDEO_FRAME_US;
        let sent = media as u64 * 1_000;
        let bytes = size(i);
        let start = sent.max(free_at);
        free_at = start + bytes as u64 * 8 * 1_000_000 / kbit;
        let arrival = free_at + queue_ms(sent / MS) * MS;
        sim.frame(track, video_header(i, media), bytes, arrival - sent);
    }
}

fn keyframes(key: usize, delta: usize) -> impl Fn(u64) -> usize {
    move |i| if i.is_multiple_of(GOP) { key } else { delta }
}

/// A start-up transient: the first seconds come through a queue that drains from 500 ms
/// to none by 4 s.
fn transient(t_ms: u64) -> u64 {
    500u64.saturating_sub(t_ms / 8)
}

#[test]
fn adaptive_playout_gives_back_the_latency_of_a_start_up_transient() {
    let mut results = Vec::new();
    for adaptive in [false, true] {
        let mut sim = Sim::with(100, true, adaptive);
        let v = sim.track("video", MediaKind::Video);
        through_link(
            &mut sim,
            v,
            0..480,
            1_000,
            keyframes(8_000, 1_200),
            transient,
        );
        sim.run_until(25_000 * MS);
        let out = sim.outputs(v);
        assert_eq!(out.len(), 480);
        assert_eq!(sim.late(v), 0, "adaptive {adaptive}: frames late");
        assert!(out[1..].iter().all(|o| !o.discont), "no rebuffer, no jump");
        // No visible jump: consecutive slots at least 90 % of the media time apart.
        for w in out.windows(2) {
            let media = (w[1].media - w[0].media) as u64 * 1_000;
            assert!(w[1].dts - w[0].dts >= media * 9 / 10, "{:?}", w);
        }
        results.push((
            sim.mean_latency_ms(v, 0, 1_000),
            sim.mean_latency_ms(v, 15_000, 20_000),
        ));
    }
    let [(fixed_start, fixed_end), (adaptive_start, adaptive_end)] = results[..] else {
        unreachable!()
    };
    eprintln!(
        "fixed {fixed_start:.0} → {fixed_end:.0} ms, adaptive {adaptive_start:.0} → {adaptive_end:.0} ms"
    );
    // The fixed offset keeps the transient's latency; the adaptive one gives it back,
    // down to the keyframe's transfer and the buffering.
    assert!(fixed_end > fixed_start - 20.0);
    assert!(
        adaptive_end < fixed_end - 350.0,
        "{adaptive_end} vs {fixed_end}"
    );
    assert!(adaptive_end < 200.0, "{adaptive_end}");
}

#[test]
fn adaptive_playout_grows_at_once_when_frames_come_late() {
    let mut sim = Sim::adaptive(100);
    let v = sim.track("video", MediaKind::Video);
    // 30 ms of queue, then 400 ms from 5 s on.
    let queue = |t_ms: u64| if t_ms < 5_000 { 30 } else { 400 };
    through_link(&mut sim, v, 0..240, 2_000, keyframes(6_000, 1_000), queue);
    sim.run_until(12_000 * MS);
    let out = sim.outputs(v);
    assert_eq!(out.len(), 240);
    // The first frame through the queue grows the timeline: it and every frame after it
    // come within the part of the buffering a late frame may use.
    let step = out.iter().position(|o| o.media >= 5_000_000).unwrap();
    let worst = out[step..]
        .iter()
        .map(|o| o.at as i64 - o.dts as i64)
        .max()
        .unwrap();
    assert!(
        worst <= 70 * MS as i64,
        "{} ms after its slot",
        worst / MS as i64
    );
    assert_eq!(sim.late(v), 0);
    assert!(
        out[1..].iter().all(|o| !o.discont),
        "grown, not re-anchored"
    );
    let playout = sim.player.playout().unwrap();
    assert!(
        playout.grows >= 1 && playout.grown_ms > 300.0,
        "{playout:?}"
    );
    // While a fixed playout rebuffers there.
    let mut fixed = Sim::new(100, true);
    let v = fixed.track("video", MediaKind::Video);
    through_link(&mut fixed, v, 0..240, 2_000, keyframes(6_000, 1_000), queue);
    fixed.run_until(12_000 * MS);
    assert_eq!(fixed.player.stats(v).rebuffers, 1);
}

#[test]
fn keyframe_transfers_are_planned_for_not_chased() {
    let mut sim = Sim::adaptive(100);
    let v = sim.track("video", MediaKind::Video);
    // 500 kbit/s, 12 kB keyframes (190 ms on the link) every 0.6 s, 1 kB frames between.
    through_link(&mut sim, v, 0..720, 500, keyframes(12_000, 1_000), |_| 20);
    sim.run_until(32_000 * MS);
    assert_eq!(sim.outputs(v).len(), 720);
    assert_eq!(sim.late(v), 0);
    let playout = sim.player.playout().unwrap();
    // Grown once or twice while learning, then steady: no sawtooth per GoP.
    assert!(playout.grows <= 3, "{playout:?}");
    assert!(playout.drained_ms < 200.0, "{playout:?}");
    let steady = sim.mean_latency_ms(v, 10_000, 30_000);
    // The keyframe's transfer (190 ms) and the path (20 ms) beyond the buffering, less the
    // part of the buffering a late frame may use.
    assert!((200.0..330.0).contains(&steady), "{steady}");
}

#[test]
fn the_latency_property_stays_the_floor_of_the_buffering() {
    let mut sim = Sim::adaptive(150);
    let v = sim.track("video", MediaKind::Video);
    // An ideal path: every frame 10 ms, no size effect.
    through_link(&mut sim, v, 0..240, 100_000, |_| 500, |_| 10);
    sim.run_until(11_000 * MS);
    let playout = sim.player.playout().unwrap();
    assert!(playout.delay_ms >= 149.0, "{playout:?}");
    assert!(playout.target_ms >= 149.0, "{playout:?}");
    let latency = sim.mean_latency_ms(v, 5_000, 10_000);
    assert!((159.0..165.0).contains(&latency), "{latency}");
}

#[test]
fn audio_drains_without_holes_and_stays_with_the_video() {
    let mut sim = Sim::adaptive(100);
    let v = sim.track("video", MediaKind::Video);
    let a = sim.track("audio", MediaKind::Audio);
    // Both through the start-up transient, audio 10 ms ahead.
    through_link(
        &mut sim,
        v,
        0..480,
        2_000,
        keyframes(6_000, 1_000),
        transient,
    );
    sim.audio(a, 0..1_000, |i| (transient(i * 20) + 10) * MS);
    sim.run_until(22_000 * MS);
    let (video, audio) = (sim.outputs(v), sim.outputs(a));
    assert_eq!(video.len(), 480);
    let drained = sim.player.stats(a).frames_drained;
    assert!(drained > 10, "audio drained by {drained} frames");
    assert_eq!(audio.len() as u64 + drained, 1_000);
    // No hole: each audio frame starts where the one before ended (or overlaps it by
    // less than half a frame).
    for w in audio.windows(2) {
        let end = w[0].dts + AUDIO_FRAME_US as u64 * 1_000;
        assert!(w[1].dts <= end + 60 * MS, "a hole before {:?}", w[1]);
    }
    // In sync: video and audio of the same instant play within 40 ms of each other.
    let offset = |o: &Out| o.dts as i64 - o.media * 1_000;
    for o in &video[1..] {
        let near = audio
            .iter()
            .filter(|x| (x.media - o.media).abs() < 100_000)
            .map(|x| (offset(x) - offset(o)).abs())
            .min();
        if let Some(skew) = near {
            assert!(
                skew <= 40 * MS as i64,
                "skew {} ms at {:?}",
                skew / MS as i64,
                o
            );
        }
    }
    let end = sim.mean_latency_ms(a, 15_000, 20_000);
    assert!(end < 250.0, "audio latency came back: {end}");
}

/// Audio's path delay, ms, for its frame `i`: 300 ms for 3 s, then climbing 200 ms a
/// second for 4.5 s (a queue building on a congested link), then level.
fn climbing_audio_delay(i: u64) -> u64 {
    300 + (i * 20).saturating_sub(3_000).min(4_500) / 5
}

/// Video a second behind its audio (congested, while the relay forwards audio first),
/// audio's delay climbing: returns the sim run for 12 s of video, and its tracks.
fn video_trailing_climbing_audio(adaptive: bool) -> (Sim, TrackId, TrackId) {
    video_trailing_audio(adaptive, climbing_audio_delay, 12)
}

/// Video a second behind its audio, whose frame `i` takes `audio_delay_ms(i)`: the sim
/// run for `video_s` of video (audio going on 2 s longer), and its tracks.
fn video_trailing_audio(
    adaptive: bool,
    audio_delay_ms: impl Fn(u64) -> u64,
    video_s: u64,
) -> (Sim, TrackId, TrackId) {
    let mut sim = Sim::with(100, true, adaptive);
    let v = sim.track("video", MediaKind::Video);
    let a = sim.track("audio", MediaKind::Audio);
    sim.video(v, 0..video_s * 24, |i| {
        (audio_delay_ms(i * VIDEO_FRAME_US as u64 / 20_000) + 1_000) * MS
    });
    // Audio goes on past the video's end: video this far behind a track that ended
    // would lead the timeline itself.
    sim.audio(a, 0..(video_s + 2) * 50, |i| audio_delay_ms(i) * MS);
    sim.run_until((video_s + 4) * 1_000 * MS);
    (sim, v, a)
}

/// Holes in a track's output over `over_ms`: where a frame starts later than the one
/// before ended, ms.
fn audio_holes_ms(audio: &[Out], over_ms: u64) -> Vec<f64> {
    audio
        .windows(2)
        .map(|w| {
            w[1].dts
                .saturating_sub(w[0].dts + AUDIO_FRAME_US as u64 * 1_000)
        })
        .filter(|hole| *hole > over_ms * MS)
        .map(|hole| hole as f64 / MS as f64)
        .collect()
}

/// The largest A/V skew, ms: at each video frame's slot, how far the media of the audio
/// playing then is from the frame's (frames that fall into a hole in the audio aside).
fn worst_skew_ms(video: &[Out], audio: &[Out]) -> f64 {
    let frame_ns = AUDIO_FRAME_US as u64 * 1_000;
    video
        .iter()
        .filter_map(|o| {
            let x = audio
                .iter()
                .find(|x| x.dts <= o.dts && o.dts < x.dts + frame_ns)?;
            let heard = x.media * 1_000 + (o.dts - x.dts) as i64;
            Some((heard - o.media * 1_000).abs())
        })
        .max()
        .unwrap_or(0) as f64
        / MS as f64
}

#[test]
fn video_trailing_its_audio_meets_it_where_the_audio_played_across_rebuffers() {
    // A fixed playout: the climbing audio rebuffers, each time moving the timeline later
    // under media the trailing video has yet to play.
    let (sim, v, a) = video_trailing_climbing_audio(false);
    let (video, audio) = (sim.outputs(v), sim.outputs(a));
    let rebuffers = sim.player.stats(a).rebuffers;
    assert!(rebuffers >= 3, "audio rebuffered {rebuffers} times");
    assert!(video.len() > 250, "video output {} frames", video.len());
    let skew = worst_skew_ms(&video, &audio);
    assert!(skew <= 1.0, "A/V skew {skew} ms over {rebuffers} rebuffers");
}

#[test]
fn audio_grows_an_adaptive_timeline_in_steps_too_short_to_hear_as_holes() {
    let (fixed, _, fixed_audio) = video_trailing_climbing_audio(false);
    let fixed_holes = audio_holes_ms(&fixed.outputs(fixed_audio), 60);
    let (sim, v, a) = video_trailing_climbing_audio(true);
    let (video, audio) = (sim.outputs(v), sim.outputs(a));
    let holes = audio_holes_ms(&audio, 45);
    let playout = sim.player.playout().expect("adaptive playout");
    // With a fixed playout each rebuffer cuts a hole of the whole latency; growing ahead
    // of the delay, the adaptive one leaves none over 45 ms, and nothing is late.
    assert!(!fixed_holes.is_empty(), "the fixed playout left no hole");
    assert!(
        holes.is_empty(),
        "holes {holes:?} ms (fixed: {fixed_holes:?})"
    );
    assert!(playout.grows >= 10, "{playout:?}");
    assert_eq!(sim.player.stats(a).rebuffers, 0);
    assert_eq!(audio.len(), 700);
    let skew = worst_skew_ms(&video, &audio);
    assert!(skew <= 1.0, "A/V skew {skew} ms");
}

#[test]
fn audio_outrun_by_its_delay_grows_by_what_the_late_frame_needs_not_the_whole_latency() {
    // A queue filling faster than the stepped growth follows (a congestion window that
    // doubles): audio's delay climbs 800 ms in a second. Frames come later than the
    // buffering takes; each moves the timeline only as far as it must.
    let climbing = |i: u64| 300 + (i * 20).saturating_sub(3_000).min(1_000) * 4 / 5;
    let (sim, v, a) = video_trailing_audio(true, climbing, 8);
    let (video, audio) = (sim.outputs(v), sim.outputs(a));
    let holes = audio_holes_ms(&audio, 60);
    let playout = sim.player.playout().expect("adaptive playout");
    assert!(holes.is_empty(), "holes {holes:?} ms, {playout:?}");
    assert_eq!(sim.player.stats(a).rebuffers, 0, "{playout:?}");
    // The audio waited 500 ms for the video to anchor; the climb took that and 300 more.
    assert!(playout.grown_ms >= 250.0, "{playout:?}");
    assert_eq!(audio.len(), 500);
    assert_eq!(sim.late(a), 0);
    let skew = worst_skew_ms(&video, &audio);
    assert!(skew <= 1.0, "A/V skew {skew} ms");
}

#[test]
fn a_video_jump_decided_after_its_keyframe_came_lands_after_the_audio_already_out() {
    // Video 600 ms behind on a congested path, audio 50 ms: audio leads, 550 ms early.
    // Frames 40-44 never come; the path clears for the next group, whose keyframe (45)
    // comes at once, long before the player gives up on frame 40 and jumps to it.
    let mut sim = Sim::new(100, true);
    let v = sim.track("video", MediaKind::Video);
    let a = sim.track("audio", MediaKind::Audio);
    sim.video(v, 0..40, |_| 600 * MS);
    sim.video(v, 45..120, |_| 150 * MS);
    sim.audio(a, 0..250, |_| 50 * MS);
    sim.run_until(6_000 * MS);
    let (video, audio) = (sim.outputs(v), sim.outputs(a));
    assert_eq!(sim.player.stats(v).jumps, 1);
    let jump = video
        .iter()
        .find(|o| o.decode_index == 45)
        .expect("the jump");
    let offset = |o: &Out| o.dts as i64 - o.media * 1_000;
    let before = offset(&video[0]);
    assert!(
        offset(jump) < before - 100 * MS as i64,
        "the jump brought playback earlier: {} ms",
        (before - offset(jump)) / MS as i64
    );
    // The audio out when the jump was decided keeps its slots; the pictures after the
    // jump start where it ends, so none is shown against the audio of the old mapping.
    let skew = worst_skew_ms(&video, &audio);
    assert!(skew <= 1.0, "A/V skew {skew} ms");
    assert!(audio_holes_ms(&audio, 60).is_empty());
}

#[test]
fn the_buffering_reported_while_audio_leads_is_the_audios() {
    // Video falls 600 ms behind after a second, audio stays at 50 ms: audio leads and its
    // frames wait the buffering; the video's come after their slots.
    let mut sim = Sim::adaptive(100);
    let v = sim.track("video", MediaKind::Video);
    let a = sim.track("audio", MediaKind::Audio);
    sim.video(v, 0..24, |_| 50 * MS);
    sim.video(v, 24..120, |_| 600 * MS);
    sim.audio(a, 0..250, |_| 50 * MS);
    sim.run_until(5_000 * MS);
    let playout = sim.player.playout().expect("adaptive playout");
    let audio = sim.mean_latency_ms(a, 2_000, 4_000);
    assert!(
        (90.0..=audio).contains(&playout.delay_ms),
        "{playout:?}, audio latency {audio} ms"
    );
}

#[test]
fn a_video_starting_behind_the_audio_it_joined_does_not_move_it() {
    // The receiver's pipeline started after the sender's, so media time is ahead of its
    // running time (by 500 ms here). Audio joined mid-stream (media 520 ms, the group
    // under way) and, the first catalog listing it alone, anchored the timeline at
    // running time 20 ms. The video came with the next catalog; its encoder started
    // late, so its first frames (media 0 on) come in a burst from 600 ms in, and it is
    // live by its 34th frame. On the audio's mapping those first frames' slots lie before
    // running time 0: they are that late, which is no reason to move the audio; the
    // video then plays on time with it.
    let mut sim = Sim::adaptive(100);
    let a = sim.track("audio", MediaKind::Audio);
    const AHEAD_US: i64 = 500_000;
    let live = |media: i64| (media - AHEAD_US + 20_000).max(0) as u64 * 1_000;
    for i in 0..250u64 {
        let media = 520_000 + i as i64 * AUDIO_FRAME_US;
        sim.frame_at(a, audio_header(i, media), 160, live(media));
    }
    sim.run_until(100 * MS);
    let v = sim.track("video", MediaKind::Video);
    for i in 0..120u64 {
        let media = i as i64 * VIDEO_FRAME_US;
        let burst = 600 * MS + i * 10 * MS;
        sim.frame_at(v, video_header(i, media), 1_000, burst.max(live(media)));
    }
    sim.run_until(6_000 * MS);
    let (video, audio) = (sim.outputs(v), sim.outputs(a));
    let holes = audio_holes_ms(&audio, 60);
    assert!(holes.is_empty(), "audio holes {holes:?} ms");
    assert_eq!(audio.len(), 250);
    let late_once_live = video
        .iter()
        .filter(|o| o.media >= 2_000_000 && o.at > o.dts + sim.latency_ns)
        .count();
    assert!(video.len() > 60, "video output {} frames", video.len());
    assert_eq!(late_once_live, 0, "video late once live");
    let skew = worst_skew_ms(&video, &audio);
    assert!(skew <= 1.0, "A/V skew {skew} ms");
}

#[test]
fn a_congestion_episodes_delay_is_given_back_at_a_tenth_of_the_media_time() {
    let mut sim = Sim::adaptive(100);
    let v = sim.track("video", MediaKind::Video);
    // 30 ms of queue, 400 ms from 5 s, draining from 8 s back to 30 ms by 8.4 s.
    let queue = |t_ms: u64| match t_ms {
        ..5_000 => 30,
        5_000..8_000 => 400,
        _ => 400u64.saturating_sub((t_ms - 8_000) * 9 / 10).max(30),
    };
    through_link(&mut sim, v, 0..720, 2_000, keyframes(6_000, 1_000), queue);
    sim.run_until(32_000 * MS);
    let out = sim.outputs(v);
    assert_eq!(out.len(), 720);
    assert_eq!(sim.late(v), 0);
    let before = sim.mean_latency_ms(v, 3_000, 5_000);
    let second = |s: i64| sim.mean_latency_ms(v, s * 1_000, (s + 1) * 1_000);
    // Once the estimate has let go of the queue (2 s after it drained), a tenth of each
    // second is given back: ~100 ms a second, where 6 % gave 60.
    let per_second = (second(10) - second(12)) / 2.0;
    assert!((85.0..=105.0).contains(&per_second), "{per_second} ms/s");
    let after = sim.mean_latency_ms(v, 14_000, 30_000);
    assert!((after - before).abs() < 10.0, "{before} → {after} ms");
    // Unseen: consecutive slots at least 89 % of the media time apart.
    for w in out.windows(2) {
        let media = (w[1].media - w[0].media) as u64 * 1_000;
        assert!(w[1].dts - w[0].dts >= media * 89 / 100, "{:?}", w);
    }
}
