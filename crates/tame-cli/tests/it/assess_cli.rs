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
    refused(
        &["--duration", "10ms"],
        "--duration 10 ms is too short for 3 rounds",
    );
    // A zero needs no unit: its range is what is wrong with it.
    refused(&["--duration", "0"], "--duration 0 ns is too short");
    refused(&["--period", "0"], "--period 0ns is out of range");
    refused(
        &["--budget", "0"],
        "--budget 0: the work needs some CPU time",
    );
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
        "--max-duration 10 ms is too short for 3 rounds",
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

#[test]
fn a_failed_assessment_writes_nothing() {
    // issue 35, item 11: with --root on a fixture tree, assess overwrote OUT/spec.toml and
    // measured the live machine before it failed. It is refused first, and what the
    // output directory held before is left as it was.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("tame-assess");
    std::fs::create_dir(&out).unwrap();
    let spec = out.join("spec.toml");
    std::fs::write(&spec, "# the user's earlier spec\n").unwrap();
    let json = dir.path().join("assess.json");
    let journal = dir.path().join("journal");
    let fixture = tame_testing::committed_fixture("dev-vm");
    let args = |extra: &[&str]| {
        let mut all = vec![
            "assess",
            "--out",
            out.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
            "--journal-dir",
            journal.to_str().unwrap(),
        ];
        all.extend_from_slice(extra);
        all.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let mut with_root = vec!["--root".to_string(), fixture.display().to_string()];
    with_root.extend(args(&[]));
    let cases = [
        (
            with_root,
            "tame assess measures and partitions the machine it runs on, and this tree is not it",
        ),
        // A length refused after the options are read: the --json file is not created either.
        (args(&["--duration", "10ms"]), "is too short for 3 rounds"),
    ];
    for (argv, words) in cases {
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let o = tame(&argv);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{argv:?}: {err}");
        assert!(err.contains(words), "{argv:?}: {err}");
        assert_eq!(
            std::fs::read_to_string(&spec).unwrap(),
            "# the user's earlier spec\n",
            "{argv:?}"
        );
        let left: Vec<_> = std::fs::read_dir(&out).unwrap().collect();
        assert_eq!(left.len(), 1, "{argv:?}: only the earlier spec: {left:?}");
        assert!(!json.exists(), "{argv:?}: the JSON report was created");
        assert!(!journal.exists(), "{argv:?}: nothing may be journaled");
    }
}
