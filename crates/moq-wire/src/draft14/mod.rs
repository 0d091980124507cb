//! draft-ietf-moq-transport-14: control messages, data streams and datagrams.
//!
//! Negotiated with ALPN [`ALPN`] on raw QUIC and version [`VERSION`] in CLIENT_SETUP /
//! SERVER_SETUP. Every limit the draft places on received values is enforced when decoding
//! (as [`crate::DecodeError::ProtocolViolation`] or
//! [`crate::DecodeError::KeyValueFormatting`]) and refused when encoding.

mod codes;
pub(crate) mod common;
mod control;
mod data;
mod params;

pub use codes::{
    fetch_error, publish_done_code, publish_error, publish_namespace_error, reset_code,
    session_error, subscribe_error, subscribe_namespace_error,
};
pub use common::{FilterType, GroupOrder, Location, NamespacePrefix, TrackNamespace};
pub use control::{
    ClientSetup, ControlMessage, Fetch, FetchCancel, FetchError, FetchOk, FetchType, Goaway,
    JoiningFetch, MaxRequestId, Publish, PublishDone, PublishError, PublishNamespace,
    PublishNamespaceCancel, PublishNamespaceDone, PublishNamespaceError, PublishNamespaceOk,
    PublishOk, RequestsBlocked, ServerSetup, Subscribe, SubscribeError, SubscribeNamespace,
    SubscribeNamespaceError, SubscribeNamespaceOk, SubscribeOk, SubscribeUpdate, TrackStatus,
    TrackStatusError, TrackStatusOk, Unsubscribe, UnsubscribeNamespace,
};
pub use data::{
    DataStreamHeader, DatagramHeader, FetchHeader, FetchObjectHeader, ObjectStatus, SubgroupHeader,
    SubgroupId, SubgroupObjectHeader,
};
pub use params::{
    KeyValuePair, Parameters, Value, authorization_token, decode_extensions, encode_extensions,
    param, setup_param,
};

/// The version number offered and selected in the setup messages (0xff000000 + draft number).
pub const VERSION: u64 = 0xff00000e;

/// The TLS ALPN token for MoQ Transport over raw QUIC.
pub const ALPN: &[u8] = b"moq-00";

/// Most fields a Track Namespace tuple may have (it needs at least one).
pub const MAX_NAMESPACE_FIELDS: usize = 32;

/// Most bytes a Full Track Name may have, counting the namespace fields and the track name
/// (not their length prefixes).
pub const MAX_FULL_TRACK_NAME_LEN: usize = 4096;

/// Most bytes a Reason Phrase may have.
pub const MAX_REASON_PHRASE_LEN: usize = 1024;

/// Most bytes the value of an odd-keyed Key-Value-Pair may have.
pub const MAX_KVP_BYTES_LEN: usize = 65535;

/// Most bytes the GOAWAY New Session URI may have.
pub const MAX_GOAWAY_URI_LEN: usize = 8192;
