//! Socket helpers shared by the relay and the probe.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;

/// Socket buffer size requested (the kernel caps it at net.core.[rw]mem_max). Bursts at tens of
/// Mbit/s overflow the default ~200 kB before a woken thread drains it.
const BUFFER_BYTES: libc::c_int = 4 << 20;

/// Binds a UDP socket with enlarged buffers.
pub(crate) fn bind_udp(addr: SocketAddr) -> io::Result<UdpSocket> {
    let sock = UdpSocket::bind(addr)?;
    for opt in [libc::SO_RCVBUF, libc::SO_SNDBUF] {
        // A smaller buffer only makes bursts more likely to overflow: the result is ignored.
        // SAFETY: the descriptor is open for the duration of the call (owned by `sock`), and
        // the option value points to a live c_int whose exact size is passed.
        unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&BUFFER_BYTES as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
    }
    Ok(sock)
}

/// A local address from which `peer` is reachable: loopback for a loopback peer (nothing else
/// can then reach the socket), the unspecified address of the same family otherwise.
pub(crate) fn local_for(peer: SocketAddr) -> SocketAddr {
    let ip = match peer.ip() {
        IpAddr::V4(ip) if ip.is_loopback() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(ip) if ip.is_loopback() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    };
    SocketAddr::new(ip, 0)
}

/// Errors a blocking receive with a timeout returns when nothing happened worth reporting:
/// the timeout itself, a signal, or an ICMP error for an earlier send on a connected socket.
pub(crate) fn is_benign(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock
            | io::ErrorKind::TimedOut
            | io::ErrorKind::Interrupted
            | io::ErrorKind::ConnectionRefused
    )
}
