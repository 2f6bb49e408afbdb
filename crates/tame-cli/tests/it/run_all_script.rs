//! bench/run-all.sh without running a benchmark: its arguments, the load check (the load
//! average read from a file of the test's, TAME_LOADAVG), the record it writes
//! (run-all.json), and the gate it runs on results that have a baseline counterpart —
//! all through `--dry-run`, which starts no benchmark.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A load average file reading `one` for the last minute.
fn loadavg(dir: &Path, one: &str) -> PathBuf {
    let p = dir.join("loadavg");
    std::fs::write(&p, format!("{one} 0.50 0.40 1/200 4242\n")).unwrap();
    p
}

fn run_all(load: &Path, args: &[&str]) -> Output {
    Command::new(repo().join("bench/run-all.sh"))
        .args(args)
        .env("TAME_LOADAVG", load)
        .env("TAME_LOAD_POLL", "1")
        .env("TAME", env!("CARGO_BIN_EXE_tame"))
        .output()
        .expect("bash runs bench/run-all.sh")
}

fn record(out: &Path) -> Value {
    let text = std::fs::read_to_string(out.join("run-all.json")).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("run-all.json is not JSON ({e}): {text}"))
}

fn code(o: &Output) -> Option<i32> {
    o.status.code()
}

fn say(o: &Output) -> String {
    format!(
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn a_quiet_machine_runs_the_chosen_benchmarks_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let load = loadavg(dir.path(), "0.12");
    let out = dir.path().join("out");
    let o = run_all(
        &load,
        &[
            "--dry-run",
            "--quick",
            "--only",
            "ipc,check",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(code(&o), Some(0), "{}", say(&o));
    let v = record(&out);
    assert_eq!(v["schema"], "tame.run-all/1");
    assert_eq!(v["quick"], true);
    assert_eq!(v["dry_run"], true);
    let benches = v["benchmarks"].as_array().unwrap();
    // The canonical order, not the order asked.
    let names: Vec<&str> = benches
        .iter()
        .map(|b| b["bench"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["check", "ipc"]);
    let ipc = &benches[1];
    assert_eq!(ipc["load_before"], 0.12);
    assert_eq!(ipc["load_after"], 0.12);
    assert_eq!(ipc["busy"], false);
    assert_eq!(ipc["refused"], false);
    assert_eq!(ipc["exit"], Value::Null, "a dry run runs nothing");
    let cmd = ipc["command"].as_str().unwrap();
    assert!(cmd.starts_with("bench/ipc.sh --rounds 2"), "{cmd}");
    assert!(
        cmd.ends_with(&format!("--out {}", out.join("ipc").display())),
        "{cmd}"
    );
    assert!(
        !out.join("ipc").exists(),
        "a dry run makes no result directory"
    );
}

#[test]
fn a_busy_machine_is_refused_or_flagged() {
    let dir = tempfile::tempdir().unwrap();
    let load = loadavg(dir.path(), "3.50");
    let out = dir.path().join("out");
    let o = &out.to_str().unwrap();
    let args = [
        "--dry-run",
        "--only",
        "noise,ipc",
        "--max-load",
        "1.5",
        "--wait",
        "0",
        "--out",
        o,
    ];
    let refused = run_all(&load, &args);
    assert_eq!(code(&refused), Some(3), "{}", say(&refused));
    assert!(
        say(&refused).contains("refused — load average 3.50 > 1.5"),
        "{}",
        say(&refused)
    );
    let v = record(&out);
    let benches = v["benchmarks"].as_array().unwrap();
    assert_eq!(benches.len(), 1, "it stops at the first refusal: {v}");
    assert_eq!(benches[0]["bench"], "noise");
    assert_eq!(benches[0]["refused"], true);
    assert_eq!(benches[0]["load_before"], 3.5);

    let flagged = run_all(&load, &[&args[..], &["--flag-busy"]].concat());
    assert_eq!(code(&flagged), Some(0), "{}", say(&flagged));
    let v = record(&out);
    let busy: Vec<&Value> = v["benchmarks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| &b["busy"])
        .collect();
    assert_eq!(busy, [&Value::Bool(true), &Value::Bool(true)]);

    // At the limit is not above it.
    let at = loadavg(dir.path(), "1.5");
    assert_eq!(code(&run_all(&at, &args)), Some(0));
}

#[test]
fn it_waits_for_the_load_to_fall() {
    let dir = tempfile::tempdir().unwrap();
    let load = loadavg(dir.path(), "4.00");
    let out = dir.path().join("out");
    let calm = {
        let dir = dir.path().to_path_buf();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(1500));
            loadavg(&dir, "0.30");
        })
    };
    let o = run_all(
        &load,
        &[
            "--dry-run",
            "--only",
            "check",
            "--max-load",
            "1",
            "--wait",
            "30",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    calm.join().unwrap();
    assert_eq!(code(&o), Some(0), "{}", say(&o));
    assert!(
        say(&o).contains("waiting for the machine to calm"),
        "{}",
        say(&o)
    );
    let v = record(&out);
    let check = &v["benchmarks"][0];
    assert_eq!(check["busy"], false);
    assert_eq!(check["load_before"], 0.3);
    let waited = check["waited_s"].as_u64().unwrap();
    assert!((1..30).contains(&waited), "{waited}");
}

#[test]
fn bad_arguments_are_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let load = loadavg(dir.path(), "0.1");
    let nowhere = dir.path().join("nowhere");
    for (args, needle) in [
        (vec!["--only", "ipc,cycle"], "no benchmark cycle"),
        (vec!["--max-load", "high"], "not a number"),
        (vec!["--wait", "-1"], "not whole seconds"),
        (vec!["--frobnicate"], "unknown argument --frobnicate"),
        (vec!["--out"], "--out needs a value"),
        (
            vec!["--baseline", nowhere.to_str().unwrap()],
            "is not a directory",
        ),
    ] {
        let o = run_all(&load, &[&["--dry-run"], &args[..]].concat());
        assert_eq!(code(&o), Some(2), "{args:?}: {}", say(&o));
        assert!(say(&o).contains(needle), "{args:?}: {}", say(&o));
    }
    let o = run_all(&nowhere, &["--dry-run"]);
    assert_eq!(code(&o), Some(2), "{}", say(&o));
    assert!(
        say(&o).contains("cannot read the load average"),
        "{}",
        say(&o)
    );
}

#[test]
fn results_with_a_baseline_counterpart_are_gated() {
    // Recorded sleep results (tests/fixtures/gate) placed as run-all would place them.
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gate");
    let dir = tempfile::tempdir().unwrap();
    let load = loadavg(dir.path(), "0.1");
    let place = |run: &str, name: &str, from: &str| {
        let d = dir.path().join(run).join("check");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::copy(fixtures.join(from), d.join(name)).unwrap();
    };
    for (i, run) in ["b1", "b2", "b3"].iter().enumerate() {
        place(run, "sleep.json", &format!("baseline/sleep-{}.json", i + 1));
    }
    place("new", "sleep.json", "loaded.json");
    place("new", "extra.json", "loaded.json");
    // Not a result: skipped.
    std::fs::write(
        dir.path().join("new/check/compare.json"),
        "{\"schema\": \"tame.compare/1\"}",
    )
    .unwrap();
    let p = |s: &str| dir.path().join(s).display().to_string();
    let args = [
        "--dry-run",
        "--only",
        "check",
        "--out",
        &p("new"),
        "--baseline",
        &p("b1"),
        "--baseline",
        &p("b2"),
        "--baseline",
        &p("b3"),
    ];
    let o = run_all(&load, &args);
    assert_eq!(code(&o), Some(1), "{}", say(&o));
    let text = say(&o);
    assert!(text.contains("gate check/sleep.json: FAILED"), "{text}");
    assert!(
        text.contains("gate check/extra.json: no baseline counterpart"),
        "{text}"
    );
    assert!(!text.contains("compare.json"), "{text}");
    let verdict: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("new/gate/check/sleep.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(verdict["schema"], "tame.gate/1");
    assert_eq!(verdict["passed"], false);
    let v = record(&dir.path().join("new"));
    assert_eq!(
        v["benchmarks"][0]["results"],
        serde_json::json!(["check/extra.json", "check/sleep.json"])
    );
    // A threshold passed on lets it through.
    let o = run_all(&load, &[&args[..], &["--threshold", "*=60"]].concat());
    assert_eq!(code(&o), Some(0), "{}", say(&o));
    assert!(
        say(&o).contains("gate check/sleep.json: passed"),
        "{}",
        say(&o)
    );
}

#[test]
fn every_bench_script_is_run() {
    let script = std::fs::read_to_string(repo().join("bench/run-all.sh")).unwrap();
    for entry in std::fs::read_dir(repo().join("bench")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().to_string();
        if name.ends_with(".sh") && name != "run-all.sh" {
            assert!(
                script.contains(&format!("bench/{name}")),
                "bench/run-all.sh does not run bench/{name}"
            );
        }
    }
}
