//! The `tame bench` commands as a user runs them: real short runs on this
//! machine, bad input refused with exit code 2 before anything starts, Ctrl-C
//! reporting what was measured and leaving no load behind.

use crate::common::{expect_bad_input, have_program, is_root, json_of, part, require, tame};

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

#[test]
fn bad_input_exits_2_with_what_why_and_what_to_do() {
    let _machine = tame_testing::serial::module(module_path!());
    expect_bad_input(&["bench", "cycle", "--interval", "10us"], "50µs..10s");
    expect_bad_input(&["bench", "cycle", "--interval", "20s"], "50µs..10s");
    expect_bad_input(&["bench", "cycle", "--cpus", "0,4096"], "not online");
    expect_bad_input(
        &["bench", "cycle", "--cpus", "zero"],
        "write CPUs as a list",
    );
    expect_bad_input(
        &["bench", "cycle", "--priority", "120"],
        "out of range for policy fifo (1..99)",
    );
    expect_bad_input(
        &["bench", "cycle", "--policy", "other", "--priority", "5"],
        "no static priority",
    );
    expect_bad_input(&["bench", "cycle", "--duration", "10"], "no unit");
    expect_bad_input(&["bench", "cycle", "--load", "gpu"], "unknown load");
    expect_bad_input(
        &[
            "bench",
            "cycle",
            "--loops",
            "10",
            "--json",
            "/nonexistent-dir/r.json",
        ],
        "cannot write the JSON result file",
    );
    expect_bad_input(
        &["bench", "sleep", "--tasks", "0"],
        "--tasks \"0\": 0 is out of range",
    );
    expect_bad_input(
        &["bench", "reserve", "--backends", "server,edf"],
        "--backends: unknown backend \"edf\" — give any of server, deadline, cgroup",
    );
    expect_bad_input(
        &["bench", "reserve", "--cpus", "4096"],
        "--cpus 4096 is not online",
    );
    expect_bad_input(
        &["bench", "reserve", "--shares", "20%,100%"],
        "--shares: \"100%\" is not between 0 and 100 %",
    );
    expect_bad_input(
        &["bench", "reserve", "--max-load", "0"],
        "--max-load 0 is out of range",
    );
    expect_bad_input(
        &["bench", "reserve", "--shares", "half"],
        "--shares: share \"half\" is not a percentage",
    );
    // A share near 2⁶⁴ ppm once overflowed (exit 101): refused, for every backend.
    for (backend, cpu) in [("server", "1"), ("deadline", ""), ("cgroup", "")] {
        let mut args = vec!["reserve", "--backend", backend];
        if !cpu.is_empty() {
            args.extend(["--cpu", cpu]);
        }
        args.extend([
            "--share",
            "1844674407370955.1614%",
            "--period",
            "40ms",
            "--",
            "true",
        ]);
        expect_bad_input(&args, "share 1844674407370955.16 % is above 100 %");
    }
    expect_bad_input(
        &["reserve-kit", "spawn-at", "1", "true"],
        "not meant to be run by hand",
    );
    expect_bad_input(&["bench", "fwq", "--quantum", "10s"], "quantum");
    expect_bad_input(
        &["bench", "fwq", "--quanta", "0"],
        "--quanta 0 is out of range",
    );
    // --samples is the raw-sample file of every bench; fwq's count is --quanta.
    expect_bad_input(
        &["bench", "fwq", "--samples", "20000"],
        "the number of samples is --quanta N for fwq",
    );
    // clap's own usage errors use exit code 2 as well.
    assert_eq!(
        tame(&["bench", "cycle", "--policy", "batch"]).status.code(),
        Some(2)
    );
}

#[test]
fn tsc_clock_is_refused_where_the_tsc_is_not_invariant() {
    let _machine = tame_testing::serial::module(module_path!());
    let dir = tempfile::tempdir().unwrap();
    let w = |p: &str, s: &str| {
        let path = dir.path().join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, s).unwrap();
    };
    w("proc/cpuinfo", "processor : 0\nflags : fpu tsc\n");
    w("sys/devices/system/cpu/online", "0\n");
    let root = dir.path().to_str().unwrap();
    let out = tame(&[
        "--root", root, "bench", "cycle", "--cpus", "0", "--loops", "5", "--clock", "tsc",
        "--policy", "other",
    ]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("invariant TSC"));
}

#[test]
fn unprivileged_realtime_policy_is_refused_up_front() {
    let _machine = tame_testing::serial::module(module_path!());
    if !require(is_root(), "root to drop privileges")
        || !require(have_program("setpriv"), "setpriv to drop privileges")
    {
        return;
    }
    let out = Command::new("setpriv")
        .args([
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
        ])
        .arg(env!("CARGO_BIN_EXE_tame"))
        .args([
            "bench",
            "cycle",
            "--loops",
            "5",
            "--no-mlock",
            "--policy",
            "fifo",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("CAP_SYS_NICE") && stderr.contains("--policy other"),
        "{stderr}"
    );
}

#[test]
fn deadline_refusal_explains_the_root_domain_rule() {
    let _machine = tame_testing::serial::module(module_path!());
    if !require(is_root(), "root for SCHED_DEADLINE") {
        return;
    }
    let out = tame(&[
        "bench", "cycle", "--cpus", "0", "--loops", "20", "--policy", "deadline",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Inside an exclusive cpuset of its own CPU 0 would be admitted; on a plain machine it is refused.
    match out.status.code() {
        Some(0) => {}
        Some(2) => assert!(stderr.contains("root domain"), "{stderr}"),
        other => panic!("unexpected exit {other:?}: {stderr}"),
    }
}

#[test]
fn cycle_counts_every_period_on_every_cpu() {
    let _machine = tame_testing::serial::module(module_path!());
    let policy = if part(is_root(), "root (SCHED_FIFO)") {
        "fifo"
    } else {
        "other"
    };
    let v = json_of(&tame(&[
        "bench",
        "cycle",
        "--loops",
        "300",
        "--interval",
        "200us",
        "--policy",
        policy,
        "--json",
        "-",
    ]));
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["bench"], "cycle");
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    assert_eq!(v["settings"]["cpus"], online.trim());
    for g in v["groups"].as_array().unwrap() {
        let lat = &g["metrics"][0];
        assert_eq!(lat["name"], "latency");
        assert_eq!(
            lat["summary"]["count"], 300,
            "count = loops, missed ones included"
        );
        assert!(
            lat["summary"]["min"].as_u64().unwrap() > 0,
            "a wakeup cannot precede its deadline"
        );
        assert!(lat["summary"]["p50"].as_u64().unwrap() <= lat["summary"]["max"].as_u64().unwrap());
        let wakeups = &g["metrics"][1];
        assert_eq!(wakeups["name"], "wakeup_latency");
        let missed = g["counters"]["missed_periods"].as_u64().unwrap();
        assert_eq!(wakeups["summary"]["count"].as_u64().unwrap() + missed, 300);
    }
    assert!(v["calibration"]["clock_read_cost_ns"].as_u64().unwrap() > 0);
    assert!(!v["environment"]["kernel_release"]
        .as_str()
        .unwrap()
        .is_empty());
    assert!(v["command_line"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a == "--loops"));
}

#[test]
fn sleep_runs_more_tasks_than_cpus() {
    let _machine = tame_testing::serial::module(module_path!());
    let v = json_of(&tame(&[
        "bench", "sleep", "--tasks", "4", "--loops", "100", "--sleep", "500us", "--policy",
        "other", "--json", "-",
    ]));
    let groups = v["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 4);
    assert_eq!(v["merged"]["metrics"][0]["summary"]["count"], 400);
    assert_eq!(v["merged"]["counters"]["early_wakeups"], 0);
}

#[test]
fn a_tasks_range_sweeps_one_run_per_value_into_one_document() {
    let _machine = tame_testing::serial::module(module_path!());
    let out = tame(&[
        "bench", "sleep", "--tasks", "1..2", "--loops", "50", "--sleep", "500us", "--policy",
        "other", "--json", "-",
    ]);
    let v = json_of(&out);
    assert_eq!(v["schema"], "tame.sweep/1");
    assert_eq!(
        (v["parameter"].as_str(), v["interrupted"].as_bool()),
        (Some("tasks"), Some(false))
    );
    assert_eq!(v["values"], serde_json::json!([1, 2]));
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    for (r, tasks) in results.iter().zip([1u64, 2]) {
        assert_eq!(
            (r["bench"].as_str(), r["settings"]["tasks"].as_u64()),
            (Some("sleep"), Some(tasks))
        );
        assert_eq!(r["groups"].as_array().unwrap().len() as u64, tasks);
        assert_eq!(r["merged"]["metrics"][0]["summary"]["count"], 50 * tasks);
    }
    // The table (stderr with --json -) is the jitter against the number of tasks.
    let table = String::from_utf8_lossy(&out.stderr);
    assert!(
        table.contains("sleep sweep over tasks: jitter of all tasks merged"),
        "{table}"
    );
    expect_bad_input(
        &["bench", "sleep", "--tasks", "4..1"],
        "the range runs backwards",
    );
    expect_bad_input(
        &["bench", "sleep", "--tasks", "1,2", "--histogram", "/tmp/h"],
        "give one --tasks value with them",
    );
    // Every step is validated before the first runs.
    expect_bad_input(
        &["bench", "sleep", "--tasks", "1,2", "--sleep", "20s"],
        "out of range",
    );
}

#[test]
fn fwq_reports_excess_as_time_cycles_and_percent() {
    let _machine = tame_testing::serial::module(module_path!());
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("raw.csv");
    let out = tame(&[
        "bench",
        "fwq",
        "--cpus",
        "0",
        "--quanta",
        "300",
        "--quantum",
        "50us",
        "--policy",
        "other",
        "--json",
        "-",
        "--samples",
        raw.to_str().unwrap(),
    ]);
    let v = json_of(&out);
    let g = &v["groups"][0];
    assert_eq!(g["metrics"][0]["name"], "excess");
    assert_eq!(g["metrics"][0]["summary"]["count"], 300);
    assert_eq!(
        g["metrics"][0]["summary"]["min"], 0,
        "excess is measured from the fastest sample"
    );
    assert!(g["derived"]["max_excess_percent"].as_f64().unwrap() >= 0.0);
    if v["environment"]["invariant_tsc"] == true {
        assert_eq!(g["metrics"][2]["name"], "excess_cycles");
        assert_eq!(g["metrics"][2]["unit"], "cycles");
    }
    let csv = std::fs::read_to_string(raw).unwrap();
    assert_eq!(csv.lines().count(), 301, "header plus one row per sample");
}

#[test]
fn histogram_file_is_in_cyclictest_layout() {
    let _machine = tame_testing::serial::module(module_path!());
    let dir = tempfile::tempdir().unwrap();
    let hist = dir.path().join("h.txt");
    let out = tame(&[
        "bench",
        "cycle",
        "--cpus",
        "0",
        "--loops",
        "50",
        "--policy",
        "other",
        "--histogram",
        hist.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(hist).unwrap();
    assert!(text.starts_with("# Histogram\n000000 "));
    assert!(text.contains("# Total: 000000050"), "{text}");
}

#[test]
fn missed_periods_are_counted_when_a_competitor_blocks_the_cpu() {
    let _machine = tame_testing::serial::module(module_path!());
    if !require(is_root(), "root for SCHED_FIFO") {
        return;
    }
    let child = Command::new(env!("CARGO_BIN_EXE_tame"))
        .args([
            "bench",
            "cycle",
            "--cpus",
            "0",
            "--interval",
            "1ms",
            "--loops",
            "400",
            "--policy",
            "fifo",
            "--priority",
            "10",
            "--json",
            "-",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(150));
    // A higher-priority thread on the same CPU that does not let go for 30 ms.
    std::thread::spawn(|| {
        tame_rt::sched::pin_current_thread(0).unwrap();
        tame_rt::sched::set_current_thread(&tame_rt::sched::SchedSpec::static_priority(
            tame_rt::Policy::Fifo,
            50,
        ))
        .unwrap();
        let end = tame_rt::clock::monotonic_ns() + 30_000_000;
        while tame_rt::clock::monotonic_ns() < end {
            std::hint::spin_loop();
        }
    })
    .join()
    .unwrap();
    let v = json_of(&child.wait_with_output().unwrap());
    let g = &v["groups"][0];
    let missed = g["counters"]["missed_periods"].as_u64().unwrap();
    assert!(
        missed >= 25,
        "a 30 ms block at 1 ms periods misses ≥ 25 deadlines, got {missed}"
    );
    assert_eq!(
        g["metrics"][0]["summary"]["count"], 400,
        "missed periods are still recorded"
    );
    assert!(g["metrics"][0]["summary"]["max"].as_u64().unwrap() >= 25_000_000);
}

/// Process ids whose command is stress-ng.
fn stress_ng_pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
            comm.starts_with("stress-ng").then_some(pid)
        })
        .collect()
}

/// `tame ARGS` interrupted by SIGINT (Ctrl-C) `after` it started, once `during` has looked
/// at the running command; its output.
fn ctrl_c_after(args: &[&str], after: Duration, during: impl FnOnce()) -> std::process::Output {
    let child = Command::new(env!("CARGO_BIN_EXE_tame"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(after);
    during();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    child.wait_with_output().unwrap()
}

#[test]
fn ctrl_c_reports_what_was_measured_stops_the_load_and_exits_130() {
    let _machine = tame_testing::serial::module(module_path!());
    if !require(have_program("stress-ng"), "stress-ng (the load)") {
        return;
    }
    let before = stress_ng_pids();
    let mut during = Vec::new();
    let args = [
        "bench",
        "cycle",
        "--cpus",
        "0",
        "--duration",
        "60s",
        "--policy",
        "other",
        "--load",
        "cpu",
        "--load-cpus",
        "1",
        "--json",
        "-",
    ];
    let out = ctrl_c_after(&args, Duration::from_millis(1500), || {
        during = stress_ng_pids()
            .into_iter()
            .filter(|p| !before.contains(p))
            .collect();
    });
    assert!(!during.is_empty(), "the load was running");
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["interrupted"], true);
    let count = v["groups"][0]["metrics"][0]["summary"]["count"]
        .as_u64()
        .unwrap();
    assert!(
        (100..60_000).contains(&count),
        "partial run measured {count} periods"
    );
    assert_eq!(v["load"]["kinds"][0], "cpu");
    let after: Vec<u32> = stress_ng_pids()
        .into_iter()
        .filter(|p| during.contains(p))
        .collect();
    assert!(after.is_empty(), "stress-ng left running: {after:?}");
}

/// A short `bench ipc` (whose length is not known beforehand, so it gets a bar however short).
const SHORT_IPC: &[&str] = &[
    "bench",
    "ipc",
    "--cpus",
    "0,1",
    "--transports",
    "floor,pipe",
    "--sizes",
    "8",
    "--round-trips",
    "4000",
    "--warmup",
    "10",
    "--messages",
    "4096",
    "--rounds",
    "2",
];

/// The progress bar every bench shares is drawn on a terminal and nowhere else: on a pipe
/// stderr holds no bar (no carriage return, no escape sequence, no `[==>`); under a
/// pseudo-terminal (script(1)) the same run draws one.
#[test]
fn progress_is_drawn_on_a_terminal_and_never_on_a_pipe() {
    let _machine = tame_testing::serial::module(module_path!());
    let piped = tame(SHORT_IPC);
    let stderr = String::from_utf8_lossy(&piped.stderr);
    assert!(piped.status.success(), "{stderr}");
    for mark in ["\r", "\x1b[", "=>", "%"] {
        assert!(!stderr.contains(mark), "{mark:?} on a pipe: {stderr:?}");
    }
    assert!(String::from_utf8_lossy(&piped.stdout).contains("floor/8B"));
    if !require(
        have_program("script"),
        "script (util-linux) for a pseudo-terminal",
    ) {
        return;
    }
    let line = std::iter::once(env!("CARGO_BIN_EXE_tame"))
        .chain(SHORT_IPC.iter().copied())
        .collect::<Vec<_>>()
        .join(" ");
    let on_terminal = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .output()
        .expect("script runs");
    let seen = String::from_utf8_lossy(&on_terminal.stdout);
    assert!(on_terminal.status.success(), "{seen}");
    assert!(
        seen.contains("=>") && seen.contains("%"),
        "no bar on a terminal: {seen:?}"
    );
}

/// Ctrl-C early in a `bench ipc`: exit 130, and what the run never reached is marked
/// `not_measured` in the JSON, with no figures — never a group of zeros.
#[test]
fn an_interrupted_ipc_marks_what_it_never_measured() {
    let _machine = tame_testing::serial::module(module_path!());
    let args = [
        "bench",
        "ipc",
        "--cpus",
        "0,1",
        "--transports",
        "floor,pipe",
        "--sizes",
        "8,56,64,256,1024",
        "--round-trips",
        "20000",
        "--messages",
        "4096",
        "--rounds",
        "1",
        "--json",
        "-",
    ];
    let out = ctrl_c_after(&args, Duration::from_millis(400), || {});
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["interrupted"], true);
    let groups = v["groups"].as_array().unwrap();
    assert_eq!(
        groups.len(),
        10,
        "one group per transport and size asked for"
    );
    let unreached: Vec<&Value> = groups
        .iter()
        .filter(|g| g.get("not_measured").is_some())
        .collect();
    assert!(!unreached.is_empty() && unreached.len() < 10, "{v}");
    for g in groups {
        let counts: Vec<u64> = g["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["summary"]["count"].as_u64().unwrap())
            .collect();
        if g.get("not_measured").is_some() {
            assert!(counts.is_empty(), "{g}");
        } else {
            assert!(counts.iter().all(|&c| c > 0), "{g}");
        }
    }
    assert!(
        stderr.contains("not measured"),
        "the table says so: {stderr}"
    );
}
