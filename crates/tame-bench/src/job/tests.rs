use super::*;
use tame_host::Root;
use tame_rt::ClockKind;

use crate::session::Conditions;

fn work(steps: u64) -> WorkKernel {
    WorkKernel {
        working_set_bytes: 64 * 1024,
        steps,
    }
}

fn settings(period_ns: u64, deadline_ns: u64, loops: Option<u64>) -> Result<JobSettings> {
    JobSettings::new(
        CpuList::parse("0").unwrap(),
        period_ns,
        deadline_ns,
        None,
        loops,
        ThreadSettings::unprivileged(),
        work(10),
    )
}

/// The first CPU this process may run on.
fn allowed_cpu() -> u32 {
    tame_rt::sched::allowed_cpus()[0]
}

#[test]
fn settings_refuse_what_a_periodic_job_cannot_be() {
    let s = settings(1_000_000, 500_000, None).unwrap();
    assert_eq!(s.loops, 10_000, "10 s of periods by default");
    assert_eq!(settings(200_000, 200_000, Some(7)).unwrap().loops, 7);
    for (period, deadline, what) in [
        (10_000, 10_000, "50µs..10s"),
        (20_000_000_000, 1_000_000, "50µs..10s"),
        (1_000_000, 0, "at most the period"),
        (1_000_000, 1_000_001, "at most the period"),
    ] {
        let e = settings(period, deadline, None).unwrap_err();
        assert!(e.is_bad_input() && e.to_string().contains(what), "{e}");
    }
    let small = JobSettings::new(
        CpuList::parse("0").unwrap(),
        1_000_000,
        1_000_000,
        None,
        None,
        ThreadSettings::unprivileged(),
        WorkKernel {
            working_set_bytes: 32,
            steps: 1,
        },
    )
    .unwrap_err();
    assert!(small.to_string().contains("4KiB..1GiB"), "{small}");
    let deadline = JobSettings::new(
        CpuList::parse("0").unwrap(),
        1_000_000,
        1_000_000,
        None,
        None,
        ThreadSettings {
            policy: Policy::Deadline,
            ..ThreadSettings::unprivileged()
        },
        work(1),
    )
    .unwrap_err();
    assert!(
        deadline.is_bad_input() && deadline.to_string().contains("--policy fifo"),
        "{deadline}"
    );
}

#[test]
fn the_default_working_set_is_half_the_l2_from_the_host_model() {
    let dir = tempfile::tempdir().unwrap();
    tame_testing::synthetic::SyntheticHost::rt_8cpu()
        .write(dir.path())
        .unwrap();
    let model = tame_host::HostModel::read(&Root::new(dir.path()));
    // The synthetic host's L2 is 2048K.
    assert_eq!(default_working_set(&model, 3), 1024 * 1024);
    let empty = tempfile::tempdir().unwrap();
    let model = tame_host::HostModel::read(&Root::new(empty.path()));
    assert_eq!(default_working_set(&model, 0), FALLBACK_WORKING_SET_BYTES);
    assert_eq!(working_set_for(Some(1_000_000)), 499_712, "whole pages");
    assert_eq!(working_set_for(Some(2048)), MIN_WORKING_SET_BYTES);
    assert_eq!(working_set_for(Some(0)), FALLBACK_WORKING_SET_BYTES);
}

#[test]
fn calibration_refuses_bad_input_before_starting_anything() {
    let control = RunControl::new();
    let t = ThreadSettings::unprivileged();
    let e = calibrate(allowed_cpu(), 1_000, 100, &t, &control).unwrap_err();
    assert!(
        e.is_bad_input() && e.to_string().contains("4KiB..1GiB"),
        "{e}"
    );
    let e = calibrate(allowed_cpu(), 11_000_000_000, 65_536, &t, &control).unwrap_err();
    assert!(e.is_bad_input() && e.to_string().contains("10s"), "{e}");
    let e = calibrate(100_000, 1_000, 65_536, &t, &control).unwrap_err();
    assert!(
        e.is_bad_input() && e.to_string().contains("may not run there"),
        "{e}"
    );
    control.request_stop();
    let e = calibrate(allowed_cpu(), 1_000, 65_536, &t, &control).unwrap_err();
    assert!(
        !e.is_bad_input() && e.to_string().contains("stopped"),
        "{e}"
    );
}

#[test]
fn no_budget_is_no_work_and_a_microsecond_is_at_least_one_step() {
    let (control, t) = (RunControl::new(), ThreadSettings::unprivileged());
    let none = calibrate(allowed_cpu(), 0, 4096, &t, &control).unwrap();
    assert_eq!(none.work.steps, 0);
    assert_eq!(none.trials, none.run_time.count);
    let one = calibrate(allowed_cpu(), 1_000, 4096, &t, &control).unwrap();
    assert!(one.work.steps >= 1);
    assert_eq!(
        (one.cpu, one.budget_ns, one.work.working_set_bytes),
        (allowed_cpu(), 1_000, 4096)
    );
    assert_eq!(one.trials, calibrate::MAX_TRIALS);
}

/// A real run through the session, as `tame assess` makes it: calibrated work of 20 µs
/// every 200 µs, 200 activations, on a CPU this process may use, at SCHED_OTHER.
#[test]
fn a_real_job_runs_its_calibrated_work_every_period() {
    let _machine = tame_testing::serial::module(module_path!());
    let cpu = allowed_cpu();
    let threads = ThreadSettings::unprivileged();
    let calibration = calibrate(cpu, 20_000, 64 * 1024, &threads, &RunControl::new()).unwrap();
    assert!(calibration.work.steps >= 1);
    let p50 = calibration.run_time.p50;
    assert!(
        (10_000..=40_000).contains(&p50),
        "calibrated median {p50} ns for a 20 µs budget"
    );
    assert!(
        calibration.elapsed_ns < 500_000_000,
        "{}",
        calibration.elapsed_ns
    );
    let settings = JobSettings::new(
        CpuList::from_cpus([cpu]),
        200_000,
        200_000,
        None,
        Some(200),
        ThreadSettings {
            clock: ClockKind::Monotonic,
            ..threads
        },
        calibration.work,
    )
    .unwrap();
    let wanted = settings.sample_capacity(true).unwrap();
    let finished = session::run(
        &Root::system(),
        settings,
        Conditions::default(),
        &RunControl::new(),
        wanted,
        |_| {},
        vec!["job".into()],
    )
    .unwrap();
    let out = &finished.measured.outputs[0];
    assert_eq!(out.activations, 200);
    assert_eq!(
        (
            out.response.count(),
            out.run_time.count(),
            out.samples.len()
        ),
        (200, 200, 200)
    );
    let run_p50 = out.run_time.quantile(0.5);
    assert!(
        (p50 / 2..=p50 * 4).contains(&run_p50),
        "run time median {run_p50} ns against the calibrated {p50} ns"
    );
    // Each response is its start delay plus its run time: never below the run time.
    assert!(out.response.min() >= out.run_time.min());
    assert!(out.response.quantile(0.5) >= run_p50);
    assert!(out.misses <= out.activations && out.overruns <= out.misses);
    let result = &finished.result;
    assert_eq!((result.bench.as_str(), result.groups.len()), ("job", 1));
    let group = &result.groups[0];
    assert_eq!(group.label, format!("cpu{cpu}"));
    let names: Vec<&str> = group.metrics.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["response", "start_delay", "run_time"]);
    assert_eq!(group.counters["activations"], 200);
    assert!(group.counters.contains_key("misses") && group.counters.contains_key("overruns"));
    let view = JobSettings::view(result);
    assert!(view.contains("tame bench job"), "{view}");
}
