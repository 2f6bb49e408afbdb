//! Sizing the work to a budget: on the job's CPU, undisturbed, in a short-lived thread
//! scheduled as the job threads will be, the chase's time per step is measured over a
//! long trial, the steps for the budget follow, and `steps` are then timed as single
//! activations and corrected once, proportionally, from their median (which includes
//! what a single activation pays beyond the long trial's rate: the clock reads).

use std::time::Instant;

use serde::{Deserialize, Serialize};
use tame_rt::sched;
use tame_rt::Clock;

use crate::cycle::MAX_INTERVAL_NS;
use crate::engine::{self, RunControl, ThreadSettings};
use crate::error::{failed, invalid, BenchError, Failure, Result};
use crate::stats::{Recorder, Summary};

use super::kernel::{validate_working_set, WorkingSet};
use super::{validate_policy, WorkKernel};

/// The rate trial doubles its steps until it lasts this long.
const RATE_TRIAL_NS: u64 = 2_000_000;
/// Rate trials at that length; their median rate counts.
const RATE_TRIALS: usize = 3;
/// Time a verification pass may take (a pass has at least [`MIN_TRIALS`]).
const VERIFY_NS: u64 = 100_000_000;
/// Trials per verification pass: as many as fit in [`VERIFY_NS`], within these bounds.
pub const MIN_TRIALS: u64 = 9;
pub const MAX_TRIALS: u64 = 200;

/// The kernel calibrated undisturbed on `cpu` so that one activation's work takes `budget_ns`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkCalibration {
    pub cpu: u32,
    pub budget_ns: u64,
    /// The steps found.
    pub work: WorkKernel,
    /// The calibrated work's run time over the verification trials.
    pub run_time: Summary,
    pub trials: u64,
    /// How long the calibration took, thread start to end (ns).
    pub elapsed_ns: u64,
}

/// Calibrate the work on `cpu` (which this process must be allowed on) with `threads`'
/// policy, priority and memory locking; the working set is built and prefaulted first.
/// A budget of 0 is no work (0 steps); any other budget gets at least one step. The trials
/// are bounded by time (at least 9 per pass): on this project's VM a budget of 100 µs took
/// 55 ms, 1 to 3 ms took 0.21–0.24 s; above about 11 ms it takes 18 budgets and more.
pub fn calibrate(
    cpu: u32,
    budget_ns: u64,
    working_set_bytes: u64,
    threads: &ThreadSettings,
    control: &RunControl,
) -> Result<WorkCalibration> {
    validate_working_set(working_set_bytes)?;
    if budget_ns > MAX_INTERVAL_NS {
        return Err(invalid(format!(
            "budget {} is longer than the longest period (10s) — give a budget within the period",
            tame_rt::duration::format_ns(budget_ns)
        )));
    }
    validate_policy(threads)?;
    let allowed = sched::allowed_cpus();
    if !allowed.contains(&cpu) {
        return Err(invalid(format!(
            "cannot calibrate the work on CPU {cpu}: this process may not run there (allowed: {}) — calibrate on one of those CPUs",
            tame_host::CpuList::from_cpus(allowed)
        )));
    }
    let spec = engine::validate_sched(threads, MAX_INTERVAL_NS, Some(cpu))?;
    let (lock, control) = (threads.mlock, control.clone());
    let thread = std::thread::Builder::new()
        .name("tame-calibrate".into())
        .spawn(move || -> Result<WorkCalibration> {
            let started = Instant::now();
            sched::pin_current_thread(cpu)
                .and_then(|()| sched::set_current_thread(&spec))
                .map_err(|source| {
                    BenchError::Failed(Failure::Sched {
                        what: "the calibration thread could not be set up".into(),
                        source,
                    })
                })?;
            let mut set = WorkingSet::new(working_set_bytes, lock)
                .map_err(|e| failed(format!("calibration: working set: {e}")))?;
            let (steps, run_time) = size_work(&mut set, budget_ns, &control)
                .ok_or_else(|| failed("calibration was stopped before it ended"))?;
            Ok(WorkCalibration {
                cpu,
                budget_ns,
                work: WorkKernel {
                    working_set_bytes,
                    steps,
                },
                trials: run_time.count(),
                run_time: run_time.summary(),
                elapsed_ns: started.elapsed().as_nanos() as u64,
            })
        })
        .map_err(|e| crate::error::io_failed("cannot start the calibration thread", e))?;
    thread
        .join()
        .map_err(|_| failed("the calibration thread panicked"))?
}

/// The steps for `budget_ns` on this thread, and the run times of the verification trials
/// of those steps; None when stopped.
fn size_work(
    set: &mut WorkingSet,
    budget_ns: u64,
    control: &RunControl,
) -> Option<(u64, Recorder)> {
    let clock = Clock::monotonic();
    set.warm_up();
    set.warm_up();
    let trials = trials_for(budget_ns);
    if budget_ns == 0 {
        return Some((0, verify(set, &clock, 0, trials, control)?));
    }
    let ns_per_step = rate(set, &clock, control)?;
    let mut steps = steps_for(budget_ns, ns_per_step);
    let mut run_time = verify(set, &clock, steps, trials, control)?;
    let corrected = steps_for(budget_ns, run_time.quantile(0.5) as f64 / steps as f64);
    if corrected != steps {
        steps = corrected;
        run_time = verify(set, &clock, steps, trials, control)?;
    }
    Some((steps, run_time))
}

/// Trials per verification pass for a budget.
fn trials_for(budget_ns: u64) -> u64 {
    VERIFY_NS
        .checked_div(budget_ns)
        .unwrap_or(MAX_TRIALS)
        .clamp(MIN_TRIALS, MAX_TRIALS)
}

/// The steps that take `budget_ns` at `ns_per_step`: at least one.
fn steps_for(budget_ns: u64, ns_per_step: f64) -> u64 {
    ((budget_ns as f64 / ns_per_step.max(1e-3)).round() as u64).max(1)
}

/// Time per step over long trials: the steps double until a trial lasts
/// [`RATE_TRIAL_NS`], then the median of [`RATE_TRIALS`] such trials.
fn rate(set: &mut WorkingSet, clock: &Clock, control: &RunControl) -> Option<f64> {
    let mut n = 256u64;
    while timed(set, clock, n) < RATE_TRIAL_NS && n < 1 << 40 {
        if control.stopped() {
            return None;
        }
        n *= 2;
    }
    let mut times = [0u64; RATE_TRIALS];
    for t in &mut times {
        *t = timed(set, clock, n);
    }
    times.sort_unstable();
    Some(times[RATE_TRIALS / 2].max(1) as f64 / n as f64)
}

/// `trials` single activations of `steps`, timed as the job loop times them.
fn verify(
    set: &mut WorkingSet,
    clock: &Clock,
    steps: u64,
    trials: u64,
    control: &RunControl,
) -> Option<Recorder> {
    let mut run_time = Recorder::new();
    for _ in 0..trials {
        if control.stopped() {
            return None;
        }
        run_time.record(timed(set, clock, steps));
    }
    Some(run_time)
}

#[inline(always)]
fn timed(set: &mut WorkingSet, clock: &Clock, steps: u64) -> u64 {
    let begun = clock.now();
    set.run(steps);
    clock.now().saturating_sub(begun)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trials_are_bounded_by_time_and_count() {
        assert_eq!(trials_for(0), MAX_TRIALS);
        assert_eq!(trials_for(1_000), MAX_TRIALS);
        assert_eq!(trials_for(1_000_000), 100);
        assert_eq!(trials_for(3_000_000), 33);
        assert_eq!(trials_for(1_000_000_000), MIN_TRIALS);
    }

    #[test]
    fn a_budget_gets_at_least_one_step() {
        assert_eq!(steps_for(1_000, 4.0), 250);
        assert_eq!(steps_for(1, 4.0), 1);
        assert_eq!(steps_for(1_000, 0.0), 1_000_000);
        assert_eq!(steps_for(10, 4.0), 3, "rounded to the nearest step");
    }
}
