//! Draft-16 control messages, read into and written from the message model.
//!
//! The framing (type, 16-bit length, payload) is the same as draft-14's. What differs is the
//! payloads: most request properties moved into parameters, parameters are delta-coded, one
//! reply pair (REQUEST_OK / REQUEST_ERROR) answers most requests, and some replies carry track
//! extensions. [`super`] documents how each draft-16 message maps onto a
//! [`ControlMessage`].

use crate::cursor::{read_u16, take};
use crate::message::common::{
    GOAWAY_URI, Wire, get, put, read_flag, read_full_name, write_flag, write_full_name,
};
use crate::message::{
    Announcer, ClientSetup, ControlMessage, Fetch, FetchOk, FetchType, FilterType, GroupOrder,
    KeyValuePair, Location, NamespacePrefix, Parameters, Publish, PublishDone, PublishNamespace,
    PublishNamespaceCancel, PublishNamespaceDone, PublishOk, Refusal, RequestKind, ServerSetup,
    Subscribe, SubscribeError, SubscribeNamespace, SubscribeOk, SubscribeUpdate, TrackNamespace,
    Value, setup_param,
};
use crate::{DecodeError, EncodeError};

use super::codes::{
    extension, param, publish_done_from_draft14, publish_done_to_draft14,
    request_error_from_draft14, request_error_to_draft14,
};
use super::kvp::{
    bytes_of, has_repeat, int_of, read_block_in, read_list, write_block_in, write_list,
};
use super::{DEFAULT_SUBSCRIBER_PRIORITY, VERSION};
use crate::varint::{Form, Quic};

/// Draft-16 message type codes.
mod code {
    pub const REQUEST_UPDATE: u64 = 0x02;
    pub const SUBSCRIBE: u64 = 0x03;
    pub const SUBSCRIBE_OK: u64 = 0x04;
    pub const REQUEST_ERROR: u64 = 0x05;
    pub const PUBLISH_NAMESPACE: u64 = 0x06;
    pub const REQUEST_OK: u64 = 0x07;
    pub const NAMESPACE: u64 = 0x08;
    pub const PUBLISH_NAMESPACE_DONE: u64 = 0x09;
    pub const UNSUBSCRIBE: u64 = 0x0A;
    pub const PUBLISH_DONE: u64 = 0x0B;
    pub const PUBLISH_NAMESPACE_CANCEL: u64 = 0x0C;
    pub const TRACK_STATUS: u64 = 0x0D;
    pub const NAMESPACE_DONE: u64 = 0x0E;
    pub const GOAWAY: u64 = 0x10;
    pub const SUBSCRIBE_NAMESPACE: u64 = 0x11;
    pub const MAX_REQUEST_ID: u64 = 0x15;
    pub const FETCH: u64 = 0x16;
    pub const FETCH_CANCEL: u64 = 0x17;
    pub const FETCH_OK: u64 = 0x18;
    pub const REQUESTS_BLOCKED: u64 = 0x1A;
    pub const PUBLISH: u64 = 0x1D;
    pub const PUBLISH_OK: u64 = 0x1E;
    pub const CLIENT_SETUP: u64 = 0x20;
    pub const SERVER_SETUP: u64 = 0x21;
}

/// The draft-16 message type `msg` is sent as; `None` for the messages draft-16 does not
/// have (UNSUBSCRIBE_NAMESPACE, SUBSCRIBE_TRACKS, REDIRECT).
pub fn message_type(msg: &ControlMessage) -> Option<u64> {
    use ControlMessage as M;
    Some(match msg {
        M::ClientSetup(_) => code::CLIENT_SETUP,
        M::ServerSetup(_) => code::SERVER_SETUP,
        M::Goaway(_) => code::GOAWAY,
        M::MaxRequestId(_) => code::MAX_REQUEST_ID,
        M::RequestsBlocked(_) => code::REQUESTS_BLOCKED,
        M::Subscribe(_) => code::SUBSCRIBE,
        M::SubscribeOk(_) => code::SUBSCRIBE_OK,
        M::SubscribeUpdate(_) => code::REQUEST_UPDATE,
        M::Unsubscribe(_) => code::UNSUBSCRIBE,
        M::PublishDone(_) => code::PUBLISH_DONE,
        M::Publish(_) => code::PUBLISH,
        M::PublishOk(_) => code::PUBLISH_OK,
        M::Fetch(_) => code::FETCH,
        M::FetchOk(_) => code::FETCH_OK,
        M::FetchCancel(_) => code::FETCH_CANCEL,
        M::TrackStatus(_) => code::TRACK_STATUS,
        M::PublishNamespace(_) => code::PUBLISH_NAMESPACE,
        M::PublishNamespaceDone(_) => code::PUBLISH_NAMESPACE_DONE,
        M::PublishNamespaceCancel(_) => code::PUBLISH_NAMESPACE_CANCEL,
        M::SubscribeNamespace(_) => code::SUBSCRIBE_NAMESPACE,
        M::TrackStatusOk(_)
        | M::PublishNamespaceOk(_)
        | M::SubscribeNamespaceOk(_)
        | M::SubscribeUpdateOk(_) => code::REQUEST_OK,
        M::SubscribeError(_)
        | M::PublishError(_)
        | M::FetchError(_)
        | M::TrackStatusError(_)
        | M::PublishNamespaceError(_)
        | M::SubscribeNamespaceError(_) => code::REQUEST_ERROR,
        M::UnsubscribeNamespace(_) | M::SubscribeTracks(_) | M::Redirect(_) => return None,
    })
}

/// The draft-16 name of the message `msg` is sent as, for logs.
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
        code::PUBLISH_NAMESPACE_DONE => "PUBLISH_NAMESPACE_DONE",
        code::UNSUBSCRIBE => "UNSUBSCRIBE",
        code::PUBLISH_DONE => "PUBLISH_DONE",
        code::PUBLISH_NAMESPACE_CANCEL => "PUBLISH_NAMESPACE_CANCEL",
        code::TRACK_STATUS => "TRACK_STATUS",
        code::NAMESPACE_DONE => "NAMESPACE_DONE",
        code::GOAWAY => "GOAWAY",
        code::SUBSCRIBE_NAMESPACE => "SUBSCRIBE_NAMESPACE",
        code::MAX_REQUEST_ID => "MAX_REQUEST_ID",
        code::FETCH => "FETCH",
        code::FETCH_CANCEL => "FETCH_CANCEL",
        code::FETCH_OK => "FETCH_OK",
        code::REQUESTS_BLOCKED => "REQUESTS_BLOCKED",
        code::PUBLISH => "PUBLISH",
        code::PUBLISH_OK => "PUBLISH_OK",
        code::CLIENT_SETUP => "CLIENT_SETUP",
        code::SERVER_SETUP => "SERVER_SETUP",
        _ => "unknown",
    }
}

// ---------------------------------------------------------------------------------------------
// Parameters

/// Message parameter types draft-16 defines; any other is a protocol violation.
const KNOWN_PARAMS: [u64; 9] = [
    param::DELIVERY_TIMEOUT,
    param::AUTHORIZATION_TOKEN,
    param::EXPIRES,
    param::LARGEST_OBJECT,
    param::FORWARD,
    param::SUBSCRIBER_PRIORITY,
    param::SUBSCRIPTION_FILTER,
    param::GROUP_ORDER,
    param::NEW_GROUP_REQUEST,
];

/// Message parameters that may appear at most once (all but AUTHORIZATION_TOKEN).
const SINGLE_PARAMS: [u64; 8] = [
    param::DELIVERY_TIMEOUT,
    param::EXPIRES,
    param::LARGEST_OBJECT,
    param::FORWARD,
    param::SUBSCRIBER_PRIORITY,
    param::SUBSCRIPTION_FILTER,
    param::GROUP_ORDER,
    param::NEW_GROUP_REQUEST,
];

/// Setup parameters that may appear at most once; unknown ones may repeat.
const SINGLE_SETUP_PARAMS: [u64; 5] = [
    setup_param::PATH,
    setup_param::MAX_REQUEST_ID,
    setup_param::MAX_AUTH_TOKEN_CACHE_SIZE,
    setup_param::AUTHORITY,
    setup_param::MOQT_IMPLEMENTATION,
];

/// Track extensions that may appear at most once; unknown ones may repeat.
const SINGLE_EXTENSIONS: [u64; 6] = [
    extension::DELIVERY_TIMEOUT,
    extension::MAX_CACHE_DURATION,
    extension::IMMUTABLE_EXTENSIONS,
    extension::DEFAULT_PUBLISHER_PRIORITY,
    extension::DEFAULT_PUBLISHER_GROUP_ORDER,
    extension::DYNAMIC_GROUPS,
];

const REPEATED: &str = "parameter repeated";
const UNKNOWN_PARAM: &str = "unknown message parameter";
const NOT_IN_MESSAGE: &str = "parameter not defined for this draft-16 message";

/// Which parameters a message takes: `lifted` ones become fields of the draft-14 struct,
/// `kept` ones stay in its `params`. Known parameters in neither list do not apply to the
/// message; the draft says to ignore them, so decoding drops them and encoding refuses them.
struct Spec {
    lifted: &'static [u64],
    kept: &'static [u64],
}

const SUBSCRIBE_SPEC: Spec = Spec {
    lifted: &[
        param::FORWARD,
        param::SUBSCRIBER_PRIORITY,
        param::SUBSCRIPTION_FILTER,
        param::GROUP_ORDER,
    ],
    kept: &[
        param::DELIVERY_TIMEOUT,
        param::AUTHORIZATION_TOKEN,
        param::NEW_GROUP_REQUEST,
    ],
};
const TRACK_STATUS_SPEC: Spec = Spec {
    lifted: &[],
    kept: &[param::AUTHORIZATION_TOKEN],
};
const SUBSCRIBE_OK_SPEC: Spec = Spec {
    lifted: &[param::EXPIRES, param::LARGEST_OBJECT],
    kept: &[],
};
const PUBLISH_SPEC: Spec = Spec {
    lifted: &[param::LARGEST_OBJECT, param::FORWARD],
    kept: &[param::AUTHORIZATION_TOKEN, param::EXPIRES],
};
const PUBLISH_OK_SPEC: Spec = Spec {
    lifted: &[
        param::FORWARD,
        param::SUBSCRIBER_PRIORITY,
        param::SUBSCRIPTION_FILTER,
        param::GROUP_ORDER,
    ],
    kept: &[
        param::DELIVERY_TIMEOUT,
        param::EXPIRES,
        param::NEW_GROUP_REQUEST,
    ],
};
const FETCH_SPEC: Spec = Spec {
    lifted: &[param::SUBSCRIBER_PRIORITY, param::GROUP_ORDER],
    kept: &[param::AUTHORIZATION_TOKEN],
};
const NO_PARAMS: Spec = Spec {
    lifted: &[],
    kept: &[],
};
const REQUEST_UPDATE_SPEC: Spec = Spec {
    lifted: &[],
    kept: &[
        param::DELIVERY_TIMEOUT,
        param::AUTHORIZATION_TOKEN,
        param::FORWARD,
        param::SUBSCRIBER_PRIORITY,
        param::SUBSCRIPTION_FILTER,
        param::NEW_GROUP_REQUEST,
    ],
};
const REQUEST_OK_STATUS_SPEC: Spec = Spec {
    lifted: &[param::EXPIRES, param::LARGEST_OBJECT],
    kept: &[],
};
const PUBLISH_NAMESPACE_SPEC: Spec = Spec {
    lifted: &[],
    kept: &[param::AUTHORIZATION_TOKEN],
};
const SUBSCRIBE_NAMESPACE_SPEC: Spec = Spec {
    lifted: &[],
    kept: &[param::AUTHORIZATION_TOKEN, param::FORWARD],
};

/// A filter carried in a SUBSCRIPTION_FILTER parameter, which must fill it exactly.
fn parse_filter(mut bytes: &[u8]) -> Result<FilterType, DecodeError> {
    const MISMATCH: &str = "subscription filter does not match its parameter length";
    let filter = FilterType::read(&mut bytes).map_err(|err| match err {
        DecodeError::Incomplete => DecodeError::ProtocolViolation(MISMATCH),
        other => other,
    })?;
    if !bytes.is_empty() {
        return Err(DecodeError::ProtocolViolation(MISMATCH));
    }
    Ok(filter)
}

/// A Location carried in a LARGEST_OBJECT parameter, which must fill it exactly.
fn parse_location(mut bytes: &[u8]) -> Result<Location, DecodeError> {
    const MISMATCH: &str = "LARGEST_OBJECT is not one Location";
    let location =
        Location::read(&mut bytes).map_err(|_| DecodeError::KeyValueFormatting(MISMATCH))?;
    if !bytes.is_empty() {
        return Err(DecodeError::KeyValueFormatting(MISMATCH));
    }
    Ok(location)
}

fn order_from(value: u64) -> Option<GroupOrder> {
    match value {
        1 => Some(GroupOrder::Ascending),
        2 => Some(GroupOrder::Descending),
        _ => None,
    }
}

/// Checks the value of a known message parameter against the draft's rules.
fn check_param(pair: &KeyValuePair) -> Result<(), DecodeError> {
    let violation = |why| Err(DecodeError::ProtocolViolation(why));
    match (pair.key, &pair.value) {
        (param::DELIVERY_TIMEOUT, Value::Int(0)) => violation("DELIVERY_TIMEOUT of 0"),
        (param::FORWARD, Value::Int(v)) if *v > 1 => violation("forward must be 0 or 1"),
        (param::SUBSCRIBER_PRIORITY, Value::Int(v)) if *v > 255 => {
            violation("subscriber priority above 255")
        }
        (param::GROUP_ORDER, Value::Int(v)) if order_from(*v).is_none() => {
            violation("group order must be ascending (1) or descending (2)")
        }
        (param::SUBSCRIPTION_FILTER, Value::Bytes(b)) => parse_filter(b).map(drop),
        (param::LARGEST_OBJECT, Value::Bytes(b)) => parse_location(b).map(drop),
        _ => Ok(()),
    }
}

/// Message parameters split by a [`Spec`].
struct Split {
    lifted: Vec<KeyValuePair>,
    kept: Vec<KeyValuePair>,
}

impl Split {
    fn int(&self, key: u64) -> Option<u64> {
        int_of(&self.lifted, key)
    }

    fn bytes(&self, key: u64) -> Option<&[u8]> {
        bytes_of(&self.lifted, key)
    }

    fn forward(&self) -> bool {
        self.int(param::FORWARD) != Some(0)
    }

    /// SUBSCRIBER_PRIORITY, 128 when absent (checked to fit 8 bits).
    fn priority(&self) -> u8 {
        self.int(param::SUBSCRIBER_PRIORITY)
            .and_then(|v| u8::try_from(v).ok())
            .unwrap_or(DEFAULT_SUBSCRIBER_PRIORITY)
    }

    /// GROUP_ORDER, `absent` when absent.
    fn group_order(&self, absent: GroupOrder) -> GroupOrder {
        self.int(param::GROUP_ORDER)
            .and_then(order_from)
            .unwrap_or(absent)
    }

    /// SUBSCRIPTION_FILTER, or the unfiltered AbsoluteStart {0, 0} when absent.
    fn filter(&self) -> Result<FilterType, DecodeError> {
        self.bytes(param::SUBSCRIPTION_FILTER)
            .map_or(Ok(UNFILTERED), parse_filter)
    }

    fn largest(&self) -> Result<Option<Location>, DecodeError> {
        self.bytes(param::LARGEST_OBJECT)
            .map(parse_location)
            .transpose()
    }

    fn expires(&self) -> u64 {
        self.int(param::EXPIRES).unwrap_or(0)
    }
}

/// A subscription without a filter passes everything, which is what AbsoluteStart {0, 0}
/// does.
const UNFILTERED: FilterType = FilterType::AbsoluteStart(Location {
    group: 0,
    object: 0,
});

/// Reads a message parameter list and splits it by `spec`.
fn read_params(buf: &mut &[u8], spec: &Spec) -> Result<Split, DecodeError> {
    let pairs = read_list(buf)?;
    if pairs.iter().any(|p| !KNOWN_PARAMS.contains(&p.key)) {
        return Err(DecodeError::ProtocolViolation(UNKNOWN_PARAM));
    }
    if has_repeat(&pairs, &SINGLE_PARAMS) {
        return Err(DecodeError::ProtocolViolation(REPEATED));
    }
    let mut split = Split {
        lifted: Vec::new(),
        kept: Vec::new(),
    };
    for pair in pairs {
        if spec.lifted.contains(&pair.key) {
            check_param(&pair)?;
            split.lifted.push(pair);
        } else if spec.kept.contains(&pair.key) {
            check_param(&pair)?;
            split.kept.push(pair);
        }
    }
    Ok(split)
}

fn invalid(err: DecodeError) -> EncodeError {
    match err {
        DecodeError::ProtocolViolation(why) | DecodeError::KeyValueFormatting(why) => {
            EncodeError::Invalid(why)
        }
        _ => EncodeError::Invalid("invalid parameter"),
    }
}

/// Checks that `params` only holds parameters `spec` keeps, with valid values.
fn check_kept(params: &[KeyValuePair], spec: &Spec) -> Result<(), EncodeError> {
    for pair in params {
        if !spec.kept.contains(&pair.key) {
            return Err(EncodeError::Invalid(NOT_IN_MESSAGE));
        }
        check_param(pair).map_err(invalid)?;
    }
    Ok(())
}

/// Writes the parameters made from fields (`lifted`) together with the caller's (`kept`,
/// checked against `spec`).
fn write_params(
    mut lifted: Vec<KeyValuePair>,
    kept: &[KeyValuePair],
    spec: &Spec,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    check_kept(kept, spec)?;
    lifted.extend_from_slice(kept);
    if has_repeat(&lifted, &SINGLE_PARAMS) {
        return Err(EncodeError::Invalid(REPEATED));
    }
    write_list(&lifted, out)
}

/// The parameters that state a subscription's terms, each left out when it has the value the
/// receiver assumes in its absence.
fn terms(
    forward: bool,
    priority: u8,
    group_order: GroupOrder,
    filter: &FilterType,
) -> Result<Vec<KeyValuePair>, EncodeError> {
    let mut params = Vec::new();
    if !forward {
        params.push(KeyValuePair::int(param::FORWARD, 0));
    }
    if priority != DEFAULT_SUBSCRIBER_PRIORITY {
        params.push(KeyValuePair::int(
            param::SUBSCRIBER_PRIORITY,
            priority.into(),
        ));
    }
    if group_order != GroupOrder::Publisher {
        params.push(KeyValuePair::int(param::GROUP_ORDER, group_order as u64));
    }
    if *filter != UNFILTERED {
        let mut bytes = Vec::new();
        filter.write(&mut bytes)?;
        params.push(KeyValuePair::bytes(param::SUBSCRIPTION_FILTER, bytes));
    }
    Ok(params)
}

fn largest_param(largest: &Option<Location>) -> Result<Vec<KeyValuePair>, EncodeError> {
    let Some(location) = largest else {
        return Ok(Vec::new());
    };
    let mut bytes = Vec::new();
    location.write(&mut bytes)?;
    Ok(vec![KeyValuePair::bytes(param::LARGEST_OBJECT, bytes)])
}

fn expires_param(expires_ms: u64) -> Vec<KeyValuePair> {
    if expires_ms == 0 {
        Vec::new()
    } else {
        vec![KeyValuePair::int(param::EXPIRES, expires_ms)]
    }
}

// ---------------------------------------------------------------------------------------------
// Track extensions

/// Checks the value of a known track extension.
fn check_extension(pair: &KeyValuePair) -> Result<(), DecodeError> {
    let violation = |why| Err(DecodeError::ProtocolViolation(why));
    match (pair.key, &pair.value) {
        (extension::DELIVERY_TIMEOUT, Value::Int(0)) => {
            violation("DELIVERY_TIMEOUT extension of 0")
        }
        (extension::DEFAULT_PUBLISHER_PRIORITY, Value::Int(v)) if *v > 255 => {
            violation("default publisher priority above 255")
        }
        (extension::DEFAULT_PUBLISHER_GROUP_ORDER, Value::Int(v)) if order_from(*v).is_none() => {
            violation("default group order must be ascending (1) or descending (2)")
        }
        (extension::DYNAMIC_GROUPS, Value::Int(v)) if *v > 1 => {
            violation("DYNAMIC_GROUPS must be 0 or 1")
        }
        _ => Ok(()),
    }
}

/// Reads the track extensions that fill the rest of a message: the group order they state
/// (ascending when absent) and the others.
///
/// Types above 2^62 - 1 are dropped: none is defined, and they can only be sent as a delta
/// from a neighbour, so without the ones the model does not keep (the group order) they could
/// not be written again.
fn read_track_extensions(buf: &mut &[u8]) -> Result<(GroupOrder, Vec<KeyValuePair>), DecodeError> {
    read_track_extensions_in::<Quic>(buf)
}

/// [`read_track_extensions`] with the integer form `F` (draft-20's Track Properties are the
/// same block).
pub(crate) fn read_track_extensions_in<F: Form>(
    buf: &mut &[u8],
) -> Result<(GroupOrder, Vec<KeyValuePair>), DecodeError> {
    let mut pairs = read_block_in::<F>(buf)?;
    *buf = &[];
    if has_repeat(&pairs, &SINGLE_EXTENSIONS) {
        return Err(DecodeError::ProtocolViolation("track extension repeated"));
    }
    pairs.iter().try_for_each(check_extension)?;
    let group_order = int_of(&pairs, extension::DEFAULT_PUBLISHER_GROUP_ORDER)
        .and_then(order_from)
        .unwrap_or(GroupOrder::Ascending);
    pairs.retain(|p| p.key != extension::DEFAULT_PUBLISHER_GROUP_ORDER && p.key <= F::MAX);
    Ok((group_order, pairs))
}

/// Writes track extensions: `group_order` (left out when ascending) and `extensions`.
fn write_track_extensions(
    group_order: GroupOrder,
    extensions: &[KeyValuePair],
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    write_track_extensions_in::<Quic>(group_order, extensions, out)
}

/// [`write_track_extensions`] with the integer form `F`.
pub(crate) fn write_track_extensions_in<F: Form>(
    group_order: GroupOrder,
    extensions: &[KeyValuePair],
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    if group_order == GroupOrder::Publisher {
        return Err(EncodeError::Invalid(
            "group order in a reply must be ascending or descending",
        ));
    }
    if extensions
        .iter()
        .any(|p| p.key == extension::DEFAULT_PUBLISHER_GROUP_ORDER)
    {
        return Err(EncodeError::Invalid(
            "the default group order travels in the group_order field",
        ));
    }
    extensions
        .iter()
        .try_for_each(check_extension)
        .map_err(invalid)?;
    if has_repeat(extensions, &SINGLE_EXTENSIONS) {
        return Err(EncodeError::Invalid("track extension repeated"));
    }
    let mut all = extensions.to_vec();
    if group_order == GroupOrder::Descending {
        all.push(KeyValuePair::int(
            extension::DEFAULT_PUBLISHER_GROUP_ORDER,
            GroupOrder::Descending as u64,
        ));
    }
    write_block_in::<F>(&all, out)
}

// ---------------------------------------------------------------------------------------------
// Names

const EMPTY_FIELD: &str = "track namespace field of 0 bytes";

/// Draft-16 forbids empty namespace fields.
fn has_empty_field(namespace: &TrackNamespace) -> bool {
    namespace.0.iter().any(Vec::is_empty)
}

fn read_namespace(buf: &mut &[u8]) -> Result<TrackNamespace, DecodeError> {
    let namespace = TrackNamespace::read(buf)?;
    if has_empty_field(&namespace) {
        return Err(DecodeError::ProtocolViolation(EMPTY_FIELD));
    }
    Ok(namespace)
}

fn write_namespace(namespace: &TrackNamespace, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    if has_empty_field(namespace) {
        return Err(EncodeError::Invalid(EMPTY_FIELD));
    }
    namespace.write(out)
}

fn read_name(buf: &mut &[u8]) -> Result<(TrackNamespace, Vec<u8>), DecodeError> {
    let (namespace, name) = read_full_name(buf)?;
    if has_empty_field(&namespace) {
        return Err(DecodeError::ProtocolViolation(EMPTY_FIELD));
    }
    Ok((namespace, name))
}

fn write_name(
    namespace: &TrackNamespace,
    name: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    if has_empty_field(namespace) {
        return Err(EncodeError::Invalid(EMPTY_FIELD));
    }
    write_full_name(namespace, name, out)
}

fn read_fetch_type(buf: &mut &[u8]) -> Result<FetchType, DecodeError> {
    let fetch_type = FetchType::read(buf)?;
    if let FetchType::Standalone { namespace, .. } = &fetch_type
        && has_empty_field(namespace)
    {
        return Err(DecodeError::ProtocolViolation(EMPTY_FIELD));
    }
    Ok(fetch_type)
}

fn write_fetch_type(fetch_type: &FetchType, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    if let FetchType::Standalone { namespace, .. } = fetch_type
        && has_empty_field(namespace)
    {
        return Err(EncodeError::Invalid(EMPTY_FIELD));
    }
    fetch_type.write(out)
}

// ---------------------------------------------------------------------------------------------
// Messages

fn read_setup_params(buf: &mut &[u8]) -> Result<Parameters, DecodeError> {
    let pairs = read_list(buf)?;
    if has_repeat(&pairs, &SINGLE_SETUP_PARAMS) {
        return Err(DecodeError::ProtocolViolation(REPEATED));
    }
    Ok(Parameters(pairs))
}

fn write_setup_params(params: &Parameters, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    if has_repeat(&params.0, &SINGLE_SETUP_PARAMS) {
        return Err(EncodeError::Invalid(REPEATED));
    }
    write_list(&params.0, out)
}

/// SUBSCRIBE, or TRACK_STATUS (same layout; the delivery terms do not apply to it).
fn write_subscribe(
    m: &Subscribe,
    track_status: bool,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    if m.fill.is_some() {
        return Err(EncodeError::Invalid(
            "draft-16 has no fill: send a joining FETCH",
        ));
    }
    put(m.request_id, out)?;
    write_name(&m.namespace, &m.track_name, out)?;
    if track_status {
        write_params(Vec::new(), &m.params.0, &TRACK_STATUS_SPEC, out)
    } else {
        let lifted = terms(m.forward, m.subscriber_priority, m.group_order, &m.filter)?;
        write_params(lifted, &m.params.0, &SUBSCRIBE_SPEC, out)
    }
}

fn read_subscribe(buf: &mut &[u8], track_status: bool) -> Result<Subscribe, DecodeError> {
    let request_id = get(buf)?;
    let (namespace, track_name) = read_name(buf)?;
    let spec = if track_status {
        &TRACK_STATUS_SPEC
    } else {
        &SUBSCRIBE_SPEC
    };
    let split = read_params(buf, spec)?;
    Ok(Subscribe {
        request_id,
        namespace,
        track_name,
        subscriber_priority: split.priority(),
        group_order: split.group_order(GroupOrder::Publisher),
        forward: split.forward(),
        filter: split.filter()?,
        params: Parameters(split.kept),
        fill: None,
    })
}

fn write_subscribe_ok(m: &SubscribeOk, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    put(m.request_id, out)?;
    put(m.track_alias, out)?;
    let mut lifted = expires_param(m.expires_ms);
    lifted.extend(largest_param(&m.largest)?);
    write_params(lifted, &[], &SUBSCRIBE_OK_SPEC, out)?;
    write_track_extensions(m.group_order, &m.params.0, out)
}

fn read_subscribe_ok(buf: &mut &[u8]) -> Result<SubscribeOk, DecodeError> {
    let request_id = get(buf)?;
    let track_alias = get(buf)?;
    let split = read_params(buf, &SUBSCRIBE_OK_SPEC)?;
    let (group_order, extensions) = read_track_extensions(buf)?;
    Ok(SubscribeOk {
        request_id,
        track_alias,
        expires_ms: split.expires(),
        group_order,
        largest: split.largest()?,
        params: Parameters(extensions),
    })
}

/// What decoding would make of a REQUEST_UPDATE's parameters in the draft-14 fields: start,
/// end group, subscriber priority and forward. Parameters that are absent (unchanged) leave
/// the field at a neutral value: {0, 0}, open ended, 128, forwarding.
fn update_fields(
    params: &[KeyValuePair],
) -> Result<(Location, Option<u64>, u8, bool), DecodeError> {
    let split = Split {
        lifted: params.to_vec(),
        kept: Vec::new(),
    };
    let (start, end_group) = match split.filter()? {
        FilterType::AbsoluteStart(start) => (start, None),
        FilterType::AbsoluteRange { start, end_group } => (start, Some(end_group)),
        FilterType::NextGroupStart
        | FilterType::LargestObject
        | FilterType::GroupsBack(_)
        | FilterType::AbsoluteObjectRange { .. } => (Location::default(), None),
    };
    Ok((start, end_group, split.priority(), split.forward()))
}

/// Builds a draft-14 [`SubscribeUpdate`] that encodes as a draft-16 REQUEST_UPDATE with
/// exactly `params` (parameters left out stay unchanged at the receiver), filling the fields
/// as decoding would. Fails if a parameter is not allowed in REQUEST_UPDATE or has an invalid
/// value.
pub fn request_update(
    request_id: u64,
    existing_request_id: u64,
    params: Parameters,
) -> Result<SubscribeUpdate, EncodeError> {
    check_kept(&params.0, &REQUEST_UPDATE_SPEC)?;
    let (start, end_group, subscriber_priority, forward) =
        update_fields(&params.0).map_err(invalid)?;
    Ok(SubscribeUpdate {
        request_id,
        subscription_request_id: existing_request_id,
        start,
        end_group,
        subscriber_priority,
        forward,
        params,
    })
}

fn write_request_update(m: &SubscribeUpdate, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    check_kept(&m.params.0, &REQUEST_UPDATE_SPEC)?;
    let fields = update_fields(&m.params.0).map_err(invalid)?;
    if fields != (m.start, m.end_group, m.subscriber_priority, m.forward) {
        return Err(EncodeError::Invalid(
            "a draft-16 REQUEST_UPDATE states its changes as parameters: the fields must \
             match them (see draft16::request_update)",
        ));
    }
    put(m.request_id, out)?;
    put(m.subscription_request_id, out)?;
    write_params(Vec::new(), &m.params.0, &REQUEST_UPDATE_SPEC, out)
}

fn read_request_update(buf: &mut &[u8]) -> Result<SubscribeUpdate, DecodeError> {
    let request_id = get(buf)?;
    let subscription_request_id = get(buf)?;
    let split = read_params(buf, &REQUEST_UPDATE_SPEC)?;
    let (start, end_group, subscriber_priority, forward) = update_fields(&split.kept)?;
    Ok(SubscribeUpdate {
        request_id,
        subscription_request_id,
        start,
        end_group,
        subscriber_priority,
        forward,
        params: Parameters(split.kept),
    })
}

fn write_publish(m: &Publish, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    put(m.request_id, out)?;
    write_name(&m.namespace, &m.track_name, out)?;
    put(m.track_alias, out)?;
    let (message, extensions): (Vec<KeyValuePair>, Vec<KeyValuePair>) = m
        .params
        .0
        .iter()
        .cloned()
        .partition(|p| PUBLISH_SPEC.kept.contains(&p.key));
    let mut lifted = largest_param(&m.largest)?;
    if !m.forward {
        lifted.push(KeyValuePair::int(param::FORWARD, 0));
    }
    write_params(lifted, &message, &PUBLISH_SPEC, out)?;
    write_track_extensions(m.group_order, &extensions, out)
}

fn read_publish(buf: &mut &[u8]) -> Result<Publish, DecodeError> {
    let request_id = get(buf)?;
    let (namespace, track_name) = read_name(buf)?;
    let track_alias = get(buf)?;
    let split = read_params(buf, &PUBLISH_SPEC)?;
    let (group_order, extensions) = read_track_extensions(buf)?;
    let mut params = split.kept.clone();
    // Extension types that collide with PUBLISH's own parameters cannot be told apart from
    // them in `params`; none is defined, so they are dropped.
    params.extend(
        extensions
            .into_iter()
            .filter(|p| !PUBLISH_SPEC.kept.contains(&p.key)),
    );
    Ok(Publish {
        request_id,
        namespace,
        track_name,
        track_alias,
        group_order,
        largest: split.largest()?,
        forward: split.forward(),
        params: Parameters(params),
    })
}

fn write_publish_ok(m: &PublishOk, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    put(m.request_id, out)?;
    let lifted = terms(m.forward, m.subscriber_priority, m.group_order, &m.filter)?;
    write_params(lifted, &m.params.0, &PUBLISH_OK_SPEC, out)
}

fn read_publish_ok(buf: &mut &[u8]) -> Result<PublishOk, DecodeError> {
    let request_id = get(buf)?;
    let split = read_params(buf, &PUBLISH_OK_SPEC)?;
    Ok(PublishOk {
        request_id,
        forward: split.forward(),
        subscriber_priority: split.priority(),
        group_order: split.group_order(GroupOrder::Publisher),
        filter: split.filter()?,
        params: Parameters(split.kept),
    })
}

fn write_fetch(m: &Fetch, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    put(m.request_id, out)?;
    write_fetch_type(&m.fetch_type, out)?;
    let mut lifted = Vec::new();
    if m.subscriber_priority != DEFAULT_SUBSCRIBER_PRIORITY {
        lifted.push(KeyValuePair::int(
            param::SUBSCRIBER_PRIORITY,
            m.subscriber_priority.into(),
        ));
    }
    // Absent means ascending; draft-16 has no "publisher's order" for FETCH.
    if m.group_order == GroupOrder::Descending {
        lifted.push(KeyValuePair::int(
            param::GROUP_ORDER,
            GroupOrder::Descending as u64,
        ));
    }
    write_params(lifted, &m.params.0, &FETCH_SPEC, out)
}

fn read_fetch(buf: &mut &[u8]) -> Result<Fetch, DecodeError> {
    let request_id = get(buf)?;
    let fetch_type = read_fetch_type(buf)?;
    let split = read_params(buf, &FETCH_SPEC)?;
    Ok(Fetch {
        request_id,
        subscriber_priority: split.priority(),
        group_order: split.group_order(GroupOrder::Ascending),
        fetch_type,
        params: Parameters(split.kept),
    })
}

fn write_fetch_ok(m: &FetchOk, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    put(m.request_id, out)?;
    write_flag(m.end_of_track, out);
    m.end_location.write(out)?;
    write_params(Vec::new(), &[], &NO_PARAMS, out)?;
    write_track_extensions(m.group_order, &m.params.0, out)
}

fn read_fetch_ok(buf: &mut &[u8]) -> Result<FetchOk, DecodeError> {
    let request_id = get(buf)?;
    let end_of_track = read_flag(buf, "end of track must be 0 or 1")?;
    let end_location = Location::read(buf)?;
    read_params(buf, &NO_PARAMS)?;
    let (group_order, extensions) = read_track_extensions(buf)?;
    Ok(FetchOk {
        request_id,
        group_order,
        end_of_track,
        end_location,
        params: Parameters(extensions),
    })
}

fn write_request_ok(
    request_id: u64,
    lifted: Vec<KeyValuePair>,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    put(request_id, out)?;
    write_params(lifted, &[], &REQUEST_OK_STATUS_SPEC, out)
}

/// REQUEST_OK standing in for TRACK_STATUS_OK (or answering a REQUEST_UPDATE): the largest
/// location and expiry become parameters; a REQUEST_OK has no track alias, group order or
/// track extensions.
fn write_status_ok(m: &SubscribeOk, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    if !m.params.is_empty() {
        return Err(EncodeError::Invalid(
            "REQUEST_OK carries no track extensions: params must be empty",
        ));
    }
    let mut lifted = expires_param(m.expires_ms);
    lifted.extend(largest_param(&m.largest)?);
    write_request_ok(m.request_id, lifted, out)
}

fn read_request_ok(buf: &mut &[u8], lookups: &Lookups) -> Result<ControlMessage, DecodeError> {
    use ControlMessage as M;
    let request_id = get(buf)?;
    let kind = (lookups.answers)(request_id).ok_or(DecodeError::ProtocolViolation(
        "REQUEST_OK for an unknown request ID",
    ))?;
    Ok(match kind {
        RequestKind::PublishNamespace => {
            read_params(buf, &NO_PARAMS)?;
            M::PublishNamespaceOk(crate::message::PublishNamespaceOk { request_id })
        }
        RequestKind::SubscribeNamespace | RequestKind::SubscribeTracks => {
            read_params(buf, &NO_PARAMS)?;
            M::SubscribeNamespaceOk(crate::message::SubscribeNamespaceOk { request_id })
        }
        RequestKind::TrackStatus | RequestKind::SubscribeUpdate => {
            let split = read_params(buf, &REQUEST_OK_STATUS_SPEC)?;
            M::TrackStatusOk(SubscribeOk {
                request_id,
                track_alias: 0,
                expires_ms: split.expires(),
                group_order: GroupOrder::Ascending,
                largest: split.largest()?,
                params: Parameters::new(),
            })
        }
        RequestKind::Subscribe | RequestKind::Fetch | RequestKind::Publish => {
            return Err(DecodeError::ProtocolViolation(
                "REQUEST_OK does not answer SUBSCRIBE, FETCH or PUBLISH",
            ));
        }
    })
}

fn write_request_error(
    kind: RequestKind,
    m: &SubscribeError,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    put(m.request_id, out)?;
    put(request_error_from_draft14(kind, m.code), out)?;
    // Retry interval: 0, do not retry.
    put(0, out)?;
    m.reason.write(out)
}

fn read_request_error(buf: &mut &[u8], lookups: &Lookups) -> Result<ControlMessage, DecodeError> {
    let request_id = get(buf)?;
    let kind = (lookups.answers)(request_id).ok_or(DecodeError::ProtocolViolation(
        "REQUEST_ERROR for an unknown request ID",
    ))?;
    let code = request_error_to_draft14(kind, get(buf)?);
    let _retry_interval = get(buf)?;
    let reason = <String as Wire>::read(buf)?;
    Ok(Refusal {
        kind,
        request_id,
        code,
        reason,
    }
    .into_message())
}

/// Writes a draft-14 error message of another kind than SUBSCRIBE_ERROR as a
/// REQUEST_ERROR, through the common shape.
fn write_error_of(
    kind: RequestKind,
    request_id: u64,
    code: u64,
    reason: &str,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let common = SubscribeError {
        request_id,
        code,
        reason: reason.to_owned(),
    };
    write_request_error(kind, &common, out)
}

fn write_publish_done(m: &PublishDone, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    PublishDone {
        status: publish_done_from_draft14(m.status),
        ..m.clone()
    }
    .write(out)
}

fn read_publish_done(buf: &mut &[u8]) -> Result<PublishDone, DecodeError> {
    let done = PublishDone::read(buf)?;
    Ok(PublishDone {
        status: publish_done_to_draft14(done.status),
        ..done
    })
}

fn write_publish_namespace(m: &PublishNamespace, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    put(m.request_id, out)?;
    write_namespace(&m.namespace, out)?;
    write_params(Vec::new(), &m.params.0, &PUBLISH_NAMESPACE_SPEC, out)
}

fn read_publish_namespace(buf: &mut &[u8]) -> Result<PublishNamespace, DecodeError> {
    Ok(PublishNamespace {
        request_id: get(buf)?,
        namespace: read_namespace(buf)?,
        params: Parameters(read_params(buf, &PUBLISH_NAMESPACE_SPEC)?.kept),
    })
}

/// Subscribe Options: 0 PUBLISH messages, 1 NAMESPACE messages, 2 both. Draft-14's
/// SUBSCRIBE_NAMESPACE asked for both, so that is what is sent.
const SUBSCRIBE_BOTH: u64 = 2;

fn write_subscribe_namespace(m: &SubscribeNamespace, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    put(m.request_id, out)?;
    if has_empty_field(&m.namespace_prefix.0) {
        return Err(EncodeError::Invalid(EMPTY_FIELD));
    }
    m.namespace_prefix.write(out)?;
    put(SUBSCRIBE_BOTH, out)?;
    write_params(Vec::new(), &m.params.0, &SUBSCRIBE_NAMESPACE_SPEC, out)
}

fn read_subscribe_namespace(buf: &mut &[u8]) -> Result<SubscribeNamespace, DecodeError> {
    let request_id = get(buf)?;
    let namespace_prefix = NamespacePrefix::read(buf)?;
    if has_empty_field(&namespace_prefix.0) {
        return Err(DecodeError::ProtocolViolation(EMPTY_FIELD));
    }
    if get(buf)? > SUBSCRIBE_BOTH {
        return Err(DecodeError::ProtocolViolation("unknown subscribe options"));
    }
    Ok(SubscribeNamespace {
        request_id,
        namespace_prefix,
        params: Parameters(read_params(buf, &SUBSCRIBE_NAMESPACE_SPEC)?.kept),
    })
}

/// The Request ID of the PUBLISH_NAMESPACE for `namespace`.
fn namespace_request_id(
    request_id_of: &dyn Fn(&TrackNamespace, Announcer) -> Option<u64>,
    namespace: &TrackNamespace,
    announcer: Announcer,
) -> Result<u64, EncodeError> {
    request_id_of(namespace, announcer).ok_or(EncodeError::Invalid(
        "no request ID known for the namespace of PUBLISH_NAMESPACE_DONE / _CANCEL",
    ))
}

/// The namespace of the PUBLISH_NAMESPACE with `request_id`.
fn namespace_of(lookups: &Lookups, request_id: u64) -> Result<TrackNamespace, DecodeError> {
    (lookups.namespace_of)(request_id).ok_or(DecodeError::ProtocolViolation(
        "PUBLISH_NAMESPACE_DONE / _CANCEL for an unknown request ID",
    ))
}

/// The session's answers to what draft-16 messages refer to by Request ID alone.
struct Lookups<'a> {
    answers: &'a dyn Fn(u64) -> Option<RequestKind>,
    namespace_of: &'a dyn Fn(u64) -> Option<TrackNamespace>,
}

fn write_payload(
    msg: &ControlMessage,
    request_id_of: &dyn Fn(&TrackNamespace, Announcer) -> Option<u64>,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    use ControlMessage as M;
    match msg {
        // Draft-16 negotiates the version by ALPN alone: the setup messages name none.
        M::ClientSetup(m) => write_setup_params(&m.params, out),
        M::ServerSetup(m) => write_setup_params(&m.params, out),
        M::Goaway(m) => m.write(out),
        M::MaxRequestId(m) => m.write(out),
        M::RequestsBlocked(m) => m.write(out),
        M::Subscribe(m) => write_subscribe(m, false, out),
        M::TrackStatus(m) => write_subscribe(m, true, out),
        M::SubscribeOk(m) => write_subscribe_ok(m, out),
        M::SubscribeUpdate(m) => write_request_update(m, out),
        M::Unsubscribe(m) => m.write(out),
        M::PublishDone(m) => write_publish_done(m, out),
        M::Publish(m) => write_publish(m, out),
        M::PublishOk(m) => write_publish_ok(m, out),
        M::Fetch(m) => write_fetch(m, out),
        M::FetchOk(m) => write_fetch_ok(m, out),
        M::FetchCancel(m) => m.write(out),
        M::PublishNamespace(m) => write_publish_namespace(m, out),
        M::SubscribeNamespace(m) => write_subscribe_namespace(m, out),
        M::TrackStatusOk(m) => write_status_ok(m, out),
        M::PublishNamespaceOk(m) => write_request_ok(m.request_id, Vec::new(), out),
        M::SubscribeNamespaceOk(m) => write_request_ok(m.request_id, Vec::new(), out),
        M::SubscribeUpdateOk(m) => write_request_ok(m.request_id, Vec::new(), out),
        M::SubscribeError(m) => write_request_error(RequestKind::Subscribe, m, out),
        M::TrackStatusError(m) => write_request_error(RequestKind::TrackStatus, m, out),
        M::FetchError(m) => {
            write_error_of(RequestKind::Fetch, m.request_id, m.code, &m.reason, out)
        }
        M::PublishError(m) => {
            write_error_of(RequestKind::Publish, m.request_id, m.code, &m.reason, out)
        }
        M::PublishNamespaceError(m) => write_error_of(
            RequestKind::PublishNamespace,
            m.request_id,
            m.code,
            &m.reason,
            out,
        ),
        M::SubscribeNamespaceError(m) => write_error_of(
            RequestKind::SubscribeNamespace,
            m.request_id,
            m.code,
            &m.reason,
            out,
        ),
        M::PublishNamespaceDone(m) => put(
            namespace_request_id(request_id_of, &m.namespace, Announcer::Local)?,
            out,
        ),
        M::PublishNamespaceCancel(m) => {
            put(
                namespace_request_id(request_id_of, &m.namespace, Announcer::Peer)?,
                out,
            )?;
            put(
                request_error_from_draft14(RequestKind::PublishNamespace, m.code),
                out,
            )?;
            m.reason.write(out)
        }
        M::UnsubscribeNamespace(_) | M::SubscribeTracks(_) | M::Redirect(_) => Err(NO_FORM),
    }
}

/// Encoding a message draft-16 does not have.
const NO_FORM: EncodeError = EncodeError::Invalid(
    "no draft-16 form (UNSUBSCRIBE_NAMESPACE: close the SUBSCRIBE_NAMESPACE stream)",
);

fn read_payload(
    message_type: u64,
    buf: &mut &[u8],
    lookups: &Lookups,
) -> Result<ControlMessage, DecodeError> {
    use ControlMessage as M;
    Ok(match message_type {
        code::CLIENT_SETUP => M::ClientSetup(ClientSetup {
            versions: vec![VERSION],
            params: read_setup_params(buf)?,
        }),
        code::SERVER_SETUP => M::ServerSetup(ServerSetup {
            version: VERSION,
            params: read_setup_params(buf)?,
        }),
        code::GOAWAY => M::Goaway(crate::message::Goaway {
            new_session_uri: GOAWAY_URI.read(buf)?,
        }),
        code::MAX_REQUEST_ID => M::MaxRequestId(Wire::read(buf)?),
        code::REQUESTS_BLOCKED => M::RequestsBlocked(Wire::read(buf)?),
        code::SUBSCRIBE => M::Subscribe(read_subscribe(buf, false)?),
        code::TRACK_STATUS => M::TrackStatus(read_subscribe(buf, true)?),
        code::SUBSCRIBE_OK => M::SubscribeOk(read_subscribe_ok(buf)?),
        code::REQUEST_UPDATE => M::SubscribeUpdate(read_request_update(buf)?),
        code::UNSUBSCRIBE => M::Unsubscribe(Wire::read(buf)?),
        code::PUBLISH_DONE => M::PublishDone(read_publish_done(buf)?),
        code::PUBLISH => M::Publish(read_publish(buf)?),
        code::PUBLISH_OK => M::PublishOk(read_publish_ok(buf)?),
        code::FETCH => M::Fetch(read_fetch(buf)?),
        code::FETCH_OK => M::FetchOk(read_fetch_ok(buf)?),
        code::FETCH_CANCEL => M::FetchCancel(Wire::read(buf)?),
        code::PUBLISH_NAMESPACE => M::PublishNamespace(read_publish_namespace(buf)?),
        code::SUBSCRIBE_NAMESPACE => M::SubscribeNamespace(read_subscribe_namespace(buf)?),
        code::REQUEST_OK => read_request_ok(buf, lookups)?,
        code::REQUEST_ERROR => read_request_error(buf, lookups)?,
        code::PUBLISH_NAMESPACE_DONE => M::PublishNamespaceDone(PublishNamespaceDone {
            namespace: namespace_of(lookups, get(buf)?)?,
        }),
        code::PUBLISH_NAMESPACE_CANCEL => {
            let namespace = namespace_of(lookups, get(buf)?)?;
            let code = request_error_to_draft14(RequestKind::PublishNamespace, get(buf)?);
            M::PublishNamespaceCancel(PublishNamespaceCancel {
                namespace,
                code,
                reason: Wire::read(buf)?,
            })
        }
        _ => return Err(DecodeError::UnknownMessageType(message_type)),
    })
}

/// Whether [`read_payload`] handles `message_type`.
fn is_modelled(message_type: u64) -> bool {
    !matches!(message_type, code::NAMESPACE | code::NAMESPACE_DONE)
        && name_of(message_type) != "unknown"
}

/// Appends `msg` as a framed draft-16 control message: type, 16-bit payload length, payload.
///
/// `request_id_of` gives the Request ID of the PUBLISH_NAMESPACE for a namespace, which
/// draft-16's PUBLISH_NAMESPACE_DONE ([`Announcer::Local`]) and PUBLISH_NAMESPACE_CANCEL
/// ([`Announcer::Peer`]) send instead of the namespace; it is asked for nothing else.
///
/// Fails without writing anything if the message has no draft-16 form
/// (UNSUBSCRIBE_NAMESPACE), a field or parameter breaks a draft-16 rule, a parameter does not
/// belong in the message, `request_id_of` has no answer, or the payload exceeds 65535 bytes.
pub fn encode_control(
    msg: &ControlMessage,
    request_id_of: &dyn Fn(&TrackNamespace, Announcer) -> Option<u64>,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let start = out.len();
    let result = encode_framed(msg, request_id_of, out);
    if result.is_err() {
        out.truncate(start);
    }
    result
}

fn encode_framed(
    msg: &ControlMessage,
    request_id_of: &dyn Fn(&TrackNamespace, Announcer) -> Option<u64>,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let message_type = message_type(msg).ok_or(NO_FORM)?;
    put(message_type, out)?;
    let length_at = out.len();
    out.extend_from_slice(&[0, 0]);
    write_payload(msg, request_id_of, out)?;
    let len = out.len() - length_at - 2;
    let len16 = u16::try_from(len).map_err(|_| EncodeError::MessageTooLong(len))?;
    out[length_at..length_at + 2].copy_from_slice(&len16.to_be_bytes());
    Ok(())
}

/// Decodes one framed draft-16 control message from the front of `buf` into the draft-14
/// model, returning it and the bytes used.
///
/// Same convention as [`ControlMessage::decode`]: [`DecodeError::Incomplete`] until the whole
/// message is in `buf`; an unknown type is reported as soon as it is read; fields that run
/// past the length or leave bytes over are a protocol violation.
///
/// `answers` says what kind of request a Request ID belongs to; it is asked about the Request
/// ID of every REQUEST_OK and REQUEST_ERROR (IDs the session issued). `namespace_of` gives the
/// namespace of the PUBLISH_NAMESPACE with a Request ID; it is asked about the ID in every
/// PUBLISH_NAMESPACE_DONE (one the peer issued) and PUBLISH_NAMESPACE_CANCEL (one the
/// session issued). A `None` from either is a protocol violation, so they should answer for
/// requests that were cancelled or withdrawn but may still be answered, too. Client and
/// server IDs differ in parity, so one table can serve both directions.
///
/// NAMESPACE and NAMESPACE_DONE, which only travel on a SUBSCRIBE_NAMESPACE stream, are not
/// modelled: they are refused as protocol violations.
pub fn decode_control(
    buf: &[u8],
    answers: &dyn Fn(u64) -> Option<RequestKind>,
    namespace_of: &dyn Fn(u64) -> Option<TrackNamespace>,
) -> Result<(ControlMessage, usize), DecodeError> {
    let mut rest = buf;
    let message_type = get(&mut rest)?;
    if matches!(message_type, code::NAMESPACE | code::NAMESPACE_DONE) {
        return Err(DecodeError::ProtocolViolation(
            "NAMESPACE / NAMESPACE_DONE outside a SUBSCRIBE_NAMESPACE stream",
        ));
    }
    if !is_modelled(message_type) {
        return Err(DecodeError::UnknownMessageType(message_type));
    }
    let len = read_u16(&mut rest)?;
    let mut payload = take(&mut rest, len.into())?;
    let lookups = Lookups {
        answers,
        namespace_of,
    };
    let message = read_payload(message_type, &mut payload, &lookups).map_err(|err| match err {
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
