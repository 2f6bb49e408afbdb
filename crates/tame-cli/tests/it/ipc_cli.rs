//! `tame ipc ls/rm` on a fixture tree (`--root`) and on the real /dev/shm.

use crate::common::{require, tame};

use std::path::Path;
use std::process::Output;

use serde_json::Value;
use tame_ipc::layout::{pack_owner, Layout};
use tame_ipc::{ChannelSpec, Ring};

fn json_of(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "tame failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

fn write_segment(root: &Path, name: &str, spec: ChannelSpec, creator: (u32, u64), peers: [u64; 2]) {
    let layout = Layout::compute(spec).unwrap();
    let mut header = layout.header(creator.0, creator.1, 0);
    header.peers = peers;
    // Recorded in the fixture's pid namespace (see write_proc_namespace).
    let header = header.with_pid_ns(FIXTURE_PID_NS);
    let mut bytes = vec![0u8; layout.segment_size as usize];
    bytes[..128].copy_from_slice(header.as_bytes());
    std::fs::write(root.join("dev/shm").join(format!("tame.{name}")), bytes).unwrap();
}

/// Pids no process can have (PID_MAX_LIMIT is 2^22).
const DEAD_CREATOR: u32 = 1_000_000_600;
const DEAD_PEER: u32 = 1_000_000_700;

/// The pid namespace the fixture /proc shows (`self/ns/pid`, as /proc has it); pids are
/// judged dead only when recorded in it.
const FIXTURE_PID_NS: u32 = 4026531836;

fn write_proc_namespace(root: &Path) {
    std::fs::create_dir_all(root.join("proc/self/ns")).unwrap();
    std::os::unix::fs::symlink(
        format!("pid:[{FIXTURE_PID_NS}]"),
        root.join("proc/self/ns/pid"),
    )
    .unwrap();
}

fn write_proc(root: &Path, pid: u32, start: u64) {
    let dir = root.join("proc").join(pid.to_string());
    std::fs::create_dir_all(&dir).unwrap();
    let stat = format!("{pid} (rt task) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 {start} 0 0\n");
    std::fs::write(dir.join("stat"), stat).unwrap();
}

#[test]
fn ls_and_rm_on_a_fixture_tree() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("dev/shm")).unwrap();
    // pid 500 is alive in the fixture; the other two are not, and are above PID_MAX_LIMIT
    // (2^22) so that no live process of this machine has them either (liveness asks kill(2)).
    write_proc_namespace(root.path());
    write_proc(root.path(), 500, 4242);
    write_segment(
        root.path(),
        "live",
        ChannelSpec::ring::<u64>(64),
        (500, 4242),
        [pack_owner(500, 4242), 0],
    );
    write_segment(
        root.path(),
        "old",
        ChannelSpec::register::<u32>(),
        (DEAD_CREATOR, 1),
        [pack_owner(DEAD_PEER, 2), 0],
    );
    std::fs::write(root.path().join("dev/shm/tame.junk"), vec![1u8; 4096]).unwrap();
    let root_arg = root.path().to_str().unwrap();

    let listing = json_of(&tame(&["--root", root_arg, "ipc", "ls", "--json"]));
    assert_eq!(listing["schema"], "tame.ipc.ls/1");
    let segments = listing["segments"].as_array().unwrap();
    assert_eq!(segments.len(), 3);
    let junk = &segments[0];
    assert_eq!(
        (junk["name"].as_str(), junk["state"].as_str()),
        (Some("junk"), Some("invalid"))
    );
    let live = &segments[1];
    assert_eq!(live["layout"]["kind"], "ring");
    assert_eq!(live["layout"]["capacity"], 64);
    assert_eq!(live["layout"]["version"], "2.0");
    assert_eq!(live["creator"]["liveness"], "alive");
    assert_eq!(live["peers"][0]["role"], "producer");
    assert_eq!(live["stale"], false);
    let old = &segments[2];
    assert_eq!(old["creator"]["liveness"], "dead");
    assert_eq!(old["peers"][0]["liveness"], "dead");
    assert_eq!(old["stale"], true);

    let human = tame(&["--root", root_arg, "ipc", "ls"]);
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(
        text.contains("64 x 8 B") && text.contains("[stale]") && text.contains("invalid:"),
        "{text}"
    );

    // A segment in use is not removed without --force; bad names are bad input.
    let out = tame(&["--root", root_arg, "ipc", "rm", "live"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("in use"));
    assert_eq!(
        tame(&["--root", root_arg, "ipc", "rm", "a/b"])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(
        tame(&["--root", root_arg, "ipc", "rm", "missing"])
            .status
            .code(),
        Some(2)
    );
    assert!(root.path().join("dev/shm/tame.live").exists());

    let out = tame(&["--root", root_arg, "ipc", "rm", "--stale"]);
    assert!(out.status.success());
    assert!(!root.path().join("dev/shm/tame.old").exists());
    assert!(root.path().join("dev/shm/tame.live").exists());
    assert!(
        root.path().join("dev/shm/tame.junk").exists(),
        "invalid segments are never stale"
    );

    // The file's name in /dev/shm names the segment too.
    assert!(tame(&["--root", root_arg, "ipc", "rm", "tame.junk"])
        .status
        .success());
    assert!(tame(&["--root", root_arg, "ipc", "rm", "--force", "live"])
        .status
        .success());
    assert_eq!(
        std::fs::read_dir(root.path().join("dev/shm"))
            .unwrap()
            .count(),
        0
    );
}

/// Unlinks the real segment even if the test fails.
struct Unlink(String);

impl Drop for Unlink {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(format!("/dev/shm/tame.{}", self.0));
    }
}

#[test]
fn ls_shows_a_real_segment_and_its_live_owner() {
    let name = format!("test-{}-cli", std::process::id());
    let _guard = Unlink(name.clone());
    let ring = Ring::create(&name, ChannelSpec::ring::<[u8; 64]>(256)).unwrap();
    let _producer = ring.producer::<[u8; 64]>().unwrap();
    let listing = json_of(&tame(&["ipc", "ls", "--json"]));
    let ours = listing["segments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name.as_str())
        .expect("our segment is listed");
    assert_eq!(ours["mode"], "0600");
    assert_eq!(ours["layout"]["elem_size"], 64);
    assert_eq!(ours["creator"]["pid"], std::process::id());
    assert_eq!(ours["creator"]["liveness"], "alive");
    assert_eq!(ours["peers"][0]["liveness"], "alive");
    let out = tame(&["ipc", "rm", &name]);
    assert_eq!(out.status.code(), Some(2), "a live segment needs --force");
    assert!(tame(&["ipc", "rm", "--force", &name]).status.success());
    assert!(!Path::new(&format!("/dev/shm/tame.{name}")).exists());
}

#[test]
fn bench_ipc_refuses_bad_input_before_measuring() {
    // Needs two CPUs of its own: a partition applied by another module would confine it.
    let _machine = tame_testing::serial::module(module_path!());
    for (args, needle) in [
        (&["--cpus", "0,0"][..], "two different"),
        (&["--cpus", "0"][..], "two CPU numbers"),
        (&["--cpus", "0,4095"][..], "not online"),
        (&["--sizes", "16"][..], "supported size"),
        (&["--transports", "carrier-pigeon"][..], "unknown transport"),
        (&["--ring-capacity", "1000"][..], "power of two"),
        (&["--rounds", "0"][..], "--rounds"),
        (&["--load-cpus", "0"][..], "--load-cpus without --load"),
        (&["--load", "gpu"][..], "unknown load \"gpu\""),
        (
            &["--samples", "/nonexistent/dir/samples.csv"][..],
            "cannot write the samples file",
        ),
        (
            &["-p", "rt", "--journal-dir", "/nonexistent/tame-journal"][..],
            "no partitions are applied",
        ),
    ] {
        let mut all = vec!["bench", "ipc"];
        all.extend_from_slice(args);
        let out = tame(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

#[test]
fn bench_ipc_short_run_writes_a_versioned_result() {
    // Needs two CPUs of its own: a partition applied by another module would confine it.
    let _machine = tame_testing::serial::module(module_path!());
    let allowed = tame_rt_allowed_cpus();
    if !require(allowed.len() >= 2, "two CPUs this process may run on") {
        return;
    }
    let cpus = format!("{},{}", allowed[0], allowed[1]);
    let dir = tempfile::tempdir().unwrap();
    let samples = dir.path().join("samples.csv");
    let out = tame(&[
        "bench",
        "ipc",
        "--cpus",
        &cpus,
        "--transports",
        "floor,tame-ring,pipe",
        "--sizes",
        "8",
        "--round-trips",
        "500",
        "--warmup",
        "50",
        "--messages",
        "2048",
        "--rounds",
        "1",
        "--samples",
        samples.to_str().unwrap(),
        "--json",
        "-",
    ]);
    let result = json_of(&out);
    assert_eq!(result["bench"], "ipc");
    assert_eq!(result["schema_version"], 3);
    assert_eq!(result["settings"]["sides"]["timing"]["cpu"], allowed[0]);
    assert_eq!(result["settings"]["sides"]["echo"]["in_partition"], false);
    assert_eq!(result["partition"], Value::Null);
    let labels: Vec<&str> = result["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["floor/8B", "tame-ring/8B", "pipe/8B"]);
    assert_eq!(result["groups"][1]["metrics"][0]["summary"]["count"], 500);
    // The merged group holds ratios only, no verdicts.
    assert_eq!(result["merged"]["label"], "ratios");
    assert_eq!(result["merged"]["counters"], serde_json::json!({}));
    assert!(
        result["merged"]["derived"]["latency_tame-ring_8B_over_floor"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    // The table went to stderr because the JSON took stdout.
    let table = String::from_utf8_lossy(&out.stderr);
    assert!(table.contains("tame-ring/8B"), "{table}");
    assert!(
        table.contains("\nratios\n") && !table.contains("goal"),
        "{table}"
    );
    // One CSV row per measured round trip, timed on the timing CPU.
    let csv = std::fs::read_to_string(&samples).unwrap();
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("timestamp_ns,cpu,value_ns,group"));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 3 * 500);
    assert!(rows.iter().all(|r| r[1] == allowed[0].to_string()));
    assert_eq!(rows.iter().filter(|r| r[3] == "pipe/8B").count(), 500);
}

/// The CPUs this test process may run on (its affinity mask).
fn tame_rt_allowed_cpus() -> Vec<u32> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_string();
    let mut cpus = Vec::new();
    for part in list.split(',') {
        match part.split_once('-') {
            Some((a, b)) => cpus.extend(a.parse::<u32>().unwrap()..=b.parse::<u32>().unwrap()),
            None => cpus.push(part.parse().unwrap()),
        }
    }
    cpus
}
