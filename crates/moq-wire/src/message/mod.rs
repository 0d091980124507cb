//! The message model: control messages, data stream headers and datagram headers as the
//! session layer sees them, whichever draft is on the wire.
//!
//! The types carry what the drafts have in common, in draft-14's terms (its fields, its
//! per-message error code tables); each draft module reads and writes them in its own wire
//! form. The methods on the types themselves (`encode`, `decode`) are draft-14's form, the
//! first one the model was built for. Every limit draft-14 places on received values is
//! enforced when decoding (as [`crate::DecodeError::ProtocolViolation`] or
//! [`crate::DecodeError::KeyValueFormatting`]) and refused when encoding.

mod codes;
pub(crate) mod common;
mod control;
mod data;
mod params;
mod requests;

pub use codes::{
    fetch_error, publish_done_code, publish_error, publish_namespace_error, reset_code,
    session_error, subscribe_error, subscribe_namespace_error,
};
pub use common::{FilterType, GroupOrder, Location, NamespacePrefix, TrackNamespace};
pub use control::{
    ClientSetup, ControlMessage, Fetch, FetchCancel, FetchError, FetchOk, FetchType, Fill, Goaway,
    JoiningFetch, MaxRequestId, Publish, PublishDone, PublishError, PublishNamespace,
    PublishNamespaceCancel, PublishNamespaceDone, PublishNamespaceError, PublishNamespaceOk,
    PublishOk, Redirect, RequestsBlocked, ServerSetup, Subscribe, SubscribeError,
    SubscribeNamespace, SubscribeNamespaceError, SubscribeNamespaceOk, SubscribeOk,
    SubscribeTracks, SubscribeUpdate, SubscribeUpdateOk, TrackStatus, TrackStatusError,
    TrackStatusOk, Unsubscribe, UnsubscribeNamespace,
};
pub use data::{
    DataStreamHeader, DatagramHeader, FetchHeader, FetchObjectHeader, ObjectStatus, SubgroupHeader,
    SubgroupId, SubgroupObjectHeader,
};
pub use params::{
    KeyValuePair, Parameters, Value, authorization_token, decode_extensions, encode_extensions,
    param, setup_param,
};
pub use requests::{Announcer, Refusal, RequestKind};

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
