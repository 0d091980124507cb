//! FETCH served by moqsink from the groups it holds: the joining FETCH a relay sends with a
//! live subscription, and the refusals for what it cannot serve.

mod common;

use std::time::Duration;

use common::*;
use h264::FrameKind;
use moq_media::FrameHeader;
use moq_testkit::peer::RawPeer;
use moq_wire::message::{
    ControlMessage, DataStreamHeader, Fetch, FetchObjectHeader, FetchType, GroupOrder,
    JoiningFetch, Location, ObjectStatus, Parameters, SubgroupObjectHeader, fetch_error,
};

/// The next control message that is not MAX_REQUEST_ID, within 10 s.
async fn reply(peer: &mut RawPeer) -> ControlMessage {
    loop {
        match tokio::time::timeout(Duration::from_secs(10), peer.read()).await {
            Ok(Ok(ControlMessage::MaxRequestId(_))) => continue,
            Ok(Ok(msg)) => return msg,
            Ok(Err(e)) => panic!("control stream: {e}"),
            Err(_) => panic!("no reply in 10 s"),
        }
    }
}

fn fetch(request_id: u64, fetch_type: FetchType) -> ControlMessage {
    ControlMessage::Fetch(Fetch {
        request_id,
        subscriber_priority: 128,
        group_order: GroupOrder::Ascending,
        fetch_type,
        params: Parameters::default(),
    })
}

/// Reads the fetch stream answering `request_id`: (object header, payload) in order.
async fn fetched_objects(peer: &RawPeer, request_id: u64) -> Vec<(FetchObjectHeader, Vec<u8>)> {
    loop {
        let mut stream = tokio::time::timeout(Duration::from_secs(10), peer.accept_stream())
            .await
            .expect("a stream within 10 s")
            .expect("accepts");
        let bytes = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(16 << 20))
            .await
            .expect("read within 10 s");
        // Subgroup streams of the subscription stay open: only the fetch stream ends.
        let Ok(bytes) = bytes else { continue };
        let Ok((DataStreamHeader::Fetch(header), used)) = DataStreamHeader::decode(&bytes) else {
            continue;
        };
        assert_eq!(header.request_id, request_id);
        let mut rest = &bytes[used..];
        let mut objects = Vec::new();
        while !rest.is_empty() {
            let (object, used) = FetchObjectHeader::decode(rest).expect("a fetch object");
            let end = used + object.payload_len as usize;
            objects.push((object, rest[used..end].to_vec()));
            rest = &rest[end..];
        }
        return objects;
    }
}

/// A raw draft-14 peer subscribed to the video of `sender` (filter Largest Object), and
/// the largest location its SUBSCRIBE_OK announced.
async fn subscribed_peer(sender: &Sender) -> (RawPeer, Location) {
    let mut peer = RawPeer::connect(&sender.url()).await.expect("connects");
    peer.setup("/live", 64).await.expect("SETUP");
    peer.subscribe(0, &live(), "video")
        .await
        .expect("SUBSCRIBE");
    let ControlMessage::SubscribeOk(ok) = reply(&mut peer).await else {
        panic!("expected SUBSCRIBE_OK");
    };
    let largest = ok.largest.expect("the video track has content");
    (peer, largest)
}

/// A joining FETCH (request `request_id`) of the peer's subscription 0, `groups_back` groups
/// before the group it starts in: the reply.
async fn joining_fetch(peer: &mut RawPeer, request_id: u64, groups_back: u64) -> ControlMessage {
    let joining = JoiningFetch {
        joining_request_id: 0,
        joining_start: groups_back,
    };
    peer.send(&fetch(request_id, FetchType::RelativeJoining(joining)))
        .await
        .expect("FETCH");
    reply(peer).await
}

/// The subscription starts at the head of the group under way, so a joining FETCH gets what
/// precedes that group, never the head again: moq-relay, which sends one with every
/// subscription, drops a whole group its fill already began.
#[test]
fn a_joining_fetch_gets_what_precedes_the_subscription() {
    // Without a keyframe request the subscription starts in the group under way.
    let sender = Sender::start("keyframe-on-subscribe=false");
    let receiver = Receiver::start(&format!("url={} tls-insecure=true", sender.url()));
    receiver.wait_frames(30, WAIT).expect("plays");
    runtime().block_on(async {
        let (mut peer, largest) = subscribed_peer(&sender).await;
        let ControlMessage::FetchError(refused) = joining_fetch(&mut peer, 2, 0).await else {
            panic!("expected FETCH_ERROR for the group the subscription starts in");
        };
        assert_eq!(refused.code, fetch_error::INVALID_RANGE, "{refused:?}");
        let ControlMessage::FetchOk(fetch_ok) = joining_fetch(&mut peer, 4, 1).await else {
            panic!("expected FETCH_OK for the group before");
        };
        let before = largest.group - 1;
        assert_eq!(
            fetch_ok.end_location,
            Location {
                group: before,
                object: 0
            },
            "all of the group before"
        );
        let objects = fetched_objects(&peer, 4).await;
        eprintln!(
            "joining FETCH one group before {largest:?}: {} objects",
            objects.len()
        );
        assert!(objects.len() >= 2, "a whole group: {}", objects.len());
        for (i, (header, payload)) in objects.iter().enumerate() {
            assert_eq!((header.group_id, header.object_id), (before, i as u64));
            assert_eq!(header.status, ObjectStatus::Normal);
            let (frame, au) = FrameHeader::decode(payload).expect("a frame of ours");
            assert!(!au.is_empty());
            if i == 0 {
                assert_eq!(frame.kind, FrameKind::Key, "a group starts at a keyframe");
            }
        }
    });
}

/// A largest-object subscription (moq-relay's, upstream) that asks the encoder for a
/// keyframe starts at the group that keyframe begins, not in the group under way, whose
/// keyframe is up to a GoP old; a joining FETCH then finds nothing to join.
#[test]
fn a_subscription_that_brings_a_keyframe_starts_at_its_group() {
    let sender = Sender::start("");
    let deadline = std::time::Instant::now() + WAIT;
    while sender.sent().len() < 24 {
        assert!(std::time::Instant::now() < deadline, "the sender publishes");
        std::thread::sleep(Duration::from_millis(20));
    }
    runtime().block_on(async {
        let (mut peer, largest) = subscribed_peer(&sender).await;
        let ControlMessage::FetchError(refused) = joining_fetch(&mut peer, 2, 0).await else {
            panic!("expected FETCH_ERROR");
        };
        assert_eq!(refused.code, fetch_error::INVALID_RANGE, "{refused:?}");
        let mut stream = tokio::time::timeout(WAIT, peer.accept_stream())
            .await
            .expect("a stream in time")
            .expect("accepts");
        // The group ends at the next keyframe, 15 frames on.
        let bytes = tokio::time::timeout(WAIT, stream.read_to_end(16 << 20))
            .await
            .expect("the group ends in time")
            .expect("reads");
        let Ok((DataStreamHeader::Subgroup(header), used)) = DataStreamHeader::decode(&bytes)
        else {
            panic!("a subgroup stream");
        };
        let (object, object_used) =
            SubgroupObjectHeader::decode(&bytes[used..], header.extensions_present)
                .expect("an object");
        let payload = &bytes[used + object_used..][..object.payload_len as usize];
        let (frame, _) = FrameHeader::decode(payload).expect("a frame of ours");
        eprintln!(
            "subscribed at {largest:?}: first group {} starts with a {:?}",
            header.group_id, frame.kind
        );
        assert_eq!(header.group_id, largest.group + 1, "the next group");
        assert_eq!(object.object_id(None), Ok(0));
        assert_eq!(frame.kind, FrameKind::Key);
    });
}

#[test]
fn fetches_it_cannot_serve_are_refused_with_the_drafts_codes() {
    let sender = Sender::start("");
    let receiver = Receiver::start(&format!("url={} tls-insecure=true", sender.url()));
    receiver.wait_frames(30, WAIT).expect("plays");
    runtime().block_on(async {
        let (mut peer, largest) = subscribed_peer(&sender).await;
        // Group IDs come from the stream's timestamps: groups 0 and 1 never existed.
        assert!(largest.group > 1, "{largest:?}");
        let cases = [
            (
                "a track that does not exist",
                FetchType::Standalone {
                    namespace: live(),
                    track_name: b"nope".to_vec(),
                    start: Location::default(),
                    end: Location::default(),
                },
                fetch_error::TRACK_DOES_NOT_EXIST,
            ),
            (
                "a joining FETCH naming no subscription",
                FetchType::RelativeJoining(JoiningFetch {
                    joining_request_id: 40,
                    joining_start: 0,
                }),
                fetch_error::INVALID_JOINING_REQUEST_ID,
            ),
            (
                "groups not held",
                FetchType::Standalone {
                    namespace: live(),
                    track_name: b"video".to_vec(),
                    start: Location::default(),
                    end: Location {
                        group: 1,
                        object: 0,
                    },
                },
                fetch_error::NO_OBJECTS,
            ),
            (
                "a range after the newest object",
                FetchType::Standalone {
                    namespace: live(),
                    track_name: b"video".to_vec(),
                    start: Location {
                        group: largest.group + 1000,
                        object: 0,
                    },
                    end: Location {
                        group: largest.group + 1000,
                        object: 0,
                    },
                },
                fetch_error::INVALID_RANGE,
            ),
        ];
        for (i, (what, fetch_type, code)) in cases.into_iter().enumerate() {
            let request_id = 2 + 2 * i as u64;
            peer.send(&fetch(request_id, fetch_type))
                .await
                .expect("FETCH");
            match reply(&mut peer).await {
                ControlMessage::FetchError(e) => {
                    eprintln!("{what}: FETCH_ERROR {:#x} {:?}", e.code, e.reason);
                    assert_eq!(e.code, code, "{what}");
                }
                other => panic!("{what}: {}", other.name()),
            }
        }
    });
    // The viewer was not disturbed.
    let now = receiver.frames().len();
    receiver.wait_frames(now + 24, WAIT).expect("keeps playing");
}
