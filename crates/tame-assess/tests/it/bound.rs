//! How sure a verdict is: misses injected into made-up activations give the one-sided
//! Clopper–Pearson bounds of a known table, and the verdict is met, not met or undecided
//! by them — never met on fewer activations than the bound needs.
//!
//! The table (95 % one-sided) was computed with exact binomial sums and bisection
//! (Python's `math.comb`, 200 halvings); k = 0 agrees with the closed form 1 − 0.05^(1/n).

use tame_assess::figures::JobFigures;
use tame_assess::report::Phase;
use tame_assess::verdict::{self, Machine, Outcome, Status};
use tame_assess::Requirement;
use tame_bench::Recorder;

const MS: u64 = 1_000_000;
const US: u64 = 1_000;

/// `activations` activations, each completing `fast` after its release, except `misses`
/// of them, which complete `slow` after it.
fn job(activations: u64, misses: u64, fast: u64, slow: u64, deadline_ns: u64) -> JobFigures {
    let mut response = Recorder::new();
    let mut run_time = Recorder::new();
    for i in 0..activations {
        response.record(if i < misses { slow } else { fast });
        run_time.record(fast / 2);
    }
    let histogram = tame_assess::figures::histogram_of(&response);
    JobFigures {
        cpus: tame_host::CpuList::parse("1").unwrap(),
        period_ns: deadline_ns,
        deadline_ns,
        budget_ns: fast / 2,
        activations,
        misses: if slow > deadline_ns { misses } else { 0 },
        overruns: 0,
        response: response.summary(),
        response_histogram: histogram,
        start_delay: run_time.summary(),
        run_time: run_time.summary(),
        interrupted: false,
    }
}

fn phase(job: JobFigures) -> Phase {
    Phase {
        measured: true,
        job: Some(job),
        rounds: 3,
        ..Phase::default()
    }
}

fn requirement(period: u64, budget: u64, miss_rate: f64) -> Requirement {
    Requirement::new(period, budget, None, miss_rate, 1).unwrap()
}

fn machine() -> Machine {
    Machine {
        partition: "rt".into(),
        online_cpus: 2,
        isolated_cpus: 1,
        ..Machine::default()
    }
}

fn close(got: f64, want: f64) -> bool {
    (got - want).abs() <= want * 1e-4
}

#[test]
fn injected_misses_give_the_clopper_pearson_bounds_of_the_table() {
    let r = requirement(MS, 50 * US, 0.01);
    // (misses, activations, upper, lower) at 95 %.
    let table = [
        (0, 1000, 0.002_991_249_5, 0.0),
        (12, 1000, 0.019_370_199, 0.006_938_388),
        (20, 1000, 0.028_930_123, 0.013_293_006),
        (5, 100, 0.102_253_378, 0.019_905_564),
        (0, 15_600, 0.000_192_015_68, 0.0),
    ];
    for (k, n, upper, lower) in table {
        let h = verdict::Holds::of(&job(n, k, 100 * US, 2 * MS, MS), None, &r);
        assert_eq!((h.late, h.activations), (k, n));
        assert!(close(h.miss_bound.unwrap(), upper), "{k}/{n}: {h:?}");
        assert!(
            close(h.miss_lower.unwrap(), lower) || lower == 0.0,
            "{k}/{n}: {h:?}"
        );
        assert_eq!(h.confidence, Some(0.95));
    }
}

#[test]
fn met_only_when_the_bound_is_below_the_tolerated_rate() {
    let r = requirement(MS, 50 * US, 0.01);
    let status = |k, n| {
        verdict::Holds::of(&job(n, k, 100 * US, 2 * MS, MS), None, &r)
            .status
            .unwrap()
    };
    // 0 of 1000: below 0.3 % — met at 1 %.
    assert_eq!(status(0, 1000), Status::Met);
    // 20 of 1000: above 1.33 % with 95 % confidence — not met.
    assert_eq!(status(20, 1000), Status::NotMet);
    // 12 of 1000: between 0.69 % and 1.94 % — undecided, and more activations would decide.
    let h = verdict::Holds::of(&job(1000, 12, 100 * US, 2 * MS, MS), None, &r);
    assert_eq!(h.status, Some(Status::Inconclusive));
    assert!(h.activations_to_decide.unwrap() > 1000, "{h:?}");
    // 0 of 100: below 2.95 % only — a clean run too short to show 1 %.
    assert_eq!(status(0, 100), Status::Inconclusive);
}

#[test]
fn a_deadline_below_every_response_is_not_met() {
    // --period 1ms --deadline 5us --budget 1us: every activation ends after 5 µs.
    let r = Requirement::new(MS, US, Some(5 * US), 0.0, 1).unwrap();
    let j = job(2000, 2000, 12 * US, 12 * US, 5 * US);
    let v = verdict::decide(&r, &phase(j.clone()), &phase(j), &machine());
    assert_eq!(v.outcome, Outcome::NotMet, "{v:?}");
    assert!(
        v.next_step.starts_with("this machine cannot meet it"),
        "{}",
        v.next_step
    );
}

#[test]
fn a_hard_requirement_with_no_miss_is_never_met_but_says_what_was_shown() {
    // --period 50ms --budget 10us: 480 activations per configuration, none missed.
    let r = requirement(50 * MS, 10 * US, 0.0);
    let j = job(480, 0, 40 * US, 40 * US, 50 * MS);
    let v = verdict::decide(&r, &phase(j.clone()), &phase(j), &machine());
    assert_eq!(v.outcome, Outcome::Inconclusive, "{v:?}");
    assert!(
        v.headline
            .contains("a miss rate of 0 cannot be shown by measurement: no miss in 480 activations — the miss rate is below 0.622% at 95% confidence"),
        "{}",
        v.headline
    );
    // The bound 0.62 % shows a rate below 1 %; 0.1 % would take 2995 activations:
    // 2995 × 50 ms ÷ 0.65 of each round = 3 min 50 s per configuration.
    assert!(
        v.next_step.starts_with("state the miss rate the work can tolerate (--miss-rate): these measurements already show one below 1% (--miss-rate 1%); showing 0.1% would take about 2995 activations (--duration 230.385s per configuration). If that is enough: real fast is enough"),
        "{}",
        v.next_step
    );
    assert!(
        v.rests_on.starts_with(
            "960 activations (480 shared, 480 partitioned) in 3 interleaved rounds each"
        ),
        "{}",
        v.rests_on
    );
}

#[test]
fn a_soft_requirement_on_too_few_activations_is_undecided_with_the_length_that_decides() {
    // --period 50ms --budget 10us --miss-rate 0.1%: 480 clean activations bound it by 0.62 %.
    let r = requirement(50 * MS, 10 * US, 0.001);
    let j = job(480, 0, 40 * US, 40 * US, 50 * MS);
    let v = verdict::decide(&r, &phase(j.clone()), &phase(j), &machine());
    assert_eq!(v.outcome, Outcome::Inconclusive, "{v:?}");
    assert!(
        v.next_step
            .starts_with("measure longer: about 2995 activations per configuration would decide"),
        "{}",
        v.next_step
    );
    // With the activations the bound needs, the same clean run is met — shared first.
    let j = job(3000, 0, 40 * US, 40 * US, 50 * MS);
    let v = verdict::decide(&r, &phase(j.clone()), &phase(j), &machine());
    assert_eq!(v.outcome, Outcome::RealFastIsEnough, "{v:?}");
    assert!(
        v.headline.contains("miss rate < 0.0998% at 95% confidence"),
        "{}",
        v.headline
    );
}

#[test]
fn met_only_partitioned_when_shared_is_shown_to_miss() {
    let r = requirement(MS, 50 * US, 0.001);
    let shared = job(20_000, 200, 100 * US, 3 * MS, MS);
    let part = job(20_000, 2, 100 * US, 3 * MS, MS);
    let v = verdict::decide(&r, &phase(shared), &phase(part), &machine());
    assert_eq!(v.outcome, Outcome::PartitionNeeded, "{v:?}");
    let p = v.partitioned.unwrap();
    assert!(p.holds && p.miss_bound.unwrap() <= 0.001, "{p:?}");
    assert_eq!(v.shared.unwrap().status, Some(Status::NotMet));
}

#[test]
fn an_interrupted_run_or_an_old_report_gets_no_verdict() {
    let r = requirement(MS, 50 * US, 0.001);
    let mut j = job(20_000, 0, 100 * US, 100 * US, MS);
    j.interrupted = true;
    let v = verdict::decide(&r, &phase(j.clone()), &phase(j), &machine());
    assert_eq!(v.outcome, Outcome::Unknown);
    // A tame.assess/1 report still reads; its verdict is not redrawn from wakeups alone.
    let old: tame_assess::AssessReport =
        serde_json::from_str(include_str!("../fixtures/dev-vm-1ms.json")).unwrap();
    assert!(old.shared.cycle.is_some() && old.shared.job.is_none());
    let v = old.decide_for(&r);
    assert_eq!(v.outcome, Outcome::Unknown);
    assert!(
        v.headline.contains("before tame.assess/2"),
        "{}",
        v.headline
    );
}
