//! Error types shared by every draft.

use crate::message::session_error;

/// Why bytes could not be turned into a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The input ends before the value does. Not an error in itself: read more bytes and
    /// decode again. It only becomes one if the stream ends (FIN) while still incomplete.
    #[error("input ends before the value does")]
    Incomplete,
    /// The bytes break a rule of the protocol; close the session with PROTOCOL_VIOLATION.
    #[error("protocol violation: {0}")]
    ProtocolViolation(&'static str),
    /// A key-value pair (or a block of them) cannot be parsed; close the session with
    /// KEY_VALUE_FORMATTING_ERROR.
    #[error("key-value formatting error: {0}")]
    KeyValueFormatting(&'static str),
    /// A control message type this draft does not define.
    #[error("unknown control message type {0:#x}")]
    UnknownMessageType(u64),
    /// A unidirectional stream type this draft does not define.
    #[error("unknown data stream type {0:#x}")]
    UnknownStreamType(u64),
    /// A datagram type this draft does not define.
    #[error("unknown datagram type {0:#x}")]
    UnknownDatagramType(u64),
}

impl DecodeError {
    /// True when more input may turn this into a successful decode.
    pub fn is_incomplete(&self) -> bool {
        matches!(self, Self::Incomplete)
    }

    /// The session termination code to close the session with.
    ///
    /// For [`DecodeError::Incomplete`] this is the code to use when the stream ended (FIN) in
    /// the middle of a value, which the protocol treats as a violation. Unknown message, stream
    /// and datagram types must close the session; the draft names no code for them, so
    /// PROTOCOL_VIOLATION is used.
    pub fn session_error_code(&self) -> u64 {
        match self {
            Self::KeyValueFormatting(_) => session_error::KEY_VALUE_FORMATTING_ERROR,
            Self::Incomplete
            | Self::ProtocolViolation(_)
            | Self::UnknownMessageType(_)
            | Self::UnknownStreamType(_)
            | Self::UnknownDatagramType(_) => session_error::PROTOCOL_VIOLATION,
        }
    }
}

/// Why a value could not be turned into bytes. Always a bug or bad input on the sending side:
/// the encoder refuses to produce anything the receiving side would reject.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// The integer does not fit the 62 bits of a variable-length integer.
    #[error("{0} does not fit a 62-bit variable-length integer")]
    VarintOutOfRange(u64),
    /// A control message payload longer than its 16-bit length field can describe.
    #[error("control message payload of {0} bytes exceeds 65535")]
    MessageTooLong(usize),
    /// A field breaks a limit or rule of the protocol.
    #[error("invalid field: {0}")]
    Invalid(&'static str),
}
