//! Relaying behaviour: several clients, both directions shaped from one profile file, and
//! hostile input (unreachable server, largest and empty datagrams).

use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::thread;
use std::time::{Duration, Instant};

use linkem::probe::{self, Pace};
use linkem::{Link, LinkConfig, Profile};

fn profile_file(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../../pipelines/profiles/{name}"))
}

/// Sends every datagram back where it came from until none came for a second.
fn echo(server: UdpSocket) -> thread::JoinHandle<u64> {
    thread::spawn(move || {
        let mut buf = vec![0u8; 65536];
        let mut echoed = 0;
        server
            .set_read_timeout(Some(Duration::from_secs(1)))
            .expect("timeout");
        while let Ok((n, from)) = server.recv_from(&mut buf) {
            if server.send_to(&buf[..n], from).is_ok() {
                echoed += 1;
            }
        }
        echoed
    })
}

#[test]
fn clients_are_relayed_independently_with_the_grid_rtt() {
    let file = Profile::from_file(&profile_file("loss0_rtt100.json")).expect("grid profile");
    let server = probe::bind_loopback().expect("server");
    let link = Link::start(LinkConfig {
        listen: "127.0.0.1:0".parse().expect("addr"),
        forward: server.local_addr().expect("addr"),
        downstream: Some(file.clone()),
        upstream: file.reverse().cloned(),
        seed: 1,
        log: None,
    })
    .expect("link");
    let clients: Vec<UdpSocket> = (0..2)
        .map(|_| {
            let c = probe::bind_loopback().expect("client");
            probe::introduce(&c, link.local_addr(), &server, Duration::from_secs(5))
                .expect("introduce");
            c
        })
        .collect();
    let echoer = echo(server);
    let base = Instant::now();
    let to = link.local_addr();
    let runs: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            thread::spawn(move || {
                let size = 100 + 50 * i;
                let pace = Pace {
                    rate_bps: size as f64 * 8.0 / 0.02,
                    size,
                    duration: Duration::from_secs(1),
                };
                let rx = c.try_clone().expect("clone");
                let rec = thread::spawn(move || {
                    probe::record(&rx, base, Duration::from_secs(1), Duration::from_secs(10))
                });
                let sent = probe::send_paced(&c, to, base, pace).expect("send");
                (size, sent, rec.join().expect("recorder"))
            })
        })
        .collect();
    for run in runs {
        let (size, sent, got) = run.join().expect("client");
        let mut rtts: Vec<f64> = got
            .iter()
            .map(|a| a.latency().as_secs_f64() * 1000.0)
            .collect();
        rtts.sort_by(f64::total_cmp);
        let median = rtts[rtts.len() / 2];
        eprintln!(
            "client with {size} B datagrams: sent {sent}, echoed back {}, RTT median {median:.3} \
             ms (profile: 100 ms)",
            got.len()
        );
        assert_eq!(got.len() as u64, sent);
        assert!(
            got.iter().all(|a| a.len == size),
            "got another client's datagram"
        );
        assert!((median - 100.0).abs() < 1.0);
    }
    let totals = link.stop();
    let echoed = echoer.join().expect("echo");
    // Upstream also carried the two introductions, which were not echoed.
    assert_eq!(totals.upstream.packets_out, echoed + 2);
    assert_eq!(totals.downstream.packets_out, echoed);
}

/// Sends five datagrams to a link forwarding to `forward` and returns the upstream totals.
fn send_five(forward: SocketAddr) -> linkem::DirectionTotals {
    let link = Link::start(LinkConfig {
        listen: "127.0.0.1:0".parse().expect("addr"),
        forward,
        downstream: Some(Profile::constant(1000, 10_000)),
        upstream: Some(Profile::constant(0, 10_000)),
        seed: 0,
        log: None,
    })
    .expect("link");
    let client = probe::bind_loopback().expect("client");
    for _ in 0..5 {
        client.send_to(b"x", link.local_addr()).expect("send");
        thread::sleep(Duration::from_millis(20));
    }
    thread::sleep(Duration::from_millis(100));
    link.stop().upstream
}

#[test]
fn unreachable_server_is_counted_not_fatal() {
    // Nothing listens: UDP cannot tell, the datagrams leave and are counted as sent.
    let gone = probe::bind_loopback().expect("socket");
    let closed = gone.local_addr().expect("addr");
    drop(gone);
    let up = send_five(closed);
    eprintln!("closed port: {up}");
    assert_eq!((up.packets_in, up.packets_out), (5, 5));
    // The broadcast address cannot be connected to without SO_BROADCAST: the socket towards
    // the server cannot be opened, and nothing leaves the machine.
    let up = send_five("255.255.255.255:9".parse().expect("addr"));
    eprintln!("unconnectable server: {up}");
    assert_eq!((up.packets_in, up.packets_send_failed), (5, 5));
}

#[test]
fn largest_and_empty_datagrams_pass_both_ways() {
    let (link, pair) =
        probe::loopback(Some(Profile::constant(100_000, 1_000_000)), None, 0, None).expect("link");
    let mut buf = vec![0u8; 65536];
    pair.client
        .set_read_timeout(Some(Duration::from_secs(2)))
        .expect("timeout");
    pair.server
        .set_read_timeout(Some(Duration::from_secs(2)))
        .expect("timeout");
    // 65507 B is the largest UDP payload over IPv4.
    for size in [65507, 0] {
        pair.client
            .send_to(&vec![7u8; size], link.local_addr())
            .expect("send up");
        let (n, _) = pair.server.recv_from(&mut buf).expect("server receives");
        assert_eq!(n, size);
        pair.server
            .send_to(&vec![9u8; size], pair.relay)
            .expect("send down");
        let n = pair.client.recv(&mut buf).expect("client receives");
        assert_eq!(n, size);
    }
    let t = link.stop();
    assert_eq!(t.downstream.bytes_out, 65507);
    assert_eq!(t.downstream.packets_out, 2);
}

#[test]
fn a_rebinding_gives_the_client_a_new_source_port_and_replies_still_arrive() {
    let server = probe::bind_loopback().expect("server");
    server
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let link = Link::start(LinkConfig {
        listen: "127.0.0.1:0".parse().expect("addr"),
        forward: server.local_addr().expect("addr"),
        downstream: None,
        upstream: None,
        seed: 1,
        log: None,
    })
    .expect("link");
    let client = probe::bind_loopback().expect("client");
    client
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut buf = [0u8; 16];
    // The source the server sees for the client's datagram, after the server answered it.
    let mut round_trip = |payload: &[u8]| {
        client.send_to(payload, link.local_addr()).expect("send");
        let (n, from) = server.recv_from(&mut buf).expect("the server gets it");
        assert_eq!(&buf[..n], payload);
        server.send_to(b"reply", from).expect("reply");
        let (n, _) = client
            .recv_from(&mut buf)
            .expect("the client gets the reply");
        assert_eq!(&buf[..n], b"reply");
        from
    };
    let before = round_trip(b"one");
    assert_eq!(
        round_trip(b"two"),
        before,
        "one mapping while nothing changes"
    );
    link.rebind();
    let after = round_trip(b"three");
    assert_ne!(after, before, "a new source port after the rebinding");
    assert_eq!(round_trip(b"four"), after);
}
