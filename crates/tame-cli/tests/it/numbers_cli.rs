//! Numbers as a new user types them (issue 35, item 10): a zero is judged by its range,
//! durations are echoed in the units people read, a share needs its `%`, and a negative
//! value reaches tame's own check instead of clap's `use '-- -5'` tip. Every case fails
//! validation, so nothing runs.

use crate::common::{expect_bad_input, tame};

#[test]
fn a_zero_is_judged_by_its_range() {
    expect_bad_input(
        &["bench", "cycle", "--interval", "0"],
        "interval 0 ns is out of range — tame bench cycle takes 50µs..10s",
    );
    expect_bad_input(
        &["bench", "fwq", "--quantum", "0"],
        "quantum 0 ns is out of range",
    );
    expect_bad_input(
        &["bench", "cycle", "--interval", "5"],
        "duration \"5\" has no unit — write it like 5ms",
    );
}

#[test]
fn durations_are_echoed_in_the_units_people_read() {
    expect_bad_input(
        &["bench", "cycle", "--interval", "20s"],
        "interval 20 s is out of range",
    );
    expect_bad_input(
        &["bench", "noise", "--duration", "5ms"],
        "duration 5 ms is out of range — use 10ms..24h",
    );
}

#[test]
fn a_share_needs_its_percent_sign() {
    expect_bad_input(
        &["reserve", "--share", "25", "--period", "40ms", "--", "true"],
        "share \"25\" has no % — write it as 25%",
    );
    expect_bad_input(&["serve", "--cap", "90"], "--cap: share \"90\" has no %");
}

#[test]
fn negative_values_reach_tames_own_checks() {
    for (args, needle) in [
        (
            &[
                "reserve", "--share", "-5%", "--period", "40ms", "--", "true",
            ][..],
            "share \"-5%\" is negative — a share must be above 0",
        ),
        (
            &[
                "reserve", "--share", "25%", "--period", "-40ms", "--", "true",
            ][..],
            "duration \"-40ms\" is negative",
        ),
        (
            &["bench", "cycle", "--interval", "-1ms"][..],
            "duration \"-1ms\" is negative",
        ),
        (
            &["bench", "cycle", "--priority", "-5"][..],
            "priority -5 is out of range",
        ),
        (
            &["bench", "reserve", "--shares", "-5%"][..],
            "share \"-5%\" is negative",
        ),
    ] {
        expect_bad_input(args, needle);
    }
    // A count that cannot be negative is clap's to refuse, but as a bad value of the
    // option, not as an unknown argument with a `-- -5` tip.
    let o = tame(&["bench", "cycle", "--loops", "-5"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("invalid value '-5' for '--loops"), "{err}");
    assert!(!err.contains("tip"), "{err}");
}
