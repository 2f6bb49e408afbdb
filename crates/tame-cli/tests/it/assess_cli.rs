//! `tame assess` refuses bad input with exit 2 before anything is changed (no journal,
//! no partition, no load). Nothing here changes the machine.

use crate::common::tame;

fn refused(args: &[&str], words: &str) {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal");
    let out = dir.path().join("out");
    let mut all = vec![
        "assess",
        "--journal-dir",
        journal.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    let o = tame(&all);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(words), "{args:?}: {err}");
    assert!(!journal.exists(), "{args:?}: nothing may be journaled");
    assert!(!out.exists(), "{args:?}: nothing may be written");
}

#[test]
fn bad_input_is_refused_before_anything_changes() {
    refused(&["--load", "cpu,disk"], "unknown load \"disk\"");
    refused(
        &["--period", "1ms", "--budget", "2ms"],
        "--budget 2.000ms is not below the deadline",
    );
    refused(&["--deadline", "2ms"], "at most the period");
    refused(&["--cpus", "999"], "--cpus 999: this machine has");
    refused(
        &["--miss-rate", "sometimes"],
        "--miss-rate \"sometimes\" is not a number",
    );
    refused(&["--duration", "10ms"], "out of range");
    refused(&["--rounds", "0"], "--rounds 0 is out of range");
    refused(&["--confidence", "100%"], "must be above 0 and below 1");
    refused(
        &["--target-bound", "0.01%"],
        "--target-bound sizes --duration auto",
    );
    refused(
        &["--duration", "auto", "--target-bound", "rarely"],
        "--target-bound \"rarely\" is not a number — give a fraction such as 0.0001",
    );
    refused(
        &["--duration", "auto", "--target-bound", "2"],
        "--target-bound 2 must be above 0 and below 1",
    );
    refused(&["--working-set", "lots"], "is not a size");
    refused(&["--load-cmd", " "], "--load-cmd is empty");
    refused(
        &["--load", "cpu", "--load-cmd", "sleep 1"],
        "cannot be used with '--load-cmd",
    );
    // Auto-sized past its cap leaves too little for one round.
    refused(
        &["--duration", "auto", "--max-duration", "10ms"],
        "out of range",
    );
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("spec.toml");
    std::fs::write(&spec, "[[partition]]\nname = \"system\"\ncpu = \"0\"\n").unwrap();
    refused(&["--spec", spec.to_str().unwrap()], "did you mean `cpus`");
    refused(
        &["--spec", "/nonexistent/spec.toml"],
        "cannot read spec /nonexistent/spec.toml",
    );
}
