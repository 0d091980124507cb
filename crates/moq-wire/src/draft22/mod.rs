//! draft-ietf-moq-transport-22: draft-20's wire form ([`crate::draft20`]) but for the
//! LOCATION_FILTER, which names its form with a Location Filter Type instead of a length
//! (draft-21 changed no codepoint or layout). Every other message, stream and datagram is
//! written as draft-20 writes it.

use crate::draft20::{Draft20Family, FilterForm};

/// The version draft-22 stands for (0xff000000 + draft number), negotiated by ALPN only.
pub const VERSION: u64 = 0xff000016;

/// The TLS ALPN token for draft-22 over raw QUIC.
pub const ALPN: &[u8] = b"moqt-22";

/// The draft-22 codec.
pub static CODEC: Draft20Family = Draft20Family::new(22, ALPN, FilterForm::Typed, VERSION);
