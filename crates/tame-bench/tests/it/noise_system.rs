//! The noise bench on this machine: known noise must be found, named and
//! measured; deliberate IPIs must be attributed to call_function IPIs; without
//! tracefs the gaps come alone with the reason; tracing is left as it was.
//! Root-only tests print why and return when not root (and fail under `CI=true`:
//! tame-testing's `require`).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use tame_bench::engine::{RunControl, ThreadSettings};
use tame_bench::noise::{self, NoiseRun, NoiseSettings};
use tame_bench::session::Conditions;
use tame_host::environment::RunEnvironment;
use tame_host::{CpuList, Root};
use tame_rt::sched::{self, SchedSpec};
use tame_rt::{ClockKind, Policy};
use tame_testing::require::{is_root, require, skip};
use tame_trace::attribute::NoiseClass;

/// These tests share the machine's tracing and CPUs: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// The CPU to measure: 1 where there is one (CPU 0 carries more of the machine's housekeeping).
fn target_cpu() -> u32 {
    let online = RunEnvironment::capture(&Root::system()).online_cpus;
    if online.contains(1) {
        1
    } else {
        0
    }
}

fn other_cpu(target: u32) -> Option<u32> {
    let online = RunEnvironment::capture(&Root::system()).online_cpus;
    let other = online.iter().find(|&c| c != target);
    other
}

fn settings(cpu: u32, duration_ns: u64) -> NoiseSettings {
    let invariant = RunEnvironment::capture(&Root::system()).invariant_tsc;
    NoiseSettings {
        cpus: CpuList::from_cpus([cpu]),
        duration_ns,
        threshold_ns: None,
        threads: ThreadSettings {
            policy: Policy::Other,
            priority: 0,
            mlock: false,
            clock: if invariant && tame_rt::clock::TSC_AVAILABLE {
                ClockKind::Tsc
            } else {
                ClockKind::Monotonic
            },
        },
        attribute: true,
    }
}

/// What tracing looks like from outside: the tracefs mount and its top-level settings.
fn tracing_state() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
    let tracefs: Vec<&str> = mounts.lines().filter(|l| l.contains(" tracefs ")).collect();
    out.push(("mounts".into(), tracefs.join("\n").into_bytes()));
    for dir in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
        for f in [
            "trace_clock",
            "tracing_on",
            "tracing_cpumask",
            "buffer_size_kb",
            "set_event",
            "events/enable",
        ] {
            let p = format!("{dir}/{f}");
            if let Ok(b) = std::fs::read(&p) {
                out.push((p, b));
            }
        }
        if let Ok(rd) = std::fs::read_dir(format!("{dir}/instances")) {
            let mut names: Vec<String> = rd
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            out.push((format!("{dir}/instances"), names.join(",").into_bytes()));
        }
    }
    out
}

/// A pinned SCHED_FIFO thread named `name` that wakes every `period_ns`
/// (first after `offset_ns`) and spins `work_ns`; stops (and is joined) on
/// drop, even when an assertion fails.
struct Competitor {
    stop: Arc<AtomicBool>,
    tid: u32,
    handle: Option<std::thread::JoinHandle<u64>>,
}

impl Competitor {
    fn start(
        name: &str,
        cpu: u32,
        priority: i32,
        period_ns: u64,
        offset_ns: u64,
        work_ns: u64,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let tid = Arc::new(AtomicU32::new(0));
        let (s, t) = (stop.clone(), tid.clone());
        let handle = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                sched::pin_current_thread(cpu).unwrap();
                sched::set_current_thread(&SchedSpec::static_priority(Policy::Fifo, priority))
                    .unwrap();
                // SAFETY: no preconditions.
                t.store(unsafe { libc::gettid() } as u32, Ordering::Release);
                let mut next = tame_rt::clock::monotonic_ns() + offset_ns;
                let mut late = 0u64;
                while !s.load(Ordering::Relaxed) {
                    let ts = libc::timespec {
                        tv_sec: (next / 1_000_000_000) as i64,
                        tv_nsec: (next % 1_000_000_000) as i64,
                    };
                    // SAFETY: ts is valid; an absolute sleep on CLOCK_MONOTONIC.
                    unsafe {
                        libc::clock_nanosleep(
                            libc::CLOCK_MONOTONIC,
                            libc::TIMER_ABSTIME,
                            &ts,
                            std::ptr::null_mut(),
                        )
                    };
                    let woke = tame_rt::clock::monotonic_ns();
                    // Half a period late: something above SCHED_FIFO 50 held the CPU,
                    // and this wakeup runs back to back with the next one.
                    if woke > next + period_ns / 2 {
                        late += 1;
                    }
                    let until = woke + work_ns;
                    while tame_rt::clock::monotonic_ns() < until {
                        std::hint::spin_loop();
                    }
                    next += period_ns;
                }
                late
            })
            .unwrap();
        let tid = loop {
            match tid.load(Ordering::Acquire) {
                0 => std::thread::yield_now(),
                t => break t,
            }
        };
        Competitor {
            stop,
            tid,
            handle: Some(handle),
        }
    }
}

impl Competitor {
    /// Stop it; how many of its wakeups came more than half a period late.
    fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.take().map_or(0, |h| h.join().unwrap())
    }
}

impl Drop for Competitor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn run(settings: NoiseSettings) -> NoiseRun {
    noise::run(
        &Root::system(),
        settings,
        Conditions::default(),
        &RunControl::new(),
        |_| {},
        vec!["test".into()],
    )
    .unwrap()
}

#[test]
fn a_periodic_competitor_is_named_counted_and_measured() {
    let _machine = tame_testing::serial::module(module_path!());
    if !require(is_root(), "root (tracefs, SCHED_FIFO)") {
        return;
    }
    let _turn = one_at_a_time();
    let before = tracing_state();
    let cpu = target_cpu();
    let period = 10_000_000;
    // The competitor of the issue (50 µs of work every 10 ms), and a twin doing
    // no work, 5 ms out of phase: each wakeup also costs its thread the kernel's
    // sleep/wakeup path (syscall return, timer re-arming, switch out), which on
    // this VM is 10-20 µs and varies with the host's load. The twin measures
    // that path in the same run, so the work itself can be checked.
    // The checks need competitors that really ran every period: a SCHED_DEADLINE
    // or higher-priority task of someone else on this CPU merges their wakeups.
    // Such a run is repeated (up to 3 tries), never counted.
    let mut tries = 0;
    let (run, worker_tid, idler_tid) = loop {
        tries += 1;
        let worker = Competitor::start("tame-work50us", cpu, 50, period, period, 50_000);
        let idler = Competitor::start("tame-work0us", cpu, 50, period, period / 2, 0);
        let run = run(settings(cpu, 2_000_000_000));
        let (worker_tid, idler_tid) = (worker.tid, idler.tid);
        let late = worker.finish() + idler.finish();
        if late == 0 {
            break (run, worker_tid, idler_tid);
        }
        eprintln!("try {tries}: {late} competitor wakeups came > 5 ms late (another task above SCHED_FIFO 50 held CPU {cpu})");
        if tries == 3 {
            assert_eq!(tracing_state(), before, "tracing is left as it was");
            skip(format_args!(
                "CPU {cpu} was never free of higher-priority work for 2 s"
            ));
            return;
        }
    };
    assert_eq!(tracing_state(), before, "tracing is left as it was");
    let n = &run.result.noise;
    assert!(n.attribution.available, "{:?}", n.attribution.reason);
    assert!(
        n.attribution.restore_problems.is_empty(),
        "{:?}",
        n.attribution
    );
    let c = &n.cpus[0];
    let find = |name: String| {
        c.sources
            .iter()
            .find(|s| s.source == name)
            .unwrap_or_else(|| panic!("{name} not among the sources: {:#?}", c.sources))
            .clone()
    };
    let work = find(format!("tame-work50us/{worker_tid}"));
    let idle = find(format!("tame-work0us/{idler_tid}"));
    let expected = c.run_ns as f64 / period as f64;
    for s in [&work, &idle] {
        assert_eq!(s.class, NoiseClass::Thread);
        let count = s.tally.count as f64;
        assert!(
            (count - expected).abs() <= expected * 0.05,
            "{}: count {count} vs {expected:.1} expected ± 5 %",
            s.source
        );
    }
    let mean =
        |s: &tame_trace::attribute::SourceTally| s.tally.total_ns as f64 / s.tally.count as f64;
    let (with_work, path) = (mean(&work), mean(&idle));
    eprintln!(
        "competitor: {} wakeups, {with_work:.0} ns each; its idle twin {path:.0} ns each: work {:.0} ns",
        work.tally.count,
        with_work - path
    );
    if std::env::var("NOISE_DEBUG").is_ok() {
        eprintln!("{}", noise::view::report(&run.result, "debug"));
    }
    assert!(
        (with_work - path - 50_000.0).abs() <= 50_000.0 * 0.2,
        "per-wakeup time {with_work:.0} ns minus the sleep/wakeup path {path:.0} ns should be 50 µs ± 20 %"
    );
    assert!(
        with_work >= 50_000.0 * 0.9,
        "per-wakeup time {with_work:.0} ns is less than the work"
    );
    // Every gap adds up exactly.
    for (_, gaps) in &run.gaps {
        for g in gaps {
            let a: u64 = g.shares.iter().map(|s| s.net_ns).sum();
            assert_eq!(a + g.unexplained_ns, g.duration_ns);
        }
    }
}

const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

fn membarrier(cmd: libc::c_int) -> libc::c_long {
    // SAFETY: membarrier takes (cmd, flags, cpu_id) and touches no memory of ours.
    unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0, 0) }
}

#[test]
fn a_burst_of_ipis_is_attributed_to_call_function() {
    let _machine = tame_testing::serial::module(module_path!());
    if !require(is_root(), "root (tracefs)") {
        return;
    }
    let _turn = one_at_a_time();
    let cpu = target_cpu();
    let sender_cpu = other_cpu(cpu);
    if !require(sender_cpu.is_some(), "a second CPU to send IPIs from")
        || !require(
            membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0,
            "membarrier private expedited",
        )
    {
        return;
    }
    let sender_cpu = sender_cpu.expect("checked above");
    let before = tracing_state();
    // Expedited membarrier IPIs every CPU running one of our threads: the detector's.
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU32::new(0));
    let (s, n) = (stop.clone(), sent.clone());
    let sender = std::thread::spawn(move || {
        sched::pin_current_thread(sender_cpu).unwrap();
        // Let the detector start first.
        std::thread::sleep(std::time::Duration::from_millis(200));
        while !s.load(Ordering::Relaxed) && n.load(Ordering::Relaxed) < 2_000 {
            if membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0 {
                n.fetch_add(1, Ordering::Relaxed);
            }
            std::thread::sleep(std::time::Duration::from_micros(300));
        }
    });
    // At SCHED_FIFO 1 the detector holds the CPU against ordinary tasks, so the
    // IPIs (sent only to CPUs running one of our threads) find it there.
    let mut s = settings(cpu, 1_500_000_000);
    s.threads.policy = Policy::Fifo;
    s.threads.priority = 1;
    let result = run(s);
    stop.store(true, Ordering::Relaxed);
    sender.join().unwrap();
    assert_eq!(tracing_state(), before, "tracing is left as it was");
    let sent = sent.load(Ordering::Relaxed) as u64;
    assert!(sent > 500, "only {sent} membarriers were sent");
    let c = &result.result.noise.cpus[0];
    if std::env::var("NOISE_DEBUG").is_ok() {
        eprintln!("{}", noise::view::report(&result.result, "debug"));
    }
    let ipis: u64 = c
        .sources
        .iter()
        .filter(|s| s.class == NoiseClass::Ipi && s.source.starts_with("call_function"))
        .map(|s| s.tally.count)
        .sum();
    // Some IPIs land while the detector is not running (between its reads they
    // are shorter than the threshold, or before/after the run): most must be seen.
    assert!(
        ipis * 2 >= sent,
        "{ipis} call_function IPIs attributed for {sent} sent: {:#?}",
        c.sources
    );
}

#[test]
fn without_tracefs_gaps_come_alone_with_the_reason() {
    let _machine = tame_testing::serial::module(module_path!());
    let _turn = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let root = Root::new(dir.path());
    let w = |p: &str, s: &str| {
        let path = root.path(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, s).unwrap();
    };
    let online = RunEnvironment::capture(&Root::system()).online_cpus;
    w("/sys/devices/system/cpu/online", &format!("{online}\n"));
    w("/proc/filesystems", "nodev\tsysfs\n");
    let mut s = settings(online.first().unwrap(), 50_000_000);
    s.threads.clock = ClockKind::Monotonic;
    let run = noise::run(
        &root,
        s,
        Conditions::default(),
        &RunControl::new(),
        |_| {},
        vec![],
    )
    .unwrap();
    let n = &run.result.noise;
    assert!(!n.attribution.available);
    let why = n.attribution.reason.as_deref().unwrap_or("");
    assert!(why.contains("tracefs"), "{why}");
    let c = &n.cpus[0];
    assert_eq!((c.attributed_ns, c.unexplained_ns), (None, None));
    assert!(c.classes.is_empty());
    assert!(c.run_ns >= 50_000_000);
    assert_eq!(run.gaps[0].1.len() as u64, c.gaps - c.gaps_dropped);
    let text = noise::view::report(&run.result, "t");
    assert!(text.contains("no attribution:"), "{text}");
}
