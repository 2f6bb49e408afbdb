//! `tame bench noise` and `tame compare` as a user runs them: bad input is
//! refused with exit code 2 before anything starts; a short run writes the
//! result, the gaps CSV, and compares with another run.

use crate::common::{is_root, require, tame};

use std::process::Command;

use serde_json::Value;

fn expect_bad_input(args: &[&str], needle: &str) {
    let out = tame(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(stderr.contains(needle), "{args:?}: {stderr}");
}

#[test]
fn bad_input_is_refused_before_anything_runs() {
    let _machine = tame_testing::serial::module(module_path!());
    expect_bad_input(
        &["bench", "noise", "--cpus", "0", "--duration", "1ms"],
        "10ms..24h",
    );
    expect_bad_input(
        &["bench", "noise", "--cpus", "0", "--threshold", "10ns"],
        "--threshold",
    );
    expect_bad_input(&["bench", "noise", "--cpus", "999"], "not online");
    expect_bad_input(
        &[
            "bench",
            "noise",
            "--cpus",
            "0",
            "--gaps",
            "/nonexistent/dir/g.csv",
        ],
        "gaps CSV",
    );
    expect_bad_input(
        &["compare", "/nonexistent/a.json", "/nonexistent/b.json"],
        "cannot read",
    );
}

#[test]
fn a_short_run_writes_result_and_gaps_and_compares() {
    let _machine = tame_testing::serial::module(module_path!());
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.json");
    let b = dir.path().join("b.json");
    let csv = dir.path().join("gaps.csv");
    for (path, gaps) in [(&a, Some(&csv)), (&b, None)] {
        let mut args = vec![
            "bench".to_string(),
            "noise".into(),
            "--cpus".into(),
            "0".into(),
            "--duration".into(),
            "100ms".into(),
            "--no-trace".into(),
            "--no-mlock".into(),
            "--json".into(),
            path.display().to_string(),
        ];
        if let Some(g) = gaps {
            args.extend(["--gaps".into(), g.display().to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = tame(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("no attribution:"), "{text}");
        assert!(text.contains("CPU available"), "{text}");
    }
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&a).unwrap()).unwrap();
    assert_eq!(v["bench"], "noise");
    assert_eq!(v["noise"]["attribution"]["available"], false);
    let cpu = &v["noise"]["cpus"][0];
    let gaps = cpu["gaps"].as_u64().unwrap() - cpu["gaps_dropped"].as_u64().unwrap();
    let csv = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(
        csv.lines().count() as u64,
        gaps + 1,
        "one row per stored gap"
    );
    assert!(csv.starts_with("cpu,start_ns,duration_ns,class,source\n"));

    let out = tame(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--json",
        "-",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cmp: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = cmp["rows"].as_array().unwrap();
    let run = rows
        .iter()
        .find(|r| r["group"] == "cpu0" && r["name"] == "run_ns")
        .expect("run_ns compared");
    let (ra, rb) = (run["a"].as_f64().unwrap(), run["b"].as_f64().unwrap());
    assert_eq!(run["diff"].as_f64().unwrap(), rb - ra);
    assert!((run["ratio"].as_f64().unwrap() - rb / ra).abs() < 1e-9);
}

#[test]
fn results_of_different_benches_are_not_compared() {
    let _machine = tame_testing::serial::module(module_path!());
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.json");
    let out = tame(&[
        "bench",
        "noise",
        "--cpus",
        "0",
        "--duration",
        "20ms",
        "--no-trace",
        "--no-mlock",
        "--json",
        a.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut other: Value = serde_json::from_str(&std::fs::read_to_string(&a).unwrap()).unwrap();
    other["bench"] = "cycle".into();
    let b = dir.path().join("b.json");
    std::fs::write(&b, other.to_string()).unwrap();
    expect_bad_input(
        &["compare", a.to_str().unwrap(), b.to_str().unwrap()],
        "same bench",
    );
}

/// The tracefs mount and the instances under it: what a noise run may leave behind.
fn tracing_state() -> (Vec<String>, Vec<String>) {
    let mounts: Vec<String> = std::fs::read_to_string("/proc/mounts")
        .unwrap()
        .lines()
        .filter(|l| l.contains(" tracefs "))
        .map(str::to_string)
        .collect();
    let mut instances: Vec<String> = std::fs::read_dir("/sys/kernel/tracing/instances")
        .map(|rd| {
            rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    instances.sort();
    (mounts, instances)
}

/// Start a 20 s noise run on CPU 0 and wait until its trace instance exists.
fn start_traced_run() -> std::process::Child {
    let child = Command::new(env!("CARGO_BIN_EXE_tame"))
        .args(["bench", "noise", "--cpus", "0", "--duration", "20s"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !tracing_state()
        .1
        .iter()
        .any(|i| i.starts_with("tame-noise-"))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "no trace instance appeared"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child
}

/// Both tests below change the machine's tracing; one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn ctrl_c_reports_what_was_measured_and_restores_tracing() {
    let _machine = tame_testing::serial::module(module_path!());
    if !require(is_root(), "root (tracefs)") {
        return;
    }
    let _turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let before = tracing_state();
    let child = start_traced_run();
    std::thread::sleep(std::time::Duration::from_millis(500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("interrupted"), "{text}");
    assert!(text.contains("attributed"), "{text}");
    assert_eq!(tracing_state(), before);
}

#[test]
fn a_killed_run_is_cleaned_up_by_the_next() {
    let _machine = tame_testing::serial::module(module_path!());
    if !require(is_root(), "root (tracefs)") {
        return;
    }
    let _turn = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let before = tracing_state();
    let mut child = start_traced_run();
    child.kill().unwrap();
    child.wait().unwrap();
    assert_ne!(tracing_state(), before, "SIGKILL leaves the instance");
    let out = tame(&[
        "bench",
        "noise",
        "--cpus",
        "0",
        "--duration",
        "20ms",
        "--no-mlock",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        tracing_state(),
        before,
        "the next run restored what the killed one left"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("note: restored") && text.contains("left by killed process"),
        "the report says so: {text}"
    );
}
