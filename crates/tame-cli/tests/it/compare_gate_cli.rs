//! `tame compare --gate` on recorded results: three `tame bench sleep` runs of 2 000 sleeps as
//! the baseline (a directory), a fourth run under `--load cpu,vm,io` on the same CPU as the new
//! result. 2 000 samples support p50 and p99, not p99.9 (10 000), so two figures are judged. Exit 0
//! when the new result is within the baseline's spread, 1 when a figure is worse, 2 for bad
//! input — and the JSON verdict is versioned.

use crate::common::{expect_bad_input, tame};

use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gate")
}

fn path(rel: &str) -> String {
    fixtures().join(rel).display().to_string()
}

#[test]
fn a_loaded_run_fails_the_gate_with_exit_1() {
    let out = tame(&[
        "compare",
        "--gate",
        &path("baseline"),
        &path("loaded.json"),
        "--json",
        "-",
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schema"], "tame.gate/1");
    assert_eq!(v["bench"], "sleep");
    assert_eq!(v["passed"], false);
    assert_eq!(v["baseline"].as_array().unwrap().len(), 3);
    let worse: Vec<&str> = v["figures"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["verdict"] == "worse")
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    // The recorded loaded run's jitter (p50 199.55 µs, p99 6.762 ms) is past the baseline's
    // worst (86.85 µs, 130.62 µs) plus its spread.
    assert_eq!(worse, ["jitter p50", "jitter p99"]);
    assert_eq!(v["tally"]["worse"], 2);
    // The human table goes to stderr with --json -.
    let table = String::from_utf8_lossy(&out.stderr);
    assert!(table.contains("FAILED: 2 judged — 2 worse"), "{table}");
}

#[test]
fn a_baseline_run_passes_against_its_own_baseline() {
    let out = tame(&[
        "compare",
        "--gate",
        &path("baseline/sleep-1.json"),
        &path("baseline/sleep-2.json"),
        &path("baseline/sleep-3.json"),
        &path("baseline/sleep-2.json"),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("PASSED: 2 judged — 0 worse"), "{text}");
    // p99.9 of 2 000 samples is no figure to judge by.
    assert!(!text.contains("jitter p99_9"), "{text}");
    // A generous threshold lets the loaded run through (6.762 ms < 130.62 µs × 60).
    let out = tame(&[
        "compare",
        "--gate",
        &path("baseline"),
        &path("loaded.json"),
        "--threshold",
        "*=60",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn bad_gate_input_is_exit_2() {
    let base = path("baseline/sleep-1.json");
    let new = path("loaded.json");
    // One baseline without a spread of its own: nothing to judge by.
    expect_bad_input(
        &["compare", "--gate", &base, &new],
        "two or more baseline results",
    );
    expect_bad_input(
        &[
            "compare",
            "--gate",
            &path("baseline"),
            &new,
            "--threshold",
            "p99=0.5",
        ],
        "the ratio is below 1",
    );
    let empty = tempfile::tempdir().unwrap();
    expect_bad_input(
        &["compare", "--gate", empty.path().to_str().unwrap(), &new],
        "holds no *.json result",
    );
    // Another bench in the baseline.
    let ws = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../crates/tame-bench/testdata/compare");
    let noise = ws.join("a-noise.json").display().to_string();
    expect_bad_input(
        &["compare", "--gate", &base, &noise, &new],
        "gate a result against baselines of the same bench",
    );
    // Without --gate, compare takes two results exactly.
    expect_bad_input(&["compare", &base, &new, &new], "takes two results");
}

/// A file of another crate's fixtures.
fn workspace_file(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
        .display()
        .to_string()
}

/// tame's own documents compare as what they are: two sweeps step by step (once refused as
/// "not a tame bench result"), two assess reports configuration by configuration (once
/// "missing field schema_version"); two of different kinds, or a document compare does not
/// compare, are refused naming what each file is and what compare takes.
#[test]
fn sweeps_and_assess_reports_compare_and_the_rest_is_named() {
    let sweep = workspace_file("crates/tame-report/tests/fixtures/recorded/sleep-sweep.json");
    let out = tame(&["compare", &sweep, &sweep, "--json", "-"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (v["schema"].as_str(), v["bench"].as_str()),
        (Some("tame.compare/1"), Some("sleep"))
    );
    let groups: Vec<&str> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["group"].as_str().unwrap())
        .collect();
    for step in ["tasks=1 task0", "tasks=2 all", "tasks=4 task3"] {
        assert!(groups.contains(&step), "{step}: {groups:?}");
    }
    let assess = workspace_file("crates/tame-assess/tests/fixtures/dev-vm-v2.json");
    let out = tame(&["compare", &assess, &assess]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(table.starts_with("tame compare (assess): "), "{table}");
    for line in [
        "partitioned  response p99",
        "shared       misses",
        "shared       activations",
    ] {
        assert!(table.contains(line), "{line}: {table}");
    }
    let cycle = workspace_file("crates/tame-report/tests/fixtures/recorded/cycle-shared.json");
    expect_bad_input(
        &["compare", &sweep, &cycle],
        "is a sweep of sleep (tasks=1, tasks=2, tasks=4) and",
    );
    expect_bad_input(&["compare", &assess, &cycle], "is an assess report and");
    expect_bad_input(&["compare", &assess, &cycle], "shared-1-job.json");
    let comparison =
        workspace_file("crates/tame-report/tests/fixtures/recorded/compare-cycle.json");
    expect_bad_input(
        &["compare", &comparison, &cycle],
        "is a comparison (tame compare --json), which compare does not compare — give two results of one bench",
    );
    expect_bad_input(
        &["compare", "--gate", &cycle, &cycle, &sweep],
        "--gate judges single bench results",
    );
}
