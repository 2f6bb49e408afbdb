//! Numbers as a new user types them (issue 35, item 10): a zero is judged by its range,
//! durations are echoed in the units people read, a share needs its `%`, and a negative
//! value reaches tame's own check instead of clap's `use '-- -5'` tip. Every case fails
//! validation, so nothing runs.

use crate::common::{expect_bad_input, tame};

/// Each command line is bad input whose message says the words beside it.
const REFUSED: &[(&[&str], &str)] = &[
    // A zero is judged by its range; a number without a unit says how to write it.
    (
        &["bench", "cycle", "--interval", "0"],
        "interval 0 ns is out of range — tame bench cycle takes 50µs..10s",
    ),
    (
        &["bench", "fwq", "--quantum", "0"],
        "quantum 0 ns is out of range",
    ),
    (
        &["bench", "cycle", "--interval", "5"],
        "duration \"5\" has no unit — write it like 5ms",
    ),
    // Durations are echoed in the units people read, not in raw nanoseconds.
    (
        &["bench", "cycle", "--interval", "20s"],
        "interval 20 s is out of range",
    ),
    (
        &["bench", "noise", "--duration", "5ms"],
        "duration 5 ms is out of range — use 10ms..24h",
    ),
    // A share needs its % (a bare 25 was read as 2500 %).
    (
        &["reserve", "--share", "25", "--period", "40ms", "--", "true"],
        "share \"25\" has no % — write it as 25%",
    ),
    (&["serve", "--cap", "90"], "--cap: share \"90\" has no %"),
    // Negative values reach tame's checks.
    (
        &[
            "reserve", "--share", "-5%", "--period", "40ms", "--", "true",
        ],
        "share \"-5%\" is negative — a share must be above 0",
    ),
    (
        &[
            "reserve", "--share", "25%", "--period", "-40ms", "--", "true",
        ],
        "duration \"-40ms\" is negative",
    ),
    (
        &["bench", "cycle", "--interval", "-1ms"],
        "duration \"-1ms\" is negative",
    ),
    (
        &["bench", "cycle", "--priority", "-5"],
        "priority -5 is out of range",
    ),
    (
        &["bench", "reserve", "--shares", "-5%"],
        "share \"-5%\" is negative",
    ),
];

#[test]
fn numbers_are_refused_with_what_is_wrong_in_the_users_terms() {
    for (args, words) in REFUSED {
        expect_bad_input(args, words);
    }
}

#[test]
fn a_negative_count_is_a_bad_value_not_an_unknown_argument() {
    // clap refuses a count that cannot be negative, but as a bad value of the option,
    // not as an unknown argument with a `-- -5` tip.
    let o = tame(&["bench", "cycle", "--loops", "-5"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("invalid value '-5' for '--loops"), "{err}");
    assert!(!err.contains("tip"), "{err}");
}

#[test]
fn one_cpu_is_named_in_the_singular() {
    // issue 35, item 13: "CPUs 1 are".
    let root = tame_testing::committed_fixture("dev-vm");
    let root = root.to_str().unwrap();
    expect_bad_input(
        &["--root", root, "check", "--cpus", "5"],
        "--cpus 5: CPU 5 is not online (online: 0-1)",
    );
    expect_bad_input(
        &["--root", root, "check", "--cpus", "4-5"],
        "--cpus 4-5: CPUs 4-5 are not online",
    );
}
