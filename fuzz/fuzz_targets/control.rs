//! Control messages: `ControlMessage::decode` on arbitrary bytes never panics, and whatever it
//! accepts encodes again and decodes to the same message.

#![no_main]

use libfuzzer_sys::fuzz_target;
use moq_wire::draft14::ControlMessage;

fuzz_target!(|data: &[u8]| {
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
});
