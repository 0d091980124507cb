//! Randomised inputs: decoding never panics, and whatever decodes re-encodes to something that
//! decodes to the same value.

use moq_wire::draft16::{self, FetchObject, FetchObjectReader, FetchObjectWriter, RequestKind};
use moq_wire::message::*;

use super::common::fuzz::{self, check_reencodes};
use super::samples;

/// Every request ID is known, its kind picked by the ID so that all kinds come up.
fn any_kind(request_id: u64) -> Option<RequestKind> {
    use RequestKind as K;
    let kinds = [
        K::Subscribe,
        K::Fetch,
        K::Publish,
        K::PublishNamespace,
        K::SubscribeNamespace,
        K::TrackStatus,
        K::SubscribeUpdate,
    ];
    Some(kinds[(request_id % kinds.len() as u64) as usize])
}

fn any_namespace(_request_id: u64) -> Option<TrackNamespace> {
    Some(TrackNamespace::from_path("fuzz"))
}

fn any_request_id(_namespace: &TrackNamespace, _announcer: draft16::Announcer) -> Option<u64> {
    Some(7)
}

fn priority(track_alias: u64) -> u8 {
    track_alias as u8
}

fn check_control(bytes: &[u8]) -> usize {
    // The request ID of a REQUEST_OK / REQUEST_ERROR decides the message, so keep the lookups.
    check_reencodes(
        bytes,
        |b| draft16::decode_control(b, &any_kind, &any_namespace),
        |message| {
            let mut again = Vec::new();
            draft16::encode_control(message, &any_request_id, &mut again)
                .unwrap_or_else(|err| panic!("decoded {message:?} does not encode: {err}"));
            again
        },
    )
}

fn check_data(bytes: &[u8]) -> usize {
    let mut accepted = 0;
    if let Ok((header, used)) = draft16::decode_data_stream_header(bytes, &priority) {
        accepted += 1;
        assert!(used <= bytes.len());
        for default in [None, Some(7)] {
            let mut again = Vec::new();
            draft16::encode_data_stream_header(&header, default, &mut again).unwrap();
            let inherit = |alias| default.unwrap_or_else(|| priority(alias));
            let (back, _) = draft16::decode_data_stream_header(&again, &inherit).unwrap();
            assert_eq!(back, header);
        }
    }
    for extensions_present in [false, true] {
        accepted += check_reencodes(
            bytes,
            |b| draft16::decode_subgroup_object(b, extensions_present),
            |header| {
                let mut again = Vec::new();
                draft16::encode_subgroup_object(header, extensions_present, &mut again).unwrap();
                again
            },
        );
    }
    accepted += check_fetch_stream(bytes);
    if let Ok((header, payload_at)) = draft16::decode_datagram(bytes, &priority) {
        accepted += 1;
        assert!(payload_at <= bytes.len());
        let mut again = Vec::new();
        draft16::encode_datagram(&header, None, &mut again).unwrap();
        again.extend_from_slice(&bytes[payload_at..]);
        let (back, _) = draft16::decode_datagram(&again, &priority).unwrap();
        assert_eq!(back, header);
    }
    accepted + usize::from(draft16::decode_extensions(bytes).is_ok())
}

/// Reads `bytes` as fetch objects (payloads skipped), then writes what was read and reads it
/// back.
fn check_fetch_stream(bytes: &[u8]) -> usize {
    let mut reader = FetchObjectReader::new();
    let mut rest = bytes;
    let mut entries = Vec::new();
    while let Ok((entry, used)) = reader.decode(rest) {
        rest = &rest[used..];
        if let FetchObject::Object { header, .. } = &entry {
            let Some(after) = usize::try_from(header.payload_len)
                .ok()
                .and_then(|len| rest.get(len..))
            else {
                break;
            };
            rest = after;
        }
        entries.push(entry);
        if entries.len() > 64 {
            break;
        }
    }
    let mut writer = FetchObjectWriter::new();
    let mut again = Vec::new();
    for entry in &entries {
        writer.encode(entry, &mut again).unwrap();
    }
    let mut reader = FetchObjectReader::new();
    let mut rest = again.as_slice();
    for entry in &entries {
        let (back, used) = reader.decode(rest).unwrap();
        assert_eq!(&back, entry);
        rest = &rest[used..];
    }
    entries.len()
}

/// Valid encodings of everything, as starting points for mutation.
fn seeds() -> Vec<Vec<u8>> {
    let mut seeds: Vec<Vec<u8>> = samples::control_messages()
        .iter()
        .map(super::encode)
        .collect();
    for header in samples::stream_headers() {
        let mut bytes = Vec::new();
        draft16::encode_data_stream_header(&header, Some(samples::DEFAULT_PRIORITY), &mut bytes)
            .unwrap();
        seeds.push(bytes);
    }
    for (header, extensions_present) in samples::subgroup_objects() {
        let mut bytes = Vec::new();
        draft16::encode_subgroup_object(&header, extensions_present, &mut bytes).unwrap();
        seeds.push(bytes);
    }
    let mut writer = FetchObjectWriter::new();
    let mut stream = Vec::new();
    for entry in samples::fetch_objects() {
        let mut bytes = Vec::new();
        writer.encode(&entry, &mut bytes).unwrap();
        if let FetchObject::Object { header, .. } = &entry {
            bytes.extend(std::iter::repeat_n(0, header.payload_len.min(3) as usize));
        }
        stream.extend_from_slice(&bytes);
        seeds.push(bytes);
    }
    seeds.push(stream);
    for header in samples::datagrams() {
        let mut bytes = Vec::new();
        draft16::encode_datagram(&header, Some(samples::DEFAULT_PRIORITY), &mut bytes).unwrap();
        seeds.push(bytes);
    }
    seeds
}

#[test]
fn random_bytes_never_panic() {
    fuzz::random_bytes(0x3e, |bytes| {
        check_control(bytes);
        check_data(bytes);
    });
}

#[test]
fn mutated_encodings_never_panic() {
    let mut control = 0;
    let mut data = 0;
    fuzz::mutated_seeds(&seeds(), |bytes| {
        control += check_control(bytes);
        data += check_data(bytes);
    });
    // Mutations must often stay decodable, or the re-encode checks above prove nothing.
    assert!(control > 2_000, "only {control} control messages decoded");
    assert!(data > 20_000, "only {data} data headers decoded");
}
