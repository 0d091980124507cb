//! Keyframes on demand: keyframe-on-subscribe and the time to first frame.

use std::time::{Duration, Instant};

use crate::common::*;

/// Time from starting a direct subscriber (which starts at the next GoP) to its first
/// frame, with a 5 s GoP so the difference shows; printed for the record, asserted only
/// loosely. (Through a relay a new viewer gets the relay's cached latest GoP at once.)
#[test]
fn a_keyframe_on_subscribe_shortens_the_time_to_first_frame() {
    let mut measured = Vec::new();
    for on in [true, false] {
        let sender = Sender::start_with_encoder(
            &format!("keyframe-on-subscribe={on}"),
            "x264enc bframes=3 key-int-max=120 speed-preset=veryfast ! h264parse ! video/x-h264,alignment=au",
        );
        let mut times = Vec::new();
        for _ in 0..3 {
            std::thread::sleep(Duration::from_millis(1700));
            let started = Instant::now();
            let receiver = Receiver::of(&sender);
            receiver.wait_frames(1, WAIT).expect("a first frame");
            times.push(started.elapsed());
        }
        eprintln!("keyframe-on-subscribe={on}: time to first frame {times:?}");
        measured.push(times);
    }
    let mean = |t: &[Duration]| t.iter().sum::<Duration>() / t.len() as u32;
    let (with, without) = (mean(&measured[0]), mean(&measured[1]));
    eprintln!("mean time to first frame: {with:?} with, {without:?} without a keyframe request");
    assert!(
        with < Duration::from_secs(2),
        "{with:?} with keyframe-on-subscribe"
    );
}
