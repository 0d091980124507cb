//! What a subscription delivers: whole objects, the ends of groups and of the track. Every
//! object holds its bytes' share of the session's receive budget until it is dropped.

use std::time::Instant;

use bytes::Bytes;
use tokio::sync::OwnedSemaphorePermit;

/// Bytes of received data a session holds between QUIC and the consumers of its objects.
pub(crate) const RECEIVE_BUDGET: usize = 16 << 20;

/// One object as received. Its bytes count against the session's receive budget until it
/// is dropped (or [`Object::release`] is called).
#[derive(Debug)]
pub struct Object {
    pub group: u64,
    pub id: u64,
    pub payload: Bytes,
    /// When the last byte of the object arrived.
    pub received: Instant,
    pub(crate) budget: Option<OwnedSemaphorePermit>,
}

impl Object {
    /// Returns the object's bytes to the receive budget now, for a consumer that keeps the
    /// payload elsewhere under its own bound.
    pub fn release(&mut self) {
        self.budget = None;
    }
}

#[derive(Debug)]
pub enum TrackEvent {
    Object(Object),
    /// A group's stream ended: `complete` when it ended with FIN, not a reset.
    GroupEnd {
        group: u64,
        complete: bool,
    },
    /// The publisher is done (PUBLISH_DONE) and every stream it announced was processed.
    Ended {
        status: u64,
        reason: String,
    },
}
