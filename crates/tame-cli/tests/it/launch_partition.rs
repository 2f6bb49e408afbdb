//! `tame run -p` and `tame detach -p` against a partition applied for real.
//! In a test binary of its own: applying a partition moves every task on the
//! machine, so it must not run beside other tests.

use crate::common::{have_program, isolate_last_cpu, partitioned, require, tame, Killed};
use crate::serve_metrics::{serve_until_listening, stop_server};

use std::process::Command;

#[test]
fn run_and_detach_into_an_applied_partition() {
    let _machine = tame_testing::serial::module(module_path!());
    // Tests of one module run side by side: one partition applied at a time.
    let _one = partitioned::exclusive();
    let Some(isolated) = isolate_last_cpu("lrt") else {
        return;
    };
    let (dir, jd, cpu) = (
        &isolated.dir,
        isolated.journal.as_str(),
        isolated.cpu.clone(),
    );

    // run -p: the program starts in the partition's cpuset, on its CPU.
    let out = dir.path().join("placed");
    let script = format!(
        "cat /proc/self/cpuset > {0}; grep Cpus_allowed_list /proc/self/status >> {0}",
        out.display()
    );
    let o = tame(&[
        "run",
        "-p",
        "lrt",
        "--journal-dir",
        jd,
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.starts_with("/tame-lrt\n"), "{text}");
    assert!(text.trim_end().ends_with(&format!("\t{cpu}")), "{text}");

    // detach -p moves a running program into the partition; attach puts it back into tame-system.
    let sleeper = Killed(Command::new("sleep").arg("30").spawn().unwrap());
    let pid = sleeper.0.id();
    let pid_s = pid.to_string();
    let cpuset_before = std::fs::read_to_string(format!("/proc/{pid}/cpuset")).unwrap();
    let o = tame(&["detach", &pid_s, "-p", "lrt", "--journal-dir", jd]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        std::fs::read_to_string(format!("/proc/{pid}/cpuset")).unwrap(),
        "/tame-lrt\n"
    );
    let o = tame(&["attach", &pid_s, "--journal-dir", jd]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        std::fs::read_to_string(format!("/proc/{pid}/cpuset")).unwrap(),
        cpuset_before
    );
    // bench -p: the measuring thread runs in the partition on its CPU, while tame itself
    // (and a load) stays outside, where it cannot be pinned to that CPU.
    let o = tame(&[
        "bench",
        "cycle",
        "-p",
        "lrt",
        "--journal-dir",
        jd,
        "--duration",
        "300ms",
        "--json",
        "-",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let result: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(result["partition"], "lrt");
    assert_eq!(result["groups"][0]["cpu"].to_string(), cpu);
    assert_eq!(result["merged"]["metrics"][0]["summary"]["count"], 300);
    let o = tame(&[
        "bench",
        "noise",
        "-p",
        "lrt",
        "--journal-dir",
        jd,
        "--duration",
        "200ms",
        "--no-trace",
        "--json",
        "-",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let result: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(result["partition"], "lrt");
    assert_eq!(result["noise"]["cpus"][0]["cpu"].to_string(), cpu);
    bench_ipc_in_a_partition_of_one_cpu(jd, &cpu);
    // A CPU outside the partition is bad input, before anything runs.
    let o = tame(&[
        "bench",
        "cycle",
        "-p",
        "lrt",
        "--journal-dir",
        jd,
        "--cpus",
        "0",
        "--loops",
        "1",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("CPU 0 is not in partition \"lrt\""),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // The partition names no user: another user may not use it, and is told which rule refused.
    if require(have_program("setpriv"), "setpriv to try as another user") {
        let o = Command::new("setpriv")
            .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_tame"))
            .args(["run", "-p", "lrt", "--journal-dir", jd, "--", "true"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(
            err.contains("may use only partitions whose spec allows its user or group"),
            "{err}"
        );
    }
}

/// `bench ipc -p` on a partition of one CPU: the timing thread joins it on that CPU, the
/// echo thread runs on the system partition's first CPU, outside it, and a load goes to the
/// system partition's other CPUs (all of them when there are none other). A timing CPU
/// outside the partition is bad input.
fn bench_ipc_in_a_partition_of_one_cpu(jd: &str, cpu: &str) {
    let last: u32 = cpu.parse().unwrap();
    let load = have_program("stress-ng");
    let mut args = vec![
        "bench",
        "ipc",
        "-p",
        "lrt",
        "--journal-dir",
        jd,
        "--transports",
        "floor,tame-ring,pipe",
        "--sizes",
        "8",
        "--round-trips",
        "2000",
        "--messages",
        "4096",
        "--rounds",
        "2",
        "--json",
        "-",
    ];
    if load {
        args.extend(["--load", "cpu"]);
    }
    let o = tame(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let result: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(result["partition"], "lrt");
    let sides = &result["settings"]["sides"];
    assert_eq!(sides["timing"]["cpu"].to_string(), cpu);
    assert_eq!(sides["timing"]["in_partition"], true);
    assert_eq!(sides["echo"]["cpu"], 0);
    assert_eq!(sides["echo"]["in_partition"], false);
    assert_eq!(result["groups"][0]["cpu"].to_string(), cpu);
    assert_eq!(result["groups"][1]["metrics"][0]["summary"]["count"], 2000);
    assert_eq!(result["merged"]["label"], "ratios");
    if load {
        // The system partition is 0..last-1; the echo thread has CPU 0.
        let want = match last {
            1 => "0".to_string(),
            2 => "1".to_string(),
            _ => format!("1-{}", last - 1),
        };
        assert_eq!(result["load"]["cpus"], want.as_str());
        assert!(result["load"]["throughput"].is_array());
    }
    // The timing threads have ended: nothing is left in the partition's cgroup.
    let tasks = std::fs::read_to_string("/sys/fs/cgroup/cpuset/tame-lrt/tasks").unwrap();
    assert_eq!(tasks, "", "left in the partition");
    // A timing CPU outside the partition is bad input, before anything runs.
    let o = tame(&[
        "bench",
        "ipc",
        "-p",
        "lrt",
        "--journal-dir",
        jd,
        "--cpus",
        "0,1",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the timing CPU 0 is not in partition \"lrt\""),
        "{err}"
    );
}

/// The reservation server serves a partition's CPU, the flow docs/reserve.md shows: started
/// after tame apply it runs in the system partition, its thread for the partition's CPU
/// joins the partition's cgroup, and `tame reserve -- PROG` (no --cpu: the partition's CPU)
/// starts PROG inside the partition. A running process outside the partition is refused
/// naming it and how to move it; moved there, it is reserved. Commands given that CPU
/// without -p name the partition to use.
#[test]
fn a_reservation_on_a_partition_cpu_and_messages_that_name_the_partition() {
    let _machine = tame_testing::serial::module(module_path!());
    // Tests of one module run side by side: one partition applied at a time.
    let _one = partitioned::exclusive();
    let Some(isolated) = isolate_last_cpu("lrs") else {
        return;
    };
    let (dir, jd, cpu) = (&isolated.dir, isolated.journal.as_str(), &isolated.cpu);
    let socket = dir.path().join("serve.sock");
    let s = socket.to_str().unwrap();
    // Declared after the partition: stopped before it is reverted.
    let (server, _rx, _said) = serve_until_listening(&["--socket", s, "--journal-dir", jd]);
    let server_pid = server.0.id();
    let reserve = |extra: &[&str]| {
        let mut args = vec![
            "reserve",
            "--socket",
            s,
            "--state-dir",
            jd,
            "--share",
            "25%",
            "--period",
            "40ms",
        ];
        args.extend_from_slice(extra);
        tame(&args)
    };

    let out = dir.path().join("placed");
    let script = format!(
        "cat /proc/self/cpuset > {0}; grep Cpus_allowed_list /proc/self/status >> {0}",
        out.display()
    );
    let o = reserve(&["--", "sh", "-c", &script]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.starts_with("/tame-lrs\n"), "{text}");
    assert!(text.trim_end().ends_with(&format!("\t{cpu}")), "{text}");
    // The server's scheduler thread for the CPU is in the partition's cgroup.
    let members = std::fs::read_to_string("/sys/fs/cgroup/cpuset/tame-lrs/tasks").unwrap();
    assert!(
        members
            .lines()
            .any(|tid| std::path::Path::new(&format!("/proc/{server_pid}/task/{tid}")).exists()),
        "no thread of the server in the partition: {members:?}"
    );

    let sleeper = Killed(Command::new("sleep").arg("30").spawn().unwrap());
    let pid = sleeper.0.id().to_string();
    let o = reserve(&["--cpu", cpu, "--pid", &pid]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the CPU belongs to partition \"lrs\" and the process runs outside it")
            && err.contains(&format!("tame detach {pid} -p lrs")),
        "{err}"
    );
    let o = tame(&["detach", &pid, "-p", "lrs", "--journal-dir", jd]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = reserve(&["--cpu", cpu, "--pid", &pid]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = tame(&["reserve", "--socket", s, "--release", &pid]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    stop_server(server);

    // A partition's CPU given without -p: the partition is named, with the option to use.
    let sleeper2 = Killed(Command::new("sleep").arg("30").spawn().unwrap());
    let pid2 = sleeper2.0.id().to_string();
    for args in [
        vec!["run", "--cpu", cpu, "--journal-dir", jd, "--", "true"],
        vec!["detach", &pid2, "--cpus", cpu, "--journal-dir", jd],
        vec![
            "bench",
            "cycle",
            "--cpus",
            cpu,
            "--journal-dir",
            jd,
            "--loops",
            "1",
        ],
    ] {
        let o = tame(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(&format!("CPU {cpu} belongs to partition \"lrs\""))
                && err.contains("use -p lrs"),
            "{args:?}: {err}"
        );
    }
}
