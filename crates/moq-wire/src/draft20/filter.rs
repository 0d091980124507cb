//! LOCATION_FILTER: the range a subscription, a fetch or a fill covers.
//!
//! Draft-20 sends it length-prefixed, and the number of integers inside says what they are:
//! none is no filter (the whole track), one the start group counted back from the next group
//! (0: the next group, 1: the current one), two a start Location (both 0: the next object),
//! three a start and an end group (as a delta), four a start and an end Location. Draft-22
//! drops the length and names the form with a Location Filter Type first. Both map onto the
//! model's [`FilterType`], where "no filter" is AbsoluteStart {0, 0}.

use crate::cursor::take;
use crate::message::{FilterType, Location};
use crate::varint::{Form, Vi64};
use crate::{DecodeError, EncodeError};

/// The model's "no filter": everything from {0, 0} on.
pub(crate) const UNFILTERED: FilterType = FilterType::AbsoluteStart(Location {
    group: 0,
    object: 0,
});

/// How a draft writes a Location Filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FilterForm {
    /// Draft-20: length-prefixed, the count of integers selects the meaning.
    Counted,
    /// Draft-22: a Location Filter Type, then the fields it names.
    Typed,
}

/// Draft-22's Location Filter Types.
mod filter_type {
    pub const NONE: u64 = 0x0;
    pub const RELATIVE_START: u64 = 0x1;
    pub const ABSOLUTE_START: u64 = 0x2;
    pub const ABSOLUTE_GROUP_END: u64 = 0x3;
    pub const ABSOLUTE_RANGE: u64 = 0x4;
    pub const NEXT_OBJECT: u64 = 0x5;
}

const BACKWARDS: &str = "location filter ends before it starts";
const END_OVERFLOW: &str = "location filter end group beyond 2^64 - 1";

/// A filter as the integers draft-20 lists for it (the model's no-filter as none).
fn fields(filter: &FilterType) -> Result<Vec<u64>, EncodeError> {
    let end_delta = |start: u64, end: u64| {
        end.checked_sub(start)
            .ok_or(EncodeError::Invalid(BACKWARDS))
    };
    Ok(match *filter {
        UNFILTERED => Vec::new(),
        FilterType::NextGroupStart => vec![0],
        FilterType::GroupsBack(back) => vec![back.checked_add(1).ok_or(EncodeError::Invalid(
            "a filter that starts 2^64 groups back",
        ))?],
        FilterType::LargestObject => vec![0, 0],
        FilterType::AbsoluteStart(start) => vec![start.group, start.object],
        FilterType::AbsoluteRange { start, end_group } => {
            vec![
                start.group,
                start.object,
                end_delta(start.group, end_group)?,
            ]
        }
        FilterType::AbsoluteObjectRange { start, end } => vec![
            start.group,
            start.object,
            end_delta(start.group, end.group)?,
            end.object,
        ],
    })
}

/// The end group a delta from `start` names.
fn end_group(start: u64, delta: u64) -> Result<u64, DecodeError> {
    start
        .checked_add(delta)
        .ok_or(DecodeError::ProtocolViolation(END_OVERFLOW))
}

/// The filter draft-20's integers describe.
fn from_fields(values: &[u64]) -> Result<FilterType, DecodeError> {
    Ok(match *values {
        [] => UNFILTERED,
        [0] => FilterType::NextGroupStart,
        [groups] => FilterType::GroupsBack(groups - 1),
        [0, 0] => FilterType::LargestObject,
        [group, object] => FilterType::AbsoluteStart(Location { group, object }),
        [group, object, delta] => FilterType::AbsoluteRange {
            start: Location { group, object },
            end_group: end_group(group, delta)?,
        },
        [group, object, delta, end_object] => FilterType::AbsoluteObjectRange {
            start: Location { group, object },
            end: Location {
                group: end_group(group, delta)?,
                object: end_object,
            },
        },
        _ => {
            return Err(DecodeError::ProtocolViolation(
                "location filter of more than four integers",
            ));
        }
    })
}

impl FilterForm {
    /// Appends `filter` as the value of a LOCATION_FILTER (after its type). The model's
    /// no-filter is written out, as draft-20's empty filter or draft-22's NONE: leave the
    /// parameter out instead where absence means the same.
    pub(crate) fn write(self, filter: &FilterType, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let values = fields(filter)?;
        match self {
            FilterForm::Counted => {
                let mut bytes = Vec::new();
                values
                    .iter()
                    .for_each(|&v| crate::varint::vi64::encode(v, &mut bytes));
                Vi64::put(bytes.len() as u64, out)?;
                out.extend_from_slice(&bytes);
            }
            FilterForm::Typed => {
                let kind = match (filter, values.len()) {
                    (FilterType::LargestObject, _) => filter_type::NEXT_OBJECT,
                    (_, 0) => filter_type::NONE,
                    (_, 1) => filter_type::RELATIVE_START,
                    (_, 2) => filter_type::ABSOLUTE_START,
                    (_, 3) => filter_type::ABSOLUTE_GROUP_END,
                    _ => filter_type::ABSOLUTE_RANGE,
                };
                Vi64::put(kind, out)?;
                if kind != filter_type::NEXT_OBJECT {
                    values.iter().try_for_each(|&v| Vi64::put(v, out))?;
                }
            }
        }
        Ok(())
    }

    /// Reads the value of a LOCATION_FILTER (after its type).
    pub(crate) fn read(self, buf: &mut &[u8]) -> Result<FilterType, DecodeError> {
        match self {
            FilterForm::Counted => {
                let len = Vi64::get(buf)?;
                let mut bytes = take(buf, len)?;
                let mut values = Vec::new();
                while !bytes.is_empty() && values.len() <= 4 {
                    values.push(Vi64::get(&mut bytes).map_err(|_| {
                        DecodeError::ProtocolViolation("location filter cut inside an integer")
                    })?);
                }
                from_fields(&values)
            }
            FilterForm::Typed => {
                let kind = Vi64::get(buf)?;
                let count = match kind {
                    filter_type::NONE => 0,
                    filter_type::RELATIVE_START => 1,
                    filter_type::ABSOLUTE_START => 2,
                    filter_type::ABSOLUTE_GROUP_END => 3,
                    filter_type::ABSOLUTE_RANGE => 4,
                    filter_type::NEXT_OBJECT => return Ok(FilterType::LargestObject),
                    _ => {
                        return Err(DecodeError::ProtocolViolation(
                            "unknown location filter type",
                        ));
                    }
                };
                let values = (0..count)
                    .map(|_| Vi64::get(buf))
                    .collect::<Result<Vec<u64>, _>>()?;
                match (kind, values.as_slice()) {
                    // Typed forms say what they are: {0, 0} is a start, not the next object.
                    (filter_type::ABSOLUTE_START, &[group, object]) => {
                        Ok(FilterType::AbsoluteStart(Location { group, object }))
                    }
                    (filter_type::RELATIVE_START, &[0]) => Ok(FilterType::NextGroupStart),
                    (filter_type::RELATIVE_START, &[groups]) => {
                        Ok(FilterType::GroupsBack(groups - 1))
                    }
                    _ => from_fields(&values),
                }
            }
        }
    }
}
