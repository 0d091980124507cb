//! draft-14 codec tests: hand-derived byte vectors, round trips, partial input, malformed input
//! and a randomised no-panic check.

mod fuzz;
mod malformed;
mod roundtrip;
mod samples;
mod vectors;

use moq_wire::draft14::ControlMessage;

/// Encodes a control message, panicking on failure.
fn encode(message: &ControlMessage) -> Vec<u8> {
    let mut out = Vec::new();
    message.encode(&mut out).expect("encodable");
    out
}

/// Parses hex bytes separated by whitespace, ignoring `//` comments to the end of a line.
fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s
        .lines()
        .flat_map(|line| line.split("//").next().unwrap_or("").bytes())
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect()
}
