//! `tame bench reserve` for real (root, stress-ng): the quick study of the cgroup backend
//! as one result of the common schema, drawn by `tame report`; Ctrl-C ends it with what
//! was measured; nothing is left behind (work kernels, stress-ng, cgroups, scratch files).

use crate::common::{have_program, is_root, require, tame, Killed};

use std::io::{BufRead, Read};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

/// What the study may leave behind if it were wrong: its processes, cgroups, scratch dirs.
fn leftovers() -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmd.contains("reserve-kit") || cmd.contains("tame-reserve-bench-") {
            found.push(format!("process {pid}: {cmd}"));
        }
    }
    for dir in [
        "/sys/fs/cgroup/cpu",
        "/sys/fs/cgroup/cpu,cpuacct",
        "/sys/fs/cgroup",
    ] {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("tame-reserve-") {
                found.push(format!("cgroup {dir}/{name}"));
            }
        }
    }
    for e in std::fs::read_dir("/var/tmp")
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("tame-reserve-bench-") {
            found.push(format!("scratch /var/tmp/{name}"));
        }
    }
    found
}

/// One study at a time: two would share the client's CPU and each other's leftovers.
static ONE_STUDY: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The test's turn and what was there before it, once root and stress-ng are there.
fn begin() -> Option<(std::sync::MutexGuard<'static, ()>, Vec<String>)> {
    if !(require(is_root(), "root (reservations, real-time policies)")
        && require(have_program("stress-ng"), "stress-ng (the background load)"))
    {
        return None;
    }
    let one = ONE_STUDY.lock().unwrap_or_else(|e| e.into_inner());
    Some((one, leftovers()))
}

#[test]
fn the_quick_cgroup_study_is_a_result_report_draws() {
    let _machine = tame_testing::serial::module(module_path!());
    let Some((_one, before)) = begin() else {
        return;
    };
    let out = tame(&[
        "bench",
        "reserve",
        "--quick",
        "--backends",
        "cgroup",
        // One overhead point of --quick's three (20, 50, 80 %): each costs 4 s; and
        // background load up to 2 processes, not 10: 0.6 s per step and series.
        "--shares",
        "50%",
        "--max-load",
        "2",
        "--json",
        "-",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON result");
    assert_eq!(
        (v["bench"].as_str(), v["schema_version"].as_u64()),
        (Some("reserve"), Some(1))
    );
    assert_eq!(v["settings"]["backends"], serde_json::json!(["cgroup"]));
    for load in ["none", "cpu", "io"] {
        let g = v["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["label"] == format!("cgroup/{load}"))
            .unwrap_or_else(|| panic!("a group for the {load} series"));
        let windows = g["counters"]["windows"].as_u64().unwrap();
        // --quick: 20 windows unloaded, 3 per step of 0, 1 and 2 background processes.
        let expected = if load == "none" { 20 } else { 3 * 3 };
        assert_eq!(windows, expected, "{load}: {windows} windows");
        assert_eq!(g["metrics"][0]["name"], "client_share");
        assert_eq!(g["metrics"][0]["summary"]["count"].as_u64(), Some(windows));
        assert!(g.get("timeline").is_some(), "{load}: the windows over time");
        let rates = v["reserve"]["stability"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["load"] == load)
            .unwrap()["window_rates"]
            .as_array()
            .unwrap()
            .len() as u64;
        assert_eq!(rates, windows);
    }
    let overhead = v["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["label"] == "cgroup/overhead")
        .expect("the overhead points");
    assert_eq!(v["settings"]["shares_ppm"], serde_json::json!([500_000]));
    assert_eq!(v["settings"]["max_load"], 2);
    assert!(
        overhead["derived"]["o_i 50%"].is_f64(),
        "O_I at 50 %: {}",
        overhead["derived"]
    );
    assert!(v["merged"]["derived"]["g_before"].as_f64().unwrap() > 0.0);
    // The tables went to stderr beside the JSON.
    assert!(String::from_utf8_lossy(&out.stderr).contains("Table 1 (cgroup): overhead"));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("reserve.json");
    std::fs::write(&file, &out.stdout).unwrap();
    let page = dir.path().join("page");
    let r = tame(&[
        "report",
        file.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(page.join("reserve-shares-over-time.svg").is_file());
    assert_eq!(leftovers(), before, "the study leaves nothing behind");
}

#[test]
fn ctrl_c_ends_the_study_with_what_was_measured_and_leaves_nothing() {
    let _machine = tame_testing::serial::module(module_path!());
    let Some((_one, before)) = begin() else {
        return;
    };
    let mut child = Killed(
        Command::new(env!("CARGO_BIN_EXE_tame"))
            .args([
                "bench",
                "reserve",
                "--quick",
                "--backends",
                "cgroup",
                "--json",
                "-",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // Past G and the floor (its progress line), into the overhead points.
    let mut progress = std::io::BufReader::new(child.0.stderr.take().unwrap());
    let mut stderr = Vec::new();
    while !String::from_utf8_lossy(&stderr).contains("S floor") {
        let read = progress.read_until(b'\n', &mut stderr).unwrap();
        assert!(
            read > 0,
            "the study ended before its floor: {}",
            String::from_utf8_lossy(&stderr)
        );
    }
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.0.id() as libc::pid_t, libc::SIGINT) };
    // Its output is a few kB: read to the end (the child's exit), then its status.
    let mut stdout = Vec::new();
    child
        .0
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut stdout)
        .unwrap();
    progress.read_to_end(&mut stderr).unwrap();
    let status = child.0.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&stderr)
    );
    let out = std::process::Output {
        status,
        stdout,
        stderr,
    };
    let v: Value = serde_json::from_slice(&out.stdout).expect("what was measured, as JSON");
    assert_eq!(v["interrupted"], true);
    assert_eq!(v["reserve"]["interrupted"], true);
    assert_eq!(
        v["settings"]["shares_ppm"],
        serde_json::json!([200_000, 500_000, 800_000]),
        "--quick's shares"
    );
    assert!(v["merged"]["derived"]["g_before"].as_f64().unwrap() > 0.0);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(leftovers(), before, "Ctrl-C leaves nothing behind");
}
