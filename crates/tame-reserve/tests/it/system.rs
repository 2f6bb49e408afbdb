//! Real runs of each backend (root only; otherwise they say why and return, or fail
//! under `CI=true`: tame-testing's `require`). Every test
//! restores what it changes through guards, even when an assertion fails. Timing is not
//! asserted here (the machine is shared and loaded): only states the kernel reports.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tame_host::Root;
use tame_reserve::kit::{Kit, ServerProcess};
use tame_reserve::server::client;
use tame_reserve::server::protocol::Request as Wire;
use tame_reserve::spec::{Backend, Request};
use tame_reserve::work::Counter;
use tame_reserve::{cgroup, deadline, ReserveError};
use tame_testing::require::{is_root, require, skip};

const KIT: &str = env!("CARGO_BIN_EXE_tame-reserve-kit");
const CPU: u32 = 1;

/// The SCHED_DEADLINE tests fill the CPUs' bandwidth on purpose (to be refused): one at a
/// time, or one's reservations make the other's refused.
static DEADLINE_BANDWIDTH: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn deadline_bandwidth() -> std::sync::MutexGuard<'static, ()> {
    DEADLINE_BANDWIDTH.lock().unwrap_or_else(|p| p.into_inner())
}

fn root_or_skip(test: &str) -> bool {
    require(
        is_root(),
        format_args!("{test}: root (real scheduling policies and cgroups)"),
    )
}

/// Another helper may briefly confine every task to one CPU: wait for CPU 1 to be ours.
fn wait_for_cpu(cpu: u32) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(20) {
        if tame_rt::sched::allowed_cpus().contains(&cpu) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    skip(format_args!("CPU {cpu} stayed outside our cpuset for 20 s"));
    false
}

/// A child process killed (and reaped) on drop; its threads' policy reset first.
struct Proc(Child);

impl Proc {
    fn sleeper() -> Self {
        Proc(
            Command::new("sleep")
                .arg("60")
                .stdin(Stdio::null())
                .spawn()
                .unwrap(),
        )
    }

    fn worker(dir: &Path, name: &str) -> (Self, Counter) {
        let path = dir.join(name);
        let counter = Counter::create(&path).unwrap();
        let child = Command::new(KIT)
            .arg("work")
            .arg(&path)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        (Proc(child), counter)
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let other = tame_rt::sched::SchedSpec::other();
        tame_rt::sched::apply_raw(self.0.id() as i32, &other, false);
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn policy(pid: u32) -> i32 {
    tame_rt::sched::get_thread_sched(pid as i32)
        .map(|s| s.policy)
        .unwrap_or(-1)
}

fn nice(pid: u32) -> i32 {
    tame_rt::sched::get_thread_sched(pid as i32)
        .map(|s| s.nice)
        .unwrap_or(-100)
}

fn reserve_req(pid: u32, share_ppm: u64) -> Wire {
    Wire::Reserve {
        pid,
        share_ppm,
        period_ns: 20_000_000,
        cpu: CPU,
    }
}

#[test]
fn server_admits_refuses_returns_shares_and_survives_sigkill() {
    let _machine = tame_testing::serial::module(module_path!());
    if !root_or_skip("server") || !wait_for_cpu(CPU) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut server =
        ServerProcess::start(&Kit::at(KIT.as_ref()), &dir.path().join("s.sock")).unwrap();
    let socket = server.socket.clone();
    let (client_proc, counter) = Proc::worker(dir.path(), "client");
    // An ordinary competitor on the CPU: without it an idle CPU would hand the client its
    // whole share at SCHED_IDLE and the server would never need to raise it.
    let (competitor, rest) = Proc::worker(dir.path(), "rest");
    tame_rt::sched::set_affinity(competitor.pid() as i32, [CPU]).unwrap();
    assert!(tame_testing::poll::until(
        Duration::from_secs(5),
        || counter.get() > 0 && rest.get() > 0
    ));
    let pid = client_proc.pid();

    // Bad input is refused before anything changes.
    let bad = client::call(
        &socket,
        &Wire::Reserve {
            pid,
            share_ppm: 300_000,
            period_ns: 20_000_000,
            cpu: 7,
        },
    );
    assert!(
        matches!(bad, Err(ReserveError::Invalid(ref m)) if m.contains("not online")),
        "{bad:?}"
    );
    let bad = client::call(&socket, &reserve_req(pid, 950_000));
    assert!(
        matches!(bad, Err(ReserveError::Invalid(ref m)) if m.contains("cap")),
        "{bad:?}"
    );
    let bad = client::call(&socket, &reserve_req(999_999_999, 300_000));
    assert!(
        matches!(bad, Err(ReserveError::Invalid(ref m)) if m.contains("no process")),
        "{bad:?}"
    );
    assert_eq!(policy(pid), 0, "a refused request changed the client");

    let status = client::call(&socket, &reserve_req(pid, 300_000)).unwrap();
    let (server_pid, watchdog_pid) = (status.server_pid, status.watchdog_pid);
    assert_eq!(server_pid, server.pid());
    assert_eq!(
        policy(watchdog_pid),
        libc::SCHED_FIFO,
        "the watchdog must outrank clients"
    );
    assert_eq!(status.clients.len(), 1);
    assert_eq!(status.clients[0].pid, pid);
    assert_eq!(tame_rt::sched::get_affinity(pid as i32).unwrap(), vec![CPU]);
    // It is raised for its slices and waits at nice 19 in between.
    assert!(
        tame_testing::poll::until(Duration::from_secs(3), || policy(pid) == libc::SCHED_FIFO),
        "never raised"
    );
    assert!(
        tame_testing::poll::until(Duration::from_secs(3), || policy(pid) == libc::SCHED_OTHER
            && nice(pid) == 19),
        "never lowered to nice 19"
    );

    // Admission: 30 % + 70 % is above the 90 % cap.
    let other = Proc::sleeper();
    let refused = client::call(&socket, &reserve_req(other.pid(), 700_000));
    assert!(
        matches!(refused, Err(ReserveError::Refused(ref m)) if m.contains("admission refused")),
        "{refused:?}"
    );
    // A client that exits gives its share back.
    let status = client::call(&socket, &reserve_req(other.pid(), 600_000)).unwrap();
    assert_eq!(status.clients.len(), 2);
    drop(other);
    assert!(
        tame_testing::poll::until(Duration::from_secs(3), || {
            client::call(&socket, &Wire::List)
                .map(|s| s.clients.len() == 1)
                .unwrap_or(false)
        }),
        "the exited client was not removed"
    );

    // SIGKILL the server, mid-cycle: the watchdog returns the client to SCHED_OTHER.
    assert!(tame_testing::poll::until(
        Duration::from_secs(3),
        || policy(pid) == libc::SCHED_FIFO
    ));
    server.child_mut().kill().unwrap();
    server.child_mut().wait().unwrap();
    assert!(
        tame_testing::poll::until(Duration::from_secs(3), || policy(pid) == libc::SCHED_OTHER
            && nice(pid) == 0),
        "client left at policy {} nice {} after the server was killed",
        policy(pid),
        nice(pid)
    );
    // And stays there: nobody raises it again.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!((policy(pid), nice(pid)), (libc::SCHED_OTHER, 0));
    // The watchdog did its work and is gone: nothing of ours is left at a real-time policy.
    assert!(
        tame_testing::poll::until(Duration::from_secs(3), || gone(watchdog_pid)),
        "watchdog {watchdog_pid} still there"
    );
}

/// The process has exited (gone, or a zombie waiting to be reaped).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|s| s.trim_start().starts_with('Z')),
        Err(_) => true,
    }
}

#[test]
fn server_shuts_down_cleanly_and_restores_clients() {
    let _machine = tame_testing::serial::module(module_path!());
    if !root_or_skip("server shutdown") || !wait_for_cpu(CPU) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sleeper = Proc::sleeper();
    let before = tame_rt::sched::get_affinity(sleeper.pid() as i32).unwrap();
    let (server_pid, watchdog_pid);
    {
        let server =
            ServerProcess::start(&Kit::at(KIT.as_ref()), &dir.path().join("s.sock")).unwrap();
        let status = client::call(&server.socket, &reserve_req(sleeper.pid(), 200_000)).unwrap();
        (server_pid, watchdog_pid) = (status.server_pid, status.watchdog_pid);
        // A second server on the same socket is refused.
        let out = Command::new(KIT)
            .arg("serve")
            .arg(&server.socket)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let released = client::call(&server.socket, &Wire::Release { pid: sleeper.pid() }).unwrap();
        assert!(released.clients.is_empty());
        assert_eq!(
            (policy(sleeper.pid()), nice(sleeper.pid())),
            (libc::SCHED_OTHER, 0)
        );
        assert_eq!(
            tame_rt::sched::get_affinity(sleeper.pid() as i32).unwrap(),
            before
        );
        client::call(&server.socket, &reserve_req(sleeper.pid(), 200_000)).unwrap();
        // Dropping sends SIGTERM: the server restores its clients itself.
    }
    assert_eq!(
        (policy(sleeper.pid()), nice(sleeper.pid())),
        (libc::SCHED_OTHER, 0)
    );
    assert_eq!(
        tame_rt::sched::get_affinity(sleeper.pid() as i32).unwrap(),
        before
    );
    assert!(!dir.path().join("s.sock").exists(), "socket left behind");
    assert!(
        gone(server_pid) && gone(watchdog_pid),
        "server or watchdog still running"
    );
}

#[test]
fn deadline_reserves_refuses_and_releases() {
    let _machine = tame_testing::serial::module(module_path!());
    let _one = deadline_bandwidth();
    // SCHED_DEADLINE needs the whole root domain: wait out a partition test confining us.
    if !root_or_skip("deadline") || !wait_for_cpu(0) || !wait_for_cpu(1) {
        return;
    }
    let root = Root::system();
    let state = tempfile::tempdir().unwrap();
    let sd = state.path();
    let req = |share_ppm, cpu| Request {
        share_ppm,
        period_ns: 40_000_000,
        cpu,
        backend: Backend::Deadline,
    };
    let a = Proc::sleeper();
    // Pinning is refused with an explanation, nothing changed.
    let e = deadline::reserve_pid(&root, sd, a.pid(), &req(100_000, Some(CPU))).unwrap_err();
    assert!(
        e.is_bad_input() && e.to_string().contains("strict subset"),
        "{e}"
    );
    assert_eq!(policy(a.pid()), 0);
    let e = deadline::reserve_pid(&root, sd, 999_999_999, &req(100_000, None)).unwrap_err();
    assert!(
        e.is_bad_input() && e.to_string().contains("no process"),
        "{e}"
    );

    let applied = deadline::reserve_pid(&root, sd, a.pid(), &req(100_000, None)).unwrap();
    assert_eq!(applied.threads.len(), 1);
    let s = tame_rt::sched::get_thread_sched(a.pid() as i32).unwrap();
    assert_eq!(
        (s.policy, s.dl_runtime_ns, s.dl_period_ns, s.reset_on_fork),
        (6, 4_000_000, 40_000_000, true)
    );
    // Journaled: the previous policy is on disk before the change.
    assert!(tame_host::journal::journal_path(&deadline::journal_dir(sd, a.pid())).exists());

    // Fill the root domain, then one more is refused with numbers, nothing changed.
    let limits = tame_reserve::bandwidth::Limits::read(&root).unwrap();
    let existing = tame_reserve::bandwidth::deadline_threads(&root);
    let free = tame_reserve::bandwidth::free_deadline_ppm(&limits, &existing);
    let b = Proc::sleeper();
    let c = Proc::sleeper();
    // Leave 5 % free (at most the 90 % a single request may ask), then ask 10 %.
    let fill = free.saturating_sub(50_000).min(900_000);
    if fill >= 100_000 {
        deadline::reserve_pid(&root, sd, b.pid(), &req(fill, None)).unwrap();
        let rest = free - 50_000 - fill;
        if rest > 0 {
            deadline::reserve_pid(&root, sd, c.pid(), &req(rest.max(3_000), None)).unwrap();
        }
        let d = Proc::sleeper();
        let e = deadline::reserve_pid(&root, sd, d.pid(), &req(100_000, None)).unwrap_err();
        assert!(
            matches!(e, ReserveError::Refused(ref m) if m.starts_with("CPU bandwidth exhausted: 10 % asked")),
            "{e}"
        );
        assert_eq!(policy(d.pid()), 0);
        assert!(
            !deadline::journal_dir(sd, d.pid()).exists(),
            "a refusal leaves no journal"
        );
        // Recovery after a crash is `tame revert` of the reservation's journal.
        tame_host::journal::revert(&root, &deadline::journal_dir(sd, b.pid())).unwrap();
        assert_eq!(policy(b.pid()), 0);
    }
    assert_eq!(deadline::release_pid(&root, sd, a.pid()).unwrap(), 1);
    assert_eq!(policy(a.pid()), 0);
    assert!(!deadline::journal_dir(sd, a.pid()).exists());
}

#[test]
fn cgroup_caps_and_releases_without_leftovers() {
    let _machine = tame_testing::serial::module(module_path!());
    if !root_or_skip("cgroup") {
        return;
    }
    let root = Root::system();
    let home = match cgroup::controller(&root) {
        Ok(h) => h,
        Err(e) => {
            skip(format_args!("cgroup: {e}"));
            return;
        }
    };
    let state = tempfile::tempdir().unwrap();
    let p = Proc::sleeper();
    let pid = p.pid();
    struct Release<'a>(&'a Path, u32);
    impl Drop for Release<'_> {
        fn drop(&mut self) {
            let _ = cgroup::release_pid(&Root::system(), self.0, self.1);
        }
    }
    let _guard = Release(state.path(), pid);
    let before = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let req = Request {
        share_ppm: 250_000,
        period_ns: 40_000_000,
        cpu: None,
        backend: Backend::Cgroup,
    };
    let e = cgroup::reserve_pid(&root, state.path(), 999_999_999, &req).unwrap_err();
    assert!(e.is_bad_input());
    let r = cgroup::reserve_pid(&root, state.path(), pid, &req).unwrap();
    let group = Path::new(&r.group);
    assert!(group
        .file_name()
        .unwrap()
        .to_string_lossy()
        .starts_with("tame-"));
    if home.version == tame_host::cgroup::CgroupVersion::V1 {
        assert_eq!(
            std::fs::read_to_string(group.join("cpu.cfs_quota_us"))
                .unwrap()
                .trim(),
            "10000"
        );
        assert_eq!(
            std::fs::read_to_string(group.join("cpu.cfs_period_us"))
                .unwrap()
                .trim(),
            "40000"
        );
        assert!(std::fs::read_to_string(group.join("tasks"))
            .unwrap()
            .lines()
            .any(|l| l == pid.to_string()));
    }
    assert_eq!(cgroup::list(state.path()).len(), 1);
    assert!(cgroup::release_pid(&root, state.path(), pid).unwrap());
    assert!(!group.exists(), "{} left behind", group.display());
    assert_eq!(
        std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap(),
        before
    );
    assert!(cgroup::list(state.path()).is_empty());
    assert!(
        !state.path().join("reserve").exists(),
        "the directory of reservations tame made goes with the last one"
    );
}

/// The case: a program whose work runs in a child it forks (`timeout` there, a
/// subshell here) is reserved itself, the child runs as SCHED_OTHER (reset-on-fork), and
/// `wait` says how much ran outside the reservation.
#[test]
fn deadline_says_when_the_work_ran_in_a_child_outside_the_reservation() {
    let _machine = tame_testing::serial::module(module_path!());
    let _one = deadline_bandwidth();
    if !root_or_skip("deadline children") || !wait_for_cpu(0) || !wait_for_cpu(1) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let at = tame_reserve::backend::Places {
        root: Root::system(),
        socket: dir.path().join("no-server.sock"),
        state_dir: dir.path().join("state"),
    };
    let backend = tame_reserve::backend::open(Backend::Deadline, &at);
    let limits = tame_reserve::bandwidth::Limits::read(&at.root).unwrap();
    let req =
        tame_reserve::reservation::request(&*backend, 100_000, 20_000_000, None, &limits).unwrap();
    let out = dir.path().join("policy");
    // The child notes its own policy (field 41 of its stat), then works.
    let script = format!(
        "(awk '{{print $41}}' /proc/self/stat > {}; i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done); exit 3",
        out.display()
    );
    let argv: Vec<std::ffi::OsString> = ["sh", "-c", &script].iter().map(Into::into).collect();
    let running = tame_reserve::reservation::start(&*backend, &at, &req, &limits, &argv).unwrap();
    assert_eq!(
        policy(running.pid()),
        6,
        "the program itself is SCHED_DEADLINE"
    );
    let ended = running.wait().unwrap();
    assert_eq!(ended.code, 3);
    let split = ended.unreserved.expect("the child's work is said");
    assert!(split.children_ns > 5 * split.reserved_ns, "{split:?}");
    let text = split.warning(1, Backend::Deadline);
    assert!(text.contains("in processes it started"), "{text}");
    // awk is the subshell's child: SCHED_OTHER (0), like the subshell that did the work.
    assert_eq!(std::fs::read_to_string(&out).unwrap().trim(), "0");
}
