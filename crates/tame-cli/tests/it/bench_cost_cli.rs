//! `tame bench cost` as a user runs it without a partition (it changes nothing): bad input
//! refused with exit code 2 before anything starts, a missing tool named with the package
//! to install, and a short real run of the machine as it is.

use crate::common::{have_program, require, tame};

use std::process::Command;

fn expect_bad_input(out: std::process::Output, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
    assert!(stderr.contains(needle), "expected {needle:?} in: {stderr}");
    assert!(
        out.stdout.is_empty(),
        "nothing may run: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(!stderr.contains("round 1/"), "a workload ran: {stderr}");
}

#[test]
fn bad_input_exits_2_before_any_workload() {
    let _machine = tame_testing::serial::module(module_path!());
    let cost = |args: &[&str]| {
        let mut all = vec!["bench", "cost"];
        all.extend_from_slice(args);
        tame(&all)
    };
    expect_bad_input(
        cost(&["--workloads", "cpu,aim"]),
        "unknown workload \"aim\"",
    );
    expect_bad_input(cost(&["--rounds", "0"]), "--rounds 0 measures nothing");
    expect_bad_input(cost(&["--duration", "1500ms"]), "whole number of seconds");
    expect_bad_input(cost(&["--duration", "5"]), "--duration");
    expect_bad_input(cost(&["--rt-load"]), "--rt-load runs a real-time load");
    expect_bad_input(
        cost(&["--spec", "/nonexistent/spec.toml"]),
        "cannot read spec",
    );
    expect_bad_input(
        cost(&["--spec", "a.toml", "--isolate", "1"]),
        "cannot be used with",
    );
}

#[test]
fn a_missing_tool_is_named_with_its_package() {
    let _machine = tame_testing::serial::module(module_path!());
    // A PATH without stress-ng and gcc.
    let empty = tempfile::tempdir().unwrap();
    let run = |workloads: &str| {
        Command::new(env!("CARGO_BIN_EXE_tame"))
            .args(["bench", "cost", "--workloads", workloads])
            .env("PATH", empty.path())
            .output()
            .unwrap()
    };
    expect_bad_input(run("cpu,pipe"), "stress-ng not found in PATH — the workloads cpu, pipe run stress-ng; install it with `apt-get install stress-ng`");
    expect_bad_input(run("build"), "gcc not found in PATH — the build workload compiles C files with gcc; install it with `apt-get install gcc`");
}

#[test]
fn a_short_shared_run_reports_each_workload_in_the_common_schema() {
    let _machine = tame_testing::serial::module(module_path!());
    if !require(
        have_program("stress-ng"),
        "stress-ng (apt-get install stress-ng)",
    ) || !require(have_program("gcc"), "gcc (apt-get install gcc)")
    {
        return;
    }
    let out = tame(&[
        "bench",
        "cost",
        "--workloads",
        "cpu,build",
        "--duration",
        "1s",
        "--rounds",
        "2",
        "--json",
        "-",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["bench"], "cost");
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["partition"], serde_json::Value::Null);
    let online = v["environment"]["online_cpus"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(v["settings"]["configurations"][0]["kind"], "shared");
    assert_eq!(v["settings"]["configurations"][0]["cpus"], online.as_str());
    let groups = v["groups"].as_array().unwrap();
    let labels: Vec<&str> = groups
        .iter()
        .map(|g| g["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["shared/cpu", "shared/build"]);
    for g in groups {
        assert_eq!(g["counters"]["rounds"], 2, "{g}");
        let t = g["derived"]["throughput"].as_f64().unwrap();
        assert!(t > 0.0, "{g}");
        let s = &g["spread"]["throughput"];
        assert!(
            s["min"].as_f64().unwrap() <= t && t <= s["max"].as_f64().unwrap(),
            "{g}"
        );
        assert_eq!(g["metrics"][0]["summary"]["count"], 2);
    }
    // Shared only: no cost figures, and the table says what ran where.
    assert!(v["merged"]["derived"].as_object().unwrap().is_empty());
    assert!(stderr.contains("shared: the machine as it is"), "{stderr}");
    assert!(stderr.contains("round 2/2 shared"), "{stderr}");
    // Nothing of the workloads outlives the run (ours by their temporary directory:
    // another stress-ng on this machine is not ours).
    let left = Command::new("pgrep")
        .args(["-f", "tame-cost\\."])
        .output()
        .unwrap();
    assert!(!left.status.success(), "stress-ng left running");
}
