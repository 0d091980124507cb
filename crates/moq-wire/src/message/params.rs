//! Key-Value-Pairs and their two uses: message parameters and object extension headers.

use crate::{DecodeError, EncodeError};

use super::MAX_KVP_BYTES_LEN;
use super::common::{Wire, get, put, read_bytes, write_bytes};

/// Parameter types for CLIENT_SETUP / SERVER_SETUP. Setup parameters have their own number
/// space, fixed across versions.
pub mod setup_param {
    /// Path of the MoQ URI, sent by clients on raw QUIC (bytes).
    pub const PATH: u64 = 0x01;
    /// Initial Maximum Request ID granted to the peer (integer; 0 when absent).
    pub const MAX_REQUEST_ID: u64 = 0x02;
    /// Token authorising the session (bytes; may repeat).
    pub const AUTHORIZATION_TOKEN: u64 = 0x03;
    /// Bytes of registered token aliases the sender will store (integer).
    pub const MAX_AUTH_TOKEN_CACHE_SIZE: u64 = 0x04;
    /// Authority of the MoQ URI, sent by clients on raw QUIC (bytes).
    pub const AUTHORITY: u64 = 0x05;
    /// Free-form name and version of the sender's implementation (bytes).
    ///
    /// The draft-14 text gives this parameter 0x05, clashing with AUTHORITY; deployed peers
    /// (and later drafts) use 0x07, so that is the value used here.
    pub const MOQT_IMPLEMENTATION: u64 = 0x07;
}

/// An AUTHORIZATION TOKEN value that carries the token itself (§Authorization Token: alias
/// type USE_VALUE, then the token type and the token). Type 0 is a token whose meaning the
/// endpoints agreed out of band, e.g. a JWT for moq-relay.
pub fn authorization_token(token_type: u64, token: &[u8]) -> Result<Vec<u8>, EncodeError> {
    /// Alias type: the token follows, and is not registered.
    const USE_VALUE: u64 = 0x3;
    let mut out = Vec::with_capacity(token.len() + 4);
    crate::varint::encode(USE_VALUE, &mut out)?;
    crate::varint::encode(token_type, &mut out)?;
    out.extend_from_slice(token);
    Ok(out)
}

/// Parameter types for every message other than the setup messages.
pub mod param {
    /// How long, in milliseconds, objects are worth forwarding after they arrive (integer).
    pub const DELIVERY_TIMEOUT: u64 = 0x02;
    /// Token authorising the request (bytes; may repeat).
    pub const AUTHORIZATION_TOKEN: u64 = 0x03;
    /// How long, in milliseconds, objects may be served from a cache (integer).
    pub const MAX_CACHE_DURATION: u64 = 0x04;
    /// Largest group the subscriber knows plus one, or 0: asks the original publisher for a
    /// new group (integer). Drafts 16 and later define it, with this number, for SUBSCRIBE
    /// and SUBSCRIBE_UPDATE; their codecs keep it in `params`.
    pub const NEW_GROUP_REQUEST: u64 = 0x32;
}

/// The value of a Key-Value-Pair. The key's parity decides which form is on the wire: even
/// keys carry an integer, odd keys a byte string.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Value {
    Int(u64),
    Bytes(Vec<u8>),
}

/// A typed value: a message parameter or an object extension header.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeyValuePair {
    pub key: u64,
    pub value: Value,
}

impl KeyValuePair {
    /// An integer pair; `key` must be even for it to be encodable.
    pub fn int(key: u64, value: u64) -> Self {
        Self {
            key,
            value: Value::Int(value),
        }
    }

    /// A byte-string pair; `key` must be odd for it to be encodable.
    pub fn bytes(key: u64, value: impl Into<Vec<u8>>) -> Self {
        Self {
            key,
            value: Value::Bytes(value.into()),
        }
    }
}

/// Even keys carry integers, odd keys byte strings.
fn carries_int(key: u64) -> bool {
    key.is_multiple_of(2)
}

impl Wire for KeyValuePair {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        match (&self.value, carries_int(self.key)) {
            (Value::Int(v), true) => {
                put(self.key, out)?;
                put(*v, out)
            }
            (Value::Bytes(bytes), false) => {
                if bytes.len() > MAX_KVP_BYTES_LEN {
                    return Err(EncodeError::Invalid(
                        "key-value byte value longer than 65535",
                    ));
                }
                put(self.key, out)?;
                write_bytes(bytes, out)
            }
            (Value::Int(_), false) => Err(EncodeError::Invalid("integer value under an odd key")),
            (Value::Bytes(_), true) => Err(EncodeError::Invalid("byte value under an even key")),
        }
    }

    fn read(buf: &mut &[u8]) -> Result<Self, DecodeError> {
        let key = get(buf)?;
        let value = if carries_int(key) {
            Value::Int(get(buf)?)
        } else {
            let bytes = read_bytes(
                buf,
                MAX_KVP_BYTES_LEN,
                "key-value byte value longer than 65535",
            )?;
            Value::Bytes(bytes.to_vec())
        };
        Ok(Self { key, value })
    }
}

/// Which parameter number space a message uses.
#[derive(Debug, Clone, Copy)]
pub(super) enum Scope {
    Setup,
    Message,
}

impl Scope {
    /// Known parameters that may appear at most once. AUTHORIZATION_TOKEN may repeat, and
    /// unknown parameters may always repeat.
    fn single_instance(self) -> &'static [u64] {
        match self {
            Self::Setup => &[
                setup_param::PATH,
                setup_param::MAX_REQUEST_ID,
                setup_param::MAX_AUTH_TOKEN_CACHE_SIZE,
                setup_param::AUTHORITY,
                setup_param::MOQT_IMPLEMENTATION,
            ],
            Self::Message => &[param::DELIVERY_TIMEOUT, param::MAX_CACHE_DURATION],
        }
    }
}

const REPEATED: &str = "parameter repeated";

/// The parameter list of a control message, in wire order.
///
/// Unknown parameters are kept (so they can be inspected or forwarded) and may repeat. A known
/// parameter that the draft allows only once (everything except AUTHORIZATION_TOKEN) is
/// rejected with a protocol violation when it appears twice, on decode and on encode alike.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Parameters(pub Vec<KeyValuePair>);

impl Parameters {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets an integer parameter, replacing any earlier value under the same key.
    pub fn with_int(self, key: u64, value: u64) -> Self {
        self.with(KeyValuePair::int(key, value))
    }

    /// Sets a byte-string parameter, replacing any earlier value under the same key. To send a
    /// repeatable parameter more than once, push onto `.0` directly.
    pub fn with_bytes(self, key: u64, value: impl Into<Vec<u8>>) -> Self {
        self.with(KeyValuePair::bytes(key, value))
    }

    fn with(mut self, pair: KeyValuePair) -> Self {
        self.0.retain(|p| p.key != pair.key);
        self.0.push(pair);
        self
    }

    /// The first integer value under `key`.
    pub fn get_int(&self, key: u64) -> Option<u64> {
        self.0.iter().find_map(|p| match p.value {
            Value::Int(v) if p.key == key => Some(v),
            _ => None,
        })
    }

    /// The first byte-string value under `key`.
    pub fn get_bytes(&self, key: u64) -> Option<&[u8]> {
        self.0.iter().find_map(|p| match &p.value {
            Value::Bytes(v) if p.key == key => Some(v.as_slice()),
            _ => None,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn has_repeated_single(&self, scope: Scope) -> bool {
        scope
            .single_instance()
            .iter()
            .any(|&key| self.0.iter().filter(|p| p.key == key).count() > 1)
    }

    pub(super) fn write_scoped(&self, scope: Scope, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        if self.has_repeated_single(scope) {
            return Err(EncodeError::Invalid(REPEATED));
        }
        put(self.0.len() as u64, out)?;
        self.0.iter().try_for_each(|pair| pair.write(out))
    }

    pub(super) fn read_scoped(buf: &mut &[u8], scope: Scope) -> Result<Self, DecodeError> {
        let count = get(buf)?;
        let mut pairs = Vec::new();
        for _ in 0..count {
            pairs.push(KeyValuePair::read(buf)?);
        }
        let params = Self(pairs);
        if params.has_repeated_single(scope) {
            return Err(DecodeError::ProtocolViolation(REPEATED));
        }
        Ok(params)
    }
}

/// Serialises object extension headers into the block carried on the wire (without its
/// length prefix), the form the data-stream and datagram headers hold.
pub fn encode_extensions(headers: &[KeyValuePair]) -> Result<Vec<u8>, EncodeError> {
    let mut block = Vec::new();
    for header in headers {
        header.write(&mut block)?;
    }
    Ok(block)
}

/// Parses an object extension header block. A block that ends inside a pair is a
/// KEY_VALUE_FORMATTING_ERROR.
pub fn decode_extensions(mut block: &[u8]) -> Result<Vec<KeyValuePair>, DecodeError> {
    let mut headers = Vec::new();
    while !block.is_empty() {
        let header = KeyValuePair::read(&mut block).map_err(|err| match err {
            DecodeError::Incomplete => {
                DecodeError::KeyValueFormatting("extension headers overrun their length")
            }
            other => other,
        })?;
        headers.push(header);
    }
    Ok(headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_authorization_token_carries_its_value() {
        // USE_VALUE (3), type 0, then the token's bytes.
        assert_eq!(
            authorization_token(0, b"ey.j.w").unwrap(),
            [&[0x03, 0x00][..], b"ey.j.w"].concat()
        );
        assert_eq!(authorization_token(300, b"").unwrap(), [0x03, 0x41, 0x2c]);
    }
}
