//! Error and status codes from the draft's registries, one module per table so that the same
//! name (e.g. `INTERNAL_ERROR`) can mean different numbers in different contexts.

/// Codes for closing the whole session (QUIC CONNECTION_CLOSE application error code).
pub mod session_error {
    pub const NO_ERROR: u64 = 0x0;
    pub const INTERNAL_ERROR: u64 = 0x1;
    pub const UNAUTHORIZED: u64 = 0x2;
    pub const PROTOCOL_VIOLATION: u64 = 0x3;
    pub const INVALID_REQUEST_ID: u64 = 0x4;
    pub const DUPLICATE_TRACK_ALIAS: u64 = 0x5;
    pub const KEY_VALUE_FORMATTING_ERROR: u64 = 0x6;
    pub const TOO_MANY_REQUESTS: u64 = 0x7;
    pub const INVALID_PATH: u64 = 0x8;
    pub const MALFORMED_PATH: u64 = 0x9;
    pub const GOAWAY_TIMEOUT: u64 = 0x10;
    pub const CONTROL_MESSAGE_TIMEOUT: u64 = 0x11;
    pub const DATA_STREAM_TIMEOUT: u64 = 0x12;
    pub const AUTH_TOKEN_CACHE_OVERFLOW: u64 = 0x13;
    pub const DUPLICATE_AUTH_TOKEN_ALIAS: u64 = 0x14;
    pub const VERSION_NEGOTIATION_FAILED: u64 = 0x15;
    pub const MALFORMED_AUTH_TOKEN: u64 = 0x16;
    pub const UNKNOWN_AUTH_TOKEN_ALIAS: u64 = 0x17;
    pub const EXPIRED_AUTH_TOKEN: u64 = 0x18;
    pub const INVALID_AUTHORITY: u64 = 0x19;
    pub const MALFORMED_AUTHORITY: u64 = 0x1A;
}

/// Codes for SUBSCRIBE_ERROR (and TRACK_STATUS_ERROR, which mirrors it).
pub mod subscribe_error {
    pub const INTERNAL_ERROR: u64 = 0x0;
    pub const UNAUTHORIZED: u64 = 0x1;
    pub const TIMEOUT: u64 = 0x2;
    pub const NOT_SUPPORTED: u64 = 0x3;
    pub const TRACK_DOES_NOT_EXIST: u64 = 0x4;
    pub const INVALID_RANGE: u64 = 0x5;
    pub const MALFORMED_AUTH_TOKEN: u64 = 0x10;
    pub const EXPIRED_AUTH_TOKEN: u64 = 0x12;
}

/// Status codes for PUBLISH_DONE (why a subscription ended).
pub mod publish_done_code {
    pub const INTERNAL_ERROR: u64 = 0x0;
    pub const UNAUTHORIZED: u64 = 0x1;
    pub const TRACK_ENDED: u64 = 0x2;
    pub const SUBSCRIPTION_ENDED: u64 = 0x3;
    pub const GOING_AWAY: u64 = 0x4;
    pub const EXPIRED: u64 = 0x5;
    pub const TOO_FAR_BEHIND: u64 = 0x6;
    pub const MALFORMED_TRACK: u64 = 0x7;
}

/// Codes for PUBLISH_ERROR.
pub mod publish_error {
    pub const INTERNAL_ERROR: u64 = 0x0;
    pub const UNAUTHORIZED: u64 = 0x1;
    pub const TIMEOUT: u64 = 0x2;
    pub const NOT_SUPPORTED: u64 = 0x3;
    pub const UNINTERESTED: u64 = 0x4;
}

/// Codes for FETCH_ERROR.
pub mod fetch_error {
    pub const INTERNAL_ERROR: u64 = 0x0;
    pub const UNAUTHORIZED: u64 = 0x1;
    pub const TIMEOUT: u64 = 0x2;
    pub const NOT_SUPPORTED: u64 = 0x3;
    pub const TRACK_DOES_NOT_EXIST: u64 = 0x4;
    pub const INVALID_RANGE: u64 = 0x5;
    pub const NO_OBJECTS: u64 = 0x6;
    pub const INVALID_JOINING_REQUEST_ID: u64 = 0x7;
    pub const UNKNOWN_STATUS_IN_RANGE: u64 = 0x8;
    pub const MALFORMED_TRACK: u64 = 0x9;
    pub const MALFORMED_AUTH_TOKEN: u64 = 0x10;
    pub const EXPIRED_AUTH_TOKEN: u64 = 0x12;
}

/// Codes for PUBLISH_NAMESPACE_ERROR and PUBLISH_NAMESPACE_CANCEL (the registry still calls
/// the table ANNOUNCE_ERROR).
pub mod publish_namespace_error {
    pub const INTERNAL_ERROR: u64 = 0x0;
    pub const UNAUTHORIZED: u64 = 0x1;
    pub const TIMEOUT: u64 = 0x2;
    pub const NOT_SUPPORTED: u64 = 0x3;
    pub const UNINTERESTED: u64 = 0x4;
    pub const MALFORMED_AUTH_TOKEN: u64 = 0x10;
    pub const EXPIRED_AUTH_TOKEN: u64 = 0x12;
}

/// Codes for SUBSCRIBE_NAMESPACE_ERROR.
pub mod subscribe_namespace_error {
    pub const INTERNAL_ERROR: u64 = 0x0;
    pub const UNAUTHORIZED: u64 = 0x1;
    pub const TIMEOUT: u64 = 0x2;
    pub const NOT_SUPPORTED: u64 = 0x3;
    pub const NAMESPACE_PREFIX_UNKNOWN: u64 = 0x4;
    pub const NAMESPACE_PREFIX_OVERLAP: u64 = 0x5;
    pub const MALFORMED_AUTH_TOKEN: u64 = 0x10;
    pub const EXPIRED_AUTH_TOKEN: u64 = 0x12;
}

/// Application error codes for RESET_STREAM / RESET_STREAM_AT on data streams.
pub mod reset_code {
    pub const INTERNAL_ERROR: u64 = 0x0;
    /// UNSUBSCRIBE, FETCH_CANCEL or STOP_SENDING, or the publisher ended the subscription.
    pub const CANCELLED: u64 = 0x1;
    pub const DELIVERY_TIMEOUT: u64 = 0x2;
    pub const SESSION_CLOSED: u64 = 0x3;
}
