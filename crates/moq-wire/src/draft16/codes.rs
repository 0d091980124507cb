//! Numbers from draft-16's registries, and the translation of request error and PUBLISH_DONE
//! codes between draft-16's tables and the per-message tables of draft-14 that the shared
//! message model ([`crate::message`]) carries.

use crate::message::RequestKind;
use crate::message::{
    fetch_error, publish_error, publish_namespace_error, subscribe_error, subscribe_namespace_error,
};

/// Message parameter types (every control message except the setup messages). Each is only
/// meaningful in some messages; see [`super`] for where each one lands in the model.
pub mod param {
    /// Milliseconds objects stay worth forwarding (integer, never 0). SUBSCRIBE, PUBLISH_OK,
    /// REQUEST_UPDATE.
    pub const DELIVERY_TIMEOUT: u64 = 0x02;
    /// An authorisation token (bytes; may repeat). SUBSCRIBE, PUBLISH, FETCH, TRACK_STATUS,
    /// REQUEST_UPDATE, PUBLISH_NAMESPACE, SUBSCRIBE_NAMESPACE.
    pub const AUTHORIZATION_TOKEN: u64 = 0x03;
    /// Milliseconds until the sender ends the subscription; 0 for never or unknown (integer).
    /// SUBSCRIBE_OK, PUBLISH, PUBLISH_OK.
    pub const EXPIRES: u64 = 0x08;
    /// The largest Location seen on the track (bytes: a Location). SUBSCRIBE_OK, PUBLISH,
    /// REQUEST_OK.
    pub const LARGEST_OBJECT: u64 = 0x09;
    /// Forwarding state, 0 or 1 (integer; 1 when absent, except in REQUEST_UPDATE). SUBSCRIBE,
    /// PUBLISH, PUBLISH_OK, REQUEST_UPDATE, SUBSCRIBE_NAMESPACE.
    pub const FORWARD: u64 = 0x10;
    /// Subscriber priority, 0 to 255 (integer; 128 when absent). SUBSCRIBE, FETCH, PUBLISH_OK,
    /// REQUEST_UPDATE.
    pub const SUBSCRIBER_PRIORITY: u64 = 0x20;
    /// A Subscription Filter (bytes; unfiltered when absent). SUBSCRIBE, PUBLISH_OK,
    /// REQUEST_UPDATE.
    pub const SUBSCRIPTION_FILTER: u64 = 0x21;
    /// Group order, 1 ascending or 2 descending (integer). SUBSCRIBE (absent: the publisher's),
    /// PUBLISH_OK, FETCH (absent: ascending).
    pub const GROUP_ORDER: u64 = 0x22;
    /// Largest group the subscriber knows plus one, or 0: asks the original publisher to
    /// start a new group (integer). SUBSCRIBE, PUBLISH_OK, REQUEST_UPDATE.
    pub const NEW_GROUP_REQUEST: u64 = 0x32;
}

/// Extension header types: track extensions (after the parameters of SUBSCRIBE_OK, PUBLISH
/// and FETCH_OK) and object extensions.
pub mod extension {
    /// The publisher's delivery timeout in milliseconds (track; integer, never 0).
    pub const DELIVERY_TIMEOUT: u64 = 0x02;
    /// Milliseconds an object may be served from a cache (track; integer).
    pub const MAX_CACHE_DURATION: u64 = 0x04;
    /// Key-Value-Pairs relays must pass on untouched (track and object; bytes).
    pub const IMMUTABLE_EXTENSIONS: u64 = 0x0B;
    /// Publisher priority of subgroups and datagrams that leave theirs out (track; 0 to 255,
    /// 128 when absent).
    pub const DEFAULT_PUBLISHER_PRIORITY: u64 = 0x0E;
    /// The publisher's group order, 1 ascending or 2 descending (track; ascending when
    /// absent).
    pub const DEFAULT_PUBLISHER_GROUP_ORDER: u64 = 0x22;
    /// 1 if subscribers may ask for new groups with NEW_GROUP_REQUEST (track; 0 or 1).
    pub const DYNAMIC_GROUPS: u64 = 0x30;
    /// Groups before this one that will never exist (object; integer).
    pub const PRIOR_GROUP_ID_GAP: u64 = 0x3C;
    /// Objects before this one that will never exist (object; integer).
    pub const PRIOR_OBJECT_ID_GAP: u64 = 0x3E;
}

/// REQUEST_ERROR codes (one table for every kind of request).
pub mod request_error {
    pub const INTERNAL_ERROR: u64 = 0x0;
    pub const UNAUTHORIZED: u64 = 0x1;
    pub const TIMEOUT: u64 = 0x2;
    pub const NOT_SUPPORTED: u64 = 0x3;
    pub const MALFORMED_AUTH_TOKEN: u64 = 0x4;
    pub const EXPIRED_AUTH_TOKEN: u64 = 0x5;
    pub const DOES_NOT_EXIST: u64 = 0x10;
    pub const INVALID_RANGE: u64 = 0x11;
    pub const MALFORMED_TRACK: u64 = 0x12;
    pub const DUPLICATE_SUBSCRIPTION: u64 = 0x19;
    pub const UNINTERESTED: u64 = 0x20;
    pub const PREFIX_OVERLAP: u64 = 0x30;
    pub const INVALID_JOINING_REQUEST_ID: u64 = 0x32;
}

/// PUBLISH_DONE status codes.
pub mod publish_done_code {
    pub const INTERNAL_ERROR: u64 = 0x0;
    pub const UNAUTHORIZED: u64 = 0x1;
    pub const TRACK_ENDED: u64 = 0x2;
    pub const SUBSCRIPTION_ENDED: u64 = 0x3;
    pub const GOING_AWAY: u64 = 0x4;
    pub const EXPIRED: u64 = 0x5;
    pub const TOO_FAR_BEHIND: u64 = 0x6;
    /// A REQUEST_UPDATE of the subscription failed. No draft-14 counterpart: it reaches the
    /// model as 0x8, a number draft-14 leaves unassigned.
    pub const UPDATE_FAILED: u64 = 0x8;
    pub const MALFORMED_TRACK: u64 = 0x12;
}

/// Application error codes for resetting data streams.
pub mod reset_code {
    pub const INTERNAL_ERROR: u64 = 0x0;
    pub const CANCELLED: u64 = 0x1;
    pub const DELIVERY_TIMEOUT: u64 = 0x2;
    pub const SESSION_CLOSED: u64 = 0x3;
    pub const UNKNOWN_OBJECT_STATUS: u64 = 0x4;
    pub const MALFORMED_TRACK: u64 = 0x12;
}

use request_error as d16;

/// Codes both drafts define for every kind of request, with the same numbers.
const SHARED: [(u64, u64); 4] = [
    (0x0, d16::INTERNAL_ERROR),
    (0x1, d16::UNAUTHORIZED),
    (0x2, d16::TIMEOUT),
    (0x3, d16::NOT_SUPPORTED),
];

/// (draft-14 code, draft-16 code) pairs with the same meaning, per draft-14 table. Within a
/// table both columns are free of repeats, so the translation is one-to-one on these codes.
const SUBSCRIBE: &[(u64, u64)] = &[
    (subscribe_error::TRACK_DOES_NOT_EXIST, d16::DOES_NOT_EXIST),
    (subscribe_error::INVALID_RANGE, d16::INVALID_RANGE),
    (
        subscribe_error::MALFORMED_AUTH_TOKEN,
        d16::MALFORMED_AUTH_TOKEN,
    ),
    (subscribe_error::EXPIRED_AUTH_TOKEN, d16::EXPIRED_AUTH_TOKEN),
];

const FETCH: &[(u64, u64)] = &[
    (fetch_error::TRACK_DOES_NOT_EXIST, d16::DOES_NOT_EXIST),
    (fetch_error::INVALID_RANGE, d16::INVALID_RANGE),
    (
        fetch_error::INVALID_JOINING_REQUEST_ID,
        d16::INVALID_JOINING_REQUEST_ID,
    ),
    (fetch_error::MALFORMED_TRACK, d16::MALFORMED_TRACK),
    (fetch_error::MALFORMED_AUTH_TOKEN, d16::MALFORMED_AUTH_TOKEN),
    (fetch_error::EXPIRED_AUTH_TOKEN, d16::EXPIRED_AUTH_TOKEN),
];

/// Draft-14 FETCH_ERROR codes that draft-16 dropped, sent as the nearest draft-16 code (one
/// way only: that code decodes to its own draft-14 counterpart).
const FETCH_ONE_WAY: &[(u64, u64)] = &[(fetch_error::NO_OBJECTS, d16::INVALID_RANGE)];

const PUBLISH: &[(u64, u64)] = &[(publish_error::UNINTERESTED, d16::UNINTERESTED)];

const PUBLISH_NAMESPACE: &[(u64, u64)] = &[
    (publish_namespace_error::UNINTERESTED, d16::UNINTERESTED),
    (
        publish_namespace_error::MALFORMED_AUTH_TOKEN,
        d16::MALFORMED_AUTH_TOKEN,
    ),
    (
        publish_namespace_error::EXPIRED_AUTH_TOKEN,
        d16::EXPIRED_AUTH_TOKEN,
    ),
];

const SUBSCRIBE_NAMESPACE: &[(u64, u64)] = &[
    (
        subscribe_namespace_error::NAMESPACE_PREFIX_UNKNOWN,
        d16::DOES_NOT_EXIST,
    ),
    (
        subscribe_namespace_error::NAMESPACE_PREFIX_OVERLAP,
        d16::PREFIX_OVERLAP,
    ),
    (
        subscribe_namespace_error::MALFORMED_AUTH_TOKEN,
        d16::MALFORMED_AUTH_TOKEN,
    ),
    (
        subscribe_namespace_error::EXPIRED_AUTH_TOKEN,
        d16::EXPIRED_AUTH_TOKEN,
    ),
];

/// The draft-14 table (as code pairs) of the error message that answers `kind`.
fn table(kind: RequestKind) -> &'static [(u64, u64)] {
    match kind {
        RequestKind::Subscribe | RequestKind::TrackStatus | RequestKind::SubscribeUpdate => {
            SUBSCRIBE
        }
        RequestKind::Fetch => FETCH,
        RequestKind::Publish => PUBLISH,
        RequestKind::PublishNamespace => PUBLISH_NAMESPACE,
        RequestKind::SubscribeNamespace | RequestKind::SubscribeTracks => SUBSCRIBE_NAMESPACE,
    }
}

/// The draft-14 code (from the table of the error message that answers `kind`) for a draft-16
/// REQUEST_ERROR code. Codes without a counterpart there become INTERNAL_ERROR (0).
pub fn request_error_to_draft14(kind: RequestKind, code: u64) -> u64 {
    SHARED
        .iter()
        .chain(table(kind))
        .find(|&&(_, d16)| d16 == code)
        .map_or(0, |&(d14, _)| d14)
}

/// The draft-16 REQUEST_ERROR code for a draft-14 code of the error message that answers
/// `kind`. Codes without a counterpart become INTERNAL_ERROR (0); draft-14's FETCH
/// NO_OBJECTS becomes INVALID_RANGE.
pub fn request_error_from_draft14(kind: RequestKind, code: u64) -> u64 {
    let one_way: &[(u64, u64)] = if kind == RequestKind::Fetch {
        FETCH_ONE_WAY
    } else {
        &[]
    };
    SHARED
        .iter()
        .chain(table(kind))
        .chain(one_way)
        .find(|&&(d14, _)| d14 == code)
        .map_or(0, |&(_, d16)| d16)
}

/// Draft-14 calls MALFORMED_TRACK 0x7 in PUBLISH_DONE, draft-16 0x12; both leave the other
/// number unassigned, so swapping the two translates in both directions and loses nothing.
fn swap_malformed_track(code: u64) -> u64 {
    match code {
        0x7 => 0x12,
        0x12 => 0x7,
        other => other,
    }
}

/// The draft-14 PUBLISH_DONE status for a draft-16 one. Every other code is passed through
/// (so [`publish_done_code::UPDATE_FAILED`] arrives as 0x8).
pub fn publish_done_to_draft14(code: u64) -> u64 {
    swap_malformed_track(code)
}

/// The draft-16 PUBLISH_DONE status for a draft-14 one (inverse of
/// [`publish_done_to_draft14`]).
pub fn publish_done_from_draft14(code: u64) -> u64 {
    swap_malformed_track(code)
}
