//! What every bench shares: validating thread settings before anything starts,
//! spawning one measuring thread per CPU or task (pinned, scheduled, stack
//! prefaulted), starting them together and waiting with progress reports.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tame_host::CpuList;
use tame_rt::memory::PREFAULT_STACK_BYTES;
use tame_rt::sched::{self, SchedSpec};
use tame_rt::{Clock, ClockKind, Policy, TscCalibration};

use crate::error::{failed, invalid, io_failed, BenchError, Failure, Result};
use crate::placement::JoinGroup;
use crate::result::Calibration;

/// How measuring threads are scheduled; shared by every bench.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadSettings {
    pub policy: Policy,
    pub priority: i32,
    /// Lock all memory and prefault stacks before measuring.
    pub mlock: bool,
    pub clock: ClockKind,
}

#[cfg(test)]
impl ThreadSettings {
    /// What any user may run in a test: SCHED_OTHER, nothing locked, the monotonic clock.
    pub(crate) fn unprivileged() -> Self {
        ThreadSettings {
            policy: Policy::Other,
            priority: 0,
            mlock: false,
            clock: ClockKind::Monotonic,
        }
    }
}

/// The static priority of measuring threads at fifo/rr unless asked otherwise: above
/// nearly everything, below the kernel's own priority-99 threads.
pub const MEASURING_PRIORITY: i32 = 95;

impl ThreadSettings {
    /// Settings with `priority`, or when it is not given `realtime_priority` for the
    /// policies with a static priority (fifo, rr) and 0 for the others.
    pub fn new(
        policy: Policy,
        priority: Option<i32>,
        realtime_priority: i32,
        mlock: bool,
        clock: ClockKind,
    ) -> Self {
        let priority = priority.unwrap_or(match policy {
            Policy::Fifo | Policy::Rr => realtime_priority,
            _ => 0,
        });
        ThreadSettings {
            policy,
            priority,
            mlock,
            clock,
        }
    }

    /// The policy, and the priority where the policy has one: `fifo 95`, `other`.
    pub fn label(&self) -> String {
        match self.policy {
            Policy::Fifo | Policy::Rr => format!("{} {}", self.policy, self.priority),
            p => p.to_string(),
        }
    }
}

/// The clock to measure with unless asked: the TSC where it is invariant (cheapest to read,
/// cycles come free), else CLOCK_MONOTONIC.
pub fn preferred_clock(root: &tame_host::Root) -> ClockKind {
    let invariant = tame_host::environment::RunEnvironment::capture(root).invariant_tsc;
    if invariant && tame_rt::clock::TSC_AVAILABLE {
        ClockKind::Tsc
    } else {
        ClockKind::Monotonic
    }
}

/// Stop flag and progress, shared between the measuring threads and whoever waits for them.
#[derive(Clone, Default)]
pub struct RunControl {
    stop: Arc<AtomicBool>,
}

impl RunControl {
    pub fn new() -> Self {
        Self::default()
    }

    /// Use an existing flag (e.g. one a SIGINT handler sets).
    pub fn with_flag(stop: Arc<AtomicBool>) -> Self {
        Self { stop }
    }

    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    #[inline(always)]
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// Check that the measuring threads can run on every requested CPU (the host
/// layer's one check: some CPUs, all online, all within this process's affinity).
pub fn validate_cpus(requested: &CpuList, online: &CpuList) -> Result<()> {
    let allowed = CpuList::from_cpus(sched::allowed_cpus());
    requested
        .check_usable(online, &allowed)
        .map_err(|e| invalid(e.to_string()))
}

/// The scheduling spec for a measuring thread, after checking the priority
/// range and that this process may actually use the policy (a throw-away
/// thread tries it on `probe_cpu`).
pub fn validate_sched(
    settings: &ThreadSettings,
    dl_period_ns: u64,
    probe_cpu: Option<u32>,
) -> Result<SchedSpec> {
    let (lo, hi) = settings.policy.priority_range();
    let policy = settings.policy;
    if settings.priority < lo || settings.priority > hi {
        return Err(invalid(if lo == hi {
            format!(
                "priority {} is not valid for policy {policy}, which takes no static priority — drop --priority or use --policy fifo/rr",
                settings.priority
            )
        } else {
            format!(
                "priority {} is out of range for policy {policy} ({lo}..{hi}) — pick a priority in that range",
                settings.priority
            )
        }));
    }
    let spec = if policy == Policy::Deadline {
        // Enough runtime for a wakeup and a measurement; the period is the interval.
        let runtime = (dl_period_ns / 10).max(50_000).min(dl_period_ns);
        SchedSpec {
            policy,
            priority: 0,
            dl_runtime_ns: runtime,
            dl_deadline_ns: dl_period_ns,
            dl_period_ns,
        }
    } else {
        SchedSpec::static_priority(policy, settings.priority)
    };
    if let Err(e) = sched::probe(spec, probe_cpu) {
        // SAFETY: no arguments.
        let privileged = unsafe { libc::geteuid() } == 0;
        let why = match e.errno() {
            libc::EPERM if policy == Policy::Deadline && privileged => {
                return Err(invalid(format!(
                    "SCHED_DEADLINE refused for a thread pinned to CPU {}: the kernel admits deadline tasks only with an affinity spanning their whole root domain — measure deadline inside an isolated partition (its exclusive cpuset is a root domain of its own), or use --policy fifo",
                    probe_cpu.unwrap_or(0)
                )))
            }
            // Root normally holds CAP_SYS_NICE: a refusal then comes from elsewhere (seen on a
            // Firecracker guest whose root had CAP_SYS_NICE in its effective set).
            libc::EPERM if privileged => {
                "the kernel refused it although this process runs as root (a container without CAP_SYS_NICE, a seccomp filter, or RT group scheduling where this process's cgroup has no real-time runtime, cpu.rt_runtime_us = 0)".to_string()
            }
            libc::EPERM => {
                "this process lacks CAP_SYS_NICE (and RLIMIT_RTPRIO does not allow it)".to_string()
            }
            libc::EBUSY => "the CPU's deadline bandwidth is exhausted".to_string(),
            libc::EINVAL => "the kernel rejected the parameters".to_string(),
            _ => e.to_string(),
        };
        // `tame assess` has no --policy: it measures at SCHED_FIFO by design.
        let remedy = if privileged {
            "allow real-time scheduling to this process and its cgroup"
        } else {
            "run as root"
        };
        return Err(invalid(format!(
            "cannot use scheduling policy {policy} (priority {}): {why} — {remedy}, or measure at --policy other where the command has it (tame bench)",
            settings.priority
        )));
    }
    Ok(spec)
}

/// Lock memory now if asked, turning the kernel's refusal into advice.
pub fn lock_memory(settings: &ThreadSettings) -> Result<()> {
    if !settings.mlock {
        return Ok(());
    }
    tame_rt::memory::lock_all().map_err(|e| {
        invalid(format!(
            "cannot lock memory (mlockall): {e} — raise the locked-memory limit (ulimit -l), run as root, or pass --no-mlock"
        ))
    })
}

/// Build the measuring clock, calibrating the TSC when it is wanted.
pub fn make_clock(kind: ClockKind, invariant_tsc: bool) -> Result<Clock> {
    match kind {
        ClockKind::Monotonic => Ok(Clock::monotonic()),
        ClockKind::Tsc => {
            if !invariant_tsc || !tame_rt::clock::TSC_AVAILABLE {
                return Err(invalid(
                    "--clock tsc needs an invariant TSC (cpu flags constant_tsc and nonstop_tsc), which this CPU does not report — use --clock monotonic",
                ));
            }
            Ok(Clock::tsc(TscCalibration::measure(100_000_000)))
        }
    }
}

/// Measure clock-read cost and the loop floor of a tight clock-reading loop.
pub fn calibrate(clock: &Clock) -> Calibration {
    let cost = clock.read_cost(200_000);
    Calibration {
        clock: Some(clock.kind()),
        clock_read_cost_ns: cost.median_ns,
        loop_floor_ns: cost.min_ns,
        tsc_hz: clock.calibration().map(|c| c.hz),
    }
}

/// Where and how one measuring thread runs.
#[derive(Clone, Debug)]
pub struct ThreadPlan {
    pub cpu: Option<u32>,
    pub sched: SchedSpec,
    pub prefault: bool,
    /// The partition cgroup the thread joins before it pins itself (`bench -p`).
    pub join: Option<Arc<JoinGroup>>,
    /// Timer slack the thread sets once scheduled (None: it keeps what it inherits).
    pub timer_slack_ns: Option<u64>,
}

/// Why a measuring thread could not be set up.
enum SetupFailure {
    Join(std::io::Error),
    Sched(sched::SchedError),
    Slack(std::io::Error),
}

impl SetupFailure {
    fn into_error(self) -> BenchError {
        match self {
            SetupFailure::Join(e) => io_failed(
                "a measuring thread could not join the partition's cgroup (is the partition still applied? see tame status)",
                e,
            ),
            SetupFailure::Sched(source) => BenchError::Failed(Failure::Sched {
                what: "measuring thread setup failed".into(),
                source,
            }),
            SetupFailure::Slack(e) => io_failed(
                "a measuring thread could not set its timer slack (prctl PR_SET_TIMERSLACK)",
                e,
            ),
        }
    }
}

/// Handed to each measuring thread: wait here, then measure from `start_ns`.
pub struct StartGate {
    ready: Barrier,
    go: Barrier,
    start_ns: AtomicU64,
}

impl StartGate {
    /// Called by a measuring thread once set up; returns the common start time
    /// (CLOCK_MONOTONIC ns), or `None` when the run was called off.
    pub fn wait(&self) -> Option<u64> {
        self.ready.wait();
        self.go.wait();
        let start = self.start_ns.load(Ordering::Acquire);
        (start != CALLED_OFF).then_some(start)
    }
}

const CALLED_OFF: u64 = u64::MAX;

/// Progress counters, one per thread, read by the waiting thread.
pub struct Progress {
    done: Vec<AtomicU64>,
}

impl Progress {
    #[inline(always)]
    pub fn set(&self, index: usize, done: u64) {
        self.done[index].store(done, Ordering::Relaxed);
    }

    pub fn total_done(&self) -> u64 {
        self.done.iter().map(|d| d.load(Ordering::Relaxed)).sum()
    }
}

/// Run `body` on one thread per plan: each is pinned, scheduled and
/// prefaulted, then all start at a common time `lead_ns` after the last one is
/// ready. `tick` is called about every 100 ms with the total progress while
/// waiting. Returns the threads' outputs in plan order.
pub fn run_threads<T, F>(
    plans: &[ThreadPlan],
    lead_ns: u64,
    mut tick: impl FnMut(u64),
    body: F,
) -> Result<Vec<T>>
where
    T: Send + 'static,
    F: Fn(usize, &StartGate, &Progress) -> T + Send + Sync + 'static,
{
    let n = plans.len();
    let gate = Arc::new(StartGate {
        ready: Barrier::new(n + 1),
        go: Barrier::new(n + 1),
        start_ns: AtomicU64::new(0),
    });
    let progress = Arc::new(Progress {
        done: (0..n).map(|_| AtomicU64::new(0)).collect(),
    });
    let body = Arc::new(body);
    let setup_failed = Arc::new(std::sync::Mutex::new(None::<SetupFailure>));
    let mut handles = Vec::with_capacity(n);
    for (index, plan) in plans.iter().cloned().enumerate() {
        let (gate, progress, body, setup_failed) = (
            gate.clone(),
            progress.clone(),
            body.clone(),
            setup_failed.clone(),
        );
        let handle = std::thread::Builder::new()
            .name(format!("tame-measure-{index}"))
            .stack_size(4 * PREFAULT_STACK_BYTES)
            .spawn(move || {
                let setup = plan
                    .join
                    .as_ref()
                    .map_or(Ok(()), |j| j.join())
                    .map_err(SetupFailure::Join)
                    .and_then(|()| {
                        plan.cpu
                            .map_or(Ok(()), sched::pin_current_thread)
                            .and_then(|_| sched::set_current_thread(&plan.sched))
                            .map_err(SetupFailure::Sched)
                    })
                    // After the policy: an RT thread keeps the kernel's zero slack.
                    .and_then(|()| {
                        plan.timer_slack_ns
                            .map_or(Ok(()), tame_rt::clock::set_timer_slack_ns)
                            .map_err(SetupFailure::Slack)
                    });
                if let Err(e) = setup {
                    *setup_failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                }
                if plan.prefault {
                    tame_rt::memory::prefault_stack();
                }
                body(index, &gate, &progress)
            })
            .map_err(|e| io_failed("cannot start a measuring thread", e))?;
        handles.push(handle);
    }
    gate.ready.wait();
    if let Some(e) = setup_failed
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
    {
        // Threads are parked at the gate; start them with a zero budget so they exit at once.
        gate.start_ns.store(CALLED_OFF, Ordering::Release);
        gate.go.wait();
        for h in handles {
            let _ = h.join();
        }
        return Err(e.into_error());
    }
    gate.start_ns
        .store(tame_rt::clock::monotonic_ns() + lead_ns, Ordering::Release);
    gate.go.wait();
    while !handles.iter().all(|h| h.is_finished()) {
        tick(progress.total_done());
        std::thread::sleep(Duration::from_millis(100));
    }
    tick(progress.total_done());
    handles
        .into_iter()
        .map(|h| h.join().map_err(|_| failed("a measuring thread panicked")))
        .collect()
}

/// One plan per thread, all set up alike: `cpus[i]` pins thread i (None leaves it free).
pub fn plans(cpus: &[Option<u32>], setup: &ThreadSetup, prefault: bool) -> Vec<ThreadPlan> {
    cpus.iter()
        .map(|&cpu| ThreadPlan {
            cpu,
            sched: setup.sched,
            prefault,
            join: setup.join.clone(),
            timer_slack_ns: None,
        })
        .collect()
}

/// How every measuring thread of a run is set up: its scheduling, and the partition
/// cgroup it joins first, if the run is placed in one.
#[derive(Clone, Debug)]
pub struct ThreadSetup {
    pub sched: SchedSpec,
    pub join: Option<Arc<JoinGroup>>,
}

impl ThreadSetup {
    /// Scheduled as `sched`, in tame's own cgroup.
    pub fn unplaced(sched: SchedSpec) -> Self {
        Self { sched, join: None }
    }
}

/// [`run_threads`] with a lead of 10 ms, timed, noting whether a stop request cut it short.
pub fn measure<T, F>(
    plans: &[ThreadPlan],
    control: &RunControl,
    tick: impl FnMut(u64),
    body: F,
) -> Result<crate::measure::Measured<T>>
where
    T: Send + 'static,
    F: Fn(usize, &StartGate, &Progress) -> T + Send + Sync + 'static,
{
    let measured: Vec<u32> = plans.iter().filter_map(|p| p.cpu).collect();
    let _away = (!measured.is_empty()).then(|| WaitingThreadAway::from(&measured));
    let started = std::time::Instant::now();
    let outputs = run_threads(plans, 10_000_000, tick, body)?;
    Ok(crate::measure::Measured {
        outputs,
        elapsed_ns: started.elapsed().as_nanos() as u64,
        interrupted: control.stopped(),
    })
}

/// Keeps the calling (waiting) thread off the measured CPUs while it lives, where other CPUs
/// are allowed; restores its affinity when dropped. A thread that wakes on a measured CPU
/// (the session's, every 100 ms) brings timer interrupts there, and a measurement deadline that
/// falls inside one is served without an interrupt of its own: a faster wakeup than the
/// system gives a lone periodic task (cyclictest's 10 ms main loop on the measured CPU sets
/// its minimum that way; docs/benchmarks.md, parity).
pub(crate) struct WaitingThreadAway {
    restore: Option<Vec<u32>>,
}

impl WaitingThreadAway {
    pub(crate) fn from(measured: &[u32]) -> Self {
        let allowed = sched::allowed_cpus();
        let elsewhere: Vec<u32> = allowed
            .iter()
            .copied()
            .filter(|c| !measured.contains(c))
            .collect();
        // Nowhere else to go (or a failed call): stay, as before; only placement changes.
        let moved = !elsewhere.is_empty() && sched::set_affinity(0, elsewhere).is_ok();
        Self {
            restore: moved.then_some(allowed),
        }
    }
}

impl Drop for WaitingThreadAway {
    fn drop(&mut self) {
        if let Some(cpus) = self.restore.take() {
            let _ = sched::set_affinity(0, cpus);
        }
    }
}

/// One measuring thread on `cpu` whose body measures several groups in turn (mem: a group per
/// size and pattern; cache: per configuration) and returns them, or why it could not go on;
/// `bench` names the bench in that failure. `body` gets the start gate and a progress setter.
pub fn measure_groups<T, F>(
    cpu: u32,
    setup: &ThreadSetup,
    prefault: bool,
    control: &RunControl,
    tick: impl FnMut(u64),
    bench: &str,
    body: F,
) -> Result<crate::measure::Measured<T>>
where
    T: Send + 'static,
    F: Fn(&StartGate, &dyn Fn(u64)) -> std::result::Result<Vec<T>, String> + Send + Sync + 'static,
{
    let plans = plans(&[Some(cpu)], setup, prefault);
    let measured = measure(&plans, control, tick, move |index, gate, progress| {
        body(gate, &|done| progress.set(index, done))
    })?;
    let mut outputs = Vec::new();
    for out in measured.outputs {
        outputs.extend(out.map_err(|e| failed(format!("bench {bench}: {e}")))?);
    }
    Ok(crate::measure::Measured {
        outputs,
        elapsed_ns: measured.elapsed_ns,
        interrupted: measured.interrupted,
    })
}

/// Spread `tasks` over a CPU list round-robin (None: leave them unpinned).
pub fn assign_cpus(tasks: usize, cpus: Option<&CpuList>) -> Vec<Option<u32>> {
    match cpus {
        None => vec![None; tasks],
        Some(list) => {
            let all: Vec<u32> = list.iter().collect();
            (0..tasks).map(|i| Some(all[i % all.len()])).collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offline_cpus_are_named_in_the_error() {
        let online = CpuList::parse("0-1").unwrap();
        assert!(validate_cpus(&CpuList::parse("1").unwrap(), &online).is_ok());
        let err = validate_cpus(&CpuList::parse("1-3").unwrap(), &online)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("CPU 2-3 is not online") && err.contains("online: 0-1"),
            "{err}"
        );
        assert!(validate_cpus(&CpuList::new(), &online).is_err());
    }

    #[test]
    fn priority_out_of_range_is_refused_before_probing() {
        let s = ThreadSettings {
            policy: Policy::Fifo,
            priority: 120,
            mlock: false,
            clock: ClockKind::Monotonic,
        };
        let err = validate_sched(&s, 1_000_000, None).unwrap_err().to_string();
        assert!(err.contains("1..99"), "{err}");
        let s = ThreadSettings {
            policy: Policy::Other,
            priority: 5,
            ..s
        };
        assert!(validate_sched(&s, 1_000_000, None)
            .unwrap_err()
            .to_string()
            .contains("no static priority"));
    }

    #[test]
    fn priority_defaults_by_policy_and_labels_name_it() {
        let t = ThreadSettings::new(
            Policy::Fifo,
            None,
            MEASURING_PRIORITY,
            true,
            ClockKind::Monotonic,
        );
        assert_eq!((t.priority, t.label().as_str()), (95, "fifo 95"));
        let t = ThreadSettings::new(
            Policy::Rr,
            Some(7),
            MEASURING_PRIORITY,
            true,
            ClockKind::Monotonic,
        );
        assert_eq!(t.label(), "rr 7");
        let t = ThreadSettings::new(
            Policy::Other,
            None,
            MEASURING_PRIORITY,
            false,
            ClockKind::Tsc,
        );
        assert_eq!((t.priority, t.label().as_str()), (0, "other"));
    }

    #[test]
    fn tasks_spread_round_robin() {
        let cpus = CpuList::parse("2,5").unwrap();
        assert_eq!(assign_cpus(3, Some(&cpus)), vec![Some(2), Some(5), Some(2)]);
        assert_eq!(assign_cpus(2, None), vec![None, None]);
    }

    #[test]
    fn the_waiting_thread_leaves_the_measured_cpus_and_comes_back() {
        std::thread::spawn(|| {
            let allowed = sched::allowed_cpus();
            let Some(&first) = allowed.first() else {
                panic!("no allowed CPU")
            };
            {
                let _away = WaitingThreadAway::from(&[first]);
                let now = sched::allowed_cpus();
                if allowed.len() > 1 {
                    assert!(
                        !now.contains(&first) && now.len() == allowed.len() - 1,
                        "{now:?}"
                    );
                } else {
                    assert_eq!(now, allowed, "a single allowed CPU is kept");
                }
            }
            assert_eq!(sched::allowed_cpus(), allowed, "restored");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_planned_timer_slack_is_set_on_the_measuring_thread() {
        let plan = |timer_slack_ns| ThreadPlan {
            cpu: None,
            sched: SchedSpec::other(),
            prefault: false,
            join: None,
            timer_slack_ns,
        };
        let inherited = tame_rt::clock::timer_slack_ns();
        assert_ne!(
            inherited, 1,
            "the test needs a slack other than 1 ns to start from"
        );
        let outs = run_threads(
            &[plan(Some(1)), plan(None)],
            1_000_000,
            |_| {},
            |_, gate, _| {
                gate.wait();
                tame_rt::clock::timer_slack_ns()
            },
        )
        .unwrap();
        assert_eq!(outs, vec![1, inherited]);
    }

    #[test]
    fn threads_start_together_and_report_in_order() {
        let plans = vec![
            ThreadPlan {
                cpu: Some(0),
                sched: SchedSpec::other(),
                prefault: true,
                join: None,
                timer_slack_ns: None,
            };
            3
        ];
        let outs = run_threads(
            &plans,
            1_000_000,
            |_| {},
            |i, gate, progress| {
                let start = gate.wait().unwrap();
                progress.set(i, 1);
                (i, start)
            },
        )
        .unwrap();
        assert_eq!(outs.iter().map(|o| o.0).collect::<Vec<_>>(), vec![0, 1, 2]);
        assert!(
            outs.iter().all(|o| o.1 == outs[0].1),
            "one common start time"
        );
    }
}
