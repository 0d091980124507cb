//! Control messages: `ControlMessage::decode` (draft-14), `draft16::decode_control`, and every
//! draft's codec (`moq_wire::codec`, the seam a session uses) on arbitrary bytes never panic,
//! and whatever they accept encodes again (in the same draft) and decodes to the same message.
//! Drafts from 17 on read a message differently on each stream, so the first byte picks the
//! stream (and the request it belongs to) the codecs read the rest on.

#![no_main]

use libfuzzer_sys::fuzz_target;
use moq_fuzz_harness::control::{AnyRequests, channel};
use moq_wire::codec::{Channel, Codec, Requests};
use moq_wire::draft16::{self, Announcer, RequestKind};
use moq_wire::message::{ControlMessage, TrackNamespace};
use moq_wire::{draft14, draft20, draft22};

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
    AnyRequests.kind_of(request_id)
}

fn any_namespace(request_id: u64) -> Option<TrackNamespace> {
    AnyRequests.namespace_of(request_id)
}

fn any_request_id(namespace: &TrackNamespace, announcer: Announcer) -> Option<u64> {
    AnyRequests.request_id_of(namespace, announcer)
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

fn check_codec(codec: &dyn Codec, channel: Channel, data: &[u8]) {
    let decode = |bytes| codec.decode_control(bytes, channel, &AnyRequests);
    let Ok((message, used)) = decode(data) else {
        return;
    };
    assert!(used <= data.len());
    assert_eq!(decode(&data[..used]).as_ref().map(|(m, _)| m), Ok(&message));

    let mut again = Vec::new();
    codec
        .encode_control(&message, &AnyRequests, &mut again)
        .unwrap_or_else(|err| {
            panic!(
                "decoded {} does not encode as draft-{}: {err}",
                codec.message_name(&message),
                codec.draft()
            )
        });
    let (back, used_again) = decode(&again).expect("re-encoded message decodes");
    assert_eq!(back, message);
    assert_eq!(used_again, again.len());
}

fuzz_target!(|data: &[u8]| {
    check_draft14(data);
    check_draft16(data);
    if let Some((&selector, message)) = data.split_first() {
        let channel = channel(selector);
        for codec in [
            &draft14::CODEC as &dyn Codec,
            &draft16::CODEC,
            &draft20::CODEC,
            &draft22::CODEC,
        ] {
            check_codec(codec, channel, message);
        }
    }
});
