//! `tame run | detach | attach | ps` for real on this machine: placement
//! checked in /proc, exec retention through a shell wrapper, detach/attach of a
//! multi-threaded program restoring every thread exactly, a thread created
//! after detach landing on the target CPU, and the refusals.

use crate::common::{have_program, is_root, last_cpu, part, require, tame, Killed};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use tame_rt::sched::{self, ThreadSched};

fn status_field(pid: u32, tid: u32, field: &str) -> String {
    let s = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix(field))
        .map(|v| v.trim().to_string())
        .unwrap_or_default()
}

#[test]
fn run_places_the_program_before_it_runs_and_placement_survives_exec() {
    let _machine = tame_testing::serial::module(module_path!());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("status");
    let cpu = last_cpu();
    // The real-time options and their checks need root (SCHED_FIFO, mlock of 8 MiB).
    let realtime = part(is_root(), "root (SCHED_FIFO, --prefault, --rttime)");
    let mut args = vec![
        "run",
        "--cpus",
        &cpu,
        "--shared-ok",
        "--journal-dir",
        dir.path().to_str().unwrap(),
        "--mlock",
    ];
    if realtime {
        args.extend([
            "--policy",
            "fifo",
            "--priority",
            "7",
            "--prefault",
            "8M",
            "--rttime",
            "2s",
        ]);
    }
    // A wrapper shell that execs into another shell, which reports on itself.
    let script = format!(
        "exec sh -c 'cat /proc/$$/status /proc/$$/stat /proc/$$/limits > {}'",
        out.display()
    );
    args.extend(["--", "sh", "-c", &script]);
    let o = tame(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&out).unwrap();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap()
            .trim()
            .to_string()
    };
    assert_eq!(field("Cpus_allowed_list:"), cpu);
    let locked_kb: u64 = field("VmLck:")
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let stat = text.lines().find(|l| l.contains(") ")).unwrap();
    let f: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..]
        .split_whitespace()
        .collect();
    if realtime {
        assert!(
            locked_kb >= 8 * 1024,
            "8 MiB prefaulted and locked after two execs: {locked_kb} kB"
        );
        assert_eq!(
            (f[38], f[37]),
            ("1", "7"),
            "policy FIFO priority 7 (stat fields 41, 40)"
        );
        let rttime = text
            .lines()
            .find(|l| l.starts_with("Max realtime timeout"))
            .unwrap();
        assert!(rttime.contains("2000000"), "{rttime}");
    } else {
        assert!(
            locked_kb > 0 || field("VmLck:").contains('0'),
            "mlock attempted"
        );
    }
    assert!(
        !dir.path()
            .join("placed")
            .read_dir()
            .map(|mut d| d.next().is_some())
            .unwrap_or(false),
        "the run record is removed when the program ends"
    );
}

#[test]
fn run_returns_the_programs_exit_status_and_forwards_signals() {
    let _machine = tame_testing::serial::module(module_path!());
    let dir = tempfile::tempdir().unwrap();
    let sd = dir.path().to_str().unwrap();
    let o = tame(&[
        "run",
        "--cpu",
        "0",
        "--shared-ok",
        "--journal-dir",
        sd,
        "--",
        "sh",
        "-c",
        "exit 42",
    ]);
    assert_eq!(o.status.code(), Some(42));
    // Killed under an RT-time limit: the exit status, and a line on why.
    let o = tame(&[
        "run",
        "--cpu",
        "0",
        "--shared-ok",
        "--rttime",
        "500ms",
        "--journal-dir",
        sd,
        "--",
        "sh",
        "-c",
        "kill -KILL $$",
    ]);
    assert_eq!(o.status.code(), Some(137));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("tame run: the program was killed by SIGKILL (exit 137): the RT-time guard (--rttime 500ms, RLIMIT_RTTIME)")
            && err.contains("e.g. --rttime 1s"),
        "{err}"
    );
    // SIGTERM sent to tame (from a process) reaches the program, which reports it.
    let marker = dir.path().join("got-term");
    let script = format!(
        "trap 'touch {}; exit 3' TERM; while :; do sleep 0.05; done",
        marker.display()
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_tame"))
        .args([
            "run",
            "--cpu",
            "0",
            "--shared-ok",
            "--journal-dir",
            sd,
            "--",
            "sh",
            "-c",
            &script,
        ])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(400));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(3));
    assert!(marker.exists());
}

const THREADS_C: &str = r#"
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
static void *idle(void *a) { (void)a; for (;;) pause(); return 0; }
static void spawn(void) { pthread_t t; pthread_create(&t, 0, idle, 0); }
static volatile sig_atomic_t more;
static void on_usr1(int s) { (void)s; more = 1; }
int main(void) {
    signal(SIGUSR1, on_usr1);
    spawn(); spawn(); spawn();
    printf("ready\n"); fflush(stdout);
    for (;;) { pause(); if (more) { more = 0; spawn(); } }
}
"#;

/// `tame run` killed while its program runs leaves the program's record behind; once the
/// program has exited, `tame ps` says so and removes the record.
#[test]
fn ps_names_a_program_gone_and_removes_its_record() {
    let _machine = tame_testing::serial::module(module_path!());
    let dir = tempfile::tempdir().unwrap();
    let sd = dir.path().to_str().unwrap();
    let cpu = last_cpu();
    // The program kills the `tame run` that started it (its parent), then exits — once
    // `tame ps` shows it, so its record is whole (the record's directory comes first).
    let o = tame(&[
        "run",
        "--cpus",
        &cpu,
        "--shared-ok",
        "--journal-dir",
        sd,
        "--",
        "sh",
        "-c",
        "i=0; while ! \"$1\" ps --journal-dir \"$0\" 2>/dev/null | grep -qw $$ && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; kill -KILL $PPID",
        sd,
        env!("CARGO_BIN_EXE_tame"),
    ]);
    assert_eq!(o.status.code(), None, "tame run was killed");
    let placed = dir.path().join("placed");
    // The orphaned program is reaped by init; its record stays.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let pid: u32 = loop {
        let entry = std::fs::read_dir(&placed)
            .unwrap()
            .flatten()
            .find_map(|e| e.file_name().to_str()?.parse().ok());
        let pid = entry.expect("the record of the killed run stays");
        if !Path::new(&format!("/proc/{pid}")).exists() || std::time::Instant::now() > deadline {
            break pid;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let ps = tame(&["ps", "--journal-dir", sd]);
    assert!(ps.status.success());
    let stderr = String::from_utf8_lossy(&ps.stderr);
    assert!(
        stderr.contains(&format!("tame ps: process {pid} (sh, placed by tame run on CPUs {cpu}) has exited; its placement record was removed")),
        "{stderr}"
    );
    assert!(!placed.exists(), "the record is gone");
    let again = tame(&["ps", "--journal-dir", sd]);
    assert!(again.stderr.is_empty(), "said once");
}

fn build_threads_program(dir: &Path) -> PathBuf {
    let src = dir.join("threads.c");
    let bin = dir.join("threads");
    std::fs::write(&src, THREADS_C).unwrap();
    let status = Command::new("gcc")
        .args(["-O1", "-pthread", "-o"])
        .arg(&bin)
        .arg(&src)
        .status()
        .expect("run gcc");
    assert!(status.success(), "gcc cannot build the test program");
    bin
}

fn tids(pid: u32) -> Vec<u32> {
    let mut t: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    t.sort_unstable();
    t
}

#[test]
fn detach_then_attach_restores_every_thread_exactly() {
    let _machine = tame_testing::serial::module(module_path!());
    if !require(is_root(), "root to raise threads to SCHED_FIFO")
        || !require(have_program("gcc"), "gcc to build the test program")
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = build_threads_program(dir.path());
    let mut child = Command::new(&bin).stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let guard = Killed(child);
    let pid = guard.0.id();
    let threads = tids(pid);
    assert_eq!(threads.len(), 4);
    // Make the threads differ, so restoring "the same for all" would be caught.
    sched::set_affinity(threads[1] as i32, [0]).unwrap();
    let mut niced = sched::get_thread_sched(threads[2] as i32).unwrap();
    niced.nice = 5;
    sched::set_thread_sched(threads[2] as i32, &niced).unwrap();
    let before: Vec<(u32, Vec<u32>, ThreadSched)> = threads
        .iter()
        .map(|&t| {
            (
                t,
                sched::get_affinity(t as i32).unwrap(),
                sched::get_thread_sched(t as i32).unwrap(),
            )
        })
        .collect();

    let cpu = last_cpu();
    let sd = dir.path().to_str().unwrap();
    let pid_s = pid.to_string();
    let o = tame(&[
        "detach",
        &pid_s,
        "--cpu",
        &cpu,
        "--shared-ok",
        "--policy",
        "fifo",
        "--priority",
        "5",
        "--journal-dir",
        sd,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let printed = String::from_utf8_lossy(&o.stdout);
    assert!(
        printed.contains(&format!("thread {}", threads[1])),
        "prints what it changed: {printed}"
    );
    for &t in &threads {
        assert_eq!(status_field(pid, t, "Cpus_allowed_list:"), cpu);
        assert_eq!(
            sched::get_thread_sched(t as i32).unwrap().policy,
            libc::SCHED_FIFO
        );
    }
    // A thread created after detach lands on the target CPU.
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid as i32, libc::SIGUSR1) };
    std::thread::sleep(Duration::from_millis(200));
    let now = tids(pid);
    let born: Vec<u32> = now
        .iter()
        .copied()
        .filter(|t| !threads.contains(t))
        .collect();
    assert_eq!(born.len(), 1);
    assert_eq!(status_field(pid, born[0], "Cpus_allowed_list:"), cpu);

    let ps = tame(&["ps", "--json", "--journal-dir", sd]);
    let listing: serde_json::Value = serde_json::from_slice(&ps.stdout).unwrap();
    assert_eq!(listing["schema"], "tame.ps/1");
    assert_eq!(
        listing["threads"].as_array().unwrap().len(),
        5,
        "ps lists every thread of the detached process"
    );

    // Attach from a separate invocation restores each thread's own previous state.
    let o = tame(&["attach", &pid_s, "--journal-dir", sd]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for (t, affinity, sched_before) in &before {
        assert_eq!(
            &sched::get_affinity(*t as i32).unwrap(),
            affinity,
            "thread {t} affinity"
        );
        assert_eq!(
            &sched::get_thread_sched(*t as i32).unwrap(),
            sched_before,
            "thread {t} scheduling"
        );
    }
    let main_before = &before[0];
    assert_eq!(
        sched::get_affinity(born[0] as i32).unwrap(),
        main_before.1,
        "the new thread gets the main thread's old placement"
    );
    assert_eq!(
        sched::get_thread_sched(born[0] as i32).unwrap().policy,
        libc::SCHED_OTHER
    );
    assert!(
        !dir.path().join(format!("placed/{pid}")).exists(),
        "the placement journal is removed once all is restored"
    );
    // A second attach has nothing to do: clear error.
    assert_eq!(
        tame(&["attach", &pid_s, "--journal-dir", sd]).status.code(),
        Some(2)
    );
}

#[test]
fn refusals_change_nothing_and_exit_2() {
    let _machine = tame_testing::serial::module(module_path!());
    let dir = tempfile::tempdir().unwrap();
    let sd = dir.path().to_str().unwrap();
    let expect = |args: &[&str], needle: &str| {
        let o = tame(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(needle),
            "{args:?}: expected {needle:?} in {err}"
        );
    };
    expect(
        &[
            "detach",
            "999999999",
            "--cpu",
            "0",
            "--shared-ok",
            "--journal-dir",
            sd,
        ],
        "no process 999999999",
    );
    expect(
        &[
            "detach",
            "2",
            "--cpu",
            "0",
            "--shared-ok",
            "--journal-dir",
            sd,
        ],
        "kernel thread",
    );
    let me = std::process::id().to_string();
    expect(
        &["detach", &me, "--cpu", "0", "--journal-dir", sd],
        "is not isolated",
    );
    expect(
        &[
            "detach",
            &me,
            "--cpu",
            "4096",
            "--shared-ok",
            "--journal-dir",
            sd,
        ],
        "not online",
    );
    expect(
        &["detach", &me, "-p", "rt", "--journal-dir", sd],
        "no partitions are applied",
    );
    expect(
        &[
            "run",
            "--cpu",
            "0",
            "--shared-ok",
            "--journal-dir",
            sd,
            "--",
            "/nonexistent/prog",
        ],
        "no such program",
    );
    expect(
        &["attach", &me, "--journal-dir", sd],
        "was not detached by tame",
    );
    // A zombie: a child that exited and was not reaped.
    let zombie = Command::new("true").spawn().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let zpid = zombie.id().to_string();
    expect(
        &[
            "detach",
            &zpid,
            "--cpu",
            "0",
            "--shared-ok",
            "--journal-dir",
            sd,
        ],
        "zombie",
    );
    drop(zombie);
    assert!(
        !dir.path().join("placed").exists()
            || dir
                .path()
                .join("placed")
                .read_dir()
                .unwrap()
                .next()
                .is_none()
    );
}

#[test]
fn a_caller_that_is_not_root_moves_only_its_own_processes() {
    let _machine = tame_testing::serial::module(module_path!());
    if !require(is_root(), "root to act as another user")
        || !require(have_program("setpriv"), "setpriv to act as another user")
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // SAFETY: chmod on our own temp dir so the unprivileged user may write records.
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let sd = dir.path().to_str().unwrap();
    let as_nobody = |args: &[&str]| {
        Command::new("setpriv")
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
            .args(args)
            .output()
            .unwrap()
    };
    let me = std::process::id().to_string();
    let o = as_nobody(&[
        "detach",
        &me,
        "--cpu",
        "0",
        "--shared-ok",
        "--journal-dir",
        sd,
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("may move only its own processes"), "{err}");
    let o = as_nobody(&[
        "run",
        "--cpu",
        "0",
        "--shared-ok",
        "--policy",
        "fifo",
        "--journal-dir",
        sd,
        "--",
        "true",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("not permitted"), "{err}");
    // Its own program it may run, placed.
    let o = as_nobody(&[
        "run",
        "--cpu",
        "0",
        "--shared-ok",
        "--journal-dir",
        sd,
        "--",
        "true",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A fixture host with cgroup v2 only (at /sys/fs/cgroup/unified) and a spec
/// applied: system on CPU 0, partition rt (cgroup tame-rt) on CPU 1.
fn v2_fixture(dir: &Path) -> (PathBuf, PathBuf) {
    let base = dir.join("root");
    let put = |p: &str, t: &str| {
        let f = base.join(p.trim_start_matches('/'));
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, t).unwrap();
    };
    put("/sys/devices/system/cpu/online", "0-1\n");
    put("/proc/cmdline", "quiet\n");
    put(
        "/proc/mounts",
        "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n",
    );
    put("/sys/fs/cgroup/unified/cgroup.controllers", "cpuset cpu\n");
    put("/sys/fs/cgroup/unified/cgroup.procs", "1\n");
    put("/sys/fs/cgroup/unified/tame-rt/cgroup.procs", "");
    // Process 1, the caller's own: detach looks at the process before the target.
    let stat = "1 (init) S 0 1 1 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
    put("/proc/1/stat", stat);
    put("/proc/1/task/1/stat", stat);
    let uid = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap());
    put(
        "/proc/1/status",
        &format!("Uid:\t{uid}\t{uid}\t{uid}\t{uid}\n"),
    );
    let journal = dir.join("state");
    let root = tame_host::Root::new(&base);
    tame_host::journal::Journal::open(&root, &journal)
        .unwrap()
        .note(
            tame_partition::apply::SPEC_NOTE,
            b"[[partition]]\nname = \"system\"\ncpus = \"0\"\nrole = \"system\"\n\n[[partition]]\nname = \"rt\"\ncpus = \"1\"\nrole = \"isolated\"\n",
        )
        .unwrap();
    (base, journal)
}

#[test]
fn partition_targets_on_cgroup_v2_are_refused_clearly_before_anything_changes() {
    let _machine = tame_testing::serial::module(module_path!());
    let dir = tempfile::tempdir().unwrap();
    let (base, journal) = v2_fixture(dir.path());
    let (base, journal) = (base.to_str().unwrap(), journal.to_str().unwrap());
    let expect = |args: &[&str], needle: &str| {
        // The subcommand, then the journal, then its arguments (`--` ends them).
        let o = tame(
            &[
                &["--root", base, args[0], "--journal-dir", journal],
                &args[1..],
            ]
            .concat(),
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(needle),
            "{args:?}: expected {needle:?} in {err}"
        );
    };
    let snapshot = || tame_testing::snapshot_tree(Path::new(base));
    let before = snapshot();
    // A PID that does not exist is said before the target's isolation.
    expect(
        &["detach", "999999", "--cpu", "1"],
        "no process 999999 — check the PID",
    );
    // The system partition is named as such, not as CPUs no partition covers.
    expect(
        &["run", "-p", "system", "--", "true"],
        "partition \"system\" is the system partition, so the machine's other work runs on its CPUs 0 — use an isolated or shared partition (-p rt), or pass --shared-ok",
    );
    // A v2 partition takes whole processes: a part of the threads is refused.
    for threads in ["main", "1,2"] {
        expect(
            &["detach", "1", "-p", "rt", "--threads", threads],
            "cgroup v2 moves whole processes — use --threads all, or --cpus without -p",
        );
    }
    assert_eq!(snapshot(), before, "nothing below the root changed");
    // A partition cgroup that is gone is said so, not "no such program".
    std::fs::remove_dir_all(Path::new(base).join("sys/fs/cgroup/unified/tame-rt")).unwrap();
    let before = snapshot();
    expect(
        &["run", "-p", "rt", "--", "true"],
        "partition cgroup /sys/fs/cgroup/unified/tame-rt does not exist",
    );
    assert_eq!(snapshot(), before, "nothing below the root changed");
    assert!(!Path::new(journal).join("placed").exists());
}
