//! `tame bench mem` and `tame bench cache` as a user runs them, briefly and for real (no
//! partition): the result in the common schema, the parity of `bench mem` with the cache
//! sizes lscpu reports (an L1-sized buffer clearly faster than one of 4× the last level),
//! and bad input refused with exit code 2 before anything runs.

use crate::common::{expect_bad_input, have_program, json_of, require, tame};

use serde_json::Value;

/// The data and unified cache sizes lscpu reports (bytes per instance), by name.
fn lscpu_caches() -> Vec<(String, u64)> {
    let out = std::process::Command::new("lscpu")
        .args(["-C=NAME,ONE-SIZE", "-B"])
        .output()
        .expect("lscpu runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .skip(1)
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let name = w.next()?.to_string();
            let bytes = w.next()?.parse().ok()?;
            (!name.ends_with('i')).then_some((name, bytes))
        })
        .collect()
}

fn group<'a>(r: &'a Value, label: &str) -> &'a Value {
    r["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["label"] == label)
        .unwrap_or_else(|| panic!("no group {label:?} in {}", r["groups"]))
}

fn chase_p50_ps(r: &Value, label: &str) -> u64 {
    let m = &group(r, label)["metrics"][0];
    assert_eq!(
        (m["name"].as_str(), m["unit"].as_str()),
        (Some("access"), Some("ps"))
    );
    m["summary"]["p50"].as_u64().unwrap()
}

#[test]
fn an_l1_sized_chase_is_clearly_faster_than_one_of_four_times_the_llc() {
    let _machine = tame_testing::serial::module(module_path!());
    if !require(
        have_program("lscpu"),
        "lscpu (util-linux) for the cache sizes",
    ) {
        return;
    }
    let caches = lscpu_caches();
    let size = |name: &str| caches.iter().find(|c| c.0 == name).map(|c| c.1);
    let (Some(l1), Some(llc)) = (size("L1d"), caches.last().map(|c| c.1)) else {
        panic!("lscpu -C names no L1d or last level: {caches:?}");
    };
    // A buffer half the L1 (at least 16 KiB), and four times the last level (at most 512 MiB).
    let small = (l1 / 2).max(16 << 10);
    let large = (llc * 4).min(512 << 20);
    let sizes = format!("{}K,{}K", small >> 10, large >> 10);
    let r = json_of(&tame(&[
        "bench",
        "mem",
        "--sizes",
        &sizes,
        "--batches",
        "200",
        "--policy",
        "other",
        "--json",
        "-",
    ]));
    assert_eq!(
        (r["bench"].as_str(), r["schema_version"].as_u64()),
        (Some("mem"), Some(1))
    );
    // tame-host read the same caches lscpu reports.
    let read: Vec<u64> = r["settings"]["caches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["size_kib"].as_u64().unwrap() << 10)
        .collect();
    let lscpu: Vec<u64> = caches.iter().map(|c| c.1).collect();
    assert_eq!(read, lscpu, "tame's caches vs lscpu -C");
    let human = |b: u64| tame_bench::mem::sweep::human_size(b);
    let fast = chase_p50_ps(&r, &format!("chase {}", human(small)));
    let slow = chase_p50_ps(&r, &format!("chase {}", human(large)));
    assert!(
        fast * 5 < slow,
        "chase p50: {fast} ps in {} vs {slow} ps in {}: an L1 hit should be far faster than DRAM",
        human(small),
        human(large)
    );
    assert!(
        r["merged"]["derived"]["chase_p50_largest_over_smallest"]
            .as_f64()
            .unwrap()
            > 5.0
    );
    for label in [
        format!("stream {}", human(small)),
        format!("stream {}", human(large)),
    ] {
        assert_eq!(group(&r, &label)["metrics"][0]["summary"]["count"], 200);
    }
}

#[test]
fn the_default_sweep_crosses_the_caches_and_the_table_shows_each_size() {
    let _machine = tame_testing::serial::module(module_path!());
    let out = tame(&[
        "bench",
        "mem",
        "--batches",
        "20",
        "--policy",
        "other",
        "--json",
        "-",
    ]);
    let r = json_of(&out);
    let sizes: Vec<u64> = r["settings"]["sizes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_u64().unwrap())
        .collect();
    let llc = r["settings"]["caches"]
        .as_array()
        .unwrap()
        .last()
        .map(|c| c["size_kib"].as_u64().unwrap() << 10);
    assert_eq!(sizes[0], 16 << 10);
    if let Some(llc) = llc {
        assert!(
            sizes.iter().any(|&s| s > llc),
            "a DRAM point beyond {llc}: {sizes:?}"
        );
    }
    assert_eq!(r["groups"].as_array().unwrap().len(), 2 * sizes.len());
    let table = String::from_utf8_lossy(&out.stderr);
    assert!(table.contains("ns per access (one cache line):"), "{table}");
    assert!(table.contains("16KiB"), "{table}");
}

#[test]
fn mem_refuses_bad_input_with_exit_2() {
    let _machine = tame_testing::serial::module(module_path!());
    for (args, needle) in [
        (
            &["--sizes", "8K"][..],
            "out of range — buffers are 16K..512M",
        ),
        (&["--sizes", "1G"][..], "out of range"),
        (&["--sizes", "lots"][..], "is not a size"),
        (&["--sizes", "17K"][..], "4 KiB pages"),
        (&["--batches", "5"][..], "--batches 5 is out of range"),
        (&["--node", "99"][..], "--node 99"),
        (&["--cpus", "4096"][..], "not online"),
        // What the option was called before: still read.
        (&["--cpu", "4096"][..], "not online"),
        (&["--load", "gpu"][..], "unknown load"),
    ] {
        let mut all = vec!["bench", "mem", "--policy", "other"];
        all.extend_from_slice(args);
        expect_bad_input(&all, needle);
    }
}

#[test]
fn cache_times_alone_and_with_the_competitor() {
    let _machine = tame_testing::serial::module(module_path!());
    let out = tame(&[
        "bench",
        "cache",
        "--iterations",
        "20",
        "--rounds",
        "2",
        "--policy",
        "other",
        "--json",
        "-",
    ]);
    let r = json_of(&out);
    assert_eq!(r["bench"], "cache");
    let labels: Vec<&str> = r["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["alone", "with competitor"]);
    for l in labels {
        let m = &group(&r, l)["metrics"][0];
        assert_eq!(
            (m["name"].as_str(), m["summary"]["count"].as_u64()),
            (Some("iteration"), Some(40))
        );
    }
    assert!(
        group(&r, "with competitor")["counters"]["competitor_lines"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert_eq!(r["merged"]["label"], "slowdown");
    for k in ["slowdown_p50", "slowdown_max"] {
        assert!(r["merged"]["derived"][k].as_f64().unwrap() > 0.0, "{k}");
    }
    // 40 iterations support p50 (20 samples), not p99.9 (10 000): no slowdown of it.
    assert!(r["merged"]["derived"].get("slowdown_p99_9").is_none());
    // No partition: the ways are shared, or cannot be split at all (this VM).
    let state = r["settings"]["cache_ways"]["state"].as_str().unwrap();
    assert!(["unavailable", "shared"].contains(&state), "{state}");
    let table = String::from_utf8_lossy(&out.stderr);
    assert!(table.contains("resctrl: "), "{table}");
    if state == "unavailable" {
        assert!(table.contains("cache ways cannot be split here"), "{table}");
    }
    // The baseline alone.
    let r = json_of(&tame(&[
        "bench",
        "cache",
        "--no-competitor",
        "--iterations",
        "10",
        "--rounds",
        "1",
        "--policy",
        "other",
        "--json",
        "-",
    ]));
    assert_eq!(r["groups"].as_array().unwrap().len(), 1);
    assert!(r["settings"]["competitor"].is_null());
    // --duration sizes the iterations from a multiply timed beforehand.
    let r = json_of(&tame(&[
        "bench",
        "cache",
        "--no-competitor",
        "--duration",
        "300ms",
        "--rounds",
        "1",
        "--policy",
        "other",
        "--json",
        "-",
    ]));
    let n = r["settings"]["iterations"].as_u64().unwrap();
    assert!(n >= 10, "{n}");
    assert_eq!(group(&r, "alone")["metrics"][0]["summary"]["count"], n);
}

#[test]
fn cache_refuses_bad_input_with_exit_2() {
    let _machine = tame_testing::serial::module(module_path!());
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let last = online.trim().rsplit(['-', ',']).next().unwrap().to_string();
    for (args, needle) in [
        (
            vec!["--cpus", last.as_str(), "--competitor-cpu", last.as_str()],
            "is the measured CPU",
        ),
        (
            vec!["--competitor-cpu", "4096"],
            "--competitor-cpu: CPU 4096 is not online",
        ),
        (vec!["--cpu", "4096", "--no-competitor"], "not online"),
        (vec!["--matrix", "4"], "--matrix 4 is out of range"),
        (vec!["--rounds", "0"], "--rounds 0 is out of range"),
        (vec!["--iterations", "1"], "--iterations 1 is out of range"),
        (
            vec!["--no-competitor", "--competitor-cpu", "0"],
            "cannot be used with",
        ),
        (
            vec!["--duration", "1s", "--iterations", "50"],
            "cannot be used with",
        ),
        (vec!["--duration", "10"], "no unit"),
    ] {
        let mut all = vec!["bench", "cache", "--policy", "other"];
        all.extend(args);
        expect_bad_input(&all, needle);
    }
}

/// The option lines of `tame ARGS --help`: each starts with `-` once indented.
fn option_lines(args: &[&str]) -> Vec<String> {
    let mut all = args.to_vec();
    all.push("--help");
    let out = tame(&all);
    assert!(out.status.success(), "{args:?} --help");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.trim_start().starts_with('-'))
        .map(str::to_string)
        .collect()
}

/// The CPU is `--cpus` in every bench (mem, cache and reserve measure on one), as `-p`'s
/// help says; `--cpu` is still read but no longer shown.
#[test]
fn every_bench_names_its_cpu_option_cpus() {
    for bench in ["mem", "cache", "reserve"] {
        let lines = option_lines(&["bench", bench]);
        assert!(
            lines.iter().any(|l| l.contains("--cpus <CPU")),
            "bench {bench}: {lines:#?}"
        );
        assert!(
            !lines.iter().any(|l| l.contains("--cpu <")),
            "bench {bench}: {lines:#?}"
        );
    }
}

/// Every option line of `bench cache --help` carries its description, as the other benches'
/// do (a long value name once pushed every description onto a line of its own).
#[test]
fn cache_help_describes_every_option_on_its_line() {
    let lines = option_lines(&["bench", "cache"]);
    assert!(lines.len() > 10, "{lines:#?}");
    for l in &lines {
        // `  -p, --partition <NAME>  Measure inside …`: the spec, two spaces, the description.
        let described = l
            .trim()
            .split_once("  ")
            .is_some_and(|(_, d)| !d.trim().is_empty());
        assert!(described, "no description on {l:?}");
    }
}
