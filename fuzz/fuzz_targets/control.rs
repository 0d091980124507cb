//! Control messages: `ControlMessage::decode` (draft-14) and `draft16::decode_control` on
//! arbitrary bytes never panic, and whatever they accept encodes again (in the same draft) and
//! decodes to the same message.

#![no_main]

use libfuzzer_sys::fuzz_target;
use moq_wire::draft16::{self, Announcer, RequestKind};
use moq_wire::message::{ControlMessage, TrackNamespace};

fn check_draft14(data: &[u8]) {
    let Ok((message, used)) = ControlMessage::decode(data) else {
        return;
    };
    assert!(used <= data.len());
    // A decoder that accepted a prefix must accept it alone, and only needs that prefix.
    assert_eq!(
        ControlMessage::decode(&data[..used])
            .as_ref()
            .map(|(m, _)| m),
        Ok(&message)
    );

    let mut again = Vec::new();
    message
        .encode(&mut again)
        .unwrap_or_else(|err| panic!("decoded {} does not encode: {err}", message.name()));
    let (back, used_again) = ControlMessage::decode(&again).expect("re-encoded message decodes");
    assert_eq!(back, message);
    assert_eq!(used_again, again.len());
    // The encoder writes the shortest form, so a re-encode is never longer than the input.
    assert!(again.len() <= used);
}

/// Every request ID is known; its kind follows from the ID, so every kind comes up.
fn any_kind(request_id: u64) -> Option<RequestKind> {
    const KINDS: [RequestKind; 7] = [
        RequestKind::Subscribe,
        RequestKind::Fetch,
        RequestKind::Publish,
        RequestKind::PublishNamespace,
        RequestKind::SubscribeNamespace,
        RequestKind::TrackStatus,
        RequestKind::SubscribeUpdate,
    ];
    Some(KINDS[(request_id % KINDS.len() as u64) as usize])
}

fn any_namespace(_request_id: u64) -> Option<TrackNamespace> {
    Some(TrackNamespace::from_path("fuzz/ns"))
}

fn any_request_id(_namespace: &TrackNamespace, _announcer: Announcer) -> Option<u64> {
    Some(7)
}

fn check_draft16(data: &[u8]) {
    let decode = |bytes| draft16::decode_control(bytes, &any_kind, &any_namespace);
    let Ok((message, used)) = decode(data) else {
        return;
    };
    assert!(used <= data.len());
    assert_eq!(decode(&data[..used]).as_ref().map(|(m, _)| m), Ok(&message));

    let mut again = Vec::new();
    draft16::encode_control(&message, &any_request_id, &mut again).unwrap_or_else(|err| {
        panic!(
            "decoded {} does not encode as draft-16: {err}",
            draft16::message_name(&message)
        )
    });
    let (back, used_again) = decode(&again).expect("re-encoded draft-16 message decodes");
    assert_eq!(back, message);
    assert_eq!(used_again, again.len());
    // Defaults are left out and what is ignored is dropped, so a re-encode never grows (the
    // request ID of PUBLISH_NAMESPACE_DONE / _CANCEL comes from the lookup: 7, one byte).
    assert!(again.len() <= used);
}

fuzz_target!(|data: &[u8]| {
    check_draft14(data);
    check_draft16(data);
});
