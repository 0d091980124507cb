//! draft-ietf-moq-transport-14: the wire form the message model ([`crate::message`]) was
//! built on.
//!
//! Negotiated with ALPN [`ALPN`] on raw QUIC and version [`VERSION`] in CLIENT_SETUP /
//! SERVER_SETUP.

/// The version number offered and selected in the setup messages (0xff000000 + draft number).
pub const VERSION: u64 = 0xff00000e;

/// The TLS ALPN token for MoQ Transport over raw QUIC.
pub const ALPN: &[u8] = b"moq-00";
