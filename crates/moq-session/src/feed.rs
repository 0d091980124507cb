//! Reads what a producer wrote to a served track into the session's scheduler.
//!
//! Producers never wait on subscribers: they append to the track and ring a doorbell. On
//! every ring the session's feeder reads the groups and objects it has not seen yet, in
//! order, and reports them (and group ends, and the end of the track) to its scheduler.

use std::sync::Arc;
use std::time::Instant;

use moq_wire::message::{Location, publish_done_code};

use crate::scheduler::{GroupInfo, Scheduler};
use crate::track::{Group, TrackShared};

#[derive(Debug)]
pub(crate) struct TrackFeed {
    request_id: u64,
    start: Location,
    end_group: Option<u64>,
    /// Creation sequence number of the next group of the track not yet looked at.
    next_sequence: u64,
    /// Groups whose objects are not all read yet, oldest first, with how many were read.
    open: Vec<(Arc<Group>, usize)>,
    finished: bool,
}

impl TrackFeed {
    /// A feed for a subscription starting at `start` (ending after `end_group`, if set).
    pub fn new(
        request_id: u64,
        track: &TrackShared,
        start: Location,
        end_group: Option<u64>,
    ) -> TrackFeed {
        TrackFeed {
            request_id,
            start,
            end_group,
            next_sequence: track.oldest_joinable(),
            open: Vec::new(),
            finished: false,
        }
    }

    /// Reads nothing more (the peer unsubscribed).
    pub fn stop(&mut self) {
        self.finished = true;
        self.open.clear();
    }

    fn wants(&self, group: u64) -> bool {
        group >= self.start.group && self.end_group.is_none_or(|end| group <= end)
    }

    /// Reports everything new in `track` to `sched`.
    pub fn poll(&mut self, track: &TrackShared, sched: &mut Scheduler, now: Instant) {
        if self.finished {
            return;
        }
        let new = track.groups_since(self.next_sequence);
        self.next_sequence = new.next;
        if new.missed > 0 {
            track.counters.add(|c| &c.groups_missed, new.missed);
        }
        for (_, group) in new.groups {
            if self.wants(group.id) {
                let first = if group.id == self.start.group {
                    usize::try_from(self.start.object).unwrap_or(usize::MAX)
                } else {
                    0
                };
                self.open.push((group, first));
            }
        }
        let request_id = self.request_id;
        self.open.retain_mut(|(group, read)| {
            let (objects, closed) = group.read_from(*read);
            let info = GroupInfo {
                id: group.id,
                priority: group.priority,
                created: group.created,
            };
            for (payload, written) in objects {
                sched.object(request_id, info, *read as u64, payload, written, now);
                *read += 1;
            }
            if closed {
                sched.group_closed(request_id, group.id, now);
            }
            !closed
        });
        let past_end = self
            .end_group
            .is_some_and(|end| track.largest().is_some_and(|l| l.group > end));
        let status = if new.ended {
            publish_done_code::TRACK_ENDED
        } else if past_end {
            publish_done_code::SUBSCRIPTION_ENDED
        } else {
            return;
        };
        if self.open.is_empty() {
            sched.end_subscription(request_id, status, now);
            self.finished = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use moq_wire::message::TrackNamespace;

    use super::*;
    use crate::scheduler::{Action, NewSubscription, PublishLimits, Transmit};
    use crate::track::{Broadcast, Priority, TrackDelivery};

    const P: Priority = Priority {
        class: 1,
        rank: 0,
        publisher: 64,
    };

    /// Every group and object reported, in order, as (group, object, bytes).
    fn drain(sched: &mut Scheduler, now: Instant) -> Vec<(u64, Vec<u8>)> {
        let mut out = Vec::new();
        while let Some(t) = sched.next_transmit() {
            match t {
                Transmit::Open { key, .. } => sched.opened(key, now),
                Transmit::Write { key, chunks } => {
                    let n = chunks.iter().map(Bytes::len).sum();
                    out.push((key.group, chunks.concat()));
                    sched.wrote(key, n, now);
                }
            }
        }
        out
    }

    #[test]
    fn reports_objects_in_order_from_the_start_then_the_end_of_the_track() {
        let b = Broadcast::new(TrackNamespace(vec![b"live".to_vec()]));
        let track = b.create_track("video", TrackDelivery::default());
        let now = Instant::now();
        let mut sched = Scheduler::new(PublishLimits::default(), &moq_wire::draft14::CODEC, now);
        sched.subscribe(
            NewSubscription {
                request_id: 0,
                alias: 0,
                delivery: TrackDelivery::default(),
                counters: track.shared.counters.clone(),
            },
            now,
        );
        // Joining at group 5 object 1: group 4 and object 0 of group 5 are not wanted.
        let g4 = track.create_group(4, P);
        g4.write(Bytes::from_static(b"old"));
        let start = Location {
            group: 5,
            object: 1,
        };
        let mut feed = TrackFeed::new(0, &track.shared, start, None);
        let g5 = track.create_group(5, P);
        for text in [b"k5" as &[u8], b"p1", b"p2"] {
            g5.write(Bytes::copy_from_slice(text));
        }
        feed.poll(&track.shared, &mut sched, now);
        let sent = drain(&mut sched, now);
        assert_eq!(sent.len(), 2);
        assert!(sent[0].1.ends_with(b"p1") && sent[1].1.ends_with(b"p2"));
        // Objects written later arrive on the next poll; a new group closes the old one.
        g5.write(Bytes::from_static(b"p3"));
        let g6 = track.create_group(6, P);
        g6.write(Bytes::from_static(b"k6"));
        feed.poll(&track.shared, &mut sched, now);
        let sent = drain(&mut sched, now);
        assert_eq!(sent.iter().map(|(g, _)| *g).collect::<Vec<_>>(), [5, 6]);
        assert!(matches!(
            sched.poll_action(),
            Some(Action::SetSendWindow(_))
        ));
        assert!(matches!(sched.poll_action(), Some(Action::Finish { .. })));
        drop((g4, g5, g6));
        track.finish();
        feed.poll(&track.shared, &mut sched, now);
        sched.acked(
            crate::scheduler::StreamKey {
                request_id: 0,
                group: 5,
            },
            now,
        );
        while let Some(action) = sched.poll_action() {
            if let Action::PublishDone { status, .. } = action {
                assert_eq!(status, publish_done_code::TRACK_ENDED);
                // The group 6 stream still waits for its acknowledgement: not yet.
                panic!("PUBLISH_DONE before every stream was acknowledged");
            }
        }
        sched.acked(
            crate::scheduler::StreamKey {
                request_id: 0,
                group: 6,
            },
            now,
        );
        assert!(std::iter::from_fn(|| sched.poll_action()).any(|a| matches!(
            a,
            Action::PublishDone {
                status: publish_done_code::TRACK_ENDED,
                stream_count: 2,
                ..
            }
        )));
    }
}
