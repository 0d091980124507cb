//! The UDP relay: sockets and threads around one [`Shaper`] per direction.
//!
//! Threads: one receiving from clients on the listen socket; one per client receiving the
//! server's replies on that client's own socket; one emitter per shaped direction that sends
//! packets when the model says they leave the link; and the CSV logger if asked for. An
//! unshaped direction is sent straight from the receiving thread.

use std::collections::HashMap;
use std::collections::VecDeque;
use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::csvlog;
use crate::profile::Profile;
use crate::shaper::{Fate, Shaper};
use crate::sock;

/// How often blocked threads look at the stop flag.
const POLL: Duration = Duration::from_millis(50);
/// The emitter sleeps in the OS until this long before a deadline, then spins until it: OS
/// wake-ups are late by tens of µs (measured here: median ~40 µs, 99th percentile ~100 µs
/// with a 1 µs timer slack), and spinning all the time would take a core. It spins rather
/// than yields: a yield hands the core to a busy neighbour for a whole time slice (ms).
const SPIN_MARGIN: Duration = Duration::from_micros(120);
/// Timer slack of the emitter thread, in ns. The default of 50 µs lets the kernel delay our
/// wake-ups to batch them with others, which the spin margin would have to cover.
const TIMER_SLACK_NS: libc::c_ulong = 1000;
/// Larger than any UDP payload, so no datagram is ever truncated.
const MAX_DATAGRAM: usize = 65536;

/// Where and how to relay.
#[derive(Debug, Clone)]
pub struct LinkConfig {
    /// Address clients send to (port 0 picks a free one; see [`Link::local_addr`]).
    pub listen: SocketAddr,
    /// The server; each client gets its own socket towards it.
    pub forward: SocketAddr,
    /// Shapes server → client (the media direction when the server is the sender); None
    /// passes packets straight through.
    pub downstream: Option<Profile>,
    /// Shapes client → server; None passes packets straight through.
    pub upstream: Option<Profile>,
    /// Seeds the loss and jitter draws: the same seed and packet sequence give the same losses.
    pub seed: u64,
    /// CSV file written every 100 ms (see the README for its columns).
    pub log: Option<PathBuf>,
}

/// Counters of one direction since the link started. Bytes are UDP payload bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirectionTotals {
    pub packets_in: u64,
    pub bytes_in: u64,
    pub packets_out: u64,
    pub bytes_out: u64,
    /// Refused by the full drop-tail queue.
    pub packets_dropped_queue: u64,
    pub bytes_dropped_queue: u64,
    /// Removed by the loss model.
    pub packets_dropped_loss: u64,
    pub bytes_dropped_loss: u64,
    /// The operating system refused to send them (e.g. unreachable server, oversized datagram).
    pub packets_send_failed: u64,
    pub bytes_send_failed: u64,
    /// Largest queue occupancy (bytes waiting or being serialised) seen after an arrival.
    pub queue_bytes_max: u64,
}

impl DirectionTotals {
    /// Packets accepted but not yet sent (still in the queue or in flight on the link).
    pub fn packets_in_link(&self) -> u64 {
        self.packets_in.saturating_sub(
            self.packets_out
                + self.packets_dropped_queue
                + self.packets_dropped_loss
                + self.packets_send_failed,
        )
    }

    pub fn bytes_in_link(&self) -> u64 {
        self.bytes_in.saturating_sub(
            self.bytes_out
                + self.bytes_dropped_queue
                + self.bytes_dropped_loss
                + self.bytes_send_failed,
        )
    }

    /// The counters in the order of the CSV log's columns.
    pub(crate) fn counters(&self) -> [u64; 9] {
        [
            self.bytes_in,
            self.packets_in,
            self.bytes_out,
            self.packets_out,
            self.bytes_dropped_queue,
            self.packets_dropped_queue,
            self.bytes_dropped_loss,
            self.packets_dropped_loss,
            self.packets_send_failed,
        ]
    }
}

/// `key=value` pairs, one line, for logs and the CLI's exit report.
impl fmt::Display for DirectionTotals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "packets_in={} bytes_in={} packets_out={} bytes_out={} \
             packets_dropped_queue={} bytes_dropped_queue={} \
             packets_dropped_loss={} bytes_dropped_loss={} \
             packets_send_failed={} bytes_send_failed={} \
             packets_in_link={} bytes_in_link={} queue_bytes_max={}",
            self.packets_in,
            self.bytes_in,
            self.packets_out,
            self.bytes_out,
            self.packets_dropped_queue,
            self.bytes_dropped_queue,
            self.packets_dropped_loss,
            self.bytes_dropped_loss,
            self.packets_send_failed,
            self.bytes_send_failed,
            self.packets_in_link(),
            self.bytes_in_link(),
            self.queue_bytes_max
        )
    }
}

/// Counters of both directions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub downstream: DirectionTotals,
    pub upstream: DirectionTotals,
}

/// Where an emitted packet goes: to the server on a client's connected socket, or to a client
/// from the listen socket.
struct Route {
    sock: Arc<UdpSocket>,
    to: Option<SocketAddr>,
}

impl Route {
    fn send(&self, data: &[u8]) -> io::Result<usize> {
        match self.to {
            Some(to) => self.sock.send_to(data, to),
            None => self.sock.send(data),
        }
    }
}

struct Packet {
    data: Vec<u8>,
    route: Route,
}

/// State of a direction at one instant, for the log.
pub(crate) struct Sample {
    pub(crate) totals: DirectionTotals,
    pub(crate) queue_bytes: usize,
    pub(crate) queue_wait: Duration,
    pub(crate) rate_kbit: u64,
}

struct DirState {
    shaper: Option<Shaper>,
    /// Accepted packets in emission order (emission times never decrease).
    line: VecDeque<(Instant, Packet)>,
    totals: DirectionTotals,
    warned: bool,
}

pub(crate) struct Direction {
    pub(crate) name: &'static str,
    state: Mutex<DirState>,
    /// Signalled when the line goes from empty to non-empty.
    ready: Condvar,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl DirState {
    fn count_failure(&mut self, name: &str, len: usize, e: &io::Error) {
        self.totals.packets_send_failed += 1;
        self.totals.bytes_send_failed += len as u64;
        if !self.warned {
            self.warned = true;
            // Not eprintln!: a closed stderr must not panic a relay thread.
            let _ = writeln!(
                io::stderr(),
                "linkem: {name}: datagram not sent: {e} (further failures are only counted)"
            );
        }
    }

    fn count_out(&mut self, len: usize) {
        self.totals.packets_out += 1;
        self.totals.bytes_out += len as u64;
    }
}

impl Direction {
    fn new(name: &'static str, profile: Option<Profile>, seed: u64, stream: u64) -> Direction {
        Direction {
            name,
            state: Mutex::new(DirState {
                shaper: profile.map(|p| Shaper::new(p, seed, stream)),
                line: VecDeque::new(),
                totals: DirectionTotals::default(),
                warned: false,
            }),
            ready: Condvar::new(),
        }
    }

    fn is_shaped(&self) -> bool {
        lock(&self.state).shaper.is_some()
    }

    /// Takes a received datagram. The arrival time is read under the lock so that arrivals
    /// from several receiving threads reach the model in time order.
    fn submit(&self, epoch: &OnceLock<Instant>, data: Vec<u8>, route: Route) {
        let len = data.len();
        let mut st = lock(&self.state);
        let now = Instant::now();
        let epoch = *epoch.get_or_init(|| now);
        st.totals.packets_in += 1;
        st.totals.bytes_in += len as u64;
        let Some(shaper) = st.shaper.as_mut() else {
            match route.send(&data) {
                Ok(_) => st.count_out(len),
                Err(e) => st.count_failure(self.name, len, &e),
            }
            return;
        };
        let t = now.saturating_duration_since(epoch);
        match shaper.arrive(t, len) {
            Fate::Lost => {
                st.totals.packets_dropped_loss += 1;
                st.totals.bytes_dropped_loss += len as u64;
            }
            Fate::Dropped => {
                st.totals.packets_dropped_queue += 1;
                st.totals.bytes_dropped_queue += len as u64;
            }
            Fate::Emit(at) => {
                let queued = shaper.backlog(t).0 as u64;
                st.totals.queue_bytes_max = st.totals.queue_bytes_max.max(queued);
                if st.line.is_empty() {
                    self.ready.notify_one();
                }
                st.line.push_back((epoch + at, Packet { data, route }));
            }
        }
    }

    /// Counts a datagram that could not even be routed (no socket towards the server).
    fn refuse(&self, len: usize, e: &io::Error) {
        let mut st = lock(&self.state);
        st.totals.packets_in += 1;
        st.totals.bytes_in += len as u64;
        st.count_failure(self.name, len, e);
    }

    pub(crate) fn totals(&self) -> DirectionTotals {
        lock(&self.state).totals
    }

    pub(crate) fn sample(&self, t: Duration) -> Sample {
        let mut st = lock(&self.state);
        let totals = st.totals;
        match st.shaper.as_mut() {
            Some(s) => {
                let (queue_bytes, queue_wait) = s.backlog(t);
                Sample {
                    totals,
                    queue_bytes,
                    queue_wait,
                    rate_kbit: s.rate_kbit(t),
                }
            }
            None => Sample {
                totals,
                queue_bytes: 0,
                queue_wait: Duration::ZERO,
                rate_kbit: 0,
            },
        }
    }

    /// Sends packets when they are due until `stop` is set; what is still queued then is
    /// abandoned (and shows as in the link in the totals).
    fn run_emitter(&self, stop: &AtomicBool) {
        // SAFETY: PR_SET_TIMERSLACK takes a plain integer and only affects the calling
        // thread; failing leaves the default slack, which the spin margin mostly covers.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, TIMER_SLACK_NS) };
        let mut due: Vec<Packet> = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let next = {
                let mut st = lock(&self.state);
                let now = Instant::now();
                let n = st.line.partition_point(|(at, _)| *at <= now);
                due.extend(st.line.drain(..n).map(|(_, p)| p));
                if !due.is_empty() {
                    None
                } else if let Some((at, _)) = st.line.front() {
                    Some(*at)
                } else {
                    drop(self.ready.wait_timeout(st, POLL));
                    continue;
                }
            };
            match next {
                Some(at) => sleep_until(at.min(Instant::now() + POLL)),
                None => self.emit(&mut due),
            }
        }
    }

    fn emit(&self, due: &mut Vec<Packet>) {
        let results: Vec<(usize, io::Result<usize>)> = due
            .drain(..)
            .map(|p| (p.data.len(), p.route.send(&p.data)))
            .collect();
        let mut st = lock(&self.state);
        for (len, r) in results {
            match r {
                Ok(_) => st.count_out(len),
                Err(e) => st.count_failure(self.name, len, &e),
            }
        }
    }
}

/// Sleeps until `deadline` to within a few µs: an OS sleep until [`SPIN_MARGIN`] before it,
/// then a busy wait.
fn sleep_until(deadline: Instant) {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        if left > SPIN_MARGIN {
            thread::sleep(left - SPIN_MARGIN);
        } else {
            std::hint::spin_loop();
        }
    }
}

pub(crate) struct Shared {
    stop: AtomicBool,
    /// NAT rebindings asked for so far: each gives every client a new source port towards
    /// the server.
    rebinds: AtomicU64,
    /// Set once every worker has stopped, so the log's last row sees the final counters.
    pub(crate) log_stop: AtomicBool,
    /// Trace time zero: the first packet to arrive in either direction.
    pub(crate) epoch: OnceLock<Instant>,
    pub(crate) down: Direction,
    pub(crate) up: Direction,
}

impl Shared {
    fn totals(&self) -> Totals {
        Totals {
            downstream: self.down.totals(),
            upstream: self.up.totals(),
        }
    }
}

/// A running relay. Dropping it stops its threads, as does [`Link::stop`].
pub struct Link {
    shared: Arc<Shared>,
    local: SocketAddr,
    workers: Vec<JoinHandle<()>>,
    logger: Option<JoinHandle<()>>,
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> io::Result<JoinHandle<()>> {
    thread::Builder::new().name(name.to_owned()).spawn(f)
}

impl Link {
    /// Binds the listen socket and starts the threads. The trace clock starts with the first
    /// packet in either direction (see [`Link::trace_start`]).
    pub fn start(cfg: LinkConfig) -> io::Result<Link> {
        let listen = Arc::new(sock::bind_udp(cfg.listen)?);
        listen.set_read_timeout(Some(POLL))?;
        let local = listen.local_addr()?;
        let log = match &cfg.log {
            Some(path) => Some(BufWriter::new(File::create(path).map_err(|e| {
                io::Error::new(e.kind(), format!("{}: {e}", path.display()))
            })?)),
            None => None,
        };
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            rebinds: AtomicU64::new(0),
            log_stop: AtomicBool::new(false),
            epoch: OnceLock::new(),
            down: Direction::new("downstream", cfg.downstream, cfg.seed, 0),
            up: Direction::new("upstream", cfg.upstream, cfg.seed, 1),
        });
        let mut link = Link {
            shared: shared.clone(),
            local,
            workers: Vec::new(),
            logger: None,
        };
        // On an error below, dropping `link` stops whatever was already started.
        for (name, pick) in [
            ("linkem-down-tx", (|s| &s.down) as fn(&Shared) -> &Direction),
            ("linkem-up-tx", |s| &s.up),
        ] {
            if pick(&shared).is_shaped() {
                let sh = shared.clone();
                link.workers
                    .push(spawn(name, move || pick(&sh).run_emitter(&sh.stop))?);
            }
        }
        let sh = shared.clone();
        let forward = cfg.forward;
        link.workers.push(spawn("linkem-rx", move || {
            run_client_rx(&sh, &listen, forward)
        })?);
        if let Some(out) = log {
            let sh = shared.clone();
            link.logger = Some(spawn("linkem-log", move || csvlog::run(&sh, out))?);
        }
        Ok(link)
    }

    /// The address clients send to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// When the trace clock started (the first packet), if a packet has arrived yet.
    pub fn trace_start(&self) -> Option<Instant> {
        self.shared.epoch.get().copied()
    }

    /// Rebinds every client's mapping, as a NAT does when it expires or the client's
    /// network changes: from its next packet on, the server sees it come from a new source
    /// port. Packets the server sends to the old port still reach the client.
    pub fn rebind(&self) {
        self.shared.rebinds.fetch_add(1, Ordering::Relaxed);
    }

    /// Counters so far.
    pub fn totals(&self) -> Totals {
        self.shared.totals()
    }

    /// Stops the threads (packets still in the link are abandoned) and returns the counters.
    pub fn stop(mut self) -> Totals {
        self.shutdown();
        self.shared.totals()
    }

    fn shutdown(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
        self.shared.log_stop.store(true, Ordering::Relaxed);
        if let Some(l) = self.logger.take() {
            let _ = l.join();
        }
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Opens a client's own socket towards the server. Connecting it makes the kernel drop
/// datagrams from anyone but the server.
fn open_upstream(forward: SocketAddr) -> io::Result<UdpSocket> {
    let s = sock::bind_udp(sock::local_for(forward))?;
    s.connect(forward)?;
    s.set_read_timeout(Some(POLL))?;
    Ok(s)
}

/// Receives from clients; creates each new client's socket and reply thread on first contact.
fn run_client_rx(shared: &Arc<Shared>, listen: &Arc<UdpSocket>, forward: SocketAddr) {
    let mut clients: HashMap<SocketAddr, Arc<UdpSocket>> = HashMap::new();
    let mut repliers = Vec::new();
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let mut rebinds = 0;
    while !shared.stop.load(Ordering::Relaxed) {
        let (n, from) = match listen.recv_from(&mut buf) {
            Ok(got) => got,
            Err(e) => {
                if !sock::is_benign(&e) {
                    thread::sleep(Duration::from_millis(1));
                }
                continue;
            }
        };
        let asked = shared.rebinds.load(Ordering::Relaxed);
        if asked != rebinds {
            rebinds = asked;
            // Every client gets a new socket towards the server from this packet on.
            clients.clear();
        }
        let upstream = match clients.get(&from) {
            Some(s) => s.clone(),
            None => {
                let opened = open_upstream(forward).map(Arc::new).and_then(|s| {
                    let (sh, l, s2) = (shared.clone(), listen.clone(), s.clone());
                    let h = spawn("linkem-reply", move || run_server_rx(&sh, &s2, &l, from))?;
                    repliers.push(h);
                    Ok(s)
                });
                match opened {
                    Ok(s) => {
                        clients.insert(from, s.clone());
                        s
                    }
                    Err(e) => {
                        shared.up.refuse(n, &e);
                        continue;
                    }
                }
            }
        };
        let route = Route {
            sock: upstream,
            to: None,
        };
        shared.up.submit(&shared.epoch, buf[..n].to_vec(), route);
    }
    for h in repliers {
        let _ = h.join();
    }
}

/// Receives the server's datagrams for one client and hands them to the downstream direction.
fn run_server_rx(
    shared: &Shared,
    upstream: &UdpSocket,
    listen: &Arc<UdpSocket>,
    client: SocketAddr,
) {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    while !shared.stop.load(Ordering::Relaxed) {
        match upstream.recv(&mut buf) {
            Ok(n) => {
                let route = Route {
                    sock: listen.clone(),
                    to: Some(client),
                };
                shared.down.submit(&shared.epoch, buf[..n].to_vec(), route);
            }
            Err(e) if sock::is_benign(&e) => {}
            Err(_) => thread::sleep(Duration::from_millis(1)),
        }
    }
}
