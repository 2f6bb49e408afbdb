//! `tame guard` on the live machine: a partition isolating the last CPU applied, the guard
//! started with `--repair --metrics`; a `sleep` put in the root cpuset and moved onto the
//! isolated CPU with `taskset` is reported and moved back within a second (its
//! Cpus_allowed_list read back), an IRQ's affinity changed by hand is reported and written
//! back, the scrape passes promtool, SIGTERM ends it with exit 0 and no tracefs instance,
//! and `tame revert` then gives back every IRQ affinity and the cpuset tree as found.
//! Needs root, a v1 cpuset hierarchy, two CPUs, taskset and promtool (CI=true fails without).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::common::{have_program, isolate_last_cpu, partitioned, require, tame, Killed};

fn irq_affinities() -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = std::fs::read_dir("/proc/irq")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let p = e.path().join("smp_affinity_list");
            let t = std::fs::read_to_string(&p).ok()?;
            Some((p.display().to_string(), t))
        })
        .collect();
    v.sort();
    v
}

fn cpuset_tree() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("/sys/fs/cgroup/cpuset")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn tame_instances() -> Vec<String> {
    [
        "/sys/kernel/tracing/instances",
        "/sys/kernel/debug/tracing/instances",
    ]
    .iter()
    .flat_map(|d| std::fs::read_dir(d).into_iter().flatten().flatten())
    .map(|e| e.file_name().to_string_lossy().into_owned())
    .filter(|n| n.starts_with("tame-guard"))
    .collect()
}

fn allowed(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_string()
}

/// A movable IRQ apply pinned to the system CPUs (not IRQ 36: kernel-managed here).
fn movable_irq(system: &str) -> Option<String> {
    irq_affinities().into_iter().find_map(|(p, v)| {
        let n = p.split('/').nth(3)?.to_string();
        (v.trim() == system && n != "36" && std::fs::write(&p, system).is_ok()).then_some(n)
    })
}

/// Wait (at most `limit`) for a line holding every needle.
fn line_with(rx: &mpsc::Receiver<String>, needles: &[&str], limit: Duration) -> Option<String> {
    let deadline = Instant::now() + limit;
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(l) if needles.iter().all(|n| l.contains(n)) => return Some(l),
            Ok(_) => {}
            Err(_) => return None,
        }
    }
    None
}

#[test]
fn guard_reports_and_repairs_a_taskset_and_an_irq_then_leaves_nothing() {
    let _machine = tame_testing::serial::module(module_path!());
    let _one = partitioned::exclusive();
    if !require(have_program("taskset"), "taskset (util-linux)")
        || !require(
            have_program("promtool"),
            "promtool (apt-get install prometheus)",
        )
    {
        return;
    }
    let irqs_before = irq_affinities();
    let tree_before = cpuset_tree();
    {
        let Some(iso) = isolate_last_cpu("rt") else {
            return;
        };
        let system = format!("0-{}", iso.cpu.parse::<u32>().unwrap() - 1);
        let system = if system == "0-0" {
            "0".to_string()
        } else {
            system
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
            .to_string();
        let mut guard = Killed(
            Command::new(env!("CARGO_BIN_EXE_tame"))
                .args([
                    "guard",
                    "--repair",
                    "--metrics",
                    &port,
                    "--journal-dir",
                    &iso.journal,
                ])
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap(),
        );
        let (tx, rx) = mpsc::channel();
        let out = guard.0.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                eprintln!("guard: {l}");
                let _ = tx.send(l);
            }
        });
        let first = line_with(&rx, &["event=started"], Duration::from_secs(10)).expect("started");
        assert!(first.contains("source=tracepoints"), "{first}");
        // Its first pass is done once the metrics count one.
        std::thread::sleep(Duration::from_millis(1500));

        let mut sleeper = Killed(Command::new("sleep").arg("60").spawn().unwrap());
        let pid = sleeper.0.id();
        // Out of the system partition's cpuset (as a runtime that puts its tasks in the
        // root would), then onto the isolated CPU.
        std::fs::write("/sys/fs/cgroup/cpuset/tasks", pid.to_string()).unwrap();
        let t0 = Instant::now();
        let o = Command::new("taskset")
            .args(["-pc", &iso.cpu, &pid.to_string()])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let pid_s = format!("pid={pid} ");
        let line = line_with(
            &rx,
            &["event=task_on_isolated", &pid_s],
            Duration::from_secs(3),
        )
        .expect("the taskset is reported");
        let took = t0.elapsed();
        eprintln!("reported and repaired after {took:?}");
        assert!(line.contains("action=repaired"), "{line}");
        // The sweep of every task's affinity runs every quarter interval (250 ms): well
        // within the second asked for, even on a loaded VM.
        assert!(took < Duration::from_secs(1), "reported after {took:?}");
        assert_eq!(allowed(pid), system, "moved back to the system CPUs");

        let irq = movable_irq(&system).expect("a movable IRQ");
        let path = format!("/proc/irq/{irq}/smp_affinity_list");
        std::fs::write(&path, &iso.cpu).unwrap();
        let t0 = Instant::now();
        let line = line_with(
            &rx,
            &["event=drift", &format!("path={path} ")],
            Duration::from_secs(3),
        )
        .expect("the IRQ's drift is reported");
        eprintln!("IRQ drift reported after {:?}: {line}", t0.elapsed());
        assert!(line.contains("action=repaired"), "{line}");
        assert_eq!(std::fs::read_to_string(&path).unwrap().trim(), system);

        let mut s = TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        let body = text.split_once("\r\n\r\n").unwrap().1.to_string();
        assert!(body.contains("tame_guard_repairs_total 2"), "{body}");
        let mut p = Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .output_with(&body);
        assert!(
            p.status.success(),
            "promtool: {}",
            String::from_utf8_lossy(&p.stderr)
        );
        p.stdout.clear();

        // SAFETY: a signal to the child this test started.
        unsafe { libc::kill(guard.0.id() as i32, libc::SIGTERM) };
        let status = guard.0.wait().unwrap();
        assert_eq!(status.code(), Some(0));
        reader.join().unwrap();
        assert!(tame_instances().is_empty(), "{:?}", tame_instances());
        let _ = sleeper.0.kill();
        let _ = sleeper.0.wait();
        let o = tame(&["revert", "--journal-dir", &iso.journal]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    assert_eq!(irq_affinities(), irqs_before, "IRQ affinities as found");
    assert_eq!(cpuset_tree(), tree_before, "the cpuset tree as found");
}

trait OutputWith {
    fn output_with(&mut self, input: &str) -> std::process::Output;
}

impl OutputWith for Command {
    fn output_with(&mut self, input: &str) -> std::process::Output {
        let mut c = self
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        c.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        c.wait_with_output().unwrap()
    }
}

#[test]
fn bad_input_is_refused_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let j = dir.path().to_str().unwrap();
    crate::common::expect_bad_input(
        &["guard", "--journal-dir", j, "--interval", "5us"],
        "out of range",
    );
    crate::common::expect_bad_input(
        &["guard", "--journal-dir", j, "--metrics", "0.0.0.0:1"],
        "--metrics-remote",
    );
    if crate::common::part(
        crate::common::is_root(),
        "root (guard reads the applied partition)",
    ) {
        crate::common::expect_bad_input(&["guard", "--journal-dir", j], "no partition is applied");
    }
}
