//! Verdicts drawn from a recorded assessment (this 2-vCPU KVM guest, 1 ms period, 100 µs
//! of work, the default stress-ng load, 6 s per configuration in 3 interleaved rounds; each
//! round's raw results left out of the fixture): the histograms it keeps let any deadline,
//! miss rate and confidence be checked against the same activations, so every outcome is
//! tested without a live run.
//!
//! Recorded: shared 7 of 3900 activations missed (miss rate 0.084 %..0.337 % at 95 %),
//! partitioned 5 of 3900 (0.051 %..0.269 %); the hypervisor stalled the isolated CPU for up
//! to 1.94 ms.

use tame_assess::report::Phase;
use tame_assess::verdict::{Outcome, SmiCount, Status};
use tame_assess::{AssessReport, Requirement};

fn recorded() -> AssessReport {
    let text = include_str!("../fixtures/dev-vm-v2.json");
    serde_json::from_str(text).expect("the recorded report parses")
}

const MS: u64 = 1_000_000;
const US: u64 = 1_000;

fn requirement(budget: u64, deadline: u64, miss_rate: f64) -> Requirement {
    Requirement::new(MS, budget, Some(deadline), miss_rate, 1).unwrap()
}

#[test]
fn the_recorded_verdict_is_reproduced_from_its_figures() {
    let r = recorded();
    assert_eq!(r.decide_for(&r.requirement), r.verdict);
    assert_eq!(r.verdict.outcome, Outcome::NotMet);
    // It names the worst round and what it rests on.
    assert!(
        r.verdict.headline.contains("(most in round 2)"),
        "{}",
        r.verdict.headline
    );
    assert!(
        r.verdict.rests_on.starts_with(
            "7800 activations (3900 shared, 3900 partitioned) in 3 interleaved rounds each"
        ),
        "{}",
        r.verdict.rests_on
    );
}

#[test]
fn each_outcome_follows_the_bounds_of_the_same_activations() {
    let r = recorded();
    // 1 %: shared's bound 0.337 % is below it — an ordinary real-time process is enough,
    // and the advice states what a partition would have cost.
    let v = r.decide_for(&requirement(100 * US, MS, 0.01));
    assert_eq!(v.outcome, Outcome::RealFastIsEnough, "{v:?}");
    assert!(
        v.next_step.ends_with("— and one would cost: partitioning costs 56% of stress-ng cpu throughput here (3256 → 1428 bogo-ops/s on 2 → 1 CPUs; 12% per remaining CPU)"),
        "{}",
        v.next_step
    );
    // 0.3 %: shared undecided (0.084 %..0.337 %), partitioned shown below it (0.269 %).
    let v = r.decide_for(&requirement(100 * US, MS, 0.003));
    assert_eq!(v.outcome, Outcome::PartitionNeeded, "{v:?}");
    assert_eq!(v.shared.unwrap().status, Some(Status::Inconclusive));
    assert!(
        v.next_step
            .starts_with("apply the spec: tame apply /tmp/a2/spec.toml"),
        "{}",
        v.next_step
    );
    // 0.2 %: both undecided — measure longer, by how much.
    let v = r.decide_for(&requirement(100 * US, MS, 0.002));
    assert_eq!(v.outcome, Outcome::Inconclusive, "{v:?}");
    assert!(
        v.next_step.starts_with("measure longer: about "),
        "{}",
        v.next_step
    );
    let needed = v.shared.unwrap().activations_to_decide.unwrap();
    assert!(needed > 3900, "{needed}");
    // 0.04 %: both shown to miss more often.
    let v = r.decide_for(&requirement(100 * US, MS, 0.0004));
    assert_eq!(v.outcome, Outcome::NotMet, "{v:?}");
    // A laxer confidence narrows the bounds: at 50 % shared's upper bound is below 0.3 %.
    let lax = requirement(100 * US, MS, 0.003)
        .with_confidence(0.5)
        .unwrap();
    assert_eq!(r.decide_for(&lax).outcome, Outcome::RealFastIsEnough);
}

#[test]
fn a_deadline_below_what_the_machine_can_do_is_not_met_with_the_most_fundamental_reason() {
    let mut r = recorded();
    // --deadline 5us --budget 1us: every response, moved to a 1 µs budget, is far beyond.
    let tight = requirement(US, 5 * US, 0.0);
    let v = r.decide_for(&tight);
    assert_eq!(v.outcome, Outcome::NotMet);
    assert!(
        v.next_step.contains("this machine cannot meet it: the hypervisor (KVM) alone stalls the CPU for up to 1.937ms"),
        "{}",
        v.next_step
    );
    // On bare metal the same gaps are firmware: SMIs, which no reboot removes.
    r.machine.hypervisor = None;
    r.machine.smis = Some(SmiCount::Counted(42));
    let v = r.decide_for(&requirement(100 * US, MS, 0.0));
    assert!(
        v.next_step.contains("this machine cannot meet it: SMIs or firmware stall the CPU for up to 1.937ms (gaps no kernel event explains; 42 SMIs were counted"),
        "{}",
        v.next_step
    );
    assert!(!v.next_step.contains("need a reboot"), "{}", v.next_step);
    r.machine.smis = Some(SmiCount::Unavailable("no MSR_SMI_COUNT".into()));
    let v = r.decide_for(&requirement(100 * US, MS, 0.0));
    assert!(
        v.next_step
            .contains("; SMIs could not be counted: no MSR_SMI_COUNT)"),
        "{}",
        v.next_step
    );
    // Without such gaps, the next cause: the boot line, then the kernel, then the requirement.
    set_unexplained(&mut r, 10 * US, Some(0.01));
    let v = r.decide_for(&requirement(100 * US, MS, 0.0));
    assert!(
        v.next_step
            .contains("these changes need a reboot, then assess again: boot a PREEMPT_RT kernel"),
        "{}",
        v.next_step
    );
    r.machine.reboot_fixes.clear();
    let v = r.decide_for(&requirement(100 * US, MS, 0.0));
    assert!(
        v.next_step.contains("a PREEMPT_RT kernel is needed"),
        "{}",
        v.next_step
    );
    r.machine.preempt_rt = true;
    let v = r.decide_for(&requirement(100 * US, MS, 0.0));
    assert!(
        v.next_step.contains("relax the requirement"),
        "{}",
        v.next_step
    );
}

#[test]
fn a_hypervisor_stall_beyond_the_room_rules_out_a_soft_requirement_too() {
    // 0.04 % is shown to be missed; the stalls are the cause whatever the miss rate.
    let v = recorded().decide_for(&requirement(100 * US, MS, 0.0004));
    assert_eq!(v.outcome, Outcome::NotMet);
    assert!(
        v.next_step.contains("the hypervisor (KVM) alone stalls"),
        "{}",
        v.next_step
    );
    assert!(!v.next_step.contains("lockdown"), "{}", v.next_step);
}

#[test]
fn without_the_partitioned_phase_the_verdict_says_what_it_needs() {
    let mut r = recorded();
    r.partitioned = Phase::skipped("applying a partition needs root");
    let v = r.decide_for(&requirement(100 * US, MS, 0.0));
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
        r.decide_for(&requirement(100 * US, MS, 0.01)).outcome,
        Outcome::RealFastIsEnough
    );
}

#[test]
fn the_works_own_slowdown_and_what_interrupted_it_are_reported() {
    let v = recorded().decide_for(&requirement(100 * US, MS, 0.0));
    assert!(
        v.notes.iter().any(|n| n.starts_with("the work itself took 166.40µs (median) shared and 133.25µs partitioned: 1.25× slower shared")),
        "{:?}",
        v.notes
    );
    assert!(
        v.limits.iter().any(|l| l.starts_with(
            "in the busy loop, interruptions took up to 1.954ms from 100.00µs of work"
        )),
        "{:?}",
        v.limits
    );
    assert!(
        v.limits.iter().any(|l| l
            .starts_with("unexplained by any guest event (the hypervisor (KVM), SMI or hardware)")),
        "{:?}",
        v.limits
    );
}

#[test]
fn an_interrupted_or_empty_phase_gets_no_verdict() {
    let mut r = recorded();
    r.partitioned.job.as_mut().unwrap().interrupted = true;
    let v = r.decide_for(&requirement(100 * US, MS, 0.01));
    assert_eq!(v.outcome, Outcome::Unknown);
    assert!(v.headline.starts_with("interrupted"), "{}", v.headline);
    // Stopped before its first activation: as if not measured.
    let mut r = recorded();
    let j = r.partitioned.job.as_mut().unwrap();
    j.activations = 0;
    j.response_histogram.clear();
    let v = r.decide_for(&requirement(100 * US, MS, 0.0));
    assert!(v.partitioned.is_none(), "{v:?}");
}

#[test]
fn the_load_throughput_ratio_is_a_geometric_mean_over_shared_stressors() {
    use tame_assess::verdict::throughput_ratio;
    use tame_bench::load::{LoadDescription, Throughput};
    let load = |rates: &[(&str, f64)]| LoadDescription {
        kinds: vec![],
        cpus: tame_host::CpuList::new(),
        commands: vec![],
        command: None,
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

/// The recorded report with the busy loop's unexplained gaps made small (a quiet host):
/// what is left is the guest's own work — the tick, RCU, the timer.
fn kernel_dominated() -> AssessReport {
    let mut r = recorded();
    set_unexplained(&mut r, 10 * US, Some(0.01));
    r
}

/// Both configurations' unexplained gaps: the longest, and their share where given.
fn set_unexplained(r: &mut AssessReport, max_ns: u64, share_percent: Option<f64>) {
    for phase in [&mut r.shared, &mut r.partitioned] {
        if let Some(n) = phase.noise.as_mut() {
            n.unexplained_max_ns = Some(max_ns);
            if share_percent.is_some() {
                n.unexplained_share_percent = share_percent;
            }
        }
    }
}

#[test]
fn hypervisor_stalls_rule_the_advice_for_a_soft_requirement_too() {
    // issue 35, item 2: a soft requirement whose measurement blames the hypervisor was
    // told to reboot into PREEMPT_RT, NO_HZ_FULL and a kernel without lockdown.
    let r = recorded();
    // 0.3 %: met only partitioned; 0.07 %: missed shared, undecided partitioned.
    for miss_rate in [0.003, 0.0007] {
        let v = r.decide_for(&requirement(100 * US, MS, miss_rate));
        assert!(
            matches!(v.outcome, Outcome::PartitionNeeded | Outcome::Inconclusive),
            "{v:?}"
        );
        says(&v.next_step, "; for more margin: what interrupts the work most is the hypervisor (KVM): stalls no guest event explains took 2.316% of the busy loop, gaps up to 1.937ms, against 0.496% for every guest source together — no reboot, boot parameter or PREEMPT_RT removes them", false);
        for never in [
            "need a reboot",
            "PREEMPT_RT kernel",
            "NO_HZ_FULL",
            "LOCK_DOWN",
            "lockdown",
        ] {
            assert!(!v.next_step.contains(never), "{never}: {}", v.next_step);
        }
    }
}

#[test]
fn hypervisor_stalls_rule_the_advice_for_a_hard_deadline() {
    let mut r = recorded();
    // Stalls shorter than the room the work has, but most of the time lost: no reboot helps.
    set_unexplained(&mut r, 10 * US, None);
    let v = r.decide_for(&requirement(100 * US, MS, 0.0));
    assert_eq!(v.outcome, Outcome::NotMet);
    says(&v.next_step, "this machine is unlikely to meet it: what interrupts the work most is the hypervisor (KVM): stalls no guest event explains took 2.316% of the busy loop, gaps up to 10.00µs, against 0.496% for every guest source together — no reboot, boot parameter or PREEMPT_RT removes them: run it on bare metal or on a host that dedicates and pins this vCPU", true);
    assert!(!v.next_step.contains("need a reboot"), "{}", v.next_step);
}

#[test]
fn kernel_work_gets_the_reboots_that_remove_what_was_seen_and_never_lockdown() {
    let mut r = kernel_dominated();
    // Met partitioned: more margin comes from the boot line, for the sources measured.
    let v = r.decide_for(&requirement(100 * US, MS, 0.003));
    assert_eq!(v.outcome, Outcome::PartitionNeeded);
    says(&v.next_step, "; for more margin, these changes need a reboot: boot a PREEMPT_RT kernel (Debian: apt install linux-image-rt-amd64; Ubuntu Pro: pro enable realtime-kernel); meanwhile boot this one with preempt=full; boot a kernel built with CONFIG_NO_HZ_FULL=y (most distribution kernels and all -rt kernels are); boot with rcu_nocbs=0", true);
    // Not met: the same changes, then assess again.
    let v = r.decide_for(&requirement(100 * US, MS, 0.0));
    says(
        &v.next_step,
        "these changes need a reboot, then assess again: boot a PREEMPT_RT kernel",
        false,
    );
    // Lockdown is never advised, nor named as what limits the work.
    for text in std::iter::once(&v.next_step).chain(&v.limits) {
        assert!(
            !text.contains("lockdown") && !text.contains("LOCK_DOWN"),
            "{text}"
        );
    }
    // Only the tick seen: only what stops the tick.
    for phase in [&mut r.shared, &mut r.partitioned] {
        if let Some(n) = phase.noise.as_mut() {
            n.sources.retain(|s| s.source == "local_timer");
        }
    }
    let v = r.decide_for(&requirement(100 * US, MS, 0.0));
    says(&v.next_step, "these changes need a reboot, then assess again: boot a kernel built with CONFIG_NO_HZ_FULL=y (most distribution kernels and all -rt kernels are)", true);
}

#[test]
fn the_loads_throughput_is_compared_only_over_phases_long_enough_and_never_as_kept_above_all() {
    use tame_assess::verdict::{load_kept, LoadKept};
    // issue 35, item 3: `--duration 1s` printed "the load kept 130 %": 217 ms of load per
    // round is mostly stress-ng starting, and more than all is not "kept".
    let mut r = recorded();
    let req = r.requirement.clone();
    // 3900 activations of 1 ms in 3 rounds: 1.3 s of load per round.
    assert!(matches!(
        load_kept(&req, &r.shared, &r.partitioned),
        Some(LoadKept::Ratio(x)) if x < 1.0
    ));
    let (shared_load, part_load) = (r.shared.load.clone(), r.partitioned.load.clone());
    r.shared.load = part_load;
    r.partitioned.load = shared_load;
    let cost = r.decide_for(&req).cost.unwrap();
    says(
        &cost,
        "; the load got more done partitioned, on fewer CPUs, than shared (2.7",
        false,
    );
    assert!(!cost.contains("kept"), "{cost}");
    // 650 activations in 3 rounds: 216 ms of load per round.
    r.partitioned.job.as_mut().unwrap().activations = 650;
    assert_eq!(
        load_kept(&req, &r.shared, &r.partitioned),
        Some(LoadKept::TooShort {
            phase_ns: 216_000_000,
            duration_ns: 4_615_384_615
        })
    );
    let cost = r.decide_for(&req).cost.unwrap();
    says(&cost, "; the load's throughput is not compared: each round's load ran about 216.000ms, and below 1.000s stress-ng's start-up (files, memory, sockets) decides its rate — --duration 4.615s per configuration or more compares it", true);
}

/// `text` ends with (`at_end`) or contains `words`, shown whole when not.
fn says(text: &str, words: &str, at_end: bool) {
    let found = if at_end {
        text.ends_with(words)
    } else {
        text.contains(words)
    };
    assert!(found, "{text}");
}
