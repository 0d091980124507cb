//! Randomised inputs: decoding never panics on any channel, and whatever decodes re-encodes
//! to something that decodes to the same value.

use moq_wire::codec::{Channel, RequestKind, StreamRequest};
use moq_wire::draft20;

use super::common::fuzz::{self, check_reencodes};
use super::samples;
use super::{decode, encode};

/// Every channel a control message can be read on.
fn channels() -> Vec<Channel> {
    let mut channels = vec![
        Channel::Control { from_server: false },
        Channel::Control { from_server: true },
        Channel::NewRequest,
    ];
    for kind in [
        RequestKind::Subscribe,
        RequestKind::Fetch,
        RequestKind::Publish,
        RequestKind::PublishNamespace,
        RequestKind::SubscribeNamespace,
        RequestKind::SubscribeTracks,
        RequestKind::TrackStatus,
    ] {
        for ours in [true, false] {
            channels.push(Channel::Request(StreamRequest {
                request_id: 4,
                kind,
                ours,
            }));
        }
    }
    channels
}

/// Decodes `bytes` with every decoder; anything accepted must survive a re-encode. Returns
/// how many decoders accepted the input.
fn check_all_decoders(bytes: &[u8], channels: &[Channel]) -> usize {
    let mut accepted = 0;
    for &channel in channels {
        accepted += check_reencodes(bytes, |b| decode(b, channel), encode);
    }
    let priority = |_| 7;
    accepted += check_reencodes(
        bytes,
        |b| draft20::decode_data_stream_header(b, &priority),
        |h| {
            let mut out = Vec::new();
            draft20::encode_data_stream_header(h, None, &mut out).unwrap();
            out
        },
    );
    for extensions_present in [false, true] {
        accepted += check_reencodes(
            bytes,
            |b| draft20::decode_subgroup_object(b, extensions_present),
            |h| {
                let mut out = Vec::new();
                draft20::encode_subgroup_object(h, extensions_present, &mut out).unwrap();
                out
            },
        );
    }
    accepted += check_reencodes(
        bytes,
        |b| draft20::FetchObjectReader::new().decode(b),
        |entry| {
            let mut out = Vec::new();
            draft20::FetchObjectWriter::new()
                .encode(entry, &mut out)
                .unwrap();
            out
        },
    );
    if let Ok((header, at)) = draft20::decode_datagram(bytes, &priority) {
        let mut again = Vec::new();
        draft20::encode_datagram(&header, None, &mut again).unwrap();
        again.extend_from_slice(&bytes[at..]);
        assert_eq!(
            draft20::decode_datagram(&again, &priority).unwrap().0,
            header
        );
        accepted += 1;
    }
    accepted + usize::from(draft20::decode_extensions(bytes).is_ok())
}

fn seeds() -> Vec<Vec<u8>> {
    let mut seeds: Vec<Vec<u8>> = samples::control_messages().iter().map(encode).collect();
    for header in samples::stream_headers() {
        let mut bytes = Vec::new();
        draft20::encode_data_stream_header(&header, None, &mut bytes).unwrap();
        seeds.push(bytes);
    }
    seeds
}

#[test]
fn random_input_never_panics() {
    let channels = channels();
    fuzz::random_bytes(0x60, |bytes| {
        check_all_decoders(bytes, &channels);
    });
}

#[test]
fn mutated_messages_never_panic_and_re_encode() {
    let channels = channels();
    let mut accepted = 0;
    fuzz::mutated_seeds(&seeds(), |bytes| {
        accepted += check_all_decoders(bytes, &channels)
    });
    // Mutations must often stay decodable, or the re-encode checks above prove nothing.
    assert!(accepted > 10_000, "only {accepted} decodes succeeded");
}
