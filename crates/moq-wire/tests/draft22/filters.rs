//! Draft-22's LOCATION_FILTER: a Location Filter Type, then the integers that type has (no
//! length). Vectors derived by hand, and the values it refuses.

use moq_wire::message::*;

use super::common::violation;
use super::malformed::{new_request, subscribe_with};
use super::vectors::{NAMESPACE, VIDEO, check, check_filter, live_join};

/// The LOCATION_FILTER value (as the model keeps it in a REQUEST_UPDATE's parameters) of an
/// AbsoluteRange from {5, 0} to group 10: type ABSOLUTE_GROUP_END (3), then 5, 0, 5.
pub const RANGE_5_0_TO_GROUP_10: &[u8] = &[0x03, 0x05, 0x00, 0x05];

#[test]
fn every_filter_form() {
    check_filter(FilterType::NextGroupStart, "01 00"); // RELATIVE_START, Start Group 0
    check_filter(FilterType::GroupsBack(0), "01 01"); // the current group
    check_filter(FilterType::GroupsBack(2), "01 03");
    check_filter(FilterType::LargestObject, "05"); // NEXT_OBJECT, no integers
    check_filter(FilterType::AbsoluteStart(Location::new(3, 1)), "02 03 01");
    check_filter(
        FilterType::AbsoluteRange {
            start: Location::new(5, 0),
            end_group: 10,
        },
        "03 05 00 05", // ABSOLUTE_GROUP_END, End Group as a delta from the start
    );
    check_filter(
        FilterType::AbsoluteObjectRange {
            start: Location::new(3, 1),
            end: Location::new(4, 0),
        },
        "04 03 01 01 00", // ABSOLUTE_RANGE
    );
}

#[test]
fn a_typed_start_of_zero_is_a_start_not_the_next_object() {
    // Draft-20's {0, 0} is the next object; draft-22's ABSOLUTE_START {0, 0} is the track's
    // beginning, which is what no filter means, and NONE says the same.
    for value in ["02 00 00", "00"] {
        let (decoded, _) = new_request(&subscribe_with(&format!("01 21 {value}"))).unwrap();
        let ControlMessage::Subscribe(subscribe) = decoded else {
            panic!("{decoded:?}")
        };
        assert_eq!(
            subscribe.filter,
            FilterType::AbsoluteStart(Location::new(0, 0))
        );
    }
}

#[test]
fn a_live_join_is_the_next_object_with_the_current_group_filled() {
    check(
        live_join(),
        &format!(
            "03 001b 04 {NAMESPACE} {VIDEO}
             02           // two parameters
             21 05        // LOCATION_FILTER: NEXT_OBJECT
             02 04        // FILL_PARAMETERS (0x21 + 2), 4 bytes:
                01 21 01 01 // one parameter, LOCATION_FILTER: RELATIVE_START 1, the current group"
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
             01 03 01 00 03 // LOCATION_FILTER: ABSOLUTE_GROUP_END {{1, 0}} to group 1 + 3"
        ),
    );
}

#[test]
fn filters_that_break_the_rules() {
    assert_eq!(
        violation(new_request(&subscribe_with("01 21 06"))),
        "unknown location filter type"
    );
    assert_eq!(
        violation(new_request(&subscribe_with(
            "01 21 03 05 00 ffffffffffffffffff"
        ))),
        "location filter end group beyond 2^64 - 1"
    );
    // A filter cut off by the end of the message.
    assert!(new_request(&subscribe_with("01 21 04 05 00")).is_err());
}
