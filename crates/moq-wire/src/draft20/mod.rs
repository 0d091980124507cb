//! draft-ietf-moq-transport-20, as a wire form of the message model ([`crate::message`]).
//!
//! From draft-17 on the protocol changed shape: integers are `vi64` ([`crate::varint::vi64`]);
//! each endpoint opens a unidirectional control stream that begins with its SETUP and later
//! carries GOAWAY; every request travels on a bidirectional stream of its own, whose first
//! message is the request and whose later messages (answers, updates) name no request;
//! cancelling a request is resetting its stream, so UNSUBSCRIBE, FETCH_CANCEL,
//! PUBLISH_NAMESPACE_DONE / _CANCEL and MAX_REQUEST_ID are gone; message parameters are
//! Type-Value pairs whose value form each type defines ([`param`]), and an unknown one, or one
//! the message does not take, is a protocol violation. Draft-20 replaced the joining FETCH by
//! a fill of the subscription (FILL_PARAMETERS) and range parameters by a Location Filter.
//! [`CODEC`] is the seam a session uses ([`crate::codec`]).
//!
//! The text the forms here follow is the working group's draft at its draft-20 state (the
//! editor's copy after draft-19 with the fill of subscriptions merged), checked against what
//! moq-relay 0.17 sends.
//!
//! | message model | draft-20 wire |
//! |---|---|
//! | [`ClientSetup`] / [`ServerSetup`] | SETUP (0x2F00), the first message of each control stream: setup options only, as Key-Value-Pairs filling the message. Decoding yields [`ClientSetup`] with `versions: [VERSION]` from a client, [`ServerSetup`] with [`VERSION`] from a server |
//! | [`Goaway`] | GOAWAY with a Timeout, sent as 0 and not modelled. On a request stream, a GOAWAY moves that request: decoded as a [`Redirect`] to the new URI |
//! | [`Subscribe`] | priority, group order, forward, filter and fill become parameters 0x20, 0x22, 0x10, 0x21 and 0x23, each left out when it has the value assumed when absent (128, the publisher's order, forwarding, no filter = AbsoluteStart {0, 0}, no fill). `params` keeps the rest |
//! | [`TrackStatus`](crate::message::TrackStatus) | as SUBSCRIBE, with AUTHORIZATION_TOKEN and INCLUDE_PROPERTIES only |
//! | [`SubscribeOk`] | no Request ID; `expires_ms` and `largest` become parameters 0x08 and 0x09; `group_order` the DEFAULT_PUBLISHER_GROUP_ORDER track property (left out when ascending), `params` the other track properties |
//! | [`SubscribeUpdate`] | REQUEST_UPDATE on the subscription's stream, which names the subscription: parameters as they are, the fields derived from them as draft-16 does |
//! | [`SubscribeUpdateOk`](crate::message::SubscribeUpdateOk), [`PublishNamespaceOk`](crate::message::PublishNamespaceOk), [`SubscribeNamespaceOk`](crate::message::SubscribeNamespaceOk) | REQUEST_OK without parameters |
//! | [`TrackStatusOk`](crate::message::TrackStatusOk) | REQUEST_OK with EXPIRES, LARGEST_OBJECT and track properties; a REQUEST_OK that answers an update decodes as one too |
//! | [`PublishDone`] | no Request ID; codes EXPIRED and TOO_FAR_BEHIND swap places, MALFORMED_TRACK is 0x12; an unknown Stream Count is 2^64 - 1 (the model's 2^62 - 1) |
//! | [`Publish`] | `largest` and `forward` become parameters; `params` keeps AUTHORIZATION_TOKEN and the track properties. EXPIRES is not modelled |
//! | [`PublishOk`](crate::message::PublishOk) | REQUEST_OK: the terms must be the defaults (they travel in a REQUEST_UPDATE) |
//! | [`Fetch`] | a named track and a LOCATION_FILTER: standalone ranges become absolute filters (an end of {2^64 - 1, 0} none), a filter relative to the largest object is [`FetchType::Filtered`](crate::message::FetchType::Filtered). There is no joining FETCH. An absent group order is ascending |
//! | [`FetchOk`] | no Request ID; group order and `params` as track properties |
//! | every *_ERROR, [`Redirect`] | REQUEST_ERROR on the request's stream, codes as in draft-16 (REDIRECT 0x34 with its Redirect structure) |
//! | [`Unsubscribe`](crate::message::Unsubscribe), [`FetchCancel`](crate::message::FetchCancel), [`PublishNamespaceCancel`](crate::message::PublishNamespaceCancel) | the request's stream reset; the peer resetting one of its SUBSCRIBE / FETCH streams decodes as them ([`crate::codec::Codec::stream_ended`]) |
//! | [`PublishNamespaceDone`](crate::message::PublishNamespaceDone) | the PUBLISH_NAMESPACE stream finished |
//! | [`SubscribeNamespace`], SUBSCRIBE_TRACKS | 0x50 and 0x51, prefixes of 0 to 32 fields |
//! | MAX_REQUEST_ID, REQUESTS_BLOCKED, UNSUBSCRIBE_NAMESPACE | none |
//!
//! NAMESPACE, NAMESPACE_DONE, PUBLISH_SKIPPED and PUBLISH_STATE_NOTIFY, which answer requests
//! a session of ours does not make (or inform without asking for anything), are not
//! modelled: they are refused as protocol violations.
//!
//! Data streams and datagrams are draft-16's design in `vi64` integers ([`decode_data_stream_header`]
//! and the functions beside it).

mod codec;
mod codes;
mod control;
mod data;
mod filter;
mod params;

#[cfg(doc)]
use crate::message::{
    ClientSetup, Fetch, FetchOk, Goaway, Publish, PublishDone, Redirect, ServerSetup, Subscribe,
    SubscribeNamespace, SubscribeOk, SubscribeUpdate,
};

pub use crate::draft16::FetchObject;
pub use codec::Draft20Family;
pub use codes::{
    UNKNOWN_STREAM_COUNT, param, property, publish_done_code, publish_done_from_model,
    publish_done_to_model, request_error, setup_option,
};
pub use control::{message_name, message_type};
pub use data::{
    FetchObjectReader, FetchObjectWriter, decode_data_stream_header, decode_datagram,
    decode_subgroup_object, encode_data_stream_header, encode_datagram, encode_subgroup_object,
};
pub use filter::FilterForm;

/// The version draft-20 stands for (0xff000000 + draft number). It is negotiated by ALPN and
/// never sent; decoded setup messages carry it.
pub const VERSION: u64 = 0xff000014;

/// The TLS ALPN token for draft-20 over raw QUIC.
pub const ALPN: &[u8] = b"moqt-20";

/// The draft-20 codec.
pub static CODEC: Draft20Family = Draft20Family::new(20, ALPN, FilterForm::Counted, VERSION);

/// Parses a draft-20 object property block (the `extensions` of the model's object headers
/// on a draft-20 session): Key-Value-Pairs with `vi64` integers.
pub fn decode_extensions(
    block: &[u8],
) -> Result<Vec<crate::message::KeyValuePair>, crate::DecodeError> {
    crate::draft16::kvp::read_block_in::<crate::varint::Vi64>(block)
}

/// Serialises object properties into a draft-20 block (without its length prefix).
pub fn encode_extensions(
    headers: &[crate::message::KeyValuePair],
) -> Result<Vec<u8>, crate::EncodeError> {
    let mut block = Vec::new();
    crate::draft16::kvp::write_block_in::<crate::varint::Vi64>(headers, &mut block)?;
    Ok(block)
}
