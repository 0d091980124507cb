//! The scheduler in virtual time: a simulated QUIC connection executes its transmits at
//! a configurable rate, and the bytes of every stream are decoded back into objects.

use std::collections::BTreeMap;

use moq_media::DeliveryMode;
use moq_media::mapping::priority;
use moq_wire::message::DataStreamHeader;

use super::*;

const MS: Duration = Duration::from_millis(1);
const FPS: u64 = 24;
const GOP: u64 = 15;
const KEY_BYTES: usize = 12_000;
const REF_BYTES: usize = 3_000;
const NONREF_BYTES: usize = 1_000;

/// Request IDs of the served tracks.
const BASE: u64 = 0;
const ENH: u64 = 2;

/// moqsink's delivery modes, as moq-media defines them (the one type), with the track
/// settings ([`TrackDelivery::base_layer`], [`TrackDelivery::enhancement_layer`]) and the
/// priorities moqsink gives them.
const MODES: [DeliveryMode; 4] = DeliveryMode::ALL;

/// The track settings moqsink uses for `mode`'s base layer.
fn base_delivery(mode: DeliveryMode, max_age: Option<Duration>) -> TrackDelivery {
    TrackDelivery::base_layer(mode.newest_group_first(), max_age)
}

fn enhancement_delivery() -> TrackDelivery {
    TrackDelivery::enhancement_layer(500 * MS)
}

fn session_priority(u: priority::Urgency) -> Priority {
    Priority {
        class: u.class,
        rank: u.rank,
        publisher: u.publisher,
    }
}

fn base_priority(mode: DeliveryMode, group: u64) -> Priority {
    session_priority(priority::base(mode, group))
}

/// One object as the subscriber decoded it from a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Received {
    id: u64,
    payload: Vec<u8>,
}

/// A decoded stream: its header's group and the objects read so far.
#[derive(Debug, Default)]
struct StreamBytes {
    bytes: Vec<u8>,
    finished: bool,
    reset: Option<u64>,
}

impl StreamBytes {
    fn decode(&self, alias: u64, group: u64) -> Vec<Received> {
        let Ok((DataStreamHeader::Subgroup(h), mut at)) = DataStreamHeader::decode(&self.bytes)
        else {
            panic!("stream of group {group} does not start with a subgroup header");
        };
        assert_eq!((h.track_alias, h.group_id), (alias, group));
        let mut out: Vec<Received> = Vec::new();
        while at < self.bytes.len() {
            let Ok((o, used)) = SubgroupObjectHeader::decode(&self.bytes[at..], false) else {
                break; // the rest of a partly written object header
            };
            let start = at + used;
            let end = start + o.payload_len as usize;
            if end > self.bytes.len() {
                break;
            }
            let id = out
                .last()
                .map_or(o.object_id_delta, |p| p.id + o.object_id_delta + 1);
            out.push(Received {
                id,
                payload: self.bytes[start..end].to_vec(),
            });
            at = end;
        }
        out
    }
}

/// A simulated connection: QUIC takes up to `bytes_per_ms` each millisecond.
struct Net {
    sched: Scheduler,
    now: Instant,
    bytes_per_ms: usize,
    /// The peer grants no stream credit and reads nothing.
    frozen: bool,
    streams: BTreeMap<StreamKey, StreamBytes>,
    open_order: Vec<StreamKey>,
    done: Vec<(u64, u64, u64)>,
    windows: Vec<u64>,
    closed: Option<String>,
    /// Largest backlog the scheduler held.
    peak_backlog: usize,
}

impl Net {
    fn new(limits: PublishLimits, bytes_per_ms: usize) -> Net {
        let now = Instant::now();
        Net {
            sched: Scheduler::new(limits, &moq_wire::draft14::CODEC, now),
            now,
            bytes_per_ms,
            frozen: false,
            streams: BTreeMap::new(),
            open_order: Vec::new(),
            done: Vec::new(),
            windows: Vec::new(),
            closed: None,
            peak_backlog: 0,
        }
    }

    fn serve(&mut self, request_id: u64, delivery: TrackDelivery) -> Arc<TrackCounters> {
        let counters = Arc::new(TrackCounters::default());
        self.sched.subscribe(
            NewSubscription {
                request_id,
                alias: request_id + 100,
                delivery,
                counters: counters.clone(),
            },
            self.now,
        );
        counters
    }

    fn actions(&mut self) {
        while let Some(action) = self.sched.poll_action() {
            match action {
                Action::Reset { key, code } => {
                    self.streams.entry(key).or_default().reset = Some(code);
                }
                Action::Finish { key } => {
                    self.streams.entry(key).or_default().finished = true;
                    // Acknowledged at once: the tests are about sending.
                    self.sched.acked(key, self.now);
                }
                Action::PublishDone {
                    request_id,
                    status,
                    stream_count,
                } => self.done.push((request_id, status, stream_count)),
                Action::SetSendWindow(w) => self.windows.push(w),
                Action::Close { reason, .. } => self.closed = Some(reason),
            }
        }
    }

    /// Runs one millisecond of the connection.
    fn tick(&mut self) {
        self.now += MS;
        self.sched.handle_timeout(self.now);
        self.actions();
        let mut credit = if self.frozen { 0 } else { self.bytes_per_ms };
        while let Some(transmit) = self.sched.next_transmit() {
            match transmit {
                Transmit::Open { key, .. } => {
                    if self.frozen {
                        break;
                    }
                    self.open_order.push(key);
                    self.streams.entry(key).or_default();
                    self.sched.opened(key, self.now);
                }
                Transmit::Write { key, chunks } => {
                    if credit == 0 {
                        break;
                    }
                    let mut taken = 0;
                    let stream = self.streams.entry(key).or_default();
                    for chunk in chunks {
                        let n = chunk.len().min(credit - taken);
                        stream.bytes.extend_from_slice(&chunk[..n]);
                        taken += n;
                        if taken == credit {
                            break;
                        }
                    }
                    credit -= taken;
                    self.sched.wrote(key, taken, self.now);
                }
            }
            self.actions();
        }
        self.actions();
        self.peak_backlog = self.peak_backlog.max(self.sched.backlog_bytes());
    }

    fn run_for(&mut self, d: Duration) {
        let end = self.now + d;
        while self.now < end {
            self.tick();
        }
    }

    /// Objects of one subscription's group as received, if its stream was opened.
    fn received(&self, request_id: u64, group: u64) -> Option<Vec<Received>> {
        let key = StreamKey { request_id, group };
        self.streams
            .get(&key)
            .filter(|s| !s.bytes.is_empty())
            .map(|s| s.decode(request_id + 100, group))
    }

    fn groups_opened(&self, request_id: u64) -> Vec<u64> {
        self.open_order
            .iter()
            .filter(|k| k.request_id == request_id)
            .map(|k| k.group)
            .collect()
    }
}

/// Bytes of a frame, recognisable on arrival: the frame number, repeated.
fn frame_bytes(n: u64, len: usize) -> Bytes {
    Bytes::from(
        (0..len)
            .map(|i| (n as usize * 31 + i) as u8)
            .collect::<Vec<_>>(),
    )
}

/// A live H.264-like producer: GoPs of `GOP` frames at `FPS`, I P B B P B B ... in decode
/// order, mapped as moqsink maps them in `mode`.
struct Producer {
    mode: DeliveryMode,
    frame: u64,
    base_object: u64,
    enh_group: u64,
    key_bytes: usize,
}

impl Producer {
    fn new(mode: DeliveryMode) -> Producer {
        Producer {
            mode,
            frame: 0,
            base_object: 0,
            enh_group: 0,
            key_bytes: KEY_BYTES,
        }
    }

    fn gop(&self) -> u64 {
        self.frame / GOP
    }

    /// Writes the next frame and runs the connection until the one after is due.
    fn next(&mut self, net: &mut Net) {
        let n = self.frame;
        let position = n % GOP;
        let group = self.gop();
        let created = net.now;
        let (len, reference) = match position {
            0 => (self.key_bytes, true),
            p if p % 3 == 1 => (REF_BYTES, true),
            _ => (NONREF_BYTES, false),
        };
        let payload = Payload::from(frame_bytes(n, len));
        if !reference && self.mode.splits_layers() {
            let info = GroupInfo {
                id: self.enh_group,
                priority: session_priority(priority::enhancement(self.enh_group)),
                created,
            };
            net.sched.object(ENH, info, 0, payload, net.now, net.now);
            net.sched.group_closed(ENH, self.enh_group, net.now);
            self.enh_group += 1;
        } else {
            if position == 0 {
                if group > 0 {
                    net.sched.group_closed(BASE, group - 1, net.now);
                }
                self.base_object = 0;
            }
            let info = GroupInfo {
                id: group,
                priority: base_priority(self.mode, group),
                created,
            };
            net.sched
                .object(BASE, info, self.base_object, payload, net.now, net.now);
            self.base_object += 1;
        }
        self.frame += 1;
        net.run_for(Duration::from_micros(1_000_000 / FPS));
    }

    fn end(&self, net: &mut Net) {
        if self.frame > 0 {
            net.sched.group_closed(
                BASE,
                self.gop() - u64::from(self.frame.is_multiple_of(GOP)),
                net.now,
            );
        }
        net.sched
            .end_subscription(BASE, publish_done_code::TRACK_ENDED, net.now);
        if self.mode.splits_layers() {
            net.sched
                .end_subscription(ENH, publish_done_code::TRACK_ENDED, net.now);
        }
        net.run_for(Duration::from_secs(2));
    }
}

fn group(id: u64, priority: Priority, created: Instant) -> GroupInfo {
    GroupInfo {
        id,
        priority,
        created,
    }
}

fn serve_mode(net: &mut Net, mode: DeliveryMode, max_age: Option<Duration>) -> Arc<TrackCounters> {
    let base = net.serve(BASE, base_delivery(mode, max_age));
    if mode.splits_layers() {
        net.serve(ENH, enhancement_delivery());
    }
    base
}

fn count(c: &AtomicU64) -> u64 {
    c.load(std::sync::atomic::Ordering::Relaxed)
}

/// 600 kbit/s at 24 fps with the frame sizes above is ~75 bytes per ms.
const STREAM_BYTES_PER_MS: usize = 75;

#[test]
fn every_mode_delivers_everything_in_order_on_a_fast_link() {
    for mode in MODES {
        let mut net = Net::new(PublishLimits::default(), 10_000);
        serve_mode(&mut net, mode, None);
        let mut p = Producer::new(mode);
        for _ in 0..3 * GOP {
            p.next(&mut net);
        }
        p.end(&mut net);
        // Every base group arrived whole, objects contiguous from 0, streams finished.
        // I P B B P B B ...: the keyframe and five P frames are the base layer.
        let expected_base = if mode.splits_layers() { 6 } else { GOP };
        for g in 0..3 {
            let objects = net.received(BASE, g).expect("group sent");
            let ids: Vec<u64> = objects.iter().map(|o| o.id).collect();
            assert_eq!(ids, (0..expected_base).collect::<Vec<_>>(), "{mode:?}");
            assert_eq!(
                objects[0].payload,
                frame_bytes(g * GOP, KEY_BYTES),
                "{mode:?}"
            );
            assert!(
                net.streams[&StreamKey {
                    request_id: BASE,
                    group: g
                }]
                    .finished
            );
        }
        assert_eq!(net.groups_opened(BASE), [0, 1, 2], "{mode:?}");
        if mode.splits_layers() {
            assert_eq!(net.groups_opened(ENH).len(), 27, "{mode:?}");
        }
        // PUBLISH_DONE after everything, with the stream counts.
        assert!(
            net.done
                .contains(&(BASE, publish_done_code::TRACK_ENDED, 3)),
            "{mode:?} {:?}",
            net.done
        );
        if mode.splits_layers() {
            assert!(
                net.done
                    .contains(&(ENH, publish_done_code::TRACK_ENDED, 27))
            );
        }
        assert_eq!(net.sched.subscriptions(), 0);
        assert!(net.streams.values().all(|s| s.reset.is_none()), "{mode:?}");
        assert_eq!(net.closed, None);
    }
}

#[test]
fn payloads_are_written_from_the_producers_buffers_without_copies() {
    let mut net = Net::new(PublishLimits::default(), 10_000);
    net.serve(BASE, base_delivery(DeliveryMode::Baseline, None));
    let header = Bytes::from_static(b"frame-header");
    let au = frame_bytes(1, 5_000);
    let info = group(7, base_priority(DeliveryMode::Baseline, 7), net.now);
    let payload = Payload::from_parts(vec![header.clone(), au.clone()]);
    net.sched.object(BASE, info, 0, payload, net.now, net.now);
    let key = StreamKey {
        request_id: BASE,
        group: 7,
    };
    assert!(matches!(
        net.sched.next_transmit(),
        Some(Transmit::Open { key: k, .. }) if k == key
    ));
    net.sched.opened(key, net.now);
    let Some(Transmit::Write { chunks, .. }) = net.sched.next_transmit() else {
        panic!("a write follows the open");
    };
    // Stream and object headers, then the producer's own buffers.
    assert_eq!(chunks.len(), 3);
    assert_eq!(chunks[1].as_ptr(), header.as_ptr());
    assert_eq!(chunks[2].as_ptr(), au.as_ptr());
    // A partial write resumes inside the payload, still in the producer's buffer.
    let taken = chunks[0].len() + header.len() + 100;
    net.sched.wrote(key, taken, net.now);
    let Some(Transmit::Write { chunks, .. }) = net.sched.next_transmit() else {
        panic!("the rest of the object");
    };
    assert_eq!(chunks.len(), 1);
    assert_eq!(chunks[0].as_ptr(), au[100..].as_ptr());
}

#[test]
fn partial_writes_resume_where_quic_stopped() {
    // Seven bytes per millisecond: every header and payload is cut somewhere.
    let mut net = Net::new(PublishLimits::default(), 7);
    net.serve(BASE, base_delivery(DeliveryMode::Baseline, None));
    let info = group(3, base_priority(DeliveryMode::Baseline, 3), net.now);
    for (id, len) in [(0, 20), (1, 3), (2, 41)] {
        let payload = Payload::from_parts(vec![
            frame_bytes(id, len / 2),
            frame_bytes(id + 9, len - len / 2),
        ]);
        net.sched.object(BASE, info, id, payload, net.now, net.now);
    }
    net.sched.group_closed(BASE, 3, net.now);
    net.run_for(100 * MS);
    let objects = net.received(BASE, 3).expect("sent");
    assert_eq!(objects.len(), 3);
    assert_eq!(objects[2].id, 2);
    assert_eq!(
        objects[2].payload,
        [frame_bytes(2, 20).to_vec(), frame_bytes(11, 21).to_vec()].concat()
    );
    assert!(
        net.streams[&StreamKey {
            request_id: BASE,
            group: 3
        }]
            .finished
    );
}

#[test]
fn an_object_is_reported_handed_off_when_quic_took_its_last_byte() {
    let handoffs = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = handoffs.clone();
    let hook: crate::track::HandoffHook = Arc::new(move |track: &str, h: Handoff| {
        seen.lock().unwrap().push((track.to_owned(), h));
    });
    // Seven bytes per millisecond: objects are taken over several writes.
    let mut net = Net::new(PublishLimits::default(), 7);
    net.sched.subscribe(
        NewSubscription {
            request_id: BASE,
            alias: BASE + 100,
            delivery: base_delivery(DeliveryMode::Baseline, None),
            counters: Arc::new(TrackCounters {
                handoff: Some(crate::track::HandoffReport::new("video", hook)),
                ..TrackCounters::default()
            }),
        },
        net.now,
    );
    let written = net.now;
    let info = group(3, base_priority(DeliveryMode::Baseline, 3), written);
    for (id, len) in [(0, 20), (1, 3), (2, 41)] {
        net.sched.object(
            BASE,
            info,
            id,
            Payload::from(frame_bytes(id, len)),
            written,
            written,
        );
    }
    net.sched.group_closed(BASE, 3, net.now);
    // When each object was whole on the stream, as the subscriber decodes it.
    let mut whole_at = Vec::new();
    for _ in 0..100 {
        net.tick();
        let whole = net.received(BASE, 3).map_or(0, |o| o.len());
        while whole_at.len() < whole {
            whole_at.push(net.now);
        }
    }
    let handoffs = handoffs.lock().unwrap();
    let expected: Vec<_> = whole_at
        .iter()
        .enumerate()
        .map(|(id, &taken)| {
            let h = Handoff {
                group: 3,
                object: id as u64,
                written,
                taken,
            };
            ("video".to_owned(), h)
        })
        .collect();
    assert_eq!(expected.len(), 3);
    assert_eq!(*handoffs, expected);
    assert!(
        expected[2].1.taken - written >= 10 * MS,
        "taken over several writes"
    );
}

#[test]
fn baseline_sends_older_groups_first_and_keeps_order_below_the_budget() {
    // A link at two thirds of the stream rate: the backlog grows but stays in order.
    let mut net = Net::new(PublishLimits::default(), STREAM_BYTES_PER_MS * 2 / 3);
    let c = serve_mode(&mut net, DeliveryMode::Baseline, None);
    let mut p = Producer::new(DeliveryMode::Baseline);
    for _ in 0..4 * GOP {
        p.next(&mut net);
    }
    let opened = net.groups_opened(BASE);
    assert!(opened.windows(2).all(|w| w[0] < w[1]), "{opened:?}");
    // Nothing was dropped: the backlog (2.5 s of media at most) stays under 3 s.
    assert_eq!(count(&c.objects_dropped), 0);
    for g in opened.iter().take(opened.len() - 1) {
        let ids: Vec<u64> = net
            .received(BASE, *g)
            .unwrap()
            .iter()
            .map(|o| o.id)
            .collect();
        assert_eq!(ids, (0..GOP).collect::<Vec<_>>(), "group {g}");
    }
}

#[test]
fn a_stalled_subscriber_costs_bounded_memory_in_every_mode_then_is_closed() {
    for mode in MODES {
        let limits = PublishLimits {
            max_backlog: Duration::from_secs(2),
            stall_timeout: Duration::from_secs(8),
        };
        let mut net = Net::new(limits, 10_000);
        let c = serve_mode(&mut net, mode, None);
        let mut p = Producer::new(mode);
        for _ in 0..GOP {
            p.next(&mut net);
        }
        // The peer stops reading: no write is accepted from now on.
        net.frozen = true;
        let frozen_at = net.now;
        while net.closed.is_none() && net.now < frozen_at + Duration::from_secs(20) {
            p.next(&mut net);
        }
        // At most the budget's worth of media (2 s ~ 150 kB) plus one GoP is held.
        let bound = STREAM_BYTES_PER_MS * 2_000 + KEY_BYTES + GOP as usize * REF_BYTES;
        assert!(
            net.peak_backlog <= bound,
            "{mode:?}: {} > {bound}",
            net.peak_backlog
        );
        let waited = net.now - frozen_at;
        assert!(
            net.closed
                .as_deref()
                .is_some_and(|r| r.contains("no progress")),
            "{mode:?}: not closed after {waited:?}"
        );
        assert!(
            waited >= Duration::from_secs(8) && waited < Duration::from_secs(9),
            "{mode:?}: {waited:?}"
        );
        let dropped = count(&c.groups_over_budget) + count(&c.groups_superseded);
        assert!(dropped > 0, "{mode:?}");
    }
}

#[test]
fn max_backlog_bounds_baseline_but_keeps_it_in_order() {
    // A link at half the stream rate for 10 s: the budget drops whole old groups.
    let limits = PublishLimits {
        max_backlog: Duration::from_secs(2),
        ..PublishLimits::default()
    };
    let mut net = Net::new(limits, STREAM_BYTES_PER_MS / 2);
    let c = serve_mode(&mut net, DeliveryMode::Baseline, None);
    let mut p = Producer::new(DeliveryMode::Baseline);
    for _ in 0..10 * FPS {
        p.next(&mut net);
    }
    assert!(count(&c.groups_over_budget) > 0);
    let opened = net.groups_opened(BASE);
    assert!(opened.windows(2).all(|w| w[0] < w[1]), "{opened:?}");
    // Whole GoPs are skipped rather than every GoP cut short: most started groups finish.
    let cut = net.streams.values().filter(|s| s.reset.is_some()).count();
    let announced = (0..p.gop())
        .filter(|&g| net.received(BASE, g).is_some_and(|o| o.is_empty()))
        .count();
    eprintln!(
        "{} groups started, {cut} cut, {announced} dropped whole",
        opened.len()
    );
    assert!(
        cut * 4 <= opened.len(),
        "{cut} of {} started groups cut",
        opened.len()
    );
    // A group dropped before it started is still announced, as a stream without objects,
    // so the in-order receiver does not wait for it.
    assert!(announced > 0);
    assert_eq!(announced + cut, count(&c.groups_over_budget) as usize);
    // Every other group that was not reset arrived complete and in order.
    for key in net.streams.keys().filter(|k| k.request_id == BASE) {
        let s = &net.streams[key];
        let ids: Vec<u64> = net
            .received(BASE, key.group)
            .unwrap_or_default()
            .iter()
            .map(|o| o.id)
            .collect();
        if s.finished && !ids.is_empty() {
            assert_eq!(ids, (0..GOP).collect::<Vec<_>>());
        } else if let Some(code) = s.reset {
            assert_eq!(code, reset_code::DELIVERY_TIMEOUT);
        }
    }
    assert!(
        net.peak_backlog <= STREAM_BYTES_PER_MS * 2_000 + KEY_BYTES + 2 * GOP as usize * REF_BYTES
    );
}

#[test]
fn skip_gops_jumps_to_the_newest_group_on_a_slow_link() {
    let mut net = Net::new(PublishLimits::default(), STREAM_BYTES_PER_MS / 2);
    let c = serve_mode(&mut net, DeliveryMode::SkipGops, None);
    let mut p = Producer::new(DeliveryMode::SkipGops);
    for _ in 0..8 * GOP {
        p.next(&mut net);
    }
    assert!(count(&c.groups_superseded) > 0);
    // Groups are started newest first: never an older group after a newer one.
    let opened = net.groups_opened(BASE);
    assert!(opened.windows(2).all(|w| w[0] < w[1]), "{opened:?}");
    // Frames were shed: the link carries half the stream.
    assert!(count(&c.objects_dropped) > 0);
    // A superseded stream is reset with CANCELLED; every started group delivered its
    // keyframe first.
    for &g in &opened {
        if let Some(code) = net.streams[&StreamKey {
            request_id: BASE,
            group: g,
        }]
            .reset
        {
            assert_eq!(code, reset_code::CANCELLED);
        }
        let objects = net.received(BASE, g).unwrap_or_default();
        assert!(objects.first().is_none_or(|o| o.id == 0));
    }
    // The newest group is the one being sent at the end: latency stays bounded.
    let last = *opened.last().unwrap();
    assert!(
        last + 2 >= p.gop(),
        "last started group {last} of {}",
        p.gop()
    );
}

#[test]
fn a_group_in_progress_sends_its_keyframe_before_yielding() {
    // The source thesis's starvation case: a keyframe takes longer than a GoP to send, so a
    // newer group always exists before the older keyframe is out. It must still go out:
    // one picture per round beats none.
    let mut net = Net::new(PublishLimits::default(), 15);
    net.sched.path_sample(0, 10 * MS, net.now);
    let c = serve_mode(&mut net, DeliveryMode::SkipGops, None);
    let mut p = Producer::new(DeliveryMode::SkipGops);
    p.key_bytes = 15 * 700; // 700 ms at 15 bytes/ms, more than the 625 ms GoP
    for i in 0..10 * GOP {
        p.next(&mut net);
        if i % 10 == 0 {
            let sent = count(&c.bytes_sent);
            net.sched.path_sample(sent, 10 * MS, net.now);
        }
    }
    let keyframes: Vec<u64> = net
        .groups_opened(BASE)
        .into_iter()
        .filter(|&g| {
            net.received(BASE, g).is_some_and(|o| {
                o.first()
                    .is_some_and(|o| o.id == 0 && o.payload.len() == p.key_bytes)
            })
        })
        .collect();
    assert!(
        keyframes.len() >= 4,
        "complete keyframes of groups {keyframes:?}"
    );
}

#[test]
fn quic_sends_an_older_groups_tail_before_a_newer_group_in_every_mode() {
    // QUIC holds up to a round trip of data and sends it by stream priority: the tail of a
    // GoP handed over before the next keyframe must not wait behind the newer group.
    for mode in MODES {
        let mut net = Net::new(PublishLimits::default(), 1_000);
        net.serve(BASE, base_delivery(mode, None));
        let mut opened = Vec::new();
        for id in 0..3 {
            let info = group(id, base_priority(mode, id), net.now);
            let payload = Payload::from_parts(vec![frame_bytes(id, 100)]);
            net.sched.object(BASE, info, 0, payload, net.now, net.now);
            while let Some(transmit) = net.sched.next_transmit() {
                match transmit {
                    Transmit::Open { key, priority } => {
                        opened.push((key.group, priority));
                        net.sched.opened(key, net.now);
                    }
                    Transmit::Write { key, chunks } => {
                        let len = chunks.iter().map(|c| c.len()).sum();
                        net.sched.wrote(key, len, net.now);
                    }
                }
            }
        }
        let groups: Vec<u64> = opened.iter().map(|&(g, _)| g).collect();
        assert_eq!(groups, [0, 1, 2], "{mode:?}");
        assert!(
            opened.windows(2).all(|w| w[0].1 > w[1].1),
            "{mode:?}: quinn priorities (group, priority) {opened:?}"
        );
    }
}

#[test]
fn enhancement_frames_go_below_the_base_layer_and_expire() {
    for mode in [DeliveryMode::DeprioritizeB, DeliveryMode::Combined] {
        // The base layer needs ~43 bytes/ms, everything ~58: enough for the base layer and
        // some of the enhancement frames.
        let mut net = Net::new(PublishLimits::default(), 50);
        serve_mode(&mut net, mode, None);
        let enh = net.sched.subs[&ENH].counters.clone();
        let mut p = Producer::new(mode);
        for _ in 0..8 * GOP {
            p.next(&mut net);
        }
        // No base frame waited for an enhancement frame: every base group arrived whole
        // except, in combined, a group superseded at the very end.
        let complete = (0..7)
            .filter(|&g| net.received(BASE, g).is_some_and(|o| o.len() == 6))
            .count();
        assert!(complete >= 6, "{mode:?}: {complete} complete base groups");
        // Enhancement frames were partly shed, by expiry after 500 ms.
        let sent = count(&enh.objects_sent);
        let expired = count(&enh.groups_expired);
        assert!(
            sent > 0 && expired > 0,
            "{mode:?}: sent {sent} expired {expired}"
        );
        for (key, s) in net.streams.iter().filter(|(k, _)| k.request_id == ENH) {
            assert!(
                s.reset.is_none_or(|c| c == reset_code::DELIVERY_TIMEOUT),
                "{key:?}"
            );
        }
    }
}

#[test]
fn the_delivery_timeout_drops_data_not_handed_over_in_time() {
    let mut net = Net::new(PublishLimits::default(), STREAM_BYTES_PER_MS / 2);
    let c = serve_mode(&mut net, DeliveryMode::Baseline, Some(300 * MS));
    let mut p = Producer::new(DeliveryMode::Baseline);
    for _ in 0..6 * GOP {
        p.next(&mut net);
    }
    assert!(count(&c.groups_expired) > 0);
    assert_eq!(
        count(&c.groups_over_budget),
        0,
        "the shorter limit names the reason"
    );
    // Nothing handed over was older than the timeout plus the time to write it.
    assert!(net.peak_backlog < STREAM_BYTES_PER_MS * 300 + KEY_BYTES + GOP as usize * REF_BYTES);
}

#[test]
fn poll_timeout_names_the_moment_a_policy_fires() {
    let limits = PublishLimits {
        max_backlog: Duration::from_millis(400),
        stall_timeout: Duration::from_secs(60),
    };
    let mut net = Net::new(limits, 0);
    net.frozen = true;
    let c = net.serve(BASE, base_delivery(DeliveryMode::Baseline, None));
    let t0 = net.now;
    let info = group(1, base_priority(DeliveryMode::Baseline, 1), t0);
    net.sched
        .object(BASE, info, 0, Payload::from(frame_bytes(0, 10)), t0, t0);
    assert_eq!(
        net.sched.poll_timeout(),
        Some(t0 + Duration::from_millis(400))
    );
    net.sched.handle_timeout(t0 + Duration::from_millis(399));
    assert_eq!(count(&c.groups_over_budget), 0);
    net.sched.handle_timeout(t0 + Duration::from_millis(400));
    assert_eq!(count(&c.groups_over_budget), 1);
    // Only the stall clock is left: the dropped group's announcement waits to go out.
    assert_eq!(net.sched.poll_timeout(), Some(t0 + Duration::from_secs(60)));
}

#[test]
fn late_objects_of_a_dropped_group_are_not_sent_as_a_new_stream() {
    let limits = PublishLimits {
        max_backlog: Duration::from_millis(100),
        stall_timeout: Duration::from_secs(60),
    };
    let mut net = Net::new(limits, 0);
    net.frozen = true;
    let c = net.serve(BASE, base_delivery(DeliveryMode::Baseline, None));
    let info = group(4, base_priority(DeliveryMode::Baseline, 4), net.now);
    net.sched.object(
        BASE,
        info,
        0,
        Payload::from(frame_bytes(0, 10)),
        net.now,
        net.now,
    );
    net.run_for(150 * MS);
    assert_eq!(count(&c.groups_over_budget), 1);
    net.frozen = false;
    net.bytes_per_ms = 1000;
    net.sched.object(
        BASE,
        info,
        1,
        Payload::from(frame_bytes(1, 10)),
        net.now,
        net.now,
    );
    net.run_for(10 * MS);
    // One stream for the group: its announcement as dropped, without objects.
    let key = StreamKey {
        request_id: BASE,
        group: 4,
    };
    assert_eq!(net.open_order, [key]);
    assert_eq!(net.received(BASE, 4), Some(Vec::new()));
    assert!(net.streams[&key].finished);
    assert_eq!(count(&c.objects_dropped), 2);
}

#[test]
fn unsubscribe_resets_streams_then_sends_publish_done() {
    let mut net = Net::new(PublishLimits::default(), 20);
    serve_mode(&mut net, DeliveryMode::Baseline, None);
    let mut p = Producer::new(DeliveryMode::Baseline);
    for _ in 0..GOP {
        p.next(&mut net);
    }
    net.sched.unsubscribe(BASE, net.now);
    net.actions();
    let s = &net.streams[&StreamKey {
        request_id: BASE,
        group: 0,
    }];
    assert_eq!(s.reset, Some(reset_code::CANCELLED));
    assert_eq!(net.done, [(BASE, publish_done_code::SUBSCRIPTION_ENDED, 1)]);
    assert!(!net.sched.serves(BASE));
    // Later objects of the track are ignored.
    p.next(&mut net);
    assert_eq!(net.sched.next_transmit(), None);
}

#[test]
fn a_failed_stream_is_given_up_and_the_others_continue() {
    let mut net = Net::new(PublishLimits::default(), 10_000);
    serve_mode(&mut net, DeliveryMode::DeprioritizeB, None);
    let mut p = Producer::new(DeliveryMode::DeprioritizeB);
    p.next(&mut net);
    p.next(&mut net);
    // The peer stopped the base group's stream (STOP_SENDING).
    let key = StreamKey {
        request_id: BASE,
        group: 0,
    };
    net.sched.stream_failed(key, net.now);
    net.actions();
    assert_eq!(net.streams[&key].reset, Some(reset_code::CANCELLED));
    for _ in 0..GOP {
        p.next(&mut net);
    }
    // Its late objects are dropped; the next group and enhancement frames flow.
    assert!(net.received(BASE, 1).is_some());
    assert!(net.groups_opened(ENH).len() > 5);
}

#[test]
fn the_send_window_follows_the_measured_rate() {
    let mut net = Net::new(PublishLimits::default(), 0);
    net.actions();
    assert_eq!(net.windows, [INITIAL_SEND_WINDOW]);
    let t0 = net.now;
    // 1 MB/s with a 50 ms minimum round trip: 2 × rate × (RTT + 50 ms slack) = 200 kB.
    for i in 0..=10u64 {
        net.sched
            .path_sample(i * 100_000, 50 * MS, t0 + (i as u32) * 100 * MS);
    }
    net.actions();
    let last = *net.windows.last().unwrap();
    assert!((195_000..=205_000).contains(&last), "{last}");
    // A stalled path shrinks it to the floor, never to zero.
    for i in 11..=30u64 {
        net.sched
            .path_sample(1_000_000, 50 * MS, t0 + (i as u32) * 100 * MS);
    }
    net.actions();
    assert_eq!(*net.windows.last().unwrap(), MIN_SEND_WINDOW);
}

#[test]
fn the_budget_counts_from_when_a_subscriber_got_the_data() {
    // The current catalog was written long before this subscriber joined: it is still
    // delivered, the budget starts when it was queued for the subscriber.
    let mut net = Net::new(PublishLimits::default(), 1_000);
    let c = net.serve(BASE, TrackDelivery::default());
    let written = net.now;
    net.now += Duration::from_secs(60);
    let info = GroupInfo {
        id: 0,
        priority: Priority {
            class: 0,
            rank: 0,
            publisher: 0,
        },
        created: written,
    };
    let catalog = Payload::from(Bytes::from_static(b"{\"version\":1}"));
    net.sched.object(BASE, info, 0, catalog, written, net.now);
    net.run_for(5 * MS);
    assert_eq!(count(&c.objects_sent), 1);
    assert_eq!(
        net.received(BASE, 0).unwrap()[0].payload,
        b"{\"version\":1}"
    );
    // A delivery timeout still judges freshness from when it was written.
    let mut net = Net::new(PublishLimits::default(), 1_000);
    let c = net.serve(BASE, base_delivery(DeliveryMode::Baseline, Some(500 * MS)));
    net.now += Duration::from_secs(1);
    let info = group(0, base_priority(DeliveryMode::Baseline, 0), written);
    net.sched.object(
        BASE,
        info,
        0,
        Payload::from(frame_bytes(0, 10)),
        written,
        net.now,
    );
    net.run_for(5 * MS);
    assert_eq!((count(&c.objects_sent), count(&c.groups_expired)), (0, 1));
}

/// The send queue over the last second of a stream played through `bytes_per_ms` in
/// baseline (nothing skipped), sampled every 50 ms.
fn send_queues(bytes_per_ms: usize) -> Vec<SendQueue> {
    let mut net = Net::new(PublishLimits::default(), bytes_per_ms);
    serve_mode(&mut net, DeliveryMode::Baseline, None);
    let mut p = Producer::new(DeliveryMode::Baseline);
    let mut samples = Vec::new();
    for n in 0..4 * GOP {
        p.next(&mut net);
        if n >= 3 * GOP {
            samples.push(net.sched.send_queue(net.now));
        }
    }
    samples
}

#[test]
fn the_send_queue_stays_short_with_room_and_grows_on_a_link_below_the_stream() {
    let roomy = send_queues(2 * STREAM_BYTES_PER_MS);
    assert!(
        roomy.iter().all(|q| q.trough < 50 * MS),
        "with room: {roomy:?}"
    );
    let tight = send_queues(STREAM_BYTES_PER_MS * 2 / 3);
    let last = tight.last().unwrap();
    assert!(last.trough > 300 * MS, "at two thirds: {tight:?}");
    assert!(last.standing >= last.trough);
    // It only grows while the link stays below the stream.
    assert!(tight.first().unwrap().trough < last.trough, "{tight:?}");
}
