//! Peers that misbehave on purpose, on both sides of the network edge: each gets a closed
//! session, a refusal or a logged drop, and everyone else keeps playing.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use gst::prelude::*;
use moq_media::catalog::{self, Catalog, TrackEntry, TrackKind};
use moq_media::header::{FrameHeader, HEADER_VERSION};
use moq_session::tls::ServerIdentity;
use moq_session::{
    Broadcast, GroupWriter, Priority, Server, ServerLimits, TrackDelivery, TrackProducer,
    parse_namespace,
};
use moq_testkit::peer::RawPeer;
use moq_wire::message::{ControlMessage, DataStreamHeader, session_error};
use moq_wire::varint;

/// The application error code the connection was closed with, waiting up to `timeout`.
async fn close_code(peer: &RawPeer, timeout: Duration) -> Option<(u64, String)> {
    match tokio::time::timeout(timeout, peer.conn.closed()).await {
        Ok(quinn::ConnectionError::ApplicationClosed(close)) => Some((
            close.error_code.into_inner(),
            String::from_utf8_lossy(&close.reason).into_owned(),
        )),
        Ok(other) => Some((u64::MAX, other.to_string())),
        Err(_) => None,
    }
}

/// A healthy viewer keeps getting frames: `more` within `within`.
fn keeps_playing(receiver: &Receiver, more: usize, within: Duration) {
    let now = receiver.frames().len();
    receiver
        .wait_frames(now + more, within)
        .expect("the healthy subscriber keeps playing");
}

#[test]
fn a_peer_that_never_reads_its_control_stream_is_closed_not_buffered_for() {
    let sender = Sender::start("");
    let receiver = Receiver::start(&format!("url={} tls-insecure=true", sender.url()));
    receiver.wait_frames(24, WAIT).expect("plays");
    let rt = runtime();
    let (sent, closed) = rt.block_on(async {
        let mut peer = RawPeer::connect(&sender.url()).await.expect("connects");
        peer.setup("/live", 64).await.expect("SETUP");
        // Every request is refused at once (no such track), so each completes and frees
        // its request ID; the replies pile up on a control stream nobody reads.
        let mut sent = 0u64;
        let deadline = Instant::now() + Duration::from_secs(60);
        while peer.close_reason().is_none() && Instant::now() < deadline {
            if peer
                .subscribe(2 * sent, &live(), "no-such-track")
                .await
                .is_err()
            {
                break;
            }
            sent += 1;
        }
        (sent, close_code(&peer, Duration::from_secs(10)).await)
    });
    eprintln!("closed after {sent} unread requests: {closed:?}");
    let (code, reason) = closed.expect("the session was closed");
    assert_eq!(code, session_error::CONTROL_MESSAGE_TIMEOUT, "{reason}");
    assert!(reason.contains("does not read"), "{reason}");
    keeps_playing(&receiver, 24, WAIT);
}

/// Counts the keyframe requests moqsink sends upstream.
fn count_keyframe_requests(sink: &gst::Element) -> Arc<AtomicUsize> {
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    sink.static_pad("video_0").expect("video pad").add_probe(
        gst::PadProbeType::EVENT_UPSTREAM,
        move |_, info| {
            if let Some(event) = info.event()
                && event
                    .structure()
                    .is_some_and(|s| s.name() == "GstForceKeyUnit")
            {
                seen.fetch_add(1, Ordering::Relaxed);
            }
            gst::PadProbeReturn::Ok
        },
    );
    count
}

#[test]
fn a_thousand_subscribes_on_one_connection_get_one_subscription_and_one_keyframe() {
    let sender = Sender::start("");
    let requests = count_keyframe_requests(&sender.sink);
    let rt = runtime();
    let (ok, refused, streams) = rt.block_on(async {
        let mut peer = RawPeer::connect(&sender.url()).await.expect("connects");
        peer.setup("/live", 4096).await.expect("SETUP");
        for i in 0..1000u64 {
            peer.subscribe(2 * i, &live(), "video").await.expect("sent");
        }
        let (mut ok, mut refused) = (0, 0);
        while ok + refused < 1000 {
            match tokio::time::timeout(WAIT, peer.read()).await {
                Ok(Ok(ControlMessage::SubscribeOk(_))) => ok += 1,
                Ok(Ok(ControlMessage::SubscribeError(e))) => {
                    assert!(e.reason.contains("already subscribed"), "{}", e.reason);
                    refused += 1;
                }
                Ok(Ok(_)) => {}
                other => panic!("after {ok} OK and {refused} refused: {other:?}"),
            }
        }
        // Only the one subscription's streams come: every one names the same track alias.
        let mut aliases = std::collections::BTreeSet::new();
        let mut streams = 0;
        let until = Instant::now() + Duration::from_secs(3);
        while let Ok(Ok(mut stream)) =
            tokio::time::timeout_at(until.into(), peer.accept_stream()).await
        {
            let data = stream.read_to_end(1 << 20).await.unwrap_or_default();
            if let Ok((DataStreamHeader::Subgroup(h), _)) = DataStreamHeader::decode(&data) {
                aliases.insert(h.track_alias);
            }
            streams += 1;
        }
        (ok, refused, (streams, aliases))
    });
    let (streams, aliases) = streams;
    let keyframes = requests.load(Ordering::Relaxed);
    eprintln!(
        "{ok} subscribed, {refused} refused, {streams} streams of aliases {aliases:?} in 3 s, {keyframes} keyframe requests"
    );
    assert_eq!((ok, refused), (1, 999));
    assert!(streams > 0);
    assert_eq!(aliases.len(), 1, "streams of one subscription only");
    assert!(
        keyframes <= 1,
        "{keyframes} keyframe requests for one subscription"
    );
}

#[test]
fn subscriber_keyframe_requests_reach_the_encoder_at_most_once_per_gop() {
    let sender = Sender::start("");
    let requests = count_keyframe_requests(&sender.sink);
    let rt = runtime();
    let started = Instant::now();
    rt.block_on(async {
        // Twenty viewers joining within a second.
        let mut peers = Vec::new();
        for _ in 0..20 {
            let mut peer = RawPeer::connect(&sender.url()).await.expect("connects");
            peer.setup("/live", 64).await.expect("SETUP");
            peer.subscribe(0, &live(), "video").await.expect("sent");
            peers.push(peer);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    });
    let elapsed = started.elapsed().as_secs_f64();
    let keyframes = requests.load(Ordering::Relaxed);
    eprintln!("20 subscriptions in {elapsed:.2} s: {keyframes} keyframe requests");
    // One per GoP as measured (0.625 s), and at least the first one.
    let gops = (elapsed / 0.625).ceil() as usize;
    assert!(
        keyframes >= 1 && keyframes <= gops + 1,
        "{keyframes} requests in {gops} GoPs"
    );
}

#[test]
fn a_subscriber_that_never_reads_is_disconnected_and_others_keep_playing() {
    let sender = Sender::start("subscriber-stall-timeout=3000");
    let receiver = Receiver::start(&format!("url={} tls-insecure=true", sender.url()));
    receiver.wait_frames(24, WAIT).expect("plays");
    let before = (receiver.frames().len(), sender.sent().len());
    let rt = runtime();
    let (closed, took) = rt.block_on(async {
        let mut peer = RawPeer::connect(&sender.url()).await.expect("connects");
        peer.setup("/live", 64).await.expect("SETUP");
        peer.subscribe(0, &live(), "video").await.expect("sent");
        let started = Instant::now();
        // Never accepts or reads a data stream: no flow-control credit once the window
        // (256 kB, ~3 s of this stream) is full, except what streams the publisher resets
        // give back, so the stall shows after a while rather than at once.
        let closed = close_code(&peer, Duration::from_secs(60)).await;
        (closed, started.elapsed())
    });
    eprintln!("stalled subscriber closed after {took:?}: {closed:?}");
    let (code, reason) = closed.expect("the stalled subscriber was disconnected");
    assert_eq!(code, session_error::INTERNAL_ERROR);
    assert!(reason.contains("no progress"), "{reason}");
    let received = receiver.frames().len() - before.0;
    let sent = sender.sent().len() - before.1;
    eprintln!("healthy subscriber meanwhile: {received} of {sent} frames");
    assert!(
        received * 100 >= sent * 95,
        "healthy subscriber got {received} of {sent}"
    );
}

#[test]
fn malformed_control_messages_close_only_that_session() {
    let sender = Sender::start("");
    let receiver = Receiver::start(&format!("url={} tls-insecure=true", sender.url()));
    receiver.wait_frames(24, WAIT).expect("plays");
    let rt = runtime();
    let subscribe = |request_id| {
        let mut bytes = Vec::new();
        ControlMessage::Subscribe(moq_wire::message::Subscribe {
            request_id,
            namespace: live(),
            track_name: b"video".to_vec(),
            subscriber_priority: 1,
            group_order: moq_wire::message::GroupOrder::Publisher,
            forward: true,
            filter: moq_wire::message::FilterType::LargestObject,
            params: moq_wire::message::Parameters::default(),
            fill: None,
        })
        .encode(&mut bytes)
        .unwrap();
        bytes
    };
    let cases: Vec<(&str, bool, Vec<u8>, u64)> = vec![
        // (what, run SETUP first, bytes, expected close code)
        (
            "an unknown message type",
            true,
            vec![0x3f, 0x00, 0x00],
            session_error::PROTOCOL_VIOLATION,
        ),
        (
            "a SUBSCRIBE cut short by its length",
            true,
            vec![0x03, 0x00, 0x01, 0x00],
            session_error::PROTOCOL_VIOLATION,
        ),
        (
            "SUBSCRIBE before SETUP",
            false,
            subscribe(0),
            session_error::PROTOCOL_VIOLATION,
        ),
        (
            "a request ID out of order",
            true,
            subscribe(6),
            session_error::INVALID_REQUEST_ID,
        ),
        (
            "a request ID of the wrong parity",
            true,
            subscribe(1),
            session_error::INVALID_REQUEST_ID,
        ),
    ];
    for (what, setup, bytes, expected) in cases {
        let closed = rt.block_on(async {
            let mut peer = RawPeer::connect(&sender.url()).await.expect("connects");
            if setup {
                peer.setup("/live", 64).await.expect("SETUP");
            }
            peer.send_bytes(&bytes).await.expect("sent");
            close_code(&peer, Duration::from_secs(15)).await
        });
        let (code, reason) = closed.unwrap_or_else(|| panic!("{what}: the session stayed open"));
        eprintln!("{what}: closed with {code:#x} {reason:?}");
        assert_eq!(code, expected, "{what}: {reason}");
    }
    // A second SETUP, and a control stream finished by the peer.
    let closed = rt.block_on(async {
        let mut peer = RawPeer::connect(&sender.url()).await.expect("connects");
        peer.setup("/live", 64).await.expect("SETUP");
        let again = ControlMessage::ClientSetup(moq_wire::message::ClientSetup {
            versions: vec![moq_wire::draft14::VERSION],
            params: moq_wire::message::Parameters::default(),
        });
        peer.send(&again).await.expect("sent");
        close_code(&peer, Duration::from_secs(15)).await
    });
    assert_eq!(closed.map(|c| c.0), Some(session_error::PROTOCOL_VIOLATION));
    keeps_playing(&receiver, 24, WAIT);
}

#[test]
fn sessions_beyond_max_subscribers_are_refused() {
    let sender = Sender::start("max-subscribers=2");
    let first = Receiver::start(&format!("url={} tls-insecure=true", sender.url()));
    let second = Receiver::start(&format!("url={} tls-insecure=true", sender.url()));
    first.wait_frames(10, WAIT).expect("first plays");
    second.wait_frames(10, WAIT).expect("second plays");
    let rt = runtime();
    let refused = rt.block_on(async {
        let started = Instant::now();
        let result = RawPeer::connect(&sender.url()).await;
        (result.err(), started.elapsed())
    });
    eprintln!("third session: {refused:?}");
    let err = refused.0.expect("the third session is refused");
    assert!(err.to_lowercase().contains("refused"), "{err}");
    assert!(refused.1 < Duration::from_secs(5));
    drop(second);
    // Room again once one leaves (the idle timeout ends its session at the latest).
    let third = Receiver::start(&format!(
        "url={} tls-insecure=true media-timeout=20000",
        sender.url()
    ));
    third.wait_frames(10, WAIT).expect("a later viewer plays");
    keeps_playing(&first, 24, WAIT);
}

/// A publisher we control byte by byte: a catalog and video frames with payloads of our
/// choosing, served like moqsink serves them.
struct HostilePublisher {
    _server: Server,
    port: u16,
    broadcast: Broadcast,
    _rt: tokio::runtime::Runtime,
}

impl HostilePublisher {
    fn start() -> HostilePublisher {
        let rt = runtime();
        let broadcast = Broadcast::new(parse_namespace("live").expect("namespace"));
        let identity = ServerIdentity::self_signed(&["localhost".into()]).expect("identity");
        let (events, _) = tokio::sync::mpsc::channel(16);
        let server = rt
            .block_on(async {
                Server::bind(
                    "127.0.0.1:0".parse().unwrap(),
                    &identity,
                    broadcast.clone(),
                    ServerLimits::default(),
                    events,
                )
            })
            .expect("binds");
        let port = server.local_addr().port();
        HostilePublisher {
            _server: server,
            port,
            broadcast,
            _rt: rt,
        }
    }

    fn url(&self) -> String {
        format!("moqt://127.0.0.1:{}/live", self.port)
    }

    /// Publishes a catalog with this frame rate and creates the (empty) video track.
    fn with_catalog(&self, framerate: [u32; 2]) -> (TrackProducer, TrackProducer) {
        self.with_tracks(framerate, Vec::new())
    }

    /// Like [`with_catalog`](Self::with_catalog), with more tracks listed in the catalog.
    fn with_tracks(
        &self,
        framerate: [u32; 2],
        more: Vec<TrackEntry>,
    ) -> (TrackProducer, TrackProducer) {
        let catalog = self
            .broadcast
            .create_track(catalog::CATALOG_TRACK, TrackDelivery::default());
        catalog
            .create_group(0, PRIORITY)
            .write(Bytes::from(catalog_json(framerate, more)));
        let video = self
            .broadcast
            .create_track(catalog::BASE_TRACK, TrackDelivery::default());
        (catalog, video)
    }
}

fn catalog_json(framerate: [u32; 2], more: Vec<TrackEntry>) -> Vec<u8> {
    let mut tracks = vec![TrackEntry {
        codec: Some("avc1.64000d".into()),
        width: Some(320),
        height: Some(240),
        framerate: Some(framerate),
        avcc: Some("01".into()),
        ..TrackEntry::new(catalog::BASE_TRACK, TrackKind::Video)
    }];
    tracks.extend(more);
    Catalog::native("skip-gops", 1, tracks).to_json()
}

const PRIORITY: Priority = Priority {
    class: 1,
    rank: 0,
    publisher: 64,
};

/// A frame header as raw varints, whatever their range.
fn raw_header(kind_flags: u8, fields: [u64; 7]) -> Vec<u8> {
    let mut out = vec![HEADER_VERSION, kind_flags];
    for v in fields {
        varint::encode(v, &mut out).unwrap();
    }
    out
}

#[test]
fn out_of_range_frame_headers_from_a_publisher_are_dropped_not_a_crash() {
    let aus = encode_aus(45, TEST_CAPS);
    let publisher = HostilePublisher::start();
    let (catalog, video) = publisher.with_catalog([24, 1]);
    let receiver = Receiver::start(&format!("url={} tls-insecure=true", publisher.url()));
    wait_until("moqsrc subscribed", || video.stats().sessions > 0);
    let huge = varint::MAX_VARINT;
    let mut group = None;
    let mut good = 0;
    for (i, au) in aus.iter().enumerate() {
        let Some(g) = write_frame(&video, &mut group, i, au) else {
            continue;
        };
        good += 1;
        // Between real frames, headers whose times overflow what a ClockTime holds.
        for fields in [
            [i as u64, 0, 0, 0, huge, au.group, i as u64],
            [i as u64, huge, 0, huge, 0, au.group, i as u64],
            [huge, 0, huge, 0, 0, huge, huge],
        ] {
            let mut bad = raw_header(0x04, fields);
            bad.extend_from_slice(&au.data);
            g.write(Bytes::from(bad));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(group);
    video.finish();
    catalog.finish();
    wait_eos(&receiver.pipeline, WAIT).expect("plays to the end without an error");
    let frames = receiver.frames().len();
    eprintln!("{frames} of {good} good frames output; the hostile headers were dropped");
    assert!(frames * 10 >= good * 9, "{frames} of {good}");
    assert_eq!(receiver.decoded(), frames);
}

/// Writes access unit `i` as a frame of `video`, in a new group at each keyframe; the
/// group it went into, if any has started.
fn write_frame<'a>(
    video: &TrackProducer,
    group: &'a mut Option<GroupWriter>,
    i: usize,
    au: &EncodedAu,
) -> Option<&'a GroupWriter> {
    if au.key {
        *group = Some(video.create_group(au.group, PRIORITY));
    }
    let g = group.as_ref()?;
    let header = FrameHeader {
        kind: if au.key {
            h264::FrameKind::Key
        } else {
            h264::FrameKind::Reference
        },
        slice_type: h264::SliceType::P,
        decode_index: i as u64,
        dts: au.dts_us,
        pts: au.pts_us,
        duration: 41_667,
        availability_us: unix_now_us(),
        base_group: au.group,
        base_index: i as u64,
    };
    let mut payload = Vec::new();
    header.encode(&mut payload);
    payload.extend_from_slice(&au.data);
    g.write(Bytes::from(payload));
    Some(g)
}

#[test]
fn tracks_of_codecs_moqsrc_does_not_carry_get_a_warning_and_no_pad() {
    let aus = encode_aus(60, TEST_CAPS);
    let publisher = HostilePublisher::start();
    let unknown = |name: &str, kind, codec: &str| TrackEntry {
        codec: Some(codec.into()),
        width: Some(320),
        height: Some(240),
        avcc: Some("01".into()),
        sample_rate: Some(44_100),
        channels: Some(2),
        ..TrackEntry::new(name, kind)
    };
    let (catalog, video) = publisher.with_tracks(
        [24, 1],
        vec![
            unknown("audio", TrackKind::Audio, "flac"),
            unknown("video-vp9", TrackKind::Video, "vp09.00.10.08"),
        ],
    );
    let receiver = Receiver::start(&format!("url={} tls-insecure=true", publisher.url()));
    wait_until("moqsrc subscribed", || video.stats().sessions > 0);
    let mut group = None;
    for (i, au) in aus.iter().enumerate() {
        write_frame(&video, &mut group, i, au);
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(group);
    video.finish();
    catalog.finish();
    wait_eos(&receiver.pipeline, WAIT).expect("the video plays to the end");
    let warnings = receiver.messages_where(|m| m.starts_with("warning"));
    eprintln!(
        "{} frames decoded; warnings {warnings:?}",
        receiver.decoded()
    );
    for codec in ["flac", "vp09.00.10.08"] {
        assert!(
            warnings.iter().any(|w| w.contains(codec)),
            "a warning names {codec}: {warnings:?}"
        );
    }
    assert!(receiver.decoded() * 10 >= aus.len() * 9);
    let pads: Vec<String> = receiver
        .pipeline
        .by_name("src")
        .unwrap()
        .src_pads()
        .iter()
        .map(|p| p.name().to_string())
        .collect();
    assert_eq!(pads, ["video_0"], "a pad for the H.264 track only");
}

#[test]
fn a_catalog_with_a_zero_framerate_denominator_is_a_clear_error() {
    let publisher = HostilePublisher::start();
    let _tracks = publisher.with_catalog([24, 0]);
    let receiver = Receiver::start(&format!(
        "url={} tls-insecure=true media-timeout=2000",
        publisher.url()
    ));
    let err = wait_eos(&receiver.pipeline, WAIT).expect_err("an error, not EOS");
    assert!(err.contains("framerate of track \"video\""), "{err}");
}

#[test]
fn a_wrong_namespace_or_track_ends_in_an_error_naming_it() {
    let sender = Sender::start("");
    for (properties, expected) in [
        (
            format!(
                "url=moqt://127.0.0.1:{}/wrong tls-insecure=true media-timeout=3000",
                sender.port
            ),
            "namespace \"wrong\"",
        ),
        (
            format!(
                "url={} tls-insecure=true media-timeout=3000 video-track=nope",
                sender.url()
            ),
            "track \"nope\"",
        ),
    ] {
        let started = Instant::now();
        let receiver = Receiver::start(&properties);
        let err = wait_eos(&receiver.pipeline, WAIT).expect_err("an error, not EOS");
        let took = started.elapsed();
        let connected = receiver
            .messages
            .lock()
            .unwrap()
            .iter()
            .filter(|m| *m == "moq-connected")
            .count();
        eprintln!("{properties}: after {took:?}: {err}");
        assert!(err.contains(expected), "{err}");
        assert!(took < Duration::from_secs(8), "gave up after {took:?}");
        assert_eq!(connected, 0, "no media ever flowed: not connected");
    }
}

#[test]
fn a_publisher_without_a_catalog_ends_in_an_error_naming_it() {
    let publisher = HostilePublisher::start();
    let _video = publisher
        .broadcast
        .create_track(catalog::BASE_TRACK, TrackDelivery::default());
    let started = Instant::now();
    let receiver = Receiver::start(&format!(
        "url={} tls-insecure=true media-timeout=3000",
        publisher.url()
    ));
    let err = wait_eos(&receiver.pipeline, WAIT).expect_err("an error, not EOS");
    eprintln!("after {:?}: {err}", started.elapsed());
    assert!(err.contains("catalog"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(8));
}

fn unix_now_us() -> u64 {
    unix_now().as_micros() as u64
}
