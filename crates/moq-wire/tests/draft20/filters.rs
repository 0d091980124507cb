//! Draft-20's LOCATION_FILTER: a length, then the integers of the filter (none to four), the
//! count saying which filter it is. Vectors derived by hand, and the values it refuses.

use moq_wire::message::*;

use super::common::samples::subscribe;
use super::common::violation;
use super::malformed::{new_request, subscribe_with};
use super::vectors::{NAMESPACE, VIDEO, check, check_filter, live_join};

/// The LOCATION_FILTER value (as the model keeps it in a REQUEST_UPDATE's parameters) of an
/// AbsoluteRange from {5, 0} to group 10: the integers 5, 0, 5 without their length.
pub const RANGE_5_0_TO_GROUP_10: &[u8] = &[0x05, 0x00, 0x05];

#[test]
fn every_filter_form() {
    check_filter(FilterType::NextGroupStart, "01 00"); // Start Group 0
    check_filter(FilterType::GroupsBack(0), "01 01"); // the current group: Start Group 1
    check_filter(FilterType::GroupsBack(2), "01 03");
    check_filter(FilterType::LargestObject, "02 00 00"); // {0, 0}: the next object
    check_filter(FilterType::AbsoluteStart(Location::new(3, 1)), "02 03 01");
    check_filter(
        FilterType::AbsoluteRange {
            start: Location::new(5, 0),
            end_group: 10,
        },
        "03 05 00 05", // End Group as a delta from the start
    );
    check_filter(
        FilterType::AbsoluteObjectRange {
            start: Location::new(3, 1),
            end: Location::new(4, 0),
        },
        "04 03 01 01 00",
    );
}

#[test]
fn subscribe_message() {
    check(
        ControlMessage::Subscribe(subscribe(FilterType::NextGroupStart)),
        &format!(
            "03 0024 04 {NAMESPACE} {VIDEO}
             05           // five parameters
             02 80fa      // OBJECT_DELIVERY_TIMEOUT (2) = 250, a two-byte vi64
             01 05 746f6b656e // AUTHORIZATION_TOKEN (2 + 1) \"token\"
             1d 07        // SUBSCRIBER_PRIORITY (3 + 29 = 0x20), one byte
             01 01 00     // LOCATION_FILTER (0x21): one integer, 0: the next group
             01 02        // GROUP_ORDER (0x22): descending"
        ),
    );
}

#[test]
fn a_live_join_is_the_next_object_with_the_current_group_filled() {
    check(
        live_join(),
        &format!(
            "03 001d 04 {NAMESPACE} {VIDEO}
             02           // two parameters
             21 02 0000   // LOCATION_FILTER: {{0, 0}}, the next object
             02 04        // FILL_PARAMETERS (0x21 + 2), 4 bytes:
                01 21 01 01 // one parameter, LOCATION_FILTER: StartGroup 1, the current group"
        ),
    );
}

#[test]
fn fetch_of_a_range() {
    let (fetch, _) =
        super::common::samples::standalone_fetch(GroupOrder::Ascending, Parameters::new());
    check(
        ControlMessage::Fetch(fetch),
        &format!(
            "16 001a 0a {NAMESPACE} {VIDEO}
             02           // two parameters
             20 02        // SUBSCRIBER_PRIORITY 2
             01 03 010003 // LOCATION_FILTER: {{1, 0}} to group 1 + 3 (End Location {{4, 0}}: all of group 4)"
        ),
    );
}

#[test]
fn filters_that_break_the_rules() {
    assert_eq!(
        violation(new_request(&subscribe_with("01 21 05 0102030405"))),
        "location filter of more than four integers"
    );
    // An end group beyond 2^64 - 1.
    assert_eq!(
        violation(new_request(&subscribe_with(
            "01 21 0b 05 00 ffffffffffffffffff"
        ))),
        "location filter end group beyond 2^64 - 1"
    );
    // An integer cut off by the filter's length.
    assert_eq!(
        violation(new_request(&subscribe_with("01 21 01 80"))),
        "location filter cut inside an integer"
    );
}
