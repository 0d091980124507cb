//! Variable-length integer examples from RFC 9000, Appendix A.1.

use moq_wire::varint::{decode, encode, encoded_len};

#[test]
fn rfc9000_examples() {
    let cases: [(&[u8], u64); 4] = [
        (
            &[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c],
            151_288_809_941_952_652,
        ),
        (&[0x9d, 0x7f, 0x3e, 0x7d], 494_878_333),
        (&[0x7b, 0xbd], 15_293),
        (&[0x25], 37),
    ];
    for (bytes, value) in cases {
        let mut slice = bytes;
        assert_eq!(decode(&mut slice).unwrap(), value);
        assert!(slice.is_empty());

        let mut out = Vec::new();
        encode(value, &mut out).unwrap();
        assert_eq!(out, bytes);
        assert_eq!(encoded_len(value), bytes.len());
    }
}

#[test]
fn rfc9000_two_byte_form_of_37_decodes() {
    let mut slice: &[u8] = &[0x40, 0x25, 0xaa];
    assert_eq!(decode(&mut slice).unwrap(), 37);
    assert_eq!(slice, [0xaa]);
}
