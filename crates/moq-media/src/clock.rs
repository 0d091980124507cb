//! The wall clock frames are stamped with: µs since the UNIX epoch, as the frame header's
//! availability time and the `timestamp/x-unix` buffer meta carry it. One reading of the
//! clock for the sender, the receiver and the tools that measure between them.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, µs since the UNIX epoch (0 on a clock set before it).
pub fn unix_now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// [`unix_now_us`] as a signed number, for the differences a receiver takes (latencies,
/// times before now).
pub fn unix_now_us_i64() -> i64 {
    i64::try_from(unix_now_us()).unwrap_or(i64::MAX)
}
