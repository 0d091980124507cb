//! Draft-20 control messages, read into and written from the message model.
//!
//! The framing (type, 16-bit length, payload) is draft-14's, with `vi64` integers. A request
//! stream begins with its request, which carries the Request ID; what follows on the stream
//! (answers, updates, PUBLISH_DONE) names no request: the decoder takes it from the
//! [`Channel`], the encoder leaves it out. [`super`] documents the mapping.

use crate::codec::{Channel, StreamRequest};
use crate::cursor::{read_u8, read_u16, take};
use crate::draft16::kvp::{has_repeat, read_block_in, write_block_in};
use crate::draft16::{
    read_track_extensions_in, request_error_from_draft14, request_error_to_draft14,
    write_track_extensions_in,
};
use crate::message::common::{GOAWAY_URI, REASON_PHRASE, read_track_name_in, write_track_name_in};
use crate::message::{
    ClientSetup, ControlMessage, Fetch, FetchOk, FetchType, FilterType, Goaway, GroupOrder,
    Location, MAX_FULL_TRACK_NAME_LEN, NamespacePrefix, Parameters, Publish, PublishDone,
    PublishNamespace, PublishNamespaceOk, PublishOk, Redirect, Refusal, RequestKind, ServerSetup,
    Subscribe, SubscribeNamespace, SubscribeNamespaceOk, SubscribeOk, SubscribeUpdate,
    TrackNamespace,
};
use crate::varint::{Form, MAX_VARINT, Vi64};
use crate::{DecodeError, EncodeError};

use super::codes::{
    UNKNOWN_STREAM_COUNT, param, publish_done_from_model, publish_done_to_model, request_error,
    setup_option,
};
use super::filter::{FilterForm, UNFILTERED};
use super::params::{
    Param, Params, find, from_model, int, is_unfiltered, order_from, read_params, to_model,
    write_params,
};

/// What tells draft-20 and draft-22 apart on the control streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Dialect {
    pub filter: FilterForm,
    /// The version the model's setup messages carry.
    pub version: u64,
}

/// Draft-20 message type codes.
mod code {
    pub const REQUEST_UPDATE: u64 = 0x02;
    pub const SUBSCRIBE: u64 = 0x03;
    pub const SUBSCRIBE_OK: u64 = 0x04;
    pub const REQUEST_ERROR: u64 = 0x05;
    pub const PUBLISH_NAMESPACE: u64 = 0x06;
    pub const REQUEST_OK: u64 = 0x07;
    pub const NAMESPACE: u64 = 0x08;
    pub const PUBLISH_DONE: u64 = 0x0B;
    pub const TRACK_STATUS: u64 = 0x0D;
    pub const NAMESPACE_DONE: u64 = 0x0E;
    pub const PUBLISH_SKIPPED: u64 = 0x0F;
    pub const GOAWAY: u64 = 0x10;
    pub const FETCH: u64 = 0x16;
    pub const FETCH_OK: u64 = 0x18;
    pub const PUBLISH: u64 = 0x1D;
    pub const PUBLISH_STATE_NOTIFY: u64 = 0x22;
    pub const SUBSCRIBE_NAMESPACE: u64 = 0x50;
    pub const SUBSCRIBE_TRACKS: u64 = 0x51;
    pub const SETUP: u64 = 0x2F00;
}

/// The draft-20 message type `msg` is sent as; `None` for what draft-20 says by other means
/// (closing a request stream) or not at all.
pub fn message_type(msg: &ControlMessage) -> Option<u64> {
    use ControlMessage as M;
    Some(match msg {
        M::ClientSetup(_) | M::ServerSetup(_) => code::SETUP,
        M::Goaway(_) => code::GOAWAY,
        M::Subscribe(_) => code::SUBSCRIBE,
        M::SubscribeOk(_) => code::SUBSCRIBE_OK,
        M::SubscribeUpdate(_) => code::REQUEST_UPDATE,
        M::PublishDone(_) => code::PUBLISH_DONE,
        M::Publish(_) => code::PUBLISH,
        M::Fetch(_) => code::FETCH,
        M::FetchOk(_) => code::FETCH_OK,
        M::TrackStatus(_) => code::TRACK_STATUS,
        M::PublishNamespace(_) => code::PUBLISH_NAMESPACE,
        M::SubscribeNamespace(_) => code::SUBSCRIBE_NAMESPACE,
        M::SubscribeTracks(_) => code::SUBSCRIBE_TRACKS,
        M::TrackStatusOk(_)
        | M::PublishNamespaceOk(_)
        | M::SubscribeNamespaceOk(_)
        | M::PublishOk(_)
        | M::SubscribeUpdateOk(_) => code::REQUEST_OK,
        M::SubscribeError(_)
        | M::PublishError(_)
        | M::FetchError(_)
        | M::TrackStatusError(_)
        | M::PublishNamespaceError(_)
        | M::SubscribeNamespaceError(_)
        | M::Redirect(_) => code::REQUEST_ERROR,
        M::MaxRequestId(_)
        | M::RequestsBlocked(_)
        | M::Unsubscribe(_)
        | M::FetchCancel(_)
        | M::PublishNamespaceDone(_)
        | M::PublishNamespaceCancel(_)
        | M::UnsubscribeNamespace(_) => return None,
    })
}

/// The draft-20 name of the message `msg` is sent as, for logs.
pub fn message_name(msg: &ControlMessage) -> &'static str {
    message_type(msg).map_or(msg.name(), name_of)
}

fn name_of(message_type: u64) -> &'static str {
    match message_type {
        code::REQUEST_UPDATE => "REQUEST_UPDATE",
        code::SUBSCRIBE => "SUBSCRIBE",
        code::SUBSCRIBE_OK => "SUBSCRIBE_OK",
        code::REQUEST_ERROR => "REQUEST_ERROR",
        code::PUBLISH_NAMESPACE => "PUBLISH_NAMESPACE",
        code::REQUEST_OK => "REQUEST_OK",
        code::NAMESPACE => "NAMESPACE",
        code::PUBLISH_DONE => "PUBLISH_DONE",
        code::TRACK_STATUS => "TRACK_STATUS",
        code::NAMESPACE_DONE => "NAMESPACE_DONE",
        code::PUBLISH_SKIPPED => "PUBLISH_SKIPPED",
        code::GOAWAY => "GOAWAY",
        code::FETCH => "FETCH",
        code::FETCH_OK => "FETCH_OK",
        code::PUBLISH => "PUBLISH",
        code::PUBLISH_STATE_NOTIFY => "PUBLISH_STATE_NOTIFY",
        code::SUBSCRIBE_NAMESPACE => "SUBSCRIBE_NAMESPACE",
        code::SUBSCRIBE_TRACKS => "SUBSCRIBE_TRACKS",
        code::SETUP => "SETUP",
        _ => "unknown",
    }
}

// ---------------------------------------------------------------------------------------------
// Which parameters each message takes

const SUBSCRIBE_PARAMS: &[u64] = &[
    param::OBJECT_DELIVERY_TIMEOUT,
    param::AUTHORIZATION_TOKEN,
    param::RENDEZVOUS_TIMEOUT,
    param::SUBGROUP_DELIVERY_TIMEOUT,
    param::FORWARD,
    param::SUBSCRIBER_PRIORITY,
    param::LOCATION_FILTER,
    param::GROUP_ORDER,
    param::FILL_PARAMETERS,
    param::SUBGROUP_FILTER,
    param::OBJECTID_FILTER,
    param::PRIORITY_FILTER,
    param::OBJECT_PROPERTY_FILTER,
    param::NEW_GROUP_REQUEST,
    param::INCLUDE_PROPERTIES,
];
/// SUBSCRIBE's parameters that become fields of the model's [`Subscribe`].
const SUBSCRIBE_LIFTED: &[u64] = &[
    param::FORWARD,
    param::SUBSCRIBER_PRIORITY,
    param::LOCATION_FILTER,
    param::GROUP_ORDER,
    param::FILL_PARAMETERS,
];
const TRACK_STATUS_PARAMS: &[u64] = &[param::AUTHORIZATION_TOKEN, param::INCLUDE_PROPERTIES];
const SUBSCRIBE_OK_PARAMS: &[u64] = &[param::EXPIRES, param::LARGEST_OBJECT];
const REQUEST_OK_PARAMS: &[u64] = &[param::EXPIRES, param::LARGEST_OBJECT];
const PUBLISH_PARAMS: &[u64] = &[
    param::AUTHORIZATION_TOKEN,
    param::EXPIRES,
    param::LARGEST_OBJECT,
    param::FORWARD,
];
const FETCH_PARAMS: &[u64] = &[
    param::AUTHORIZATION_TOKEN,
    param::FILL_TIMEOUT,
    param::SUBSCRIBER_PRIORITY,
    param::LOCATION_FILTER,
    param::GROUP_ORDER,
    param::SUBGROUP_FILTER,
    param::OBJECTID_FILTER,
    param::PRIORITY_FILTER,
    param::OBJECT_PROPERTY_FILTER,
    param::INCLUDE_PROPERTIES,
];
const FETCH_LIFTED: &[u64] = &[
    param::SUBSCRIBER_PRIORITY,
    param::LOCATION_FILTER,
    param::GROUP_ORDER,
];
const REQUEST_UPDATE_PARAMS: &[u64] = &[
    param::OBJECT_DELIVERY_TIMEOUT,
    param::AUTHORIZATION_TOKEN,
    param::SUBGROUP_DELIVERY_TIMEOUT,
    param::FORWARD,
    param::SUBSCRIBER_PRIORITY,
    param::LOCATION_FILTER,
    param::FILL_PARAMETERS,
    param::SUBGROUP_FILTER,
    param::OBJECTID_FILTER,
    param::PRIORITY_FILTER,
    param::OBJECT_PROPERTY_FILTER,
    param::TRACK_PROPERTY_FILTER,
    param::NEW_GROUP_REQUEST,
    param::TRACK_NAMESPACE_PREFIX,
];
const NAMESPACE_PARAMS: &[u64] = &[param::AUTHORIZATION_TOKEN];
const SUBSCRIBE_TRACKS_PARAMS: &[u64] = &[
    param::OBJECT_DELIVERY_TIMEOUT,
    param::AUTHORIZATION_TOKEN,
    param::RENDEZVOUS_TIMEOUT,
    param::SUBGROUP_DELIVERY_TIMEOUT,
    param::FORWARD,
    param::SUBSCRIBER_PRIORITY,
    param::LOCATION_FILTER,
    param::GROUP_ORDER,
    param::FILL_PARAMETERS,
    param::SUBGROUP_FILTER,
    param::OBJECTID_FILTER,
    param::PRIORITY_FILTER,
    param::OBJECT_PROPERTY_FILTER,
    param::TRACK_PROPERTY_FILTER,
    param::NEW_GROUP_REQUEST,
    param::INCLUDE_PROPERTIES,
];
const NO_PARAMS: &[u64] = &[];

/// Setup options that may appear at most once; unknown ones may repeat.
const SINGLE_SETUP_OPTIONS: [u64; 6] = [
    setup_option::PATH,
    setup_option::MAX_AUTH_TOKEN_CACHE_SIZE,
    setup_option::AUTHORITY,
    setup_option::MOQT_IMPLEMENTATION,
    setup_option::MAX_FILTER_RANGES,
    setup_option::MAX_REQUEST_UPDATES,
];

/// The parameters of `params` not in `lifted`, as the model keeps them.
fn kept(params: &Params, lifted: &[u64], dialect: Dialect) -> Parameters {
    Parameters(
        params
            .iter()
            .filter(|(key, _)| !lifted.contains(key))
            .map(|(key, value)| to_model(*key, value, dialect.filter))
            .collect(),
    )
}

/// The model's kept parameters, back as values, refusing any that `lifted` makes fields.
fn unkept(params: &Parameters, lifted: &[u64], dialect: Dialect) -> Result<Params, EncodeError> {
    params
        .0
        .iter()
        .map(|pair| {
            if lifted.contains(&pair.key) {
                return Err(EncodeError::Invalid(
                    "the parameter travels in a field of the model",
                ));
            }
            from_model(pair, dialect.filter)
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Names

const EMPTY_FIELD: &str = "track namespace field of 0 bytes";

/// Reads a Track Namespace of `min_fields` to 32 non-empty fields.
pub(crate) fn read_namespace(
    buf: &mut &[u8],
    min_fields: usize,
) -> Result<TrackNamespace, DecodeError> {
    let namespace = TrackNamespace::read_fields_in::<Vi64>(buf, MAX_FULL_TRACK_NAME_LEN)?;
    if namespace.0.iter().any(Vec::is_empty) {
        return Err(DecodeError::ProtocolViolation(EMPTY_FIELD));
    }
    if namespace.0.len() < min_fields {
        return Err(DecodeError::ProtocolViolation(
            "track namespace must have 1 to 32 fields",
        ));
    }
    Ok(namespace)
}

fn write_namespace(namespace: &TrackNamespace, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    if namespace.0.iter().any(Vec::is_empty) {
        return Err(EncodeError::Invalid(EMPTY_FIELD));
    }
    namespace.write_fields_in::<Vi64>(out)
}

fn read_name(buf: &mut &[u8]) -> Result<(TrackNamespace, Vec<u8>), DecodeError> {
    let namespace = read_namespace(buf, 0)?;
    read_track_name_in::<Vi64>(buf, namespace)
}

fn write_name(
    namespace: &TrackNamespace,
    name: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    write_namespace(namespace, out)?;
    write_track_name_in::<Vi64>(namespace, name, out)
}

// ---------------------------------------------------------------------------------------------
// SETUP and GOAWAY

fn read_setup_options(buf: &mut &[u8]) -> Result<Parameters, DecodeError> {
    let pairs = read_block_in::<Vi64>(buf)?;
    *buf = &[];
    if has_repeat(&pairs, &SINGLE_SETUP_OPTIONS) {
        return Err(DecodeError::ProtocolViolation("setup option repeated"));
    }
    Ok(Parameters(pairs))
}

fn write_setup_options(params: &Parameters, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    if has_repeat(&params.0, &SINGLE_SETUP_OPTIONS) {
        return Err(EncodeError::Invalid("setup option repeated"));
    }
    write_block_in::<Vi64>(&params.0, out)
}

fn read_goaway(buf: &mut &[u8]) -> Result<Goaway, DecodeError> {
    let new_session_uri = GOAWAY_URI.read_in::<Vi64>(buf)?;
    // The time the sender waits before closing is not modelled.
    let _timeout = Vi64::get(buf)?;
    Ok(Goaway { new_session_uri })
}

fn write_goaway(m: &Goaway, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    GOAWAY_URI.write_in::<Vi64>(&m.new_session_uri, out)?;
    // Timeout 0: no specific deadline.
    Vi64::put(0, out)
}

// ---------------------------------------------------------------------------------------------
// Subscriptions

/// The parameters that state a subscription's terms, each left out when it has the value
/// the receiver assumes in its absence.
fn subscription_terms(m: &Subscribe) -> Result<Params, EncodeError> {
    let mut params = Params::new();
    if !m.forward {
        params.push((param::FORWARD, Param::Int(0)));
    }
    if m.subscriber_priority != DEFAULT_PRIORITY {
        params.push((
            param::SUBSCRIBER_PRIORITY,
            Param::Int(m.subscriber_priority.into()),
        ));
    }
    if !is_unfiltered(&m.filter) {
        params.push((param::LOCATION_FILTER, Param::Filter(m.filter)));
    }
    if m.group_order != GroupOrder::Publisher {
        params.push((param::GROUP_ORDER, Param::Int(m.group_order as u64)));
    }
    if let Some(fill) = &m.fill {
        params.push((param::FILL_PARAMETERS, Param::Fill(fill.clone())));
    }
    Ok(params)
}

/// Subscriber priority assumed when a message states none.
const DEFAULT_PRIORITY: u8 = 128;

fn priority(params: &Params) -> u8 {
    int(params, param::SUBSCRIBER_PRIORITY).map_or(DEFAULT_PRIORITY, |v| v as u8)
}

fn filter(params: &Params) -> FilterType {
    match find(params, param::LOCATION_FILTER) {
        Some(Param::Filter(filter)) => *filter,
        _ => UNFILTERED,
    }
}

fn write_subscribe(
    m: &Subscribe,
    track_status: bool,
    dialect: Dialect,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    Vi64::put(m.request_id, out)?;
    write_name(&m.namespace, &m.track_name, out)?;
    if track_status {
        if m.fill.is_some() {
            return Err(EncodeError::Invalid("TRACK_STATUS has no fill"));
        }
        let params = unkept(&m.params, &[], dialect)?;
        write_params(&params, dialect.filter, TRACK_STATUS_PARAMS, out)
    } else {
        let mut params = subscription_terms(m)?;
        params.extend(unkept(&m.params, SUBSCRIBE_LIFTED, dialect)?);
        write_params(&params, dialect.filter, SUBSCRIBE_PARAMS, out)
    }
}

fn read_subscribe(
    buf: &mut &[u8],
    track_status: bool,
    dialect: Dialect,
) -> Result<Subscribe, DecodeError> {
    let request_id = Vi64::get(buf)?;
    let (namespace, track_name) = read_name(buf)?;
    let allowed = if track_status {
        TRACK_STATUS_PARAMS
    } else {
        SUBSCRIBE_PARAMS
    };
    let params = read_params(buf, dialect.filter, allowed)?;
    Ok(Subscribe {
        request_id,
        namespace,
        track_name,
        subscriber_priority: priority(&params),
        group_order: int(&params, param::GROUP_ORDER)
            .and_then(order_from)
            .unwrap_or(GroupOrder::Publisher),
        forward: int(&params, param::FORWARD) != Some(0),
        filter: filter(&params),
        fill: match find(&params, param::FILL_PARAMETERS) {
            Some(Param::Fill(fill)) => Some(fill.clone()),
            _ => None,
        },
        params: kept(&params, SUBSCRIBE_LIFTED, dialect),
    })
}

/// EXPIRES and LARGEST_OBJECT, each left out when it says nothing.
fn expires_and_largest(expires_ms: u64, largest: &Option<Location>) -> Params {
    let mut params = Params::new();
    if expires_ms != 0 {
        params.push((param::EXPIRES, Param::Int(expires_ms)));
    }
    if let Some(largest) = largest {
        params.push((param::LARGEST_OBJECT, Param::Location(*largest)));
    }
    params
}

fn largest(params: &Params) -> Option<Location> {
    match find(params, param::LARGEST_OBJECT) {
        Some(Param::Location(location)) => Some(*location),
        _ => None,
    }
}

fn write_subscribe_ok(
    m: &SubscribeOk,
    dialect: Dialect,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    Vi64::put(m.track_alias, out)?;
    write_params(
        &expires_and_largest(m.expires_ms, &m.largest),
        dialect.filter,
        SUBSCRIBE_OK_PARAMS,
        out,
    )?;
    write_track_extensions_in::<Vi64>(m.group_order, &m.params.0, out)
}

fn read_subscribe_ok(
    buf: &mut &[u8],
    request_id: u64,
    dialect: Dialect,
) -> Result<SubscribeOk, DecodeError> {
    let track_alias = Vi64::get(buf)?;
    let params = read_params(buf, dialect.filter, SUBSCRIBE_OK_PARAMS)?;
    let (group_order, properties) = read_track_extensions_in::<Vi64>(buf)?;
    Ok(SubscribeOk {
        request_id,
        track_alias,
        expires_ms: int(&params, param::EXPIRES).unwrap_or(0),
        group_order,
        largest: largest(&params),
        params: Parameters(properties),
    })
}

/// What a REQUEST_UPDATE's parameters make of the model's fields: start, end group,
/// subscriber priority and forward. Absent (unchanged) ones leave a field neutral: {0, 0},
/// open ended, 128, forwarding.
fn update_fields(params: &Params) -> (Location, Option<u64>, u8, bool) {
    let (start, end_group) = match filter(params) {
        FilterType::AbsoluteStart(start) => (start, None),
        FilterType::AbsoluteRange { start, end_group } => (start, Some(end_group)),
        _ => (Location::default(), None),
    };
    (
        start,
        end_group,
        priority(params),
        int(params, param::FORWARD) != Some(0),
    )
}

fn write_request_update(
    m: &SubscribeUpdate,
    dialect: Dialect,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let params = unkept(&m.params, &[], dialect)?;
    if update_fields(&params) != (m.start, m.end_group, m.subscriber_priority, m.forward) {
        return Err(EncodeError::Invalid(
            "a REQUEST_UPDATE states its changes as parameters: the fields must match them",
        ));
    }
    Vi64::put(m.request_id, out)?;
    write_params(&params, dialect.filter, REQUEST_UPDATE_PARAMS, out)
}

fn read_request_update(
    buf: &mut &[u8],
    subscription_request_id: u64,
    dialect: Dialect,
) -> Result<SubscribeUpdate, DecodeError> {
    let request_id = Vi64::get(buf)?;
    let params = read_params(buf, dialect.filter, REQUEST_UPDATE_PARAMS)?;
    let (start, end_group, subscriber_priority, forward) = update_fields(&params);
    Ok(SubscribeUpdate {
        request_id,
        subscription_request_id,
        start,
        end_group,
        subscriber_priority,
        forward,
        params: kept(&params, &[], dialect),
    })
}

fn write_publish_done(m: &PublishDone, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    Vi64::put(publish_done_from_model(m.status), out)?;
    let stream_count = if m.stream_count == MAX_VARINT {
        UNKNOWN_STREAM_COUNT
    } else {
        m.stream_count
    };
    Vi64::put(stream_count, out)?;
    REASON_PHRASE.write_in::<Vi64>(&m.reason, out)
}

fn read_publish_done(buf: &mut &[u8], request_id: u64) -> Result<PublishDone, DecodeError> {
    let status = publish_done_to_model(Vi64::get(buf)?);
    let stream_count = match Vi64::get(buf)? {
        UNKNOWN_STREAM_COUNT => MAX_VARINT,
        count => count,
    };
    Ok(PublishDone {
        request_id,
        status,
        stream_count,
        reason: REASON_PHRASE.read_in::<Vi64>(buf)?,
    })
}

fn write_publish(m: &Publish, dialect: Dialect, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    Vi64::put(m.request_id, out)?;
    write_name(&m.namespace, &m.track_name, out)?;
    Vi64::put(m.track_alias, out)?;
    let mut params = expires_and_largest(0, &m.largest);
    if !m.forward {
        params.push((param::FORWARD, Param::Int(0)));
    }
    // AUTHORIZATION_TOKEN is the one message parameter `params` keeps; the rest are track
    // properties.
    let (tokens, properties): (Vec<_>, Vec<_>) = m
        .params
        .0
        .iter()
        .cloned()
        .partition(|p| p.key == param::AUTHORIZATION_TOKEN);
    params.extend(unkept(&Parameters(tokens), &[], dialect)?);
    write_params(&params, dialect.filter, PUBLISH_PARAMS, out)?;
    write_track_extensions_in::<Vi64>(m.group_order, &properties, out)
}

fn read_publish(buf: &mut &[u8], dialect: Dialect) -> Result<Publish, DecodeError> {
    let request_id = Vi64::get(buf)?;
    let (namespace, track_name) = read_name(buf)?;
    let track_alias = Vi64::get(buf)?;
    let params = read_params(buf, dialect.filter, PUBLISH_PARAMS)?;
    let (group_order, properties) = read_track_extensions_in::<Vi64>(buf)?;
    // EXPIRES is not modelled for PUBLISH: its number is TIMESCALE's among the properties
    // the model keeps beside the tokens.
    let mut kept = kept(
        &params,
        &[param::EXPIRES, param::LARGEST_OBJECT, param::FORWARD],
        dialect,
    );
    // A property numbered as AUTHORIZATION_TOKEN could not be told from a token in `params`;
    // none is defined, so it is dropped.
    kept.0.extend(
        properties
            .into_iter()
            .filter(|p| p.key != param::AUTHORIZATION_TOKEN),
    );
    Ok(Publish {
        request_id,
        namespace,
        track_name,
        track_alias,
        group_order,
        largest: largest(&params),
        forward: int(&params, param::FORWARD) != Some(0),
        params: kept,
    })
}

// ---------------------------------------------------------------------------------------------
// Fetches

/// The model's end of a range with no end: all of the last possible group.
const OPEN_END: Location = Location {
    group: u64::MAX,
    object: 0,
};

/// A standalone range as a Location Filter.
fn range_filter(start: Location, end: Location) -> FilterType {
    match end {
        OPEN_END => FilterType::AbsoluteStart(start),
        Location { group, object: 0 } => FilterType::AbsoluteRange {
            start,
            end_group: group,
        },
        Location { group, object } => FilterType::AbsoluteObjectRange {
            start,
            end: Location {
                group,
                object: object - 1,
            },
        },
    }
}

/// The fetch type a Location Filter describes.
fn fetch_type(namespace: TrackNamespace, track_name: Vec<u8>, filter: FilterType) -> FetchType {
    let standalone = |start, end| FetchType::Standalone {
        namespace: namespace.clone(),
        track_name: track_name.clone(),
        start,
        end,
    };
    match filter {
        FilterType::AbsoluteStart(start) => standalone(start, OPEN_END),
        FilterType::AbsoluteRange { start, end_group } => standalone(
            start,
            Location {
                group: end_group,
                object: 0,
            },
        ),
        FilterType::AbsoluteObjectRange { start, end } => {
            // The whole last group when it ends at the last possible object.
            let end = match end.object.checked_add(1) {
                Some(object) => Location {
                    group: end.group,
                    object,
                },
                None => Location {
                    group: end.group,
                    object: 0,
                },
            };
            standalone(start, end)
        }
        relative => FetchType::Filtered {
            namespace,
            track_name,
            filter: relative,
        },
    }
}

fn write_fetch(m: &Fetch, dialect: Dialect, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    let (namespace, track_name, filter) = match &m.fetch_type {
        FetchType::Standalone {
            namespace,
            track_name,
            start,
            end,
        } => (namespace, track_name, range_filter(*start, *end)),
        FetchType::Filtered {
            namespace,
            track_name,
            filter,
        } => (namespace, track_name, *filter),
        FetchType::RelativeJoining(_) | FetchType::AbsoluteJoining(_) => {
            return Err(EncodeError::Invalid(
                "draft-20 has no joining FETCH: subscribe with a fill",
            ));
        }
    };
    Vi64::put(m.request_id, out)?;
    write_name(namespace, track_name, out)?;
    let mut params = Params::new();
    if m.subscriber_priority != DEFAULT_PRIORITY {
        params.push((
            param::SUBSCRIBER_PRIORITY,
            Param::Int(m.subscriber_priority.into()),
        ));
    }
    if !is_unfiltered(&filter) {
        params.push((param::LOCATION_FILTER, Param::Filter(filter)));
    }
    // An absent order means ascending.
    if m.group_order == GroupOrder::Descending {
        params.push((
            param::GROUP_ORDER,
            Param::Int(GroupOrder::Descending as u64),
        ));
    }
    params.extend(unkept(&m.params, FETCH_LIFTED, dialect)?);
    write_params(&params, dialect.filter, FETCH_PARAMS, out)
}

fn read_fetch(buf: &mut &[u8], dialect: Dialect) -> Result<Fetch, DecodeError> {
    let request_id = Vi64::get(buf)?;
    let (namespace, track_name) = read_name(buf)?;
    let params = read_params(buf, dialect.filter, FETCH_PARAMS)?;
    Ok(Fetch {
        request_id,
        subscriber_priority: priority(&params),
        group_order: int(&params, param::GROUP_ORDER)
            .and_then(order_from)
            .unwrap_or(GroupOrder::Ascending),
        fetch_type: fetch_type(namespace, track_name, filter(&params)),
        params: kept(&params, FETCH_LIFTED, dialect),
    })
}

fn write_fetch_ok(m: &FetchOk, dialect: Dialect, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    out.push(u8::from(m.end_of_track));
    m.end_location.write_in::<Vi64>(out)?;
    write_params(&[], dialect.filter, NO_PARAMS, out)?;
    write_track_extensions_in::<Vi64>(m.group_order, &m.params.0, out)
}

fn read_fetch_ok(
    buf: &mut &[u8],
    request_id: u64,
    dialect: Dialect,
) -> Result<FetchOk, DecodeError> {
    let end_of_track = match read_u8(buf)? {
        0 => false,
        1 => true,
        _ => {
            return Err(DecodeError::ProtocolViolation(
                "end of track must be 0 or 1",
            ));
        }
    };
    let end_location = Location::read_in::<Vi64>(buf)?;
    read_params(buf, dialect.filter, NO_PARAMS)?;
    let (group_order, properties) = read_track_extensions_in::<Vi64>(buf)?;
    Ok(FetchOk {
        request_id,
        group_order,
        end_of_track,
        end_location,
        params: Parameters(properties),
    })
}

// ---------------------------------------------------------------------------------------------
// Namespaces

fn write_publish_namespace(
    m: &PublishNamespace,
    dialect: Dialect,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    Vi64::put(m.request_id, out)?;
    if m.namespace.0.is_empty() {
        return Err(EncodeError::Invalid(
            "track namespace must have 1 to 32 fields",
        ));
    }
    write_namespace(&m.namespace, out)?;
    write_params(
        &unkept(&m.params, &[], dialect)?,
        dialect.filter,
        NAMESPACE_PARAMS,
        out,
    )
}

fn read_publish_namespace(
    buf: &mut &[u8],
    dialect: Dialect,
) -> Result<PublishNamespace, DecodeError> {
    Ok(PublishNamespace {
        request_id: Vi64::get(buf)?,
        namespace: read_namespace(buf, 1)?,
        params: kept(
            &read_params(buf, dialect.filter, NAMESPACE_PARAMS)?,
            &[],
            dialect,
        ),
    })
}

/// SUBSCRIBE_NAMESPACE, or SUBSCRIBE_TRACKS (same layout, more parameters).
fn write_subscribe_namespace(
    m: &SubscribeNamespace,
    allowed: &[u64],
    dialect: Dialect,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    Vi64::put(m.request_id, out)?;
    write_namespace(&m.namespace_prefix.0, out)?;
    write_params(
        &unkept(&m.params, &[], dialect)?,
        dialect.filter,
        allowed,
        out,
    )
}

fn read_subscribe_namespace(
    buf: &mut &[u8],
    allowed: &[u64],
    dialect: Dialect,
) -> Result<SubscribeNamespace, DecodeError> {
    Ok(SubscribeNamespace {
        request_id: Vi64::get(buf)?,
        namespace_prefix: NamespacePrefix(read_namespace(buf, 0)?),
        params: kept(&read_params(buf, dialect.filter, allowed)?, &[], dialect),
    })
}

// ---------------------------------------------------------------------------------------------
// REQUEST_OK and REQUEST_ERROR

fn write_request_ok(
    params: &Params,
    dialect: Dialect,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    write_params(params, dialect.filter, REQUEST_OK_PARAMS, out)
}

/// REQUEST_OK answering `request` (or, on a stream where no OK answers the request, an
/// update sent on it: TRACK_STATUS_OK stands in for that answer, as in draft-16).
fn read_request_ok(
    buf: &mut &[u8],
    request: StreamRequest,
    dialect: Dialect,
) -> Result<ControlMessage, DecodeError> {
    use ControlMessage as M;
    let request_id = request.request_id;
    let params = read_params(buf, dialect.filter, REQUEST_OK_PARAMS)?;
    let (group_order, properties) = read_track_extensions_in::<Vi64>(buf)?;
    // Only TRACK_STATUS_OK carries track properties; these carry nothing at all.
    let plain = |params: &Params| -> Result<(), DecodeError> {
        if !properties.is_empty() || group_order != GroupOrder::Ascending {
            return Err(DecodeError::ProtocolViolation(
                "track properties in a REQUEST_OK that answers no TRACK_STATUS",
            ));
        }
        match params.is_empty() {
            true => Ok(()),
            false => Err(DecodeError::ProtocolViolation(
                "parameters in a plain REQUEST_OK",
            )),
        }
    };
    Ok(match (request.ours, request.kind) {
        (true, RequestKind::PublishNamespace) => {
            plain(&params)?;
            M::PublishNamespaceOk(PublishNamespaceOk { request_id })
        }
        (true, RequestKind::SubscribeNamespace | RequestKind::SubscribeTracks) => {
            plain(&params)?;
            M::SubscribeNamespaceOk(SubscribeNamespaceOk { request_id })
        }
        (true, RequestKind::Publish) => {
            plain(&Params::new())?;
            M::PublishOk(PublishOk {
                request_id,
                forward: true,
                subscriber_priority: DEFAULT_PRIORITY,
                group_order: GroupOrder::Publisher,
                filter: UNFILTERED,
                params: kept(&params, &[], dialect),
            })
        }
        _ => M::TrackStatusOk(SubscribeOk {
            request_id,
            track_alias: 0,
            expires_ms: int(&params, param::EXPIRES).unwrap_or(0),
            group_order,
            largest: largest(&params),
            params: Parameters(properties),
        }),
    })
}

/// Writes a Redirect structure.
fn write_redirect(m: &Redirect, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    GOAWAY_URI.write_in::<Vi64>(&m.connect_uri, out)?;
    match &m.target {
        None => {
            Vi64::put(0, out)?;
            Vi64::put(0, out)
        }
        Some((namespace, name)) => {
            if namespace.0.is_empty() {
                return Err(EncodeError::Invalid(
                    "a redirect target names a namespace of 1 to 32 fields",
                ));
            }
            write_name(namespace, name, out)
        }
    }
}

fn read_redirect(
    buf: &mut &[u8],
    request_id: u64,
    reason: String,
) -> Result<Redirect, DecodeError> {
    let connect_uri = GOAWAY_URI.read_in::<Vi64>(buf)?;
    let (namespace, name) = read_name(buf)?;
    let target = match (namespace.0.is_empty(), name.is_empty()) {
        (true, true) => None,
        (true, false) => {
            return Err(DecodeError::ProtocolViolation(
                "a redirect target with a track name and no namespace",
            ));
        }
        (false, _) => Some((namespace, name)),
    };
    Ok(Redirect {
        request_id,
        reason,
        connect_uri,
        target,
    })
}

fn write_request_error(refusal: &Refusal, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    Vi64::put(request_error_from_draft14(refusal.kind, refusal.code), out)?;
    // Retry interval 0: do not retry.
    Vi64::put(0, out)?;
    REASON_PHRASE.write_in::<Vi64>(&refusal.reason, out)
}

fn read_request_error(
    buf: &mut &[u8],
    request: StreamRequest,
) -> Result<ControlMessage, DecodeError> {
    let code = Vi64::get(buf)?;
    let _retry_interval = Vi64::get(buf)?;
    let reason = REASON_PHRASE.read_in::<Vi64>(buf)?;
    if code == request_error::REDIRECT {
        return Ok(ControlMessage::Redirect(read_redirect(
            buf,
            request.request_id,
            reason,
        )?));
    }
    // Refusing the peer's own request is its business; on its stream an error answers an
    // update of ours.
    let kind = if request.ours {
        request.kind
    } else {
        RequestKind::SubscribeUpdate
    };
    Ok(Refusal {
        kind,
        request_id: request.request_id,
        code: request_error_to_draft14(kind, code),
        reason,
    }
    .into_message())
}

// ---------------------------------------------------------------------------------------------
// Framing

fn write_payload(
    msg: &ControlMessage,
    dialect: Dialect,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    use ControlMessage as M;
    if let Some(refusal) = Refusal::of(msg) {
        return write_request_error(&refusal, out);
    }
    match msg {
        M::ClientSetup(m) => write_setup_options(&m.params, out),
        M::ServerSetup(m) => write_setup_options(&m.params, out),
        M::Goaway(m) => write_goaway(m, out),
        M::Subscribe(m) => write_subscribe(m, false, dialect, out),
        M::TrackStatus(m) => write_subscribe(m, true, dialect, out),
        M::SubscribeOk(m) => write_subscribe_ok(m, dialect, out),
        M::SubscribeUpdate(m) => write_request_update(m, dialect, out),
        M::PublishDone(m) => write_publish_done(m, out),
        M::Publish(m) => write_publish(m, dialect, out),
        M::Fetch(m) => write_fetch(m, dialect, out),
        M::FetchOk(m) => write_fetch_ok(m, dialect, out),
        M::PublishNamespace(m) => write_publish_namespace(m, dialect, out),
        M::SubscribeNamespace(m) => write_subscribe_namespace(m, NAMESPACE_PARAMS, dialect, out),
        M::SubscribeTracks(m) => {
            write_subscribe_namespace(m, SUBSCRIBE_TRACKS_PARAMS, dialect, out)
        }
        M::TrackStatusOk(m) => {
            write_request_ok(&expires_and_largest(m.expires_ms, &m.largest), dialect, out)?;
            write_track_extensions_in::<Vi64>(m.group_order, &m.params.0, out)
        }
        M::PublishNamespaceOk(_) | M::SubscribeNamespaceOk(_) | M::SubscribeUpdateOk(_) => {
            write_request_ok(&Params::new(), dialect, out)
        }
        M::PublishOk(m) => {
            if (m.forward, m.subscriber_priority, m.group_order, m.filter)
                != (true, DEFAULT_PRIORITY, GroupOrder::Publisher, UNFILTERED)
            {
                return Err(EncodeError::Invalid(
                    "draft-20's PUBLISH_OK states no terms: they go in a REQUEST_UPDATE",
                ));
            }
            write_request_ok(&unkept(&m.params, &[], dialect)?, dialect, out)
        }
        M::Redirect(m) => {
            Vi64::put(request_error::REDIRECT, out)?;
            Vi64::put(0, out)?;
            REASON_PHRASE.write_in::<Vi64>(&m.reason, out)?;
            write_redirect(m, out)
        }
        _ => Err(NO_FORM),
    }
}

const NO_FORM: EncodeError = EncodeError::Invalid(
    "no draft-20 message: said by closing the request's stream, or not at all",
);

/// Appends `msg` as a framed draft-20 control message (Request IDs of answers left out: the
/// stream they travel on names the request). Fails without writing anything if the message
/// has no draft-20 form, breaks a rule, or its payload exceeds 65535 bytes.
pub(crate) fn encode_control(
    msg: &ControlMessage,
    dialect: Dialect,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let start = out.len();
    let result = (|| {
        Vi64::put(message_type(msg).ok_or(NO_FORM)?, out)?;
        let length_at = out.len();
        out.extend_from_slice(&[0, 0]);
        write_payload(msg, dialect, out)?;
        let len = out.len() - length_at - 2;
        let len16 = u16::try_from(len).map_err(|_| EncodeError::MessageTooLong(len))?;
        out[length_at..length_at + 2].copy_from_slice(&len16.to_be_bytes());
        Ok(())
    })();
    if result.is_err() {
        out.truncate(start);
    }
    result
}

/// Which messages each channel carries, decoded into the model.
fn read_payload(
    message_type: u64,
    buf: &mut &[u8],
    channel: Channel,
    dialect: Dialect,
) -> Result<ControlMessage, DecodeError> {
    use ControlMessage as M;
    let misplaced = |where_: &'static str| Err(DecodeError::ProtocolViolation(where_));
    match channel {
        Channel::Control { from_server } => match message_type {
            code::SETUP if from_server => Ok(M::ServerSetup(ServerSetup {
                version: dialect.version,
                params: read_setup_options(buf)?,
            })),
            code::SETUP => Ok(M::ClientSetup(ClientSetup {
                versions: vec![dialect.version],
                params: read_setup_options(buf)?,
            })),
            code::GOAWAY => Ok(M::Goaway(read_goaway(buf)?)),
            _ => misplaced("the control stream carries only SETUP and GOAWAY"),
        },
        Channel::NewRequest => match message_type {
            code::SUBSCRIBE => Ok(M::Subscribe(read_subscribe(buf, false, dialect)?)),
            code::TRACK_STATUS => Ok(M::TrackStatus(read_subscribe(buf, true, dialect)?)),
            code::FETCH => Ok(M::Fetch(read_fetch(buf, dialect)?)),
            code::PUBLISH => Ok(M::Publish(read_publish(buf, dialect)?)),
            code::PUBLISH_NAMESPACE => {
                Ok(M::PublishNamespace(read_publish_namespace(buf, dialect)?))
            }
            code::SUBSCRIBE_NAMESPACE => Ok(M::SubscribeNamespace(read_subscribe_namespace(
                buf,
                NAMESPACE_PARAMS,
                dialect,
            )?)),
            code::SUBSCRIBE_TRACKS => Ok(M::SubscribeTracks(read_subscribe_namespace(
                buf,
                SUBSCRIBE_TRACKS_PARAMS,
                dialect,
            )?)),
            _ => misplaced("a request stream begins with a request"),
        },
        Channel::Request(request) => {
            let id = request.request_id;
            match (message_type, request.ours, request.kind) {
                (code::SUBSCRIBE_OK, true, RequestKind::Subscribe) => {
                    Ok(M::SubscribeOk(read_subscribe_ok(buf, id, dialect)?))
                }
                (code::PUBLISH_DONE, true, RequestKind::Subscribe)
                | (code::PUBLISH_DONE, false, RequestKind::Publish) => {
                    Ok(M::PublishDone(read_publish_done(buf, id)?))
                }
                (code::FETCH_OK, true, RequestKind::Fetch) => {
                    Ok(M::FetchOk(read_fetch_ok(buf, id, dialect)?))
                }
                (code::REQUEST_OK, ..) => read_request_ok(buf, request, dialect),
                (code::REQUEST_ERROR, ..) => read_request_error(buf, request),
                // The requester's side: updates of its request.
                (code::REQUEST_UPDATE, false, _)
                | (code::REQUEST_UPDATE, true, RequestKind::Publish) => {
                    Ok(M::SubscribeUpdate(read_request_update(buf, id, dialect)?))
                }
                // A GOAWAY on a request stream moves that request elsewhere.
                (code::GOAWAY, ..) => {
                    let goaway = read_goaway(buf)?;
                    Ok(M::Redirect(Redirect {
                        request_id: id,
                        reason: "GOAWAY".into(),
                        connect_uri: goaway.new_session_uri,
                        target: None,
                    }))
                }
                _ => misplaced("a message that does not belong on this request's stream"),
            }
        }
    }
}

/// Whether draft-20 defines `message_type`.
fn is_known(message_type: u64) -> bool {
    name_of(message_type) != "unknown"
}

/// Decodes one framed draft-20 control message, read on `channel`, from the front of `buf`
/// into the model, returning it and the bytes used. [`DecodeError::Incomplete`] until all of
/// it is there; an unknown type is reported as soon as it is read; fields that run past the
/// length or leave bytes over are a protocol violation.
pub(crate) fn decode_control(
    buf: &[u8],
    channel: Channel,
    dialect: Dialect,
) -> Result<(ControlMessage, usize), DecodeError> {
    let mut rest = buf;
    let message_type = Vi64::get(&mut rest)?;
    if !is_known(message_type) {
        return Err(DecodeError::UnknownMessageType(message_type));
    }
    let len = read_u16(&mut rest)?;
    let mut payload = take(&mut rest, len.into())?;
    let message =
        read_payload(message_type, &mut payload, channel, dialect).map_err(|err| match err {
            DecodeError::Incomplete => {
                DecodeError::ProtocolViolation("control message shorter than its fields")
            }
            other => other,
        })?;
    if !payload.is_empty() {
        return Err(DecodeError::ProtocolViolation(
            "control message longer than its fields",
        ));
    }
    Ok((message, buf.len() - rest.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_types_draft20_defines_have_names() {
        for t in [
            0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x0B, 0x0D, 0x0E, 0x0F, 0x10, 0x16, 0x18,
            0x1D, 0x22, 0x50, 0x51, 0x2F00,
        ] {
            assert!(is_known(t), "{t:#x}");
        }
        for t in [0x01, 0x0A, 0x11, 0x15, 0x17, 0x1A, 0x1E, 0x20, 0x21, 0x40] {
            assert!(!is_known(t), "{t:#x}");
        }
    }
}
