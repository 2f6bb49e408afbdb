//! Verdicts drawn from a recorded assessment (this 2-vCPU KVM guest, 1 ms period, mixed
//! stress-ng load, 6 s per phase): the histograms it keeps let any requirement be checked
//! against the same measurements, so every outcome is tested without a live run.

use tame_assess::report::Phase;
use tame_assess::verdict::Outcome;
use tame_assess::{AssessReport, Requirement};

fn recorded() -> AssessReport {
    let text = include_str!("../fixtures/dev-vm-1ms.json");
    serde_json::from_str(text).expect("the recorded report parses")
}

const MS: u64 = 1_000_000;
const US: u64 = 1_000;

fn requirement(period: u64, budget: u64, deadline: u64, miss_rate: f64) -> Requirement {
    Requirement::new(period, budget, Some(deadline), miss_rate, 1).unwrap()
}

#[test]
fn the_recorded_verdict_is_reproduced_from_its_figures() {
    let r = recorded();
    assert_eq!(r.decide_for(&r.requirement), r.verdict);
    assert_eq!(r.verdict.outcome, Outcome::NotMet);
}

#[test]
fn a_deadline_below_what_the_machine_can_do_is_not_met_with_the_reason() {
    let mut r = recorded();
    let v = r.decide_for(&requirement(MS, 0, 5 * US, 0.0));
    assert_eq!(v.outcome, Outcome::NotMet);
    // The hypervisor's stalls come first: no guest setting removes them.
    assert!(
        v.next_step.starts_with("this machine cannot meet it: the hypervisor (KVM) alone stalls the CPU for up to 13.35"),
        "{}",
        v.next_step
    );
    assert!(
        v.limits[0].starts_with("the fastest wakeup took"),
        "{:?}",
        v.limits
    );
    // On bare metal the wakeup floor is the reason.
    r.machine.hypervisor = None;
    let v = r.decide_for(&requirement(MS, 0, 5 * US, 0.0));
    assert!(
        v.next_step
            .starts_with("this machine cannot meet it: even the fastest wakeup took 10.09µs"),
        "{}",
        v.next_step
    );
}

#[test]
fn an_easy_requirement_is_met_shared_and_real_fast_is_enough() {
    let v = recorded().decide_for(&requirement(50 * MS, 5 * MS, 50 * MS, 0.0));
    assert_eq!(v.outcome, Outcome::RealFastIsEnough, "{v:?}");
    assert!(
        v.headline.starts_with("met shared: 0 late of 3900"),
        "{}",
        v.headline
    );
    assert!(
        v.next_step.starts_with("real fast is enough"),
        "{}",
        v.next_step
    );
    let cost = v.cost.expect("the cost of partitioning is stated");
    assert!(
        cost.starts_with("partitioning takes 1 of 2 CPUs from ordinary work; the load kept "),
        "{cost}"
    );
}

#[test]
fn a_requirement_met_only_inside_the_partition_gets_the_spec() {
    let v = recorded().decide_for(&requirement(MS, 0, MS, 0.001));
    assert_eq!(v.outcome, Outcome::PartitionNeeded, "{v:?}");
    let shared = v.shared.as_ref().unwrap();
    let part = v.partitioned.as_ref().unwrap();
    assert!(!shared.holds && shared.late > 400, "{shared:?}");
    assert!(
        part.holds && part.late == 3 && part.margin_ns > 0,
        "{part:?}"
    );
    assert!(
        v.next_step
            .starts_with("apply the spec: tame apply /tmp/as2/spec.toml"),
        "{}",
        v.next_step
    );
    // Hard, the same measurements do not hold: three activations were late.
    assert_eq!(
        recorded().decide_for(&requirement(MS, 0, MS, 0.0)).outcome,
        Outcome::NotMet
    );
}

#[test]
fn without_the_hypervisor_the_next_step_is_the_kernel_or_the_boot_line() {
    let mut r = recorded();
    r.machine.hypervisor = None;
    let hard = requirement(MS, 0, MS, 0.0);
    let v = r.decide_for(&hard);
    assert!(
        v.next_step.starts_with(
            "these changes need a reboot, then assess again: boot a PREEMPT_RT kernel"
        ),
        "{}",
        v.next_step
    );
    r.machine.reboot_fixes.clear();
    let v = r.decide_for(&hard);
    assert!(
        v.next_step.starts_with("a PREEMPT_RT kernel is needed"),
        "{}",
        v.next_step
    );
    r.machine.preempt_rt = true;
    let v = r.decide_for(&hard);
    assert!(
        v.next_step
            .starts_with("relax the requirement: the work waited up to 1.42"),
        "{}",
        v.next_step
    );
}

#[test]
fn without_the_partitioned_phase_the_verdict_says_what_it_needs() {
    let mut r = recorded();
    r.partitioned = Phase::skipped("applying a partition needs root");
    let v = r.decide_for(&requirement(MS, 0, MS, 0.0));
    assert_eq!(v.outcome, Outcome::Unknown);
    assert!(
        v.next_step.starts_with(
            "the partitioned configuration was not measured (applying a partition needs root) — fix that"
        ),
        "{}",
        v.next_step
    );
    // Met shared needs no partitioned phase to decide.
    assert_eq!(
        r.decide_for(&requirement(50 * MS, 0, 50 * MS, 0.0)).outcome,
        Outcome::RealFastIsEnough
    );
}

#[test]
fn an_isolated_median_that_rises_on_a_halting_vcpu_is_explained() {
    let v = recorded().decide_for(&requirement(MS, 0, MS, 0.0));
    assert!(
        v.notes
            .iter()
            .any(|n| n.contains("no cpuidle driver, so idle = \"poll\" cannot help")),
        "{:?}",
        v.notes
    );
}

#[test]
fn an_interrupted_or_empty_phase_gets_no_verdict() {
    let mut r = recorded();
    r.partitioned.cycle.as_mut().unwrap().interrupted = true;
    let v = r.decide_for(&requirement(50 * MS, 0, 50 * MS, 0.0));
    assert_eq!(v.outcome, Outcome::Unknown);
    assert!(v.headline.starts_with("interrupted"), "{}", v.headline);
    // Stopped before its first activation: as if not measured.
    let mut r = recorded();
    let c = r.partitioned.cycle.as_mut().unwrap();
    c.activations = 0;
    c.histogram.clear();
    let v = r.decide_for(&requirement(MS, 0, MS, 0.0));
    assert_eq!(v.outcome, Outcome::Unknown, "{v:?}");
    assert!(v.partitioned.is_none());
}

#[test]
fn a_soft_requirement_needs_enough_activations_and_is_not_ruled_out_by_one_stall() {
    // 0.01 % of 3900 activations is less than one: the run cannot tell.
    let v = recorded().decide_for(&requirement(MS, 0, MS, 0.0001));
    assert!(
        v.notes
            .iter()
            .any(|n| n.starts_with("3900 activations are too few to tell a miss rate of 0.01%")),
        "{:?}",
        v.notes
    );
    // Soft: a single hypervisor stall does not make it impossible; the next cause is named.
    assert!(!v.next_step.contains("hypervisor"), "{}", v.next_step);
}

#[test]
fn the_load_throughput_ratio_is_a_geometric_mean_over_shared_stressors() {
    use tame_assess::verdict::throughput_ratio;
    use tame_bench::load::{LoadDescription, Throughput};
    let load = |rates: &[(&str, f64)]| LoadDescription {
        kinds: vec![],
        cpus: tame_host::CpuList::new(),
        commands: vec![],
        throughput: rates
            .iter()
            .map(|(s, r)| Throughput {
                stressor: s.to_string(),
                bogo_ops_per_s: *r,
            })
            .collect(),
    };
    let shared = load(&[("cpu", 100.0), ("vm", 100.0), ("io", 0.0)]);
    let part = load(&[("cpu", 25.0), ("vm", 100.0), ("sock", 5.0)]);
    // cpu 0.25 and vm 1.0 (io has no rate, sock no shared figure): sqrt(0.25) = 0.5.
    let ratio = throughput_ratio(Some(&shared), Some(&part)).unwrap();
    assert!((ratio - 0.5).abs() < 1e-12, "{ratio}");
    assert_eq!(throughput_ratio(Some(&shared), None), None);
    assert_eq!(throughput_ratio(Some(&load(&[])), Some(&part)), None);
}

#[test]
fn interruptions_of_the_budget_count_against_the_deadline() {
    use tame_assess::stretch::Stretch;
    let mut r = recorded();
    let req = requirement(20 * MS, MS, 20 * MS, 0.0);
    let before = r.decide_for(&req).partitioned.unwrap();
    assert!(before.holds && before.stretch_ns == 0, "{before:?}");
    // The busy loop saw one computation of the budget lose just more than the margin.
    let lost = before.margin_ns as u64 + 10 * US;
    r.partitioned.noise.as_mut().unwrap().stretch = Some(Stretch {
        budget_ns: MS,
        worst_ns: lost,
        mean_share_percent: 1.0,
        tasks_excluded: true,
        incomplete: false,
    });
    let v = r.decide_for(&req);
    let after = v.partitioned.as_ref().unwrap();
    assert!(!after.holds, "{after:?}");
    assert_eq!(after.stretch_ns, lost);
    assert_eq!(after.response_ns, before.response_ns + lost);
    // The worst hits one computation: the late count takes the average (1 % of 1 ms).
    assert_eq!(
        after.late,
        recorded()
            .decide_for(&requirement(20 * MS, MS + 10 * US, 20 * MS, 0.0))
            .partitioned
            .unwrap()
            .late
    );
    // A tolerated miss rate takes the average share instead: 1 % of 1 ms.
    let soft = requirement(20 * MS, MS, 20 * MS, 0.01);
    let v = r.decide_for(&soft);
    assert_eq!(v.partitioned.unwrap().stretch_ns, 10 * US);
}

#[test]
fn when_only_the_interruptions_break_it_the_next_step_says_so() {
    use tame_assess::stretch::Stretch;
    let mut r = recorded();
    let req = requirement(20 * MS, MS, 20 * MS, 0.0);
    let margin = r.decide_for(&req).partitioned.unwrap().margin_ns as u64;
    r.partitioned.noise.as_mut().unwrap().stretch = Some(Stretch {
        budget_ns: MS,
        worst_ns: margin + 10 * US,
        mean_share_percent: 1.0,
        tasks_excluded: true,
        incomplete: false,
    });
    // Shared does not hold either (its wakeups alone are too slow).
    let v = r.decide_for(&req);
    assert_eq!(v.outcome, Outcome::NotMet, "{v:?}");
    assert!(
        v.next_step.starts_with("the wakeups alone fit ("),
        "{}",
        v.next_step
    );
    assert!(
        v.limits[0].starts_with("interruptions add up to "),
        "{:?}",
        v.limits
    );
}

/// The cost probe's figures: stress-ng cpu on both vCPUs of this VM as `tame bench cost`
/// measured it (992 bogo-ops/s, docs/bench.md), and on the one CPU the system partition
/// keeps — that one made up for the test (no partition is applied on the machine the
/// figures were recorded on): a bit less than half.
fn with_probe(mut r: AssessReport, partitioned: f64) -> AssessReport {
    use tame_assess::figures::WorkThroughput;
    let probe = |cpus: &str, throughput: f64| WorkThroughput {
        workload: "stress-ng cpu".into(),
        unit: "bogo-ops/s".into(),
        cpus: tame_host::CpuList::parse(cpus).unwrap(),
        throughput,
    };
    r.shared.throughput = Some(probe("0-1", 992.0));
    r.partitioned.throughput = Some(probe("1", partitioned));
    r
}

#[test]
fn the_advice_states_the_measured_cost_of_partitioning() {
    let r = with_probe(recorded(), 481.0);
    let v = r.decide_for(&requirement(50 * MS, 5 * MS, 50 * MS, 0.0));
    assert_eq!(v.outcome, Outcome::RealFastIsEnough);
    // 1 − 481/992 = 51.5 %; per CPU 1 − 481/496 = 3.0 %.
    let said = "partitioning costs 52% of stress-ng cpu throughput here (992 → 481 bogo-ops/s on 2 → 1 CPUs; 3% per remaining CPU)";
    assert!(
        v.next_step.starts_with("real fast is enough")
            && v.next_step
                .ends_with(&format!("— and one would cost: {said}")),
        "{}",
        v.next_step
    );
    let cost = v.cost.unwrap();
    assert!(
        cost.starts_with(&format!(
            "partitioning takes 1 of 2 CPUs from ordinary work; {said}; the load kept "
        )),
        "{cost}"
    );
    // Where a partition is needed, the cost is stated but the next step stays the spec.
    let v = r.decide_for(&requirement(MS, 0, MS, 0.001));
    assert_eq!(v.outcome, Outcome::PartitionNeeded);
    assert!(!v.next_step.contains("would cost"), "{}", v.next_step);
    assert!(v.cost.unwrap().contains(said));
}

#[test]
fn without_both_probes_no_cost_is_claimed() {
    use tame_assess::verdict::WorkCost;
    let r = with_probe(recorded(), 481.0);
    assert!(WorkCost::of(r.shared.throughput.as_ref(), None).is_none());
    let mut other = r.partitioned.throughput.clone().unwrap();
    other.workload = "stress-ng pipe".into();
    assert!(WorkCost::of(r.shared.throughput.as_ref(), Some(&other)).is_none());
    // The recorded report predates the probe: its verdict has no measured cost.
    let v = recorded().decide_for(&requirement(50 * MS, 5 * MS, 50 * MS, 0.0));
    assert!(!v.cost.unwrap().contains("stress-ng cpu"));
    // More throughput partitioned (a noisy shared run) reads as a gain, not a negative cost.
    let w = with_probe(recorded(), 1100.0);
    let c = WorkCost::of(
        w.shared.throughput.as_ref(),
        w.partitioned.throughput.as_ref(),
    )
    .unwrap();
    assert!(
        c.sentence()
            .starts_with("partitioning gains 11% of stress-ng cpu throughput"),
        "{}",
        c.sentence()
    );
}
