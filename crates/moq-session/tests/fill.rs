//! A live join on drafts 20 and 22: a SUBSCRIBE for the next object with a fill of the
//! current group (FILL_PARAMETERS), as moq-relay joins a track. The fill brings the head of
//! the group under way from what the track holds, on a fetch stream naming the SUBSCRIBE;
//! the subscription goes on from the object after it.

mod common;

use bytes::Bytes;
use common::{Raw20, WAIT, serve, subscribe_video};
use moq_session::{FilterType, Location, Priority};
use moq_wire::codec::RequestKind;
use moq_wire::draft20::{FetchObject, FetchObjectReader};
use moq_wire::message::{ControlMessage, DataStreamHeader, FetchHeader, Fill, Subscribe};

const PRIORITY: Priority = Priority {
    class: 2,
    rank: 0,
    publisher: 128,
};

/// Everything on the next unidirectional stream the server opens.
async fn next_stream(peer: &Raw20) -> Vec<u8> {
    let mut recv = tokio::time::timeout(WAIT, peer.conn.accept_uni())
        .await
        .expect("a stream in time")
        .unwrap();
    tokio::time::timeout(WAIT, recv.read_to_end(1 << 20))
        .await
        .expect("the stream's end in time")
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_join_gets_the_current_group_head_in_its_fill_and_the_rest_subscribed() {
    for draft in ["20", "22"] {
        let served = serve(&["video"]);
        let group = served.tracks[0].create_group(5, PRIORITY);
        for object in 0..3 {
            group.write(Bytes::from(format!("object {object}")));
        }
        let peer = Raw20::connect(&served.url, &served.trust, draft).await;
        let subscribe = Subscribe {
            fill: Some(Fill {
                filter: Some(FilterType::GroupsBack(0)),
                ..Fill::default()
            }),
            ..subscribe_video(0)
        };
        let (_send, mut recv) = peer.request(&ControlMessage::Subscribe(subscribe)).await;
        let ControlMessage::SubscribeOk(ok) =
            peer.answer(&mut recv, 0, RequestKind::Subscribe).await
        else {
            panic!("draft-{draft}: not SUBSCRIBE_OK");
        };
        assert_eq!(ok.largest, Some(Location::new(5, 2)), "draft-{draft}");

        // The fill: the three objects, on a fetch stream of the SUBSCRIBE.
        let bytes = next_stream(&peer).await;
        let (header, mut at) = peer.codec.decode_stream_header(&bytes, &|_| 128).unwrap();
        assert_eq!(
            header,
            DataStreamHeader::Fetch(FetchHeader { request_id: 0 }),
            "draft-{draft}"
        );
        let mut reader = FetchObjectReader::new();
        let mut filled = Vec::new();
        while at < bytes.len() {
            let (entry, used) = reader.decode(&bytes[at..]).unwrap();
            at += used;
            let FetchObject::Object { header, .. } = entry else {
                panic!("draft-{draft}: {entry:?}");
            };
            let len = header.payload_len as usize;
            filled.push((
                Location::new(header.group_id, header.object_id),
                String::from_utf8_lossy(&bytes[at..at + len]).into_owned(),
            ));
            at += len;
        }
        let expected: Vec<_> = (0..3)
            .map(|o| (Location::new(5, o), format!("object {o}")))
            .collect();
        assert_eq!(filled, expected, "draft-{draft}");

        // The subscription: the group's next object, on a subgroup stream.
        group.write(Bytes::from_static(b"object 3"));
        drop(group);
        let bytes = next_stream(&peer).await;
        let (header, at) = peer.codec.decode_stream_header(&bytes, &|_| 128).unwrap();
        let DataStreamHeader::Subgroup(subgroup) = header else {
            panic!("draft-{draft}: {header:?}");
        };
        assert_eq!(subgroup.group_id, 5, "draft-{draft}");
        let (object, used) = peer
            .codec
            .decode_subgroup_object(&bytes[at..], subgroup.extensions_present)
            .unwrap();
        assert_eq!(object.object_id(None), Ok(3), "draft-{draft}");
        assert_eq!(&bytes[at + used..], b"object 3", "draft-{draft}");
    }
}
