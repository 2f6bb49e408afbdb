//! `tame watch` on real programs: cyclictest's own histogram is the judge of the wake
//! latency tame measures for its thread; a loop that misses on purpose, with a
//! real-time competitor started beside it, has every miss counted and the competitor
//! named in a snapshot. Bad input is refused before anything runs.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::common::{expect_bad_input, have_program, is_root, last_cpu, require, tame};

#[test]
fn bad_input_is_refused_before_anything_runs() {
    if !require(
        is_root(),
        "root: as another user every watch is refused for that first",
    ) {
        return;
    }
    expect_bad_input(&["watch"], "say what to watch");
    expect_bad_input(&["watch", "1", "--", "true"], "say what to watch");
    expect_bad_input(
        &["watch", "4294967", "--duration", "1s"],
        "no process 4294967",
    );
    expect_bad_input(
        &["watch", "1", "--period", "0s"],
        "--period must be more than 0",
    );
    expect_bad_input(&["watch", "1", "--period", "often"], "--period");
    expect_bad_input(&["watch", "1", "--window", "2s"], "--window must be");
    expect_bad_input(&["watch", "1", "--cpus", "0"], "--cpus places a program");
    expect_bad_input(&["watch", "1", "--threads", "(unclosed"], "--threads");
    expect_bad_input(&["watch", "1", "--deadline", "5 parsecs"], "--deadline");
}

/// The median of cyclictest's histogram (`--histfile`: one line per µs bucket, latencies
/// beyond it counted as overflows), in ns at the bucket's middle (cyclictest truncates to
/// whole µs), and its count.
fn cyclictest_median(histfile: &Path) -> (u64, u64) {
    let text = std::fs::read_to_string(histfile).unwrap();
    let overflows: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("# Histogram Overflows:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    let buckets: Vec<(u64, u64)> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let mut f = l.split_whitespace();
            let us = f.next().unwrap().parse().unwrap();
            (us, f.next().unwrap().parse().unwrap())
        })
        .collect();
    let total: u64 = buckets.iter().map(|b| b.1).sum::<u64>() + overflows;
    let mut seen = 0;
    for (us, n) in &buckets {
        seen += n;
        if seen * 2 >= total {
            return (us * 1000 + 500, total);
        }
    }
    panic!("the median is beyond the histogram: {text}");
}

/// The watched thread whose inferred period is `period_ns` (cyclictest's measuring
/// thread, not its main one).
fn group_with_period(result: &Value, period_ns: f64) -> &Value {
    result["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| {
            g["derived"]["period_ns"]
                .as_f64()
                .is_some_and(|p| (p - period_ns).abs() < period_ns * 0.05)
        })
        .unwrap_or_else(|| panic!("no thread with period {period_ns}: {result:#}"))
}

fn metric<'a>(group: &'a Value, name: &str) -> &'a Value {
    group["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == name)
        .unwrap()
}

// Each measuring test in a module of its own: tests of one module may run together,
// and two watched programs on one CPU would disturb each other's figures.
mod cyclictest {
    use super::*;

    /// One watched cyclictest run: (tame's median, cyclictest's median, cyclictest's count,
    /// tame's count of activations with a known release) for its measuring thread.
    fn watched_run(loops: u64) -> (u64, u64, u64, u64) {
        let dir = tempfile::tempdir().unwrap();
        let hist = dir.path().join("hist");
        let json = dir.path().join("watch.json");
        let out = tame(&[
            "watch",
            "--json",
            json.to_str().unwrap(),
            "--",
            "cyclictest",
            "-m",
            "-q",
            "-p",
            "90",
            "-i",
            "1000",
            "-a",
            &last_cpu(),
            "-l",
            &loops.to_string(),
            "-h",
            "2000",
            "--histfile",
            hist.to_str().unwrap(),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let result: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let (theirs, count) = cyclictest_median(&hist);
        let group = group_with_period(&result, 1e6);
        let wake = &metric(group, "wake_latency")["summary"];
        (
            wake["p50"].as_u64().unwrap(),
            theirs,
            count,
            wake["count"].as_u64().unwrap(),
        )
    }

    /// Up to three runs: the pure tests of this binary run beside it, and with their
    /// load the caches are cold when cyclictest returns to user space, so its clock read
    /// comes up to 3.5 µs after the return tame sees (0.3–1.3 µs quiet). One run that
    /// agrees shows tame measures what cyclictest measures; every run's count must agree.
    #[test]
    fn cyclictests_own_histogram_agrees_with_the_wake_latency_tame_measures() {
        let _machine = tame_testing::serial::module(module_path!());
        if !require(is_root(), "root to trace the scheduler")
            || !require(have_program("cyclictest"), "cyclictest (rt-tests)")
        {
            return;
        }
        let loops = 3000;
        let mut runs = Vec::new();
        for _ in 0..3 {
            let (ours, theirs, count, measured) = watched_run(loops);
            assert_eq!(count, loops);
            assert!(
                measured.abs_diff(loops) * 100 <= loops,
                "activations with a known release: tame {measured}, cyclictest {loops}"
            );
            let tolerance = 2_000.max(theirs / 10);
            runs.push(format!(
                "tame {ours} ns, cyclictest {theirs} ns (±{tolerance})"
            ));
            if ours.abs_diff(theirs) <= tolerance {
                return;
            }
        }
        panic!("median wake latency never agreed: {runs:?}");
    }
}

fn build(dir: &Path, name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/watch/missloop.c");
    let bin = dir.join(name);
    let status = Command::new("gcc")
        .args(["-O1", "-o"])
        .arg(&bin)
        .arg(&src)
        .status()
        .expect("run gcc");
    assert!(status.success(), "gcc cannot build {}", src.display());
    bin
}

/// Kills the competitor however the test ends.
struct Competitor(std::process::Child);

impl Drop for Competitor {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

mod misses {
    use super::*;

    #[test]
    fn every_miss_is_counted_and_a_competitor_is_named_in_a_snapshot() {
        let _machine = tame_testing::serial::module(module_path!());
        if !require(is_root(), "root to trace the scheduler")
            || !require(have_program("gcc"), "gcc to build the test programs")
            || !require(have_program("chrt"), "chrt (util-linux)")
        {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let looped = build(dir.path(), "missloop");
        let rival = build(dir.path(), "competitor");
        let cpu = last_cpu();
        // 150 activations of 20 ms: 300 µs of work, 8 ms every 50th (a miss of the 6 ms
        // deadline by the loop itself); a FIFO 60 competitor on the same CPU works 14 ms
        // every 170 ms, missing the loop's deadline where it overlaps a release.
        let _rival = Competitor(
            Command::new("chrt")
                .args(["-f", "60", "taskset", "-c", &cpu])
                .arg(&rival)
                .args(["170000", "14000", "0", "0", "40", "1000000"])
                .stdout(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let snaps = dir.path().join("snaps");
        let json = dir.path().join("watch.json");
        let out = tame(&[
            "watch",
            "--period",
            "20ms",
            "--deadline",
            "6ms",
            "--snapshot-on-miss",
            snaps.to_str().unwrap(),
            "--snapshots",
            "100",
            "--json",
            json.to_str().unwrap(),
            "--",
            "chrt",
            "-f",
            "50",
            "taskset",
            "-c",
            &cpu,
            looped.to_str().unwrap(),
            "20000",
            "300",
            "8000",
            "50",
            "150",
            "6000",
        ]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let own: u64 = stdout
            .lines()
            .find_map(|l| l.strip_prefix("misses "))
            .unwrap_or_else(|| panic!("the loop prints its misses: {stdout}"))
            .trim()
            .parse()
            .unwrap();
        assert!(own >= 3, "the loop misses at least every 50th: {stdout}");
        let result: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let thread = &result["watch"]["threads"][0];
        assert_eq!(thread["comm"], "missloop", "{result:#}");
        // Every miss the loop saw is one tame counted — or, where the loop overran into
        // its next period (it then never slept: one activation for tame), a missed period.
        // The loop counts its timer-released activations only: before its first sleep, tame
        // also saw the exec chain (chrt, taskset), released by wakeups, which under load can
        // take longer than the deadline. Each miss has a snapshot that says what released it.
        let misses = thread["misses"].as_u64().unwrap();
        let missed_periods = thread["missed_periods"].as_u64().unwrap();
        let snapshots = result["watch"]["snapshots"].as_array().unwrap();
        assert_eq!(snapshots.len() as u64, misses, "one snapshot per miss");
        let timer_misses = snapshots
            .iter()
            .filter(|s| s["released_by"] == "timer")
            .count() as u64;
        assert!(
            (timer_misses..=timer_misses + missed_periods).contains(&own),
            "the loop saw {own} misses, tame {timer_misses} of timer-released activations ({misses} in all) and {missed_periods} missed periods: {stdout}"
        );
        for i in 1..=misses {
            assert!(snaps.join(format!("miss-{i}.json")).exists());
            assert!(snaps.join(format!("miss-{i}.svg")).exists());
        }
        // The competitor: by name and priority (kernel 39 = FIFO 60), as the main cause.
        let named = snapshots.iter().any(|s| {
            let top = &s["causes"][0];
            top["source"]
                .as_str()
                .is_some_and(|src| src.starts_with("competitor/"))
                && top["prio"] == 39
        });
        assert!(
            named,
            "a snapshot blames the competitor: {}",
            serde_json::to_string_pretty(snapshots).unwrap()
        );
        assert!(stdout.contains("competitor/"), "{stdout}");
        assert!(stdout.contains("(real-time 60)"), "{stdout}");
    }
}

mod partition {
    use super::*;
    use crate::common::partitioned::exclusive;
    use crate::common::{isolate_last_cpu, json_of, Killed};

    /// `tame watch -p NAME`: every thread in the partition's cgroup, here cyclictest's,
    /// started there by `tame run -p`.
    #[test]
    fn every_thread_in_a_partition_is_watched() {
        let _machine = tame_testing::serial::module(module_path!());
        let _one = exclusive();
        if !require(have_program("cyclictest"), "cyclictest (rt-tests)") {
            return;
        }
        let Some(isolated) = isolate_last_cpu("wrt") else {
            return;
        };
        let _program = Killed(
            Command::new(env!("CARGO_BIN_EXE_tame"))
                .args(["run", "-p", "wrt", "--journal-dir", &isolated.journal, "--"])
                // It ends by itself: a SIGKILL of tame run would leave it running.
                .args([
                    "cyclictest",
                    "-m",
                    "-q",
                    "-p",
                    "80",
                    "-i",
                    "1000",
                    "-l",
                    "3000",
                ])
                .stdout(Stdio::null())
                .spawn()
                .unwrap(),
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
        let out = tame(&[
            "watch",
            "-p",
            "wrt",
            "--journal-dir",
            &isolated.journal,
            "--duration",
            "1500ms",
            "--json",
            "-",
        ]);
        let result = json_of(&out);
        assert_eq!(result["partition"], "wrt");
        assert!(
            !result["settings"]["cpus"].as_str().unwrap_or("").is_empty(),
            "the traced CPUs are recorded: {}",
            result["settings"]
        );
        let group = group_with_period(&result, 1e6);
        let n = metric(group, "wake_latency")["summary"]["count"]
            .as_u64()
            .unwrap();
        assert!(
            (1_000..=1_600).contains(&n),
            "{n} activations in 1.5 s at 1 kHz"
        );
    }
}
