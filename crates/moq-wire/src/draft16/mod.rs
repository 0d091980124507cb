//! draft-ietf-moq-transport-16, as a wire form of the message model ([`crate::message`]).
//!
//! The session layer speaks one vocabulary, the types of [`crate::message`]; this module
//! reads and writes them as draft-16 bytes, and is chosen when the connection negotiated
//! [`ALPN`] (draft-16 negotiates the version by ALPN only: [`VERSION`] never goes on the
//! wire). Every limit of draft-14 is enforced here too, plus draft-16's own (no empty
//! namespace fields, no unknown message parameters, parameter values in range, ascending
//! Key-Value-Pair types).
//!
//! # Control messages
//!
//! [`encode_control`] and [`decode_control`] frame messages as draft-14 does. Where the two
//! drafts differ, the mapping is:
//!
//! | message model | draft-16 wire |
//! |---|---|
//! | [`ClientSetup`] / [`ServerSetup`] | no versions: encoding ignores `versions` / `version`, decoding yields `vec![VERSION]` / `VERSION`. Setup parameter numbers are the same |
//! | [`Subscribe`] | priority, group order, forward and filter become parameters 0x20, 0x22, 0x10 and 0x21, each left out when it has the value the draft assumes when absent (128, the publisher's order, forwarding, unfiltered = AbsoluteStart {0, 0}), and filled with that value when decoding. `params` keeps DELIVERY_TIMEOUT, AUTHORIZATION_TOKEN and NEW_GROUP_REQUEST |
//! | [`TrackStatus`](crate::message::TrackStatus) | as SUBSCRIBE, but only AUTHORIZATION_TOKEN applies: the delivery fields are not sent, and decode to the defaults |
//! | [`SubscribeOk`] | `expires_ms` and `largest` become parameters 0x08 and 0x09. `group_order` becomes the DEFAULT_PUBLISHER_GROUP_ORDER track extension (left out when ascending, ascending when absent); `params` holds the other track extensions ([`extension`]: draft-14's DELIVERY_TIMEOUT 0x02 and MAX_CACHE_DURATION 0x04 parameters of SUBSCRIBE_OK are draft-16 track extensions with the same numbers and meaning) |
//! | [`Publish`] | `largest` and `forward` become parameters; `params` holds AUTHORIZATION_TOKEN and EXPIRES (sent as parameters) and the track extensions (everything else); `group_order` as for SUBSCRIBE_OK |
//! | [`PublishOk`] | as SUBSCRIBE's terms; an absent GROUP_ORDER decodes as [`GroupOrder::Publisher`] (keep the order PUBLISH stated), which encodes as absent. `params` keeps DELIVERY_TIMEOUT, EXPIRES, NEW_GROUP_REQUEST |
//! | [`Fetch`] | priority 0x20 and group order 0x22 become parameters; absent order means ascending, so [`GroupOrder::Publisher`] is sent as absent and decodes as ascending |
//! | [`FetchOk`] | `group_order` and `params` are track extensions, as for SUBSCRIBE_OK (draft-16's FETCH_OK states no order of its own: the fetch uses the one requested) |
//! | [`SubscribeUpdate`] | REQUEST_UPDATE, which states only what changes, as parameters: `params` is sent as it is, and the fields must match it (build it with [`request_update`]). Decoding keeps all parameters in `params` and fills the fields from them, with neutral values for those absent |
//! | [`PublishDone`] | same layout; MALFORMED_TRACK is 0x12 instead of 0x7 ([`publish_done_to_draft14`]) |
//! | PUBLISH_NAMESPACE_OK, SUBSCRIBE_NAMESPACE_OK, TRACK_STATUS_OK | REQUEST_OK. TRACK_STATUS_OK's `expires_ms` and `largest` become parameters; its alias and group order are not sent and `params` must be empty |
//! | every *_ERROR | REQUEST_ERROR with Retry Interval 0; codes translated between draft-16's table and the draft-14 table of that error ([`request_error_to_draft14`]) |
//! | [`PublishNamespaceDone`] / [`PublishNamespaceCancel`] | keyed by the Request ID of the PUBLISH_NAMESPACE instead of the namespace: the session gives the mapping through the lookups of [`encode_control`] and [`decode_control`] |
//! | [`SubscribeNamespace`] | Subscribe Options are sent as 2 (PUBLISH and NAMESPACE messages, what draft-14 asked for) and dropped when decoding. Draft-16 sends it on a bidirectional stream of its own |
//! | [`UnsubscribeNamespace`] | none: encoding fails (close the SUBSCRIBE_NAMESPACE stream instead) |
//!
//! REQUEST_OK and REQUEST_ERROR name the request they answer by ID only, so the decoder asks
//! the session what kind of request the ID belongs to ([`RequestKind`]) and decodes:
//!
//! | request | REQUEST_OK | REQUEST_ERROR |
//! |---|---|---|
//! | PUBLISH_NAMESPACE | PUBLISH_NAMESPACE_OK | PUBLISH_NAMESPACE_ERROR |
//! | SUBSCRIBE_NAMESPACE | SUBSCRIBE_NAMESPACE_OK | SUBSCRIBE_NAMESPACE_ERROR |
//! | TRACK_STATUS, SUBSCRIBE_UPDATE | TRACK_STATUS_OK (alias 0, ascending) | TRACK_STATUS_ERROR |
//! | SUBSCRIBE | protocol violation | SUBSCRIBE_ERROR |
//! | FETCH | protocol violation | FETCH_ERROR |
//! | PUBLISH | protocol violation | PUBLISH_ERROR |
//!
//! Draft-14 has no answer to SUBSCRIBE_UPDATE; under draft-16 one is required, and
//! TRACK_STATUS_OK / TRACK_STATUS_ERROR (the reply that can carry LARGEST_OBJECT) stand in
//! for it in both directions. Any of the OK messages above encodes as the same REQUEST_OK.
//!
//! Message parameters that draft-16 defines but not for the message at hand are dropped when
//! decoding (the draft says to ignore them) and refused when encoding; parameters it does not
//! define at all are a protocol violation. Encoding sorts parameters by type, so a message
//! round-trips exactly when its `params` are in ascending order (for PUBLISH: the message
//! parameters first, then the track extensions).
//!
//! NAMESPACE and NAMESPACE_DONE, which travel on a SUBSCRIBE_NAMESPACE stream, are not
//! modelled.
//!
//! # Data streams and datagrams
//!
//! See [`decode_data_stream_header`], [`decode_subgroup_object`], [`FetchObjectReader`] and
//! [`decode_datagram`], and the encoders beside them. The `extensions` fields of the model's
//! object headers hold draft-16 blocks (delta-coded types) when used with this module.

mod codec;
mod codes;
mod control;
pub(crate) mod data;
pub(crate) mod kvp;

#[cfg(doc)]
use crate::message::{
    ClientSetup, Fetch, FetchOk, GroupOrder, Publish, PublishDone, PublishNamespaceCancel,
    PublishNamespaceDone, PublishOk, ServerSetup, Subscribe, SubscribeNamespace, SubscribeOk,
    SubscribeUpdate, UnsubscribeNamespace,
};

pub use crate::message::{Announcer, RequestKind};
pub use crate::message::{session_error, setup_param};
pub use codec::{CODEC, Draft16};
pub use codes::{
    extension, param, publish_done_code, publish_done_from_draft14, publish_done_to_draft14,
    request_error, request_error_from_draft14, request_error_to_draft14, reset_code,
};
pub use control::{decode_control, encode_control, message_name, message_type, request_update};
pub(crate) use control::{read_track_extensions_in, write_track_extensions_in};
pub use data::{
    FetchObject, FetchObjectReader, FetchObjectWriter, datagram_type, decode_data_stream_header,
    decode_datagram, decode_subgroup_object, encode_data_stream_header, encode_datagram,
    encode_subgroup_object, subgroup_stream_type,
};
pub use kvp::{decode_extensions, encode_extensions};

/// The version draft-16 stands for (0xff000000 + draft number). It is negotiated by ALPN and
/// never sent; decoded setup messages carry it.
pub const VERSION: u64 = 0xff000010;

/// The TLS ALPN token for draft-16 over raw QUIC (and its WT-Available-Protocols token).
pub const ALPN: &[u8] = b"moqt-16";

/// Subscriber priority assumed when SUBSCRIBE, PUBLISH_OK or FETCH states none.
pub const DEFAULT_SUBSCRIBER_PRIORITY: u8 = 128;

/// Publisher priority of a track that announces no DEFAULT_PUBLISHER_PRIORITY extension: what
/// subgroups and datagrams that leave their priority out have.
pub const DEFAULT_PUBLISHER_PRIORITY: u8 = 128;
