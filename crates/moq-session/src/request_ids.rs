//! Which Request IDs the peer may use: the right parity, each once, within what we granted.
//!
//! On a draft that grants Request IDs (MAX_REQUEST_ID) the peer may use IDs below the last
//! grant, and each completed request earns it one more, granted in batches. On the control
//! stream requests arrive in order: when every request travels there, each must be the next
//! ID; when some travel on streams of their own, the control stream's may skip theirs, which
//! can then arrive in any order. Remembering which IDs were used costs at most
//! [`MAX_OUT_OF_ORDER`] entries: past that, the oldest gap is given up (an ID in it would be
//! refused as used).

use std::collections::BTreeSet;

use moq_wire::message::session_error;

use crate::error::SessionError;

/// IDs above the lowest unused one that are remembered as used.
const MAX_OUT_OF_ORDER: usize = 256;

/// How many IDs a peer may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Grants {
    /// Below a limit we raise with MAX_REQUEST_ID: `window` requests open at once, raised
    /// `batch` completed requests at a time.
    Window { window: u64, batch: u64 },
    /// Any: the draft has no MAX_REQUEST_ID, QUIC's stream limit bounds the requests.
    Unlimited,
}

/// The peer's Request IDs, as checked so far.
#[derive(Debug)]
pub(crate) struct PeerRequestIds {
    grants: Grants,
    /// Every request travels on the control stream, so IDs come in sequence.
    in_sequence: bool,
    /// The lowest ID not used yet.
    next: u64,
    /// IDs above `next` used already.
    used: BTreeSet<u64>,
    /// The last ID used on the control stream.
    last_ordered: Option<u64>,
    /// IDs below this may be used (the last grant).
    granted: u64,
    completed: u64,
}

impl PeerRequestIds {
    /// The IDs of a peer whose first ID is `first` (0 for a client, 1 for a server).
    pub fn new(first: u64, grants: Grants, in_sequence: bool) -> PeerRequestIds {
        let granted = match grants {
            Grants::Window { window, .. } => first + 2 * window,
            Grants::Unlimited => u64::MAX,
        };
        PeerRequestIds {
            grants,
            in_sequence,
            next: first,
            used: BTreeSet::new(),
            last_ordered: None,
            granted,
            completed: 0,
        }
    }

    /// The limit our SETUP grants (None: the draft has none).
    pub fn initial_grant(&self) -> Option<u64> {
        matches!(self.grants, Grants::Window { .. }).then_some(self.granted)
    }

    /// Checks a new request's ID; `ordered`: it came on the control stream.
    pub fn accept(&mut self, id: u64, ordered: bool) -> Result<(), SessionError> {
        let invalid = |reason: String| SessionError::Protocol {
            code: session_error::INVALID_REQUEST_ID,
            reason,
        };
        if id % 2 != self.next % 2 {
            return Err(invalid(format!("request ID {id} has the wrong parity")));
        }
        if id < self.next || self.used.contains(&id) {
            return Err(invalid(format!("request ID {id} used twice")));
        }
        if ordered {
            if self.in_sequence && id != self.next {
                return Err(invalid(format!("request ID {id}, expected {}", self.next)));
            }
            if self.last_ordered.is_some_and(|last| id < last) {
                return Err(invalid(format!("request ID {id} after a later one")));
            }
        }
        if id >= self.granted {
            return Err(SessionError::Protocol {
                code: session_error::TOO_MANY_REQUESTS,
                reason: format!("request ID {id} beyond the granted {}", self.granted),
            });
        }
        if ordered {
            self.last_ordered = Some(id);
        }
        self.used.insert(id);
        while self.used.remove(&self.next) {
            self.next += 2;
        }
        if self.used.len() > MAX_OUT_OF_ORDER
            && let Some(lowest) = self.used.pop_first()
        {
            self.next = lowest + 2;
            while self.used.remove(&self.next) {
                self.next += 2;
            }
        }
        Ok(())
    }

    /// A request of the peer is complete: room for another one. Returns a new limit to
    /// grant with MAX_REQUEST_ID, when a batch is due.
    pub fn completed(&mut self) -> Option<u64> {
        let Grants::Window { window, batch } = self.grants else {
            return None;
        };
        self.completed += 1;
        let first = self.granted % 2;
        let granted = first + 2 * (window + self.completed);
        (granted >= self.granted + 2 * batch).then(|| {
            self.granted = granted;
            granted
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(result: Result<(), SessionError>) -> u64 {
        match result {
            Err(SessionError::Protocol { code, .. }) => code,
            other => panic!("expected a protocol error, got {other:?}"),
        }
    }

    #[test]
    fn on_a_control_stream_alone_requests_come_in_sequence() {
        let mut ids = PeerRequestIds::new(
            0,
            Grants::Window {
                window: 4,
                batch: 2,
            },
            true,
        );
        assert_eq!(ids.initial_grant(), Some(8));
        ids.accept(0, true).unwrap();
        assert_eq!(code(ids.accept(4, true)), session_error::INVALID_REQUEST_ID);
        assert_eq!(code(ids.accept(3, true)), session_error::INVALID_REQUEST_ID);
        assert_eq!(code(ids.accept(0, true)), session_error::INVALID_REQUEST_ID);
        ids.accept(2, true).unwrap();
        ids.accept(4, true).unwrap();
        ids.accept(6, true).unwrap();
        assert_eq!(code(ids.accept(8, true)), session_error::TOO_MANY_REQUESTS);
    }

    #[test]
    fn completed_requests_are_granted_again_in_batches() {
        let mut ids = PeerRequestIds::new(
            1,
            Grants::Window {
                window: 4,
                batch: 2,
            },
            true,
        );
        assert_eq!(ids.initial_grant(), Some(9));
        assert_eq!(ids.completed(), None);
        assert_eq!(ids.completed(), Some(13));
        assert_eq!(ids.completed(), None);
        assert_eq!(ids.completed(), Some(17));
    }

    #[test]
    fn requests_on_their_own_streams_may_arrive_in_any_order() {
        let mut ids = PeerRequestIds::new(
            0,
            Grants::Window {
                window: 8,
                batch: 2,
            },
            false,
        );
        // The control stream skips 2, which a request stream brings later.
        ids.accept(0, true).unwrap();
        ids.accept(4, true).unwrap();
        assert_eq!(code(ids.accept(2, true)), session_error::INVALID_REQUEST_ID);
        ids.accept(2, false).unwrap();
        assert_eq!(
            code(ids.accept(4, false)),
            session_error::INVALID_REQUEST_ID
        );
        ids.accept(8, false).unwrap();
        ids.accept(6, true).unwrap();
    }

    #[test]
    fn without_grants_any_unused_id_goes_and_memory_stays_bounded() {
        let mut ids = PeerRequestIds::new(1, Grants::Unlimited, false);
        assert_eq!(ids.initial_grant(), None);
        assert_eq!(ids.completed(), None);
        // Every other ID, never filling the gaps.
        for i in 0..10 * MAX_OUT_OF_ORDER as u64 {
            ids.accept(1 + 4 * i, false).unwrap();
        }
        assert!(ids.used.len() <= MAX_OUT_OF_ORDER);
        assert_eq!(
            code(ids.accept(1, false)),
            session_error::INVALID_REQUEST_ID
        );
        // A gap given up counts as used.
        assert_eq!(
            code(ids.accept(3, false)),
            session_error::INVALID_REQUEST_ID
        );
        ids.accept(1 + 4 * 10 * MAX_OUT_OF_ORDER as u64, false)
            .unwrap();
    }
}
