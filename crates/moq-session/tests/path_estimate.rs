//! The path estimate of a live publishing session over real QUIC, through the link
//! emulator: a ~600 kbit/s stream of 24 fps objects (a keyframe 6 times the size of the
//! others every 15) to one subscriber, the link at 1200 kbit/s (the stream is
//! app-limited: only its bursts show the path), then 500, then 300 kbit/s.
//!
//! The publisher is a quinn server built here with a tapped congestion controller
//! (`CongestionControl::configure`); `estimator_of` finds its estimator from the
//! connection. Every wait has a timeout; ports are picked by the OS.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use linkem::{Link, LinkConfig, Profile};
use moq_session::congestion::{CongestionControl, estimator_of};
use moq_session::tls::{ServerIdentity, Trust};
use moq_session::{
    Broadcast, GroupOrder, MoqUrl, Priority, Session, SessionConfig, SubscribeOptions,
    TrackDelivery, TrackEvent, TrackProducer, connect, parse_namespace, session_transport,
};
use quinn::crypto::rustls::QuicServerConfig;

const FPS: u64 = 24;
const GOP: u64 = 15;
const KEY_RATIO: u64 = 6;
const STREAM_BPS: u64 = 600_000;
/// The link's rate (kbit/s) from each trace time on.
const PHASES: [(Duration, u64); 3] = [
    (Duration::ZERO, 1200),
    (Duration::from_secs(8), 500),
    (Duration::from_secs(18), 300),
];
const END_AT: Duration = Duration::from_secs(26);
/// How long the estimate may take to come within 25% of a new rate.
const FOLLOW: Duration = Duration::from_secs(3);
const QUEUE_BYTES: u64 = 60_000;
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);
const PRIORITY: Priority = Priority {
    class: 1,
    rank: 0,
    publisher: 64,
};

/// One sample of the publisher's estimate.
#[derive(Debug, Clone, Copy)]
struct Sample {
    /// Trace time of the link.
    t: Duration,
    rate_kbit: Option<f64>,
    acked_kbit: Option<f64>,
    rtt: Option<Duration>,
    queue: Duration,
    confirmed: bool,
}

fn profile() -> Profile {
    let steps: Vec<String> = PHASES
        .iter()
        .enumerate()
        .map(|(i, &(from, kbit))| {
            let until = PHASES.get(i + 1).map_or(600.0, |p| p.0.as_secs_f64());
            let duration = until - from.as_secs_f64();
            format!(r#"{{"duration_s": {duration}, "rate_kbit": {kbit}}}"#)
        })
        .collect();
    let json = format!(
        r#"{{"name": "1200, 500, 300 kbit/s", "queue_bytes": {QUEUE_BYTES},
            "steps": [{}]}}"#,
        steps.join(", ")
    );
    match Profile::from_json_str(&json) {
        Ok(p) => p,
        Err(err) => panic!("profile: {err}"),
    }
}

/// A publisher endpoint on a free loopback port whose connections use `cc`, tapped.
fn publisher_endpoint(identity: &ServerIdentity, cc: CongestionControl) -> quinn::Endpoint {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(identity.chain.clone(), identity.key.clone_key())
        .unwrap();
    tls.alpn_protocols = vec![moq_wire::draft14::ALPN.to_vec()];
    let crypto = QuicServerConfig::try_from(tls).unwrap();
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    config.transport_config(Arc::new(session_transport(false, true, cc)));
    let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
    quinn::Endpoint::server(config, addr).unwrap()
}

/// The stream's track, served newest group first (as moqsink's `skip-gops`).
fn video_track(broadcast: &Broadcast) -> TrackProducer {
    let delivery = TrackDelivery {
        group_order: GroupOrder::Descending,
        supersede_after: Some(Duration::from_millis(200)),
        ..TrackDelivery::default()
    };
    broadcast.create_track("video", delivery)
}

/// Writes the synthetic stream until `stop`: objects at 24 fps, a group of 15 per GoP.
async fn produce(track: TrackProducer, stop: Instant) {
    let average = STREAM_BPS / 8 / FPS;
    let other = average * GOP / (GOP - 1 + KEY_RATIO);
    let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / FPS));
    let mut group = None;
    for frame in 0u64.. {
        tick.tick().await;
        if Instant::now() >= stop {
            break;
        }
        let index = frame % GOP;
        if index == 0 {
            group = Some(track.create_group(frame / GOP, PRIORITY));
        }
        let size = if index == 0 { other * KEY_RATIO } else { other };
        if let Some(g) = &group {
            g.write(Bytes::from(vec![(frame % 251) as u8; size as usize]));
        }
    }
    track.finish();
}

/// Runs the scenario with `cc` on the publisher; returns the samples and the bytes the
/// subscriber received.
async fn run(cc: CongestionControl) -> (Vec<Sample>, u64) {
    let identity = ServerIdentity::self_signed(&["localhost".to_string()]).unwrap();
    let endpoint = publisher_endpoint(&identity, cc);
    let server_addr = endpoint.local_addr().unwrap();
    let link = Link::start(LinkConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        forward: server_addr,
        downstream: Some(profile()),
        upstream: None,
        seed: 1,
        log: None,
    })
    .unwrap();
    let namespace = parse_namespace("live").unwrap();
    let broadcast = Broadcast::new(namespace.clone());
    // The track exists before anyone can subscribe to it.
    let track = video_track(&broadcast);

    // The publisher accepts one session and serves the broadcast.
    let accept = {
        let endpoint = endpoint.clone();
        let broadcast = broadcast.clone();
        tokio::spawn(async move {
            let incoming = endpoint.accept().await.expect("an incoming connection");
            let conn = incoming.await.expect("handshake");
            let config = SessionConfig {
                publish: Some(broadcast),
                ..SessionConfig::default()
            };
            let session = Session::server(conn.clone(), config).await.expect("setup");
            (conn, session)
        })
    };
    let url = MoqUrl::parse(&format!("moqt://{}/live", link.local_addr())).unwrap();
    let trust = Trust::Fingerprint(identity.fingerprint());
    let subscriber = tokio::time::timeout(
        SETUP_TIMEOUT,
        connect(&url, &trust, SessionConfig::default()),
    )
    .await
    .expect("connect in time")
    .expect("connect");
    let (conn, _publisher) = tokio::time::timeout(SETUP_TIMEOUT, accept)
        .await
        .expect("accept in time")
        .expect("accept task");
    let estimator = estimator_of(&conn).expect("a tapped controller");
    let trace_start = link.trace_start().expect("packets went through the link");
    let stop = trace_start + END_AT;

    let producer = tokio::spawn(produce(track, stop));
    let mut subscription = tokio::time::timeout(
        SETUP_TIMEOUT,
        subscriber.subscribe(namespace, "video", SubscribeOptions::default()),
    )
    .await
    .expect("subscribe in time")
    .expect("subscribe");
    let reader = tokio::spawn(async move {
        let mut bytes = 0u64;
        loop {
            match tokio::time::timeout(Duration::from_secs(5), subscription.next()).await {
                Ok(Some(TrackEvent::Object(object))) => bytes += object.payload.len() as u64,
                Ok(Some(TrackEvent::Ended { .. })) | Ok(None) | Err(_) => return bytes,
                Ok(Some(_)) => {}
            }
        }
    });

    let mut samples = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    while Instant::now() < stop {
        tick.tick().await;
        let now = Instant::now();
        // Copied out under the lock; nothing else is called while it is held.
        let est = estimator.lock().unwrap().estimate(now);
        samples.push(Sample {
            t: now.saturating_duration_since(trace_start),
            rate_kbit: est.delivery_rate.map(|r| r as f64 / 1000.0),
            acked_kbit: est.acked_rate.map(|r| r as f64 / 1000.0),
            rtt: est.rtt,
            queue: est.queue_delay,
            confirmed: est.confirmed,
        });
    }
    let _ = tokio::time::timeout(Duration::from_secs(5), producer).await;
    drop(subscriber);
    let received = tokio::time::timeout(Duration::from_secs(10), reader)
        .await
        .expect("reader ends in time")
        .expect("reader task");
    endpoint.close(quinn::VarInt::from_u32(0), b"done");
    let totals = link.stop();
    println!(
        "{cc}: link carried {} B downstream, dropped {} in its queue",
        totals.downstream.bytes_out, totals.downstream.packets_dropped_queue
    );
    (samples, received)
}

fn print(cc: CongestionControl, samples: &[Sample]) {
    println!("{cc}:    t  estimate  acked (kbit/s)   srtt  queue  confirmed");
    for s in samples.iter().step_by(2) {
        println!(
            "{cc}: {:5.1} {:9} {:6} {:>13} {:>6} {}",
            s.t.as_secs_f64(),
            s.rate_kbit.map_or("-".into(), |r| format!("{r:.0}")),
            s.acked_kbit.map_or("-".into(), |r| format!("{r:.0}")),
            s.rtt
                .map_or("-".into(), |r| format!("{:.0} ms", r.as_secs_f64() * 1e3)),
            format!("{:.0} ms", s.queue.as_secs_f64() * 1e3),
            s.confirmed
        );
    }
}

/// Share of the samples in `[from, to)` within `tolerance` of `kbit`, and their range.
fn share_within(
    samples: &[Sample],
    from: Duration,
    to: Duration,
    kbit: f64,
    tolerance: f64,
) -> (f64, f64, f64) {
    let window: Vec<f64> = samples
        .iter()
        .filter(|s| s.t >= from && s.t < to)
        .map(|s| s.rate_kbit.unwrap_or(0.0))
        .collect();
    let ok = window
        .iter()
        .filter(|&&r| (r - kbit).abs() <= kbit * tolerance)
        .count();
    let lo = window.iter().copied().fold(f64::MAX, f64::min);
    let hi = window.iter().copied().fold(0.0, f64::max);
    (ok as f64 / window.len().max(1) as f64, lo, hi)
}

/// First trace time after `from` from which every sample up to the next phase is within
/// `tolerance` of `kbit`.
fn settled(samples: &[Sample], from: Duration, kbit: f64, tolerance: f64) -> Option<Duration> {
    let until = PHASES
        .iter()
        .map(|p| p.0)
        .find(|&t| t > from)
        .unwrap_or(END_AT);
    let mut since = None;
    for s in samples.iter().filter(|s| s.t >= from && s.t < until) {
        let r = s.rate_kbit.unwrap_or(0.0);
        if (r - kbit).abs() <= kbit * tolerance {
            since.get_or_insert(s.t);
        } else {
            since = None;
        }
    }
    since
}

async fn estimate_follows_the_link(cc: CongestionControl) {
    let (samples, received) = run(cc).await;
    print(cc, &samples);
    assert!(received > 0);
    for (i, &(from, kbit)) in PHASES.iter().enumerate() {
        let until = PHASES.get(i + 1).map_or(END_AT, |p| p.0);
        let kbit = kbit as f64;
        // The first phase starts with the connection: give it the same time to measure.
        let after = settled(&samples, from, kbit, 0.25).filter(|&t| t < until);
        let (share, lo, hi) = share_within(&samples, from + FOLLOW, until, kbit, 0.25);
        println!(
            "{cc}: {kbit} kbit/s from {from:?}: within 25% from {:?} after the change on; \
             {:.0}% of samples within 25% from {:?} on, {lo:.0}..{hi:.0} kbit/s",
            after.map(|t| t.saturating_sub(from)),
            share * 100.0,
            from + FOLLOW
        );
        assert!(share >= 0.9, "{cc}: estimate near {kbit} kbit/s: {share}");
        // Measured on the path throughout, not a figure held from the first burst.
        let window: Vec<&Sample> = samples
            .iter()
            .filter(|s| s.t >= from + FOLLOW && s.t < until)
            .collect();
        let measured = window.iter().filter(|s| s.confirmed).count();
        assert!(
            measured * 10 >= window.len() * 9,
            "{cc}: {measured} of {} samples near {kbit} kbit/s measured within the last second",
            window.len()
        );
        assert!(
            after.is_some_and(|t| t <= from + FOLLOW),
            "{cc}: estimate reaches {kbit} kbit/s within {FOLLOW:?}: {after:?}"
        );
        if i == 0 {
            // App-limited: the estimate shows the path, never just the stream's rate.
            let stream = STREAM_BPS as f64 / 1000.0;
            assert!(lo >= 0.9 * stream, "{cc}: app-limited estimate {lo} kbit/s");
        }
    }
    println!("{cc}: subscriber received {received} B");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn estimate_follows_the_link_with_cubic() {
    estimate_follows_the_link(CongestionControl::Cubic).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn estimate_follows_the_link_with_delay() {
    estimate_follows_the_link(CongestionControl::Delay).await;
}
