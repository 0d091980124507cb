//! Message parameters from draft-17 on: a count, then Type-Value pairs whose types are sent
//! as deltas (so in ascending order) and whose values take the form each type defines, not
//! the parity rule of Key-Value-Pairs. A type the draft does not define, or one it does not
//! allow in the message at hand, is a protocol violation: the receiver cannot skip what it
//! does not know.
//!
//! Parameters a message keeps in the model's `params` are [`KeyValuePair`]s: integers (varint
//! and uint8 types) as integers, everything else as the bytes of its value, in their shortest
//! form (length-prefixed values without their length).

use crate::cursor::{read_u8, take};
use crate::message::common::{read_bytes_in, write_bytes_in};
use crate::message::{
    Fill, FilterType, GroupOrder, KeyValuePair, Location, MAX_KVP_BYTES_LEN, TrackNamespace, Value,
};
use crate::varint::{Form, Vi64};
use crate::{DecodeError, EncodeError};

use super::codes::param;
use super::filter::{FilterForm, UNFILTERED};

/// How a parameter's value is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Varint,
    /// One byte.
    Byte,
    /// Length-prefixed bytes.
    Bytes,
    /// Two integers.
    Location,
    Filter,
    /// Length-prefixed parameters of the fill's own.
    Fill,
    /// A Track Namespace.
    Namespace,
}

/// The value form of every parameter type draft-20 defines.
fn kind(key: u64) -> Option<Kind> {
    use param::*;
    Some(match key {
        OBJECT_DELIVERY_TIMEOUT
        | RENDEZVOUS_TIMEOUT
        | SUBGROUP_DELIVERY_TIMEOUT
        | EXPIRES
        | FILL_TIMEOUT
        | NEW_GROUP_REQUEST => Kind::Varint,
        FORWARD | SUBSCRIBER_PRIORITY | GROUP_ORDER | INCLUDE_PROPERTIES => Kind::Byte,
        AUTHORIZATION_TOKEN
        | SUBGROUP_FILTER
        | OBJECTID_FILTER
        | PRIORITY_FILTER
        | OBJECT_PROPERTY_FILTER
        | TRACK_PROPERTY_FILTER => Kind::Bytes,
        LARGEST_OBJECT => Kind::Location,
        LOCATION_FILTER => Kind::Filter,
        FILL_PARAMETERS => Kind::Fill,
        TRACK_NAMESPACE_PREFIX => Kind::Namespace,
        _ => return None,
    })
}

/// Types that may appear more than once in a message.
fn repeatable(key: u64) -> bool {
    key == param::AUTHORIZATION_TOKEN
        || (param::SUBGROUP_FILTER..=param::TRACK_PROPERTY_FILTER).contains(&key)
}

/// A decoded parameter value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Param {
    Int(u64),
    Bytes(Vec<u8>),
    Location(Location),
    Filter(FilterType),
    Fill(Fill),
    Namespace(TrackNamespace),
}

/// A message's parameters, in wire (ascending type) order.
pub(crate) type Params = Vec<(u64, Param)>;

const OUT_OF_RANGE: &str = "parameter value out of range";

fn read_value(kind: Kind, form: FilterForm, buf: &mut &[u8]) -> Result<Param, DecodeError> {
    Ok(match kind {
        Kind::Varint => Param::Int(Vi64::get(buf)?),
        Kind::Byte => Param::Int(read_u8(buf)?.into()),
        Kind::Bytes => Param::Bytes(
            read_bytes_in::<Vi64>(buf, MAX_KVP_BYTES_LEN, "parameter value longer than 65535")?
                .to_vec(),
        ),
        Kind::Location => Param::Location(Location::read_in::<Vi64>(buf)?),
        Kind::Filter => Param::Filter(form.read(buf)?),
        Kind::Fill => {
            let len = Vi64::get(buf)?;
            let mut inner = take(buf, len)?;
            let fill = read_fill(&mut inner, form)?;
            if !inner.is_empty() {
                return Err(DecodeError::ProtocolViolation(
                    "FILL_PARAMETERS longer than its parameters",
                ));
            }
            Param::Fill(fill)
        }
        Kind::Namespace => Param::Namespace(super::control::read_namespace(buf, 0)?),
    })
}

fn write_value(
    key: u64,
    value: &Param,
    form: FilterForm,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let mismatch = Err(EncodeError::Invalid("parameter value of the wrong form"));
    match (kind(key), value) {
        (Some(Kind::Varint), Param::Int(v)) => Vi64::put(*v, out),
        (Some(Kind::Byte), Param::Int(v)) => {
            out.push(u8::try_from(*v).map_err(|_| EncodeError::Invalid(OUT_OF_RANGE))?);
            Ok(())
        }
        (Some(Kind::Bytes), Param::Bytes(bytes)) => {
            if bytes.len() > MAX_KVP_BYTES_LEN {
                return Err(EncodeError::Invalid("parameter value longer than 65535"));
            }
            write_bytes_in::<Vi64>(bytes, out)
        }
        (Some(Kind::Location), Param::Location(location)) => location.write_in::<Vi64>(out),
        (Some(Kind::Filter), Param::Filter(filter)) => form.write(filter, out),
        (Some(Kind::Fill), Param::Fill(fill)) => {
            let mut inner = Vec::new();
            write_fill(fill, form, &mut inner)?;
            write_bytes_in::<Vi64>(&inner, out)
        }
        (Some(Kind::Namespace), Param::Namespace(ns)) => ns.write_fields_in::<Vi64>(out),
        (None, _) => Err(EncodeError::Invalid(
            "parameter type draft-20 does not define",
        )),
        _ => mismatch,
    }
}

/// Checks a value against the rules of its type.
fn check(key: u64, value: &Param) -> Result<(), &'static str> {
    match (key, value) {
        (param::FORWARD | param::INCLUDE_PROPERTIES, Param::Int(v)) if *v > 1 => {
            Err("FORWARD / INCLUDE_PROPERTIES must be 0 or 1")
        }
        (param::GROUP_ORDER, Param::Int(v)) if !matches!(v, 1 | 2) => {
            Err("group order must be ascending (1) or descending (2)")
        }
        (param::TRACK_NAMESPACE_PREFIX, Param::Namespace(ns)) if ns.0.iter().any(Vec::is_empty) => {
            Err("track namespace field of 0 bytes")
        }
        _ => Ok(()),
    }
}

/// Reads a count, then that many parameters, each allowed by `allowed`.
pub(crate) fn read_params(
    buf: &mut &[u8],
    form: FilterForm,
    allowed: &[u64],
) -> Result<Params, DecodeError> {
    let count = Vi64::get(buf)?;
    let mut params = Params::new();
    let mut previous = 0u64;
    for i in 0..count {
        let delta = Vi64::get(buf)?;
        let key = previous
            .checked_add(delta)
            .ok_or(DecodeError::ProtocolViolation(
                "parameter type beyond 2^64 - 1",
            ))?;
        let kind = kind(key).ok_or(DecodeError::ProtocolViolation("unknown message parameter"))?;
        if !allowed.contains(&key) {
            return Err(DecodeError::ProtocolViolation(
                "parameter not allowed in this message",
            ));
        }
        if i > 0 && delta == 0 && !repeatable(key) {
            return Err(DecodeError::ProtocolViolation("parameter repeated"));
        }
        let value = read_value(kind, form, buf)?;
        check(key, &value).map_err(DecodeError::ProtocolViolation)?;
        params.push((key, value));
        previous = key;
    }
    Ok(params)
}

/// Writes the number of parameters, then the parameters sorted by type (equal types keep
/// their order), each allowed by `allowed`.
pub(crate) fn write_params(
    params: &[(u64, Param)],
    form: FilterForm,
    allowed: &[u64],
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let mut sorted: Vec<&(u64, Param)> = params.iter().collect();
    sorted.sort_by_key(|(key, _)| *key);
    Vi64::put(sorted.len() as u64, out)?;
    let mut previous: Option<u64> = None;
    for (key, value) in sorted {
        if !allowed.contains(key) {
            return Err(EncodeError::Invalid(
                "parameter not allowed in this message",
            ));
        }
        if previous == Some(*key) && !repeatable(*key) {
            return Err(EncodeError::Invalid("parameter repeated"));
        }
        check(*key, value).map_err(EncodeError::Invalid)?;
        Vi64::put(key - previous.unwrap_or(0), out)?;
        write_value(*key, value, form, out)?;
        previous = Some(*key);
    }
    Ok(())
}

/// The first value of type `key`.
pub(crate) fn find(params: &[(u64, Param)], key: u64) -> Option<&Param> {
    params.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
}

/// The integer value of type `key`.
pub(crate) fn int(params: &[(u64, Param)], key: u64) -> Option<u64> {
    match find(params, key)? {
        Param::Int(v) => Some(*v),
        _ => None,
    }
}

pub(crate) fn order_from(value: u64) -> Option<GroupOrder> {
    match value {
        1 => Some(GroupOrder::Ascending),
        2 => Some(GroupOrder::Descending),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// The model's `params`

/// A parameter as the model keeps it (see the module documentation).
pub(crate) fn to_model(key: u64, value: &Param, form: FilterForm) -> KeyValuePair {
    let bytes = |write: &dyn Fn(&mut Vec<u8>) -> Result<(), EncodeError>| {
        let mut out = Vec::new();
        // A value that was just decoded writes again.
        let _ = write(&mut out);
        out
    };
    match value {
        Param::Int(v) => KeyValuePair::int(key, *v),
        Param::Bytes(b) => KeyValuePair::bytes(key, b.clone()),
        Param::Location(l) => KeyValuePair::bytes(key, bytes(&|out| l.write_in::<Vi64>(out))),
        Param::Filter(f) => KeyValuePair::bytes(key, bytes(&|out| filter_content(f, form, out))),
        Param::Fill(fill) => KeyValuePair::bytes(key, bytes(&|out| write_fill(fill, form, out))),
        Param::Namespace(ns) => {
            KeyValuePair::bytes(key, bytes(&|out| ns.write_fields_in::<Vi64>(out)))
        }
    }
}

/// A kept parameter of the model, read back into its value.
pub(crate) fn from_model(
    pair: &KeyValuePair,
    form: FilterForm,
) -> Result<(u64, Param), EncodeError> {
    let kind = kind(pair.key).ok_or(EncodeError::Invalid(
        "parameter type draft-20 does not define",
    ))?;
    let invalid = |_| EncodeError::Invalid("kept parameter is not a value of its type");
    let value = match (kind, &pair.value) {
        (Kind::Varint | Kind::Byte, Value::Int(v)) => Param::Int(*v),
        (Kind::Bytes, Value::Bytes(b)) => Param::Bytes(b.clone()),
        (Kind::Location, Value::Bytes(b)) => {
            Param::Location(parse_all(b, Location::read_in::<Vi64>).map_err(invalid)?)
        }
        (Kind::Filter, Value::Bytes(b)) => {
            Param::Filter(parse_all(b, |buf| read_filter_content(buf, form)).map_err(invalid)?)
        }
        (Kind::Fill, Value::Bytes(b)) => {
            Param::Fill(parse_all(b, |buf| read_fill(buf, form)).map_err(invalid)?)
        }
        (Kind::Namespace, Value::Bytes(b)) => Param::Namespace(
            parse_all(b, |buf| super::control::read_namespace(buf, 0)).map_err(invalid)?,
        ),
        _ => return Err(EncodeError::Invalid("kept parameter of the wrong form")),
    };
    Ok((pair.key, value))
}

/// Runs `read` on all of `bytes`, which it must use up.
fn parse_all<T>(
    mut bytes: &[u8],
    read: impl FnOnce(&mut &[u8]) -> Result<T, DecodeError>,
) -> Result<T, DecodeError> {
    let value = read(&mut bytes)?;
    if !bytes.is_empty() {
        return Err(DecodeError::ProtocolViolation("bytes left over"));
    }
    Ok(value)
}

/// A filter's value without the length draft-20 puts before it.
fn filter_content(
    filter: &FilterType,
    form: FilterForm,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let mut value = Vec::new();
    form.write(filter, &mut value)?;
    match form {
        FilterForm::Counted => {
            let mut rest = value.as_slice();
            let _ = Vi64::get(&mut rest);
            out.extend_from_slice(rest);
        }
        FilterForm::Typed => out.extend_from_slice(&value),
    }
    Ok(())
}

/// Reads what [`filter_content`] writes.
fn read_filter_content(buf: &mut &[u8], form: FilterForm) -> Result<FilterType, DecodeError> {
    match form {
        FilterForm::Counted => {
            let mut framed = Vec::new();
            write_bytes_in::<Vi64>(buf, &mut framed)
                .map_err(|_| DecodeError::ProtocolViolation(OUT_OF_RANGE))?;
            *buf = &[];
            FilterForm::Counted.read(&mut framed.as_slice())
        }
        FilterForm::Typed => FilterForm::Typed.read(buf),
    }
}

// ---------------------------------------------------------------------------------------------
// FILL_PARAMETERS

/// What may appear inside FILL_PARAMETERS.
const FILL_ALLOWED: [u64; 4] = [
    param::FILL_TIMEOUT,
    param::SUBSCRIBER_PRIORITY,
    param::LOCATION_FILTER,
    param::GROUP_ORDER,
];

/// Reads the parameters inside FILL_PARAMETERS (a count, then parameters).
fn read_fill(buf: &mut &[u8], form: FilterForm) -> Result<Fill, DecodeError> {
    let params = read_params(buf, form, &FILL_ALLOWED)?;
    Ok(Fill {
        filter: match find(&params, param::LOCATION_FILTER) {
            Some(Param::Filter(filter)) => Some(*filter),
            _ => None,
        },
        subscriber_priority: int(&params, param::SUBSCRIBER_PRIORITY).map(|v| v as u8),
        group_order: int(&params, param::GROUP_ORDER).and_then(order_from),
        timeout_ms: int(&params, param::FILL_TIMEOUT),
    })
}

/// Writes the parameters inside FILL_PARAMETERS. An explicit no-filter is sent (it means the
/// whole track, where an absent filter means the subscription's).
fn write_fill(fill: &Fill, form: FilterForm, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    let mut params = Params::new();
    if let Some(timeout) = fill.timeout_ms {
        params.push((param::FILL_TIMEOUT, Param::Int(timeout)));
    }
    if let Some(priority) = fill.subscriber_priority {
        params.push((param::SUBSCRIBER_PRIORITY, Param::Int(priority.into())));
    }
    if let Some(filter) = fill.filter {
        params.push((param::LOCATION_FILTER, Param::Filter(filter)));
    }
    match fill.group_order {
        None => {}
        Some(GroupOrder::Publisher) => {
            return Err(EncodeError::Invalid(
                "a fill's group order is ascending or descending",
            ));
        }
        Some(order) => params.push((param::GROUP_ORDER, Param::Int(order as u64))),
    }
    write_params(&params, form, &FILL_ALLOWED, out)
}

/// Whether `filter` is the model's no-filter.
pub(crate) fn is_unfiltered(filter: &FilterType) -> bool {
    *filter == UNFILTERED
}
