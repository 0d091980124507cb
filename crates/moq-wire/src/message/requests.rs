//! The kinds of request, and the messages that answer them: what a draft that answers every
//! request with the same REQUEST_OK / REQUEST_ERROR pair needs to map its answers onto the
//! model's per-request messages and back.

use super::control::{
    ControlMessage, FetchError, PublishError, PublishNamespaceError, SubscribeError,
    SubscribeNamespaceError,
};

/// The kind of request a Request ID was issued for. From draft-16 on most requests are
/// answered by the same two messages, REQUEST_OK and REQUEST_ERROR, which name the request
/// by ID only (or, from draft-17 on, not at all: by the request stream they travel on), so
/// decoding an answer needs the kind of request it answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RequestKind {
    Subscribe,
    Fetch,
    Publish,
    PublishNamespace,
    SubscribeNamespace,
    /// Draft-20's SUBSCRIBE_TRACKS.
    SubscribeTracks,
    TrackStatus,
    /// A SUBSCRIBE_UPDATE, sent as REQUEST_UPDATE from draft-16 on.
    SubscribeUpdate,
}

impl RequestKind {
    /// The kind of request `msg` makes, if it is a request.
    pub fn of(msg: &ControlMessage) -> Option<(RequestKind, u64)> {
        use ControlMessage as M;
        Some(match msg {
            M::Subscribe(m) => (Self::Subscribe, m.request_id),
            M::Fetch(m) => (Self::Fetch, m.request_id),
            M::Publish(m) => (Self::Publish, m.request_id),
            M::PublishNamespace(m) => (Self::PublishNamespace, m.request_id),
            M::SubscribeNamespace(m) => (Self::SubscribeNamespace, m.request_id),
            M::SubscribeTracks(m) => (Self::SubscribeTracks, m.request_id),
            M::TrackStatus(m) => (Self::TrackStatus, m.request_id),
            M::SubscribeUpdate(m) => (Self::SubscribeUpdate, m.request_id),
            _ => return None,
        })
    }
}

/// Which endpoint sent the PUBLISH_NAMESPACE that a PUBLISH_NAMESPACE_DONE or
/// PUBLISH_NAMESPACE_CANCEL refers to (drafts from 16 on name it by that request's ID).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Announcer {
    /// Sent by this endpoint: PUBLISH_NAMESPACE_DONE withdraws it.
    Local,
    /// Sent by the peer: PUBLISH_NAMESPACE_CANCEL stops routing requests for it.
    Peer,
}

/// A refusal of a request, whatever message of the model carries it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Refusal {
    pub kind: RequestKind,
    pub request_id: u64,
    /// In the model's table for `kind` (draft-14's table of that error message).
    pub code: u64,
    pub reason: String,
}

impl Refusal {
    /// The model message that refuses a request of this kind. SUBSCRIBE_UPDATE has no error
    /// message of its own: TRACK_STATUS_ERROR stands in for it.
    pub fn into_message(self) -> ControlMessage {
        use ControlMessage as M;
        let Refusal {
            kind,
            request_id,
            code,
            reason,
        } = self;
        match kind {
            RequestKind::Subscribe => M::SubscribeError(SubscribeError {
                request_id,
                code,
                reason,
            }),
            RequestKind::TrackStatus | RequestKind::SubscribeUpdate => {
                M::TrackStatusError(SubscribeError {
                    request_id,
                    code,
                    reason,
                })
            }
            RequestKind::Fetch => M::FetchError(FetchError {
                request_id,
                code,
                reason,
            }),
            RequestKind::Publish => M::PublishError(PublishError {
                request_id,
                code,
                reason,
            }),
            RequestKind::PublishNamespace => M::PublishNamespaceError(PublishNamespaceError {
                request_id,
                code,
                reason,
            }),
            RequestKind::SubscribeNamespace | RequestKind::SubscribeTracks => {
                M::SubscribeNamespaceError(SubscribeNamespaceError {
                    request_id,
                    code,
                    reason,
                })
            }
        }
    }

    /// The refusal `msg` carries, if it is one of the model's error messages.
    pub fn of(msg: &ControlMessage) -> Option<Refusal> {
        use ControlMessage as M;
        let (kind, request_id, code, reason) = match msg {
            M::SubscribeError(m) => (RequestKind::Subscribe, m.request_id, m.code, &m.reason),
            M::TrackStatusError(m) => (RequestKind::TrackStatus, m.request_id, m.code, &m.reason),
            M::FetchError(m) => (RequestKind::Fetch, m.request_id, m.code, &m.reason),
            M::PublishError(m) => (RequestKind::Publish, m.request_id, m.code, &m.reason),
            M::PublishNamespaceError(m) => (
                RequestKind::PublishNamespace,
                m.request_id,
                m.code,
                &m.reason,
            ),
            M::SubscribeNamespaceError(m) => (
                RequestKind::SubscribeNamespace,
                m.request_id,
                m.code,
                &m.reason,
            ),
            _ => return None,
        };
        Some(Refusal {
            kind,
            request_id,
            code,
            reason: reason.clone(),
        })
    }
}
