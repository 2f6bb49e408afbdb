//! `tame bench mem -p` and `tame bench cache -p` against a partition applied for real: the
//! measuring thread runs on the partition's CPU, the load and the cache competitor stay on
//! the system partition, and the result says which cache ways the partition had. A test
//! binary of its own: applying a partition moves every task on the machine (the lead runs
//! it; see COMMON.md).

use crate::common::{have_program, isolate_last_cpu, json_of, require, tame};

use std::process::Command;

fn stress_ng_running() -> bool {
    Command::new("pgrep")
        .args(["-x", "stress-ng"])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn mem_and_cache_measure_inside_an_applied_partition() {
    let _machine = tame_testing::serial::module(module_path!());
    if !require(have_program("stress-ng"), "stress-ng for the vm,cache load") {
        return;
    }
    let Some(isolated) = isolate_last_cpu("mrt") else {
        return;
    };
    let (jd, cpu) = (isolated.journal.as_str(), isolated.cpu.clone());
    let system_last = cpu.parse::<u32>().unwrap() - 1;

    // mem -p under memory-heavy load on the system partition.
    let r = json_of(&tame(&[
        "bench",
        "mem",
        "-p",
        "mrt",
        "--journal-dir",
        jd,
        "--sizes",
        "16K,64M",
        "--batches",
        "100",
        "--load",
        "vm,cache",
        "--json",
        "-",
    ]));
    assert_eq!(r["partition"], "mrt");
    assert_eq!(r["settings"]["cpus"].as_str(), Some(cpu.as_str()));
    assert!(r["groups"].as_array().unwrap().iter().all(|g| g["cpu"]
        .as_u64()
        .map(|c| c.to_string())
        .as_deref()
        == Some(cpu.as_str())));
    let system = if system_last == 0 {
        "0".to_string()
    } else {
        format!("0-{system_last}")
    };
    assert_eq!(r["load"]["cpus"].as_str(), Some(system.as_str()));
    assert_eq!(r["groups"].as_array().unwrap().len(), 4);
    assert!(!stress_ng_running(), "the load is gone after the run");

    // cache -p: the work in the partition, the competitor on the system partition.
    let r = json_of(&tame(&[
        "bench",
        "cache",
        "-p",
        "mrt",
        "--journal-dir",
        jd,
        "--iterations",
        "50",
        "--rounds",
        "2",
        "--json",
        "-",
    ]));
    assert_eq!(r["partition"], "mrt");
    assert_eq!(r["settings"]["cpus"].as_str(), Some(cpu.as_str()));
    let competitor = r["settings"]["competitor"]["cpu"].as_u64().unwrap();
    assert!(
        competitor <= u64::from(system_last),
        "competitor on the system partition: {competitor}"
    );
    assert!(
        r["groups"][1]["counters"]["competitor_lines"]
            .as_u64()
            .unwrap()
            > 0
    );
    // No cache_ways in the spec: not requested where resctrl exists, impossible here without.
    let state = r["settings"]["cache_ways"]["state"].as_str().unwrap();
    assert!(["unavailable", "not-requested"].contains(&state), "{state}");

    // The measured CPU must be the partition's.
    let o = tame(&[
        "bench",
        "mem",
        "-p",
        "mrt",
        "--journal-dir",
        jd,
        "--cpus",
        "0",
        "--sizes",
        "16K",
    ]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("is not in partition \"mrt\""));
}
