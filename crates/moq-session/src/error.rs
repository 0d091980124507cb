use moq_wire::DecodeError;
use thiserror::Error;

use crate::tls::TlsError;

/// A request the peer refused (SUBSCRIBE_ERROR, PUBLISH_NAMESPACE_ERROR, ...).
#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[error("{what} refused with code {code:#x}: {reason}")]
pub struct RequestError {
    pub what: &'static str,
    pub code: u64,
    pub reason: String,
}

#[derive(Debug, Clone, Error)]
pub enum SessionError {
    #[error("TLS: {0}")]
    Tls(String),
    #[error("cannot resolve {0}")]
    Resolve(String),
    #[error("cannot set up the QUIC endpoint: {0}")]
    Endpoint(String),
    #[error("connection failed: {0}")]
    Connection(#[from] quinn::ConnectionError),
    #[error("peer violated the protocol ({code:#x}): {reason}")]
    Protocol { code: u64, reason: String },
    #[error("the peer offered no supported version (we speak {ours:#x})")]
    VersionNegotiation { ours: u64 },
    /// The TLS handshake found no MoQ Transport draft (ALPN) both sides speak.
    #[error(
        "no MoQ Transport draft in common: we allow {ours}, the server speaks {}",
        if theirs.is_empty() { "none of the drafts we know" } else { theirs }
    )]
    NoCommonDraft {
        /// Our drafts, e.g. "16,14".
        ours: String,
        /// The server's, as far as they are drafts we know ("" when none is).
        theirs: String,
    },
    #[error("the control stream closed")]
    ControlClosed,
    #[error("timed out {0}")]
    Timeout(&'static str),
    #[error(transparent)]
    Request(#[from] RequestError),
    #[error("the peer sent GOAWAY; no new requests")]
    GoingAway,
    #[error("refused: {0}")]
    Refused(String),
    #[error(transparent)]
    Redirected(Redirected),
}

/// A request the peer refused with REDIRECT: it could succeed elsewhere. A subscriber
/// follows it as it follows a relay going away: it connects to `url` (when the peer named
/// one) and asks for `namespace` / `track` (when named) there.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[error("redirected{}{}: {reason}",
    url.as_deref().map(|u| format!(" to {u}")).unwrap_or_default(),
    target.as_ref().map(|(ns, t)| format!(" for {}/{}", ns.to_path(), String::from_utf8_lossy(t))).unwrap_or_default())]
pub struct Redirected {
    /// Where to connect, `None` for the current session's URI.
    pub url: Option<String>,
    /// The track to ask for instead, `None` for the same one.
    pub target: Option<(moq_wire::message::TrackNamespace, Vec<u8>)>,
    pub reason: String,
}

impl SessionError {
    pub(crate) fn decode(err: DecodeError) -> SessionError {
        SessionError::Protocol {
            code: err.session_error_code(),
            reason: err.to_string(),
        }
    }

    pub(crate) fn violation(reason: impl Into<String>) -> SessionError {
        SessionError::Protocol {
            code: moq_wire::message::session_error::PROTOCOL_VIOLATION,
            reason: reason.into(),
        }
    }

    /// Whether the server refused us for good: unauthorized (a missing or wrong token, a
    /// namespace we may not publish), or unreachable by name, TLS or version. Retrying
    /// cannot help.
    pub fn is_refusal(&self) -> bool {
        use moq_wire::message::{publish_namespace_error, session_error};
        match self {
            SessionError::Request(refused) => refused.code == publish_namespace_error::UNAUTHORIZED,
            SessionError::Connection(quinn::ConnectionError::ApplicationClosed(close)) => {
                close.error_code.into_inner() == session_error::UNAUTHORIZED
            }
            SessionError::Connection(quinn::ConnectionError::TransportError(e)) => {
                is_tls_alert(e.code)
            }
            SessionError::Connection(quinn::ConnectionError::ConnectionClosed(close)) => {
                is_tls_alert(close.error_code)
            }
            SessionError::Resolve(_)
            | SessionError::Tls(_)
            | SessionError::VersionNegotiation { .. }
            | SessionError::NoCommonDraft { .. } => true,
            _ => false,
        }
    }

    /// The peer says the track (or its broadcast) does not exist.
    pub fn is_missing(&self) -> bool {
        use moq_wire::message::subscribe_error;
        matches!(self, SessionError::Request(refused) if refused.code == subscribe_error::TRACK_DOES_NOT_EXIST)
    }

    /// What to do about a refusal, for the error message a user reads.
    pub fn advice(&self) -> Option<&'static str> {
        use moq_wire::message::session_error;
        let tls = "the server's certificate is not trusted: pin it with tls-fingerprint=SHA256 \
                   (a listening moqsink posts it in moq-listening and has it in \
                   tls-cert-fingerprint; a URI takes ?tls-fingerprint=), trust its CA with \
                   tls-ca-file, or set tls-insecure=true (?tls-insecure=true) on a trusted network";
        let auth =
            "set auth-token (or ?jwt= in the URL) to a token the relay accepts for this path";
        match self {
            SessionError::Connection(quinn::ConnectionError::TransportError(e))
                if is_tls_alert(e.code) =>
            {
                Some(tls)
            }
            SessionError::Connection(quinn::ConnectionError::ApplicationClosed(close))
                if close.error_code.into_inner() == session_error::UNAUTHORIZED =>
            {
                Some(auth)
            }
            SessionError::Request(refused)
                if refused.code == moq_wire::message::publish_namespace_error::UNAUTHORIZED =>
            {
                Some(auth)
            }
            SessionError::NoCommonDraft { .. } | SessionError::VersionNegotiation { .. } => {
                Some("set versions to include a draft the server speaks")
            }
            SessionError::Resolve(_) => Some("check the host name in the URL"),
            _ => None,
        }
    }

    /// Whether retrying later could help (the peer went away, as opposed to refusing us).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            SessionError::Connection(_)
                | SessionError::ControlClosed
                | SessionError::Timeout(_)
                | SessionError::GoingAway
                | SessionError::Redirected(_)
        )
    }
}

/// A QUIC connection closed by a TLS alert: the handshake failed on a certificate (ours
/// rejecting the server's, or the server rejecting the handshake), which a retry repeats.
fn is_tls_alert(code: quinn::TransportErrorCode) -> bool {
    (0x100..0x200).contains(&u64::from(code))
}

impl From<TlsError> for SessionError {
    fn from(err: TlsError) -> Self {
        SessionError::Tls(err.to_string())
    }
}
