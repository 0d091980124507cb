//! Measuring a link from outside: a paced sender of numbered, timestamped datagrams and a
//! recorder of their arrivals. The accuracy tests, the fluid-model check and the benchmark use
//! it; so can anything else that wants to check a profile before trusting a result.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::thread;
use std::time::{Duration, Instant};

use crate::link::{Link, LinkConfig};
use crate::profile::Profile;
use crate::sock;

/// Bytes at the start of every probe datagram: sequence number and send time, both u64 LE.
pub const HEADER_BYTES: usize = 16;
const HELLO: &str = "linkem-hello ";
const RECV_POLL: Duration = Duration::from_millis(20);

/// A UDP socket on 127.0.0.1 with a free port and large buffers.
pub fn bind_loopback() -> io::Result<UdpSocket> {
    sock::bind_udp(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
}

/// Makes the link create its socket for `client` and tells the server about it: returns the
/// address the server must send to so that datagrams reach `client` through the link. Retries
/// every 100 ms (the upstream direction may lose packets) until `timeout`.
pub fn introduce(
    client: &UdpSocket,
    link: SocketAddr,
    server: &UdpSocket,
    timeout: Duration,
) -> io::Result<SocketAddr> {
    let hello = format!("{HELLO}{}", client.local_addr()?);
    let give_up = Instant::now() + timeout;
    server.set_read_timeout(Some(Duration::from_millis(100)))?;
    let mut buf = [0u8; 128];
    while Instant::now() < give_up {
        client.send_to(hello.as_bytes(), link)?;
        match server.recv_from(&mut buf) {
            Ok((n, relay)) if buf[..n] == *hello.as_bytes() => return Ok(relay),
            Ok(_) => {}
            Err(e) if sock::is_benign(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::TimedOut,
        format!("no hello through the link at {link} within {timeout:?}"),
    ))
}

/// A server behind a link and a client in front of it, introduced to each other.
pub struct Pair {
    pub server: UdpSocket,
    pub client: UdpSocket,
    /// Where the server sends to reach the client through the link.
    pub relay: SocketAddr,
}

/// Starts an in-process link on loopback with a fresh server and client around it.
pub fn loopback(
    downstream: Option<Profile>,
    upstream: Option<Profile>,
    seed: u64,
    log: Option<PathBuf>,
) -> io::Result<(Link, Pair)> {
    let server = bind_loopback()?;
    let link = Link::start(LinkConfig {
        listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        forward: server.local_addr()?,
        downstream,
        upstream,
        seed,
        log,
    })?;
    let client = bind_loopback()?;
    let relay = introduce(&client, link.local_addr(), &server, Duration::from_secs(5))?;
    Ok((
        link,
        Pair {
            server,
            client,
            relay,
        },
    ))
}

/// A constant-rate stream.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    /// Offered rate in bit/s of UDP payload.
    pub rate_bps: f64,
    /// Datagram size in bytes (at least [`HEADER_BYTES`]).
    pub size: usize,
    pub duration: Duration,
}

impl Pace {
    fn interval(&self) -> Duration {
        Duration::from_secs_f64(self.size as f64 * 8.0 / self.rate_bps)
    }

    /// Number of datagrams the stream sends.
    pub fn count(&self) -> u64 {
        (self.duration.as_secs_f64() * self.rate_bps / (self.size as f64 * 8.0)).ceil() as u64
    }
}

/// Sends `pace` to `to`, numbering datagrams from 0 and stamping each with its send time
/// relative to `base`. Datagram i is due at start + i × interval; a late sender catches up in
/// a burst, so the average rate holds. Returns the number sent.
pub fn send_paced(sock: &UdpSocket, to: SocketAddr, base: Instant, pace: Pace) -> io::Result<u64> {
    if !(pace.rate_bps.is_finite() && pace.rate_bps > 0.0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "pace rate must be a positive number of bit/s (got {})",
                pace.rate_bps
            ),
        ));
    }
    let size = pace.size.max(HEADER_BYTES);
    let pace = Pace { size, ..pace };
    let mut buf = vec![0u8; size];
    let start = Instant::now();
    let interval = pace.interval();
    let total = pace.count();
    for seq in 0..total {
        let due = start + interval.mul_f64(seq as f64);
        let wait = due.saturating_duration_since(Instant::now());
        if !wait.is_zero() {
            thread::sleep(wait);
        }
        let sent = Instant::now().saturating_duration_since(base);
        buf[..8].copy_from_slice(&seq.to_le_bytes());
        buf[8..16].copy_from_slice(&(sent.as_nanos() as u64).to_le_bytes());
        sock.send_to(&buf, to)?;
    }
    Ok(total)
}

/// One received probe datagram; times are relative to the `base` given to sender and
/// recorder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    pub seq: u64,
    pub sent: Duration,
    pub at: Duration,
    pub len: usize,
}

impl Arrival {
    /// One-way latency.
    pub fn latency(&self) -> Duration {
        self.at.saturating_sub(self.sent)
    }
}

/// Records probe datagrams until none came for `idle` or `limit` has passed since the call.
/// Shorter datagrams (introductions) are ignored.
pub fn record(sock: &UdpSocket, base: Instant, idle: Duration, limit: Duration) -> Vec<Arrival> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 65536];
    let end = Instant::now() + limit;
    let mut last = Instant::now();
    if sock.set_read_timeout(Some(RECV_POLL)).is_err() {
        return out;
    }
    while Instant::now() < end && last.elapsed() < idle {
        let Ok(n) = sock.recv(&mut buf) else {
            continue;
        };
        last = Instant::now();
        if n < HEADER_BYTES {
            continue;
        }
        let word = |i: usize| u64::from_le_bytes(buf[i..i + 8].try_into().unwrap_or_default());
        out.push(Arrival {
            seq: word(0),
            sent: Duration::from_nanos(word(8)),
            at: last.saturating_duration_since(base),
            len: n,
        });
    }
    out
}

/// Delivered rate in bit/s measured on the arrivals alone: the bytes after the first arrival
/// over the time from the first to the last. None with fewer than two arrivals.
pub fn throughput_bps(arrivals: &[Arrival]) -> Option<f64> {
    let (first, rest) = arrivals.split_first()?;
    let last = rest.last()?;
    let span = last.at.checked_sub(first.at)?.as_secs_f64();
    let bytes: usize = rest.iter().map(|a| a.len).sum();
    (span > 0.0).then(|| bytes as f64 * 8.0 / span)
}
