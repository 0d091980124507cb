//! Numbers from draft-20's registries, and the translation of its codes to the model's.
//!
//! REQUEST_ERROR codes are draft-16's table with a few more: the translation to the model's
//! per-request tables is draft-16's ([`crate::draft16::request_error_to_draft14`]), and codes
//! draft-20 added reach the model as INTERNAL_ERROR, except REDIRECT, which is its own
//! message of the model.

/// Message parameter types, and the value form of each ([`super::params`]).
pub mod param {
    /// Milliseconds an object stays worth forwarding (varint). SUBSCRIBE, REQUEST_UPDATE.
    pub const OBJECT_DELIVERY_TIMEOUT: u64 = 0x02;
    /// An authorization token (length-prefixed; may repeat).
    pub const AUTHORIZATION_TOKEN: u64 = 0x03;
    /// Milliseconds a relay may wait for a publisher to appear (varint). SUBSCRIBE.
    pub const RENDEZVOUS_TIMEOUT: u64 = 0x04;
    /// Milliseconds a subgroup stays worth forwarding (varint). SUBSCRIBE, REQUEST_UPDATE.
    pub const SUBGROUP_DELIVERY_TIMEOUT: u64 = 0x06;
    /// Milliseconds until the sender ends the subscription, 0 for never (varint).
    pub const EXPIRES: u64 = 0x08;
    /// The largest Location of the track (a bare Location).
    pub const LARGEST_OBJECT: u64 = 0x09;
    /// Milliseconds a relay may spend fetching upstream (varint). FETCH, inside
    /// FILL_PARAMETERS.
    pub const FILL_TIMEOUT: u64 = 0x0A;
    /// Forwarding state, 0 or 1 (uint8).
    pub const FORWARD: u64 = 0x10;
    /// Subscriber priority (uint8).
    pub const SUBSCRIBER_PRIORITY: u64 = 0x20;
    /// A Location Filter ([`super::filter`]).
    pub const LOCATION_FILTER: u64 = 0x21;
    /// Group order, 1 ascending or 2 descending (uint8).
    pub const GROUP_ORDER: u64 = 0x22;
    /// The fill of a subscription: parameters of its own (length-prefixed).
    pub const FILL_PARAMETERS: u64 = 0x23;
    /// Range filters (length-prefixed; may repeat).
    pub const SUBGROUP_FILTER: u64 = 0x25;
    pub const OBJECTID_FILTER: u64 = 0x26;
    pub const PRIORITY_FILTER: u64 = 0x27;
    pub const OBJECT_PROPERTY_FILTER: u64 = 0x28;
    pub const TRACK_PROPERTY_FILTER: u64 = 0x29;
    /// Largest group known plus one, or 0: asks for a new group (varint).
    pub const NEW_GROUP_REQUEST: u64 = 0x32;
    /// A new prefix for a SUBSCRIBE_NAMESPACE / SUBSCRIBE_TRACKS (a Track Namespace).
    pub const TRACK_NAMESPACE_PREFIX: u64 = 0x34;
    /// Whether the answer carries Track Properties, 0 or 1 (uint8).
    pub const INCLUDE_PROPERTIES: u64 = 0x35;
}

/// Setup option types (the setup parameter space of every draft).
pub mod setup_option {
    pub use crate::message::setup_param::{
        AUTHORITY, AUTHORIZATION_TOKEN, MAX_AUTH_TOKEN_CACHE_SIZE, MOQT_IMPLEMENTATION, PATH,
    };
    /// Ranges a peer may send in all range filters of one request (varint; 0 when absent).
    pub const MAX_FILTER_RANGES: u64 = 0x06;
    /// Unanswered REQUEST_UPDATEs a request stream may have (varint; 0: no limit).
    pub const MAX_REQUEST_UPDATES: u64 = 0x08;
}

/// Track property types (the last field of SUBSCRIBE_OK, PUBLISH, FETCH_OK, REQUEST_OK).
pub mod property {
    pub use crate::draft16::extension::{
        DEFAULT_PUBLISHER_GROUP_ORDER, DEFAULT_PUBLISHER_PRIORITY, DYNAMIC_GROUPS,
        IMMUTABLE_EXTENSIONS as IMMUTABLE_PROPERTIES, MAX_CACHE_DURATION,
    };
    /// Milliseconds an object stays worth forwarding (integer).
    pub const OBJECT_DELIVERY_TIMEOUT: u64 = 0x02;
    /// Milliseconds a subgroup stays worth forwarding (integer).
    pub const SUBGROUP_DELIVERY_TIMEOUT: u64 = 0x06;
}

/// REQUEST_ERROR codes: draft-16's, and those draft-20 added.
pub mod request_error {
    pub use crate::draft16::request_error::*;
    pub const GOING_AWAY: u64 = 0x6;
    pub const EXCESSIVE_LOAD: u64 = 0x9;
    pub const NAMESPACE_TOO_LARGE: u64 = 0x31;
    pub const UNSUPPORTED_EXTENSION: u64 = 0x33;
    /// The request could succeed elsewhere: a Redirect follows the reason.
    pub const REDIRECT: u64 = 0x34;
    pub const CONFLICTING_FILTERS: u64 = 0x35;
    pub const INVALID_FILTER: u64 = 0x36;
}

/// PUBLISH_DONE status codes.
pub mod publish_done_code {
    pub const INTERNAL_ERROR: u64 = 0x0;
    pub const UNAUTHORIZED: u64 = 0x1;
    pub const TRACK_ENDED: u64 = 0x2;
    pub const SUBSCRIPTION_ENDED: u64 = 0x3;
    pub const GOING_AWAY: u64 = 0x4;
    pub const TOO_FAR_BEHIND: u64 = 0x5;
    pub const EXPIRED: u64 = 0x6;
    pub const UPDATE_FAILED: u64 = 0x8;
    pub const EXCESSIVE_LOAD: u64 = 0x9;
    pub const MALFORMED_TRACK: u64 = 0x12;
}

/// Draft-20 swaps draft-14's EXPIRED (0x5) and TOO_FAR_BEHIND (0x6), and calls
/// MALFORMED_TRACK 0x12 instead of 0x7, leaving 0x7 unassigned: swapping each pair
/// translates both ways and loses nothing.
fn swap(code: u64) -> u64 {
    match code {
        0x5 => 0x6,
        0x6 => 0x5,
        0x7 => 0x12,
        0x12 => 0x7,
        other => other,
    }
}

/// The model's PUBLISH_DONE status for a draft-20 one (other codes pass through).
pub fn publish_done_to_model(code: u64) -> u64 {
    swap(code)
}

/// The draft-20 PUBLISH_DONE status for a model one (inverse of [`publish_done_to_model`]).
pub fn publish_done_from_model(code: u64) -> u64 {
    swap(code)
}

/// The Stream Count of a PUBLISH_DONE whose publisher does not know it: 2^64 - 1 in
/// draft-20, 2^62 - 1 in the model (the largest draft-14 integer).
pub const UNKNOWN_STREAM_COUNT: u64 = u64::MAX;
