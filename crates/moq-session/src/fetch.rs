//! Serving the peer's FETCHes from the groups a track still holds.
//!
//! moq-relay asks with a joining FETCH for what precedes a new subscription, and with a
//! standalone FETCH for a group it no longer caches. A live publisher holds
//! only its newest groups (`TrackDelivery::retained_groups`), so a FETCH is answered from
//! those: objects it no longer holds are left out, which the draft reads as "does not
//! exist", and a range with nothing held gets NO_OBJECTS. [`plan`] decides what to send,
//! without I/O; [`serve`] writes it on one unidirectional stream.

use std::sync::Arc;

use moq_wire::message::{
    self as wire, ControlMessage, DataStreamHeader, FetchHeader, FetchObjectHeader, FetchType,
    FilterType, GroupOrder, Location, ObjectStatus, Parameters, TrackNamespace,
};
use tokio::sync::oneshot;

use crate::inner::Inner;
use crate::track::{Group, TrackShared, lock};

/// What a FETCH asks for, resolved to one track: `start` inclusive, `end` one past the last
/// object wanted, where an `end.object` of 0 asks for all of `end.group` (the draft's form).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FetchRange {
    pub start: Location,
    pub end: Location,
}

/// What a track holds of one group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HeldGroup {
    pub id: u64,
    /// Objects written so far (IDs 0..objects).
    pub objects: u64,
    /// No object follows.
    pub closed: bool,
}

/// What to send for a FETCH, and what FETCH_OK says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FetchPlan {
    /// (group, first object, last object), inclusive, in the order to send.
    pub runs: Vec<(u64, u64, u64)>,
    pub end_location: Location,
    pub end_of_track: bool,
}

/// Why a FETCH is refused (its FETCH_ERROR code).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    InvalidRange,
    NoObjects,
}

impl Refusal {
    fn code(self) -> u64 {
        match self {
            Refusal::InvalidRange => wire::fetch_error::INVALID_RANGE,
            Refusal::NoObjects => wire::fetch_error::NO_OBJECTS,
        }
    }
}

/// The range of a joining FETCH: from `joining_start` groups before (relative) or from
/// group `joining_start` (absolute) up to `start`, where the joined subscription's first
/// object is (none: the track had no content; INVALID_RANGE). The draft's subscription
/// starts after the largest object, so its joining FETCH ends at that object; ours starts
/// at the head of the largest object's group (or at a new group), so the FETCH ends before
/// that group, and one for the current group alone finds nothing to join (INVALID_RANGE).
pub(crate) fn joining_range(
    start: Option<Location>,
    joining_start: u64,
    relative: bool,
) -> Result<FetchRange, Refusal> {
    let start = start.ok_or(Refusal::InvalidRange)?;
    let group = if relative {
        start.group.saturating_sub(joining_start)
    } else {
        joining_start
    };
    // An end object of 0 asks for all of the end group.
    let end = match start.object {
        0 if group < start.group => Location {
            group: start.group - 1,
            object: 0,
        },
        0 => return Err(Refusal::InvalidRange),
        object if group <= start.group => Location {
            group: start.group,
            object,
        },
        _ => return Err(Refusal::InvalidRange),
    };
    Ok(FetchRange {
        start: Location { group, object: 0 },
        end,
    })
}

/// What to send for `range` of a track holding `held` (oldest first), whose newest object
/// is `largest`; `ended`: the track is finished.
pub(crate) fn plan(
    held: &[HeldGroup],
    largest: Option<Location>,
    ended: bool,
    range: FetchRange,
    descending: bool,
) -> Result<FetchPlan, Refusal> {
    let largest = largest.ok_or(Refusal::InvalidRange)?;
    let FetchRange { start, end } = range;
    // The last object asked for (None: all of `end.group`).
    let last_asked = (end.object > 0).then(|| Location {
        group: end.group,
        object: end.object - 1,
    });
    let ends_before_start = match last_asked {
        Some(last) => last < start,
        None => end.group < start.group,
    };
    if start > largest || ends_before_start {
        return Err(Refusal::InvalidRange);
    }
    let largest_closed = held
        .last()
        .is_some_and(|g| g.id == largest.group && g.closed);
    let beyond_largest = match last_asked {
        Some(last) => last > largest,
        None => end.group > largest.group || (end.group == largest.group && !largest_closed),
    };
    let last = match last_asked {
        Some(last) if !beyond_largest => last,
        _ if beyond_largest => largest,
        // All of a group older than the newest, or of the newest once closed.
        _ => Location {
            group: end.group,
            object: u64::MAX,
        },
    };
    let mut runs: Vec<(u64, u64, u64)> = held
        .iter()
        .filter(|g| g.objects > 0 && (start.group..=last.group).contains(&g.id))
        .filter_map(|g| {
            let first = if g.id == start.group { start.object } else { 0 };
            let mut final_object = g.objects - 1;
            if g.id == last.group {
                final_object = final_object.min(last.object);
            }
            (first <= final_object).then_some((g.id, first, final_object))
        })
        .collect();
    if runs.is_empty() {
        return Err(Refusal::NoObjects);
    }
    if descending {
        runs.reverse();
    }
    let end_location = if beyond_largest {
        Location {
            group: largest.group,
            object: largest.object.saturating_add(1),
        }
    } else {
        end
    };
    Ok(FetchPlan {
        runs,
        end_location,
        end_of_track: ended && beyond_largest,
    })
}

/// What a track holds now: its groups (oldest first), newest object, and whether it ended.
fn held(track: &TrackShared) -> (Vec<Arc<Group>>, Option<Location>, bool) {
    let (groups, ended) = track.held_groups();
    (groups, track.largest(), ended)
}

/// The range a Location Filter selects when evaluated as a fetch's, against the track's
/// `largest` object: never beyond it. `None` when it selects nothing (it starts after the
/// largest object).
pub(crate) fn filter_range(filter: FilterType, largest: Location) -> Option<FetchRange> {
    let to_largest = Location {
        group: largest.group,
        object: largest.object.saturating_add(1),
    };
    let (start, end) = match filter {
        // Both start after the largest object.
        FilterType::NextGroupStart | FilterType::LargestObject => return None,
        FilterType::GroupsBack(back) => (
            Location {
                group: largest.group.saturating_sub(back),
                object: 0,
            },
            to_largest,
        ),
        FilterType::AbsoluteStart(start) => (start, to_largest),
        FilterType::AbsoluteRange { start, end_group } => (
            start,
            Location {
                group: end_group,
                object: 0,
            },
        ),
        FilterType::AbsoluteObjectRange { start, end } => (
            start,
            Location {
                group: end.group,
                object: end.object.saturating_add(1),
            },
        ),
    };
    (start <= largest).then_some(FetchRange { start, end })
}

/// A range planned against what a track holds now, with the groups it will be served from.
struct Planned {
    groups: Vec<Arc<Group>>,
    plan: FetchPlan,
}

/// Plans `range` of `track` in `order` (the publisher's, when the requester left it to it).
fn plan_range(
    track: &TrackShared,
    range: FetchRange,
    order: GroupOrder,
) -> Result<Planned, Refusal> {
    let (groups, largest, ended) = held(track);
    let held_now: Vec<HeldGroup> = groups
        .iter()
        .map(|g| {
            let (objects, closed) = g.read_from(0);
            HeldGroup {
                id: g.id,
                objects: objects.len() as u64,
                closed,
            }
        })
        .collect();
    let descending = match order {
        GroupOrder::Publisher => track.delivery.group_order,
        other => other,
    } == GroupOrder::Descending;
    let plan = plan(&held_now, largest, ended, range, descending)?;
    Ok(Planned { groups, plan })
}

/// Serves `planned` on a new fetch stream whose header names `request_id`, until done or
/// `cancel` fires (then the stream is reset); `then` runs once it is over either way.
fn spawn_serve(
    inner: &Arc<Inner>,
    request_id: u64,
    planned: Planned,
    then: impl FnOnce(&Inner) + Send + 'static,
) {
    let (cancel_tx, cancel) = oneshot::channel();
    lock(&inner.state).fetches.insert(request_id, cancel_tx);
    let inner = inner.clone();
    tokio::spawn(async move {
        // A write error means the peer stopped reading (STOP_SENDING) or left: nothing
        // more to do for this answer either way.
        tokio::select! {
            _ = serve(&inner, request_id, &planned.groups, &planned.plan) => {}
            _ = cancel => {}
        }
        lock(&inner.state).fetches.remove(&request_id);
        then(&inner);
    });
}

/// Answers the peer's FETCH: FETCH_OK and the objects on a new stream, or FETCH_ERROR.
/// `joined`: for a joining FETCH, the joined subscription's track and where it starts, if
/// the request ID names one of ours.
pub(crate) fn fetch(
    inner: &Arc<Inner>,
    msg: wire::Fetch,
    joined: Option<(Arc<TrackShared>, Option<Location>)>,
) {
    let refuse = |code: u64, reason: String| {
        inner.send(ControlMessage::FetchError(wire::FetchError {
            request_id: msg.request_id,
            code,
            reason,
        }));
        inner.request_completed();
    };
    let named = |namespace: &TrackNamespace, track_name: &[u8]| {
        inner
            .publish
            .as_ref()
            .filter(|b| b.namespace() == namespace)
            .and_then(|b| b.track(track_name))
            .ok_or_else(|| {
                format!(
                    "no track {:?} in {}",
                    String::from_utf8_lossy(track_name),
                    namespace.to_path()
                )
            })
    };
    let (track, range) = match &msg.fetch_type {
        FetchType::Standalone {
            namespace,
            track_name,
            start,
            end,
        } => match named(namespace, track_name) {
            Ok(track) => (
                track,
                FetchRange {
                    start: *start,
                    end: *end,
                },
            ),
            Err(why) => return refuse(wire::fetch_error::TRACK_DOES_NOT_EXIST, why),
        },
        FetchType::Filtered {
            namespace,
            track_name,
            filter,
        } => match named(namespace, track_name) {
            Ok(track) => match track.largest().and_then(|l| filter_range(*filter, l)) {
                Some(range) => (track, range),
                None => {
                    return refuse(
                        Refusal::InvalidRange.code(),
                        "the range starts after the newest object".into(),
                    );
                }
            },
            Err(why) => return refuse(wire::fetch_error::TRACK_DOES_NOT_EXIST, why),
        },
        FetchType::RelativeJoining(j) | FetchType::AbsoluteJoining(j) => {
            let Some((track, start)) = joined else {
                return refuse(
                    wire::fetch_error::INVALID_JOINING_REQUEST_ID,
                    format!(
                        "request {} is no subscription of this session",
                        j.joining_request_id
                    ),
                );
            };
            let relative = matches!(msg.fetch_type, FetchType::RelativeJoining(_));
            match joining_range(start, j.joining_start, relative) {
                Ok(range) => (track, range),
                Err(refusal) => {
                    return refuse(
                        refusal.code(),
                        "nothing precedes the joined subscription".into(),
                    );
                }
            }
        }
    };
    let planned = match plan_range(&track, range, msg.group_order) {
        Ok(planned) => planned,
        Err(refusal) => {
            return refuse(
                refusal.code(),
                match refusal {
                    Refusal::InvalidRange => "the range starts after the newest object".into(),
                    Refusal::NoObjects => "no object of the range is held any more".into(),
                },
            );
        }
    };
    let group_order = match msg.group_order {
        GroupOrder::Publisher => track.delivery.group_order,
        other => other,
    };
    inner.send(ControlMessage::FetchOk(wire::FetchOk {
        request_id: msg.request_id,
        group_order: match group_order {
            GroupOrder::Publisher => GroupOrder::Ascending,
            other => other,
        },
        end_of_track: planned.plan.end_of_track,
        end_location: planned.plan.end_location,
        params: Parameters::default(),
    }));
    spawn_serve(inner, msg.request_id, planned, Inner::request_completed);
}

/// Serves the fill of the peer's subscription `request_id` to `track`: the objects its
/// `filter` selects up to `largest` (what SUBSCRIBE_OK announced), on a fetch stream whose
/// header names the SUBSCRIBE. A fill that selects nothing opens no stream; one with nothing
/// held any more is reset right after its header, which tells the peer it failed.
pub(crate) fn fill(
    inner: &Arc<Inner>,
    request_id: u64,
    track: &TrackShared,
    filter: FilterType,
    order: Option<GroupOrder>,
    largest: Option<Location>,
) {
    let Some(range) = largest.and_then(|l| filter_range(filter, l)) else {
        return;
    };
    let order = order.unwrap_or(GroupOrder::Ascending);
    match plan_range(track, range, order) {
        Ok(planned) => spawn_serve(inner, request_id, planned, |_| {}),
        Err(_) => refuse_fill(inner, request_id),
    }
}

/// Fails the fill of subscription `request_id`: its stream, reset right after the header.
pub(crate) fn refuse_fill(inner: &Arc<Inner>, request_id: u64) {
    tokio::spawn(fail_fill(inner.clone(), request_id));
}

async fn fail_fill(inner: Arc<Inner>, request_id: u64) {
    let Ok(stream) = inner.conn.open_uni().await else {
        return;
    };
    let mut stream = ResetOnDrop(Some(stream));
    let mut header = Vec::new();
    let fetch_header = DataStreamHeader::Fetch(FetchHeader { request_id });
    if let Some(send) = stream.0.as_mut()
        && inner
            .codec
            .encode_stream_header(&fetch_header, &mut header)
            .is_ok()
    {
        let _ = send.write_all(&header).await;
    }
}

/// Writes the objects of `plan` on a new unidirectional stream, then finishes it. Dropped
/// before the end (FETCH_CANCEL), the stream is reset.
async fn serve(
    inner: &Inner,
    request_id: u64,
    groups: &[Arc<Group>],
    plan: &FetchPlan,
) -> Result<(), quinn::WriteError> {
    let Ok(stream) = inner.conn.open_uni().await else {
        return Ok(());
    };
    let mut stream = ResetOnDrop(Some(stream));
    let send = stream.0.as_mut().ok_or(quinn::WriteError::ClosedStream)?;
    let mut header = Vec::new();
    let fetch_header = DataStreamHeader::Fetch(FetchHeader { request_id });
    // IDs beyond the draft's integers cannot come from a track: the answer is reset.
    if inner
        .codec
        .encode_stream_header(&fetch_header, &mut header)
        .is_err()
    {
        return Ok(());
    }
    send.write_all(&header).await?;
    let mut writer = inner.codec.fetch_writer();
    for &(group_id, first, last) in &plan.runs {
        let Some(group) = groups.iter().find(|g| g.id == group_id) else {
            continue;
        };
        let (objects, _) = group.read_from(first as usize);
        for (object_id, (payload, _)) in (first..=last).zip(objects) {
            let mut header = Vec::new();
            let object = FetchObjectHeader {
                group_id,
                subgroup_id: 0,
                object_id,
                publisher_priority: group.priority.publisher,
                extensions: Vec::new(),
                payload_len: payload.len() as u64,
                status: ObjectStatus::Normal,
            };
            if writer.encode(&object, &mut header).is_err() {
                return Ok(());
            }
            send.write_all(&header).await?;
            for part in payload.parts() {
                send.write_all(part).await?;
            }
        }
    }
    if let Some(mut send) = stream.0.take() {
        let _ = send.finish();
    }
    Ok(())
}

/// A fetch stream that did not get to its end is reset (CANCELLED), not finished: the peer
/// must not read a cut-off answer as complete.
struct ResetOnDrop(Option<quinn::SendStream>);

impl Drop for ResetOnDrop {
    fn drop(&mut self) {
        if let Some(mut send) = self.0.take() {
            let _ = send.reset(quinn::VarInt::from_u32(wire::reset_code::CANCELLED as u32));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(group: u64, object: u64) -> Location {
        Location { group, object }
    }

    fn range(start: Location, end: Location) -> FetchRange {
        FetchRange { start, end }
    }

    /// Groups 5 (closed, 3 objects), 6 (closed, 2), 7 (open, 4): largest {7, 3}.
    fn held() -> Vec<HeldGroup> {
        vec![
            HeldGroup {
                id: 5,
                objects: 3,
                closed: true,
            },
            HeldGroup {
                id: 6,
                objects: 2,
                closed: true,
            },
            HeldGroup {
                id: 7,
                objects: 4,
                closed: false,
            },
        ]
    }

    const LARGEST: Option<Location> = Some(Location {
        group: 7,
        object: 3,
    });

    #[test]
    fn a_joining_fetch_ends_where_the_joined_subscription_starts() {
        // Subscribed at the head of the newest group: the current group alone is nothing
        // to join, one group back is all of group 6.
        assert_eq!(
            joining_range(Some(at(7, 0)), 0, true),
            Err(Refusal::InvalidRange)
        );
        let r = joining_range(Some(at(7, 0)), 1, true).unwrap();
        assert_eq!(r, range(at(6, 0), at(6, 0)));
        let p = plan(&held(), LARGEST, false, r, false).unwrap();
        assert_eq!(p.runs, [(6, 0, 1)]);
        assert_eq!(p.end_location, at(6, 0));
        // The draft's start, after the largest object (a subscription with a fill): the
        // head of the newest group, up to that object.
        let r = joining_range(Some(at(7, 4)), 0, true).unwrap();
        assert_eq!(r, range(at(7, 0), at(7, 4)));
        let p = plan(&held(), LARGEST, false, r, false).unwrap();
        assert_eq!(p.runs, [(7, 0, 3)]);
        assert_eq!(p.end_location, at(7, 4));
        assert!(!p.end_of_track);
        // Absolute starts: before the subscription, at it, after it.
        assert_eq!(
            joining_range(Some(at(7, 0)), 5, false).unwrap().start,
            at(5, 0)
        );
        assert_eq!(
            joining_range(Some(at(7, 0)), 7, false),
            Err(Refusal::InvalidRange)
        );
        assert_eq!(
            joining_range(Some(at(7, 4)), 8, false),
            Err(Refusal::InvalidRange)
        );
        assert_eq!(joining_range(None, 0, true), Err(Refusal::InvalidRange));
    }

    #[test]
    fn a_whole_group_is_answered_with_the_groups_end() {
        let p = plan(&held(), LARGEST, false, range(at(5, 1), at(6, 0)), false).unwrap();
        assert_eq!(p.runs, [(5, 1, 2), (6, 0, 1)]);
        // The response covers the last object of group 6: the end stays {6, 0}.
        assert_eq!(p.end_location, at(6, 0));
        // All of the newest group, still open: only what exists, end = largest + 1.
        let p = plan(&held(), LARGEST, false, range(at(7, 0), at(7, 0)), false).unwrap();
        assert_eq!(p.runs, [(7, 0, 3)]);
        assert_eq!(p.end_location, at(7, 4));
    }

    #[test]
    fn a_range_beyond_the_newest_object_ends_at_it() {
        let p = plan(&held(), LARGEST, true, range(at(6, 1), at(9, 5)), false).unwrap();
        assert_eq!(p.runs, [(6, 1, 1), (7, 0, 3)]);
        assert_eq!(p.end_location, at(7, 4));
        assert!(
            p.end_of_track,
            "the track ended and the range reaches its end"
        );
    }

    #[test]
    fn descending_order_reverses_groups_not_objects() {
        let p = plan(&held(), LARGEST, false, range(at(5, 0), at(7, 2)), true).unwrap();
        assert_eq!(p.runs, [(7, 0, 1), (6, 0, 1), (5, 0, 2)]);
    }

    #[test]
    fn groups_no_longer_held_are_left_out_and_an_empty_answer_is_refused() {
        let p = plan(&held(), LARGEST, false, range(at(2, 0), at(5, 2)), false).unwrap();
        assert_eq!(p.runs, [(5, 0, 1)]);
        assert_eq!(
            plan(&held(), LARGEST, false, range(at(2, 0), at(4, 0)), false),
            Err(Refusal::NoObjects)
        );
    }

    #[test]
    fn bad_ranges_are_refused() {
        // Starts after the newest object.
        assert_eq!(
            plan(&held(), LARGEST, false, range(at(7, 4), at(8, 0)), false),
            Err(Refusal::InvalidRange)
        );
        // Ends before it starts.
        assert_eq!(
            plan(&held(), LARGEST, false, range(at(6, 1), at(6, 1)), false),
            Err(Refusal::InvalidRange)
        );
        assert_eq!(
            plan(&held(), LARGEST, false, range(at(6, 0), at(5, 0)), false),
            Err(Refusal::InvalidRange)
        );
        // Nothing published.
        assert_eq!(
            plan(&[], None, false, range(at(0, 0), at(0, 0)), false),
            Err(Refusal::InvalidRange)
        );
        // Extreme values do not overflow.
        let far = at(u64::MAX, u64::MAX);
        assert!(plan(&held(), LARGEST, false, range(at(0, 0), far), false).is_ok());
    }
}
