//! The answer: does the requirement hold shared, partitioned, or not at all; what limits
//! it; and the next step with its cost — real time or real fast (seed 001's decision:
//! when an ordinary process meets the requirement, partitioning only costs the rest of
//! the machine). Pure: drawn from the figures alone, so recorded results give the same
//! verdict as the live run.

use serde::{Deserialize, Serialize};
use tame_bench::load::LoadDescription;
use tame_trace::attribute::NoiseClass;

use crate::figures::{CycleFigures, NoiseFigures, WorkThroughput};
use crate::report::Phase;
use crate::requirement::{human, percent, Requirement};
use tame_bench::cost::figures as cost_figures;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// An ordinary real-time process on the shared machine meets it.
    RealFastIsEnough,
    /// Met only inside an isolated partition.
    PartitionNeeded,
    /// Met in neither configuration.
    NotMet,
    /// Not met shared, and the partitioned phase was not measured.
    Unknown,
}

/// Whether the requirement held in one configuration, and by how much.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Holds {
    pub holds: bool,
    pub activations: u64,
    /// Activations whose latency plus the budget, stretched by the average
    /// interruption, passed the deadline.
    pub late: u64,
    pub late_fraction: f64,
    /// What interruptions add to the budget (the busy loop's measure of them: the worst
    /// when hard, the average share otherwise; 0 when the busy loop did not run).
    #[serde(default)]
    pub stretch_ns: u64,
    /// Latency at the tolerated miss rate (the maximum when hard) plus the budget plus
    /// the stretch.
    pub response_ns: u64,
    /// Deadline minus response: how much room is left (negative: how much is missing).
    pub margin_ns: i64,
}

impl Holds {
    /// Whether the requirement held over `cycle`'s activations, each computation of the
    /// budget stretched by the interruptions `noise` measured in the same configuration.
    ///
    /// Late activations are counted with the average stretch (a worst case hits one
    /// computation, not every one); a hard requirement must also hold when the worst
    /// interruption meets the worst wakeup, which the response states.
    pub fn of(cycle: &CycleFigures, noise: Option<&NoiseFigures>, r: &Requirement) -> Self {
        let stretch = noise.and_then(|n| n.stretch.as_ref());
        let stretch_ns = stretch.map_or(0, |s| s.for_budget(r.budget_ns, r.is_hard()));
        let average_ns = stretch.map_or(0, |s| s.for_budget(r.budget_ns, false));
        let late = cycle.late(r.latency_bound_ns().saturating_sub(average_ns));
        let late_fraction = late as f64 / cycle.activations.max(1) as f64;
        let response_ns = cycle
            .latency_within(r.miss_rate)
            .saturating_add(r.budget_ns)
            .saturating_add(stretch_ns);
        let worst_fits = !r.is_hard() || response_ns <= r.deadline_ns;
        Holds {
            holds: cycle.activations > 0 && late_fraction <= r.miss_rate && worst_fits,
            activations: cycle.activations,
            late,
            late_fraction,
            stretch_ns,
            response_ns,
            margin_ns: (i128::from(r.deadline_ns) - i128::from(response_ns))
                .clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64,
        }
    }

    fn describe(&self) -> String {
        let margin = if self.margin_ns >= 0 {
            format!("{} to spare", human(self.margin_ns as u64))
        } else {
            format!("{} short", human(self.margin_ns.unsigned_abs()))
        };
        let stretch = if self.stretch_ns > 0 {
            format!(
                " (interruptions add {} to the budget)",
                human(self.stretch_ns)
            )
        } else {
            String::new()
        };
        format!(
            "{} late of {} ({}), response {}{stretch} — {margin}",
            self.late,
            self.activations,
            percent(self.late_fraction),
            human(self.response_ns)
        )
    }
}

/// What the verdict knows of the machine besides the measurements.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// The hypervisor, when virtualised.
    pub hypervisor: Option<String>,
    pub preempt_rt: bool,
    pub cpuidle_driver: Option<String>,
    pub online_cpus: usize,
    /// CPUs the partitions take from ordinary work (every CPU outside the system partition).
    pub isolated_cpus: usize,
    /// The isolated partition the work would run in.
    pub partition: String,
    /// Fixes the check found that need a reboot (boot parameters, another kernel).
    pub reboot_fixes: Vec<String>,
    /// Check findings that warn or fail, one line each.
    pub findings: Vec<String>,
    /// Where the spec was written, if it was.
    pub spec_file: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub outcome: Outcome,
    /// One sentence.
    pub headline: String,
    pub shared: Option<Holds>,
    pub partitioned: Option<Holds>,
    /// What limits it, worst first.
    pub limits: Vec<String>,
    /// What to do next.
    pub next_step: String,
    /// What that costs the rest of the machine.
    pub cost: Option<String>,
    pub notes: Vec<String>,
}

pub fn decide(r: &Requirement, shared: &Phase, partitioned: &Phase, m: &Machine) -> Verdict {
    // A phase cut short before its first activation counts as not measured.
    let measured = |p: &Phase| p.cycle.clone().filter(|c| c.activations > 0);
    let (shared_cycle, part_cycle) = (measured(shared), measured(partitioned));
    let shared_holds = shared_cycle
        .as_ref()
        .map(|c| Holds::of(c, shared.noise.as_ref(), r));
    let part_holds = part_cycle
        .as_ref()
        .map(|c| Holds::of(c, partitioned.noise.as_ref(), r));
    let best = part_cycle.as_ref().or(shared_cycle.as_ref());
    let best_noise = partitioned.noise.as_ref().or(shared.noise.as_ref());
    let mut notes = notes(r, shared, partitioned, m);
    let interrupted = [shared, partitioned]
        .iter()
        .any(|p| p.cycle.as_ref().is_some_and(|c| c.interrupted));
    let (outcome, headline, next_step) = if interrupted {
        (
            Outcome::Unknown,
            "interrupted before the measurements were complete: no verdict".to_string(),
            "run the assessment to its end (Ctrl-C stopped it)".to_string(),
        )
    } else {
        outcome(
            r,
            (&shared_holds, &part_holds),
            shared_cycle.as_ref(),
            best,
            best_noise,
            partitioned,
            m,
            &mut notes,
        )
    };
    let work_cost = WorkCost::of(shared.throughput.as_ref(), partitioned.throughput.as_ref());
    let limits = limits(
        r,
        best,
        best_noise,
        part_holds.as_ref().or(shared_holds.as_ref()),
        m,
    );
    Verdict {
        outcome,
        headline,
        shared: shared_holds,
        partitioned: part_holds,
        limits,
        next_step: match (&outcome, &work_cost) {
            // Real fast is enough: what a partition would have cost backs the advice.
            (Outcome::RealFastIsEnough, Some(c)) => {
                format!("{next_step} — and one would cost: {}", c.sentence())
            }
            _ => next_step,
        },
        cost: cost(
            shared.load.as_ref(),
            partitioned.load.as_ref(),
            work_cost.as_ref(),
            m,
        ),
        notes,
    }
}

/// The outcome, its headline and the next step, from whether each configuration holds.
#[allow(clippy::too_many_arguments)]
fn outcome(
    r: &Requirement,
    holds: (&Option<Holds>, &Option<Holds>),
    shared_cycle: Option<&CycleFigures>,
    best: Option<&CycleFigures>,
    best_noise: Option<&NoiseFigures>,
    partitioned: &Phase,
    m: &Machine,
    notes: &mut Vec<String>,
) -> (Outcome, String, String) {
    match holds {
        (Some(s), _) if s.holds => (
            Outcome::RealFastIsEnough,
            format!("met shared: {}", s.describe()),
            format!(
                "real fast is enough: run the work as an ordinary SCHED_FIFO process (chrt -f 80 CMD, or tame run --cpus {} --shared-ok --policy fifo -- CMD); no partition is needed",
                shared_cycle.map_or(String::new(), |c| c.cpus.to_string())
            ),
        ),
        (_, Some(p)) if p.holds => (
            Outcome::PartitionNeeded,
            format!("met only partitioned: {}", p.describe()),
            format!(
                "apply the spec: tame apply {} (then start the work with tame run -p {} -- CMD){}",
                m.spec_file.as_deref().unwrap_or("SPEC"),
                m.partition,
                if m.reboot_fixes.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; for more margin, these changes need a reboot: {}",
                        m.reboot_fixes.join("; ")
                    )
                }
            ),
        ),
        (Some(s), None) => {
            notes.push(format!("shared: {}", s.describe()));
            (
                Outcome::Unknown,
                "not met shared; the partitioned configuration was not measured".to_string(),
                format!(
                    "the partitioned configuration was not measured ({}) — fix that and assess again to see whether a partition meets it",
                    partitioned
                        .not_measured
                        .as_deref()
                        .unwrap_or("no reason recorded")
                ),
            )
        }
        (_, Some(p)) => (
            Outcome::NotMet,
            format!("not met, not even partitioned: {}", p.describe()),
            not_met_step(r, best, best_noise, p.stretch_ns, m),
        ),
        (None, None) => (
            Outcome::Unknown,
            "nothing was measured".to_string(),
            "run the assessment to its end (it stopped before the first measurement)".to_string(),
        ),
    }
}

/// Why no configuration meets it, and what could: the most fundamental cause first.
fn not_met_step(
    r: &Requirement,
    cycle: Option<&CycleFigures>,
    noise: Option<&NoiseFigures>,
    stretch_ns: u64,
    m: &Machine,
) -> String {
    let bound = r.latency_bound_ns();
    let waited = cycle.map_or(0, |c| c.latency_within(r.miss_rate));
    // When the wakeups alone fit, the interruptions of the computation are what breaks it.
    if stretch_ns > 0 && waited <= bound {
        return format!(
            "the wakeups alone fit ({} of the {} the work can wait), but interruptions add up to {} to each {} of work (see the limits): {}",
            human(waited),
            human(bound),
            human(stretch_ns),
            human(r.budget_ns),
            cause_step(r, cycle, noise, m, bound.saturating_sub(waited))
        );
    }
    cause_step(r, cycle, noise, m, bound)
}

/// The most fundamental cause of what is missing, and what could remove it: `room` is
/// what the work can afford to lose to the cause.
fn cause_step(
    r: &Requirement,
    cycle: Option<&CycleFigures>,
    noise: Option<&NoiseFigures>,
    m: &Machine,
    room: u64,
) -> String {
    let bound = r.latency_bound_ns();
    // One stall proves a hard requirement impossible; a tolerated miss rate may absorb it.
    if let (Some(hv), Some(stall), true) = (
        &m.hypervisor,
        noise.and_then(|n| n.unexplained_max_ns),
        r.is_hard(),
    ) {
        if stall > room {
            return format!(
                "this machine cannot meet it: the hypervisor ({hv}) alone stalls the CPU for up to {} (gaps no guest event explains), more than the {} the work can wait — run it on bare metal or on a host that dedicates and pins this vCPU",
                human(stall),
                human(room)
            );
        }
    }
    if let Some(c) = cycle {
        if c.latency.min > bound {
            return format!(
                "this machine cannot meet it: even the fastest wakeup took {}, more than the {} the work can wait — relax the deadline, or let the task spin instead of sleeping (tame bench cycle --busy-wait shows what that gives)",
                human(c.latency.min),
                human(bound)
            );
        }
    }
    if !m.reboot_fixes.is_empty() {
        return format!(
            "these changes need a reboot, then assess again: {}",
            m.reboot_fixes.join("; ")
        );
    }
    if !m.preempt_rt {
        return "a PREEMPT_RT kernel is needed: what is left comes from kernel work a partition cannot move away (see the limits)".to_string();
    }
    let measured = cycle.map_or(0, |c| c.latency_within(r.miss_rate));
    let or_budget = if room < bound {
        " (or shorten the budget)"
    } else {
        ""
    };
    format!(
        "relax the requirement{or_budget}: the work waited up to {} at the tolerated miss rate, and may wait {}",
        human(measured),
        human(bound)
    )
}

/// What limits the latency, worst first: the wakeup floor, attributed sources of noise,
/// what no guest event explains, and the check's findings.
fn limits(
    r: &Requirement,
    cycle: Option<&CycleFigures>,
    noise: Option<&NoiseFigures>,
    holds: Option<&Holds>,
    m: &Machine,
) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(h) = holds.filter(|h| h.stretch_ns > 0) {
        out.push(format!(
            "interruptions add up to {} to each {} of work ({})",
            human(h.stretch_ns),
            human(r.budget_ns),
            if r.is_hard() {
                "the most the busy loop lost in one computation of the budget"
            } else {
                "the busy loop's average share of lost time"
            }
        ));
    }
    if let Some(c) = cycle {
        if c.latency.min.saturating_add(r.budget_ns) > r.deadline_ns {
            out.push(format!("the fastest wakeup took {}", human(c.latency.min)));
        }
        if c.missed_periods > 0 {
            out.push(format!(
                "{} periods passed while the thread could not run",
                c.missed_periods
            ));
        }
    }
    if let Some(n) = noise {
        for s in n
            .sources
            .iter()
            .filter(|s| s.class != NoiseClass::Unexplained)
            .take(3)
        {
            out.push(format!(
                "{} {}: {:.3}% of the time, {} times, longest {}",
                s.class,
                s.source,
                s.share_percent,
                s.count,
                human(s.max_ns)
            ));
        }
        if let (Some(share), Some(max)) = (n.unexplained_share_percent, n.unexplained_max_ns) {
            if max > 0 {
                let who = m
                    .hypervisor
                    .as_deref()
                    .map_or("hardware, firmware (SMI)".to_string(), |h| {
                        format!("the hypervisor ({h}), SMI or hardware")
                    });
                out.push(format!(
                    "unexplained by any guest event ({who}): {share:.3}% of the time, longest {}",
                    human(max)
                ));
            }
        }
        if !n.attributed {
            if let Some(why) = &n.attribution_note {
                out.push(format!("noise not attributed: {why}"));
            }
        }
    }
    out.extend(m.findings.iter().take(5).map(|f| format!("check: {f}")));
    out
}

/// What partitioning cost ordinary work in the cost probe: the same workload's throughput
/// on the machine as it is and on the system partition (`tame bench cost`'s figures).
#[derive(Clone, Debug, PartialEq)]
pub struct WorkCost<'a> {
    pub shared: &'a WorkThroughput,
    pub partitioned: &'a WorkThroughput,
    /// 1 − partitioned / shared, percent.
    pub percent: f64,
    /// The same per CPU each configuration had, percent.
    pub per_cpu_percent: f64,
}

impl<'a> WorkCost<'a> {
    pub fn of(
        shared: Option<&'a WorkThroughput>,
        partitioned: Option<&'a WorkThroughput>,
    ) -> Option<Self> {
        let (s, p) = (shared?, partitioned?);
        if s.workload != p.workload {
            return None;
        }
        Some(WorkCost {
            shared: s,
            partitioned: p,
            percent: cost_figures::cost_percent(s.throughput, p.throughput)?,
            per_cpu_percent: cost_figures::cost_per_cpu_percent(
                s.throughput,
                s.cpus.len(),
                p.throughput,
                p.cpus.len(),
            )?,
        })
    }

    /// `partitioning costs 48% of stress-ng cpu throughput here (2431 → 1264 bogo-ops/s on
    /// 2 → 1 CPUs; 4% per remaining CPU)`.
    pub fn sentence(&self) -> String {
        let (s, p) = (self.shared, self.partitioned);
        let verb = if self.percent >= 0.0 {
            "costs"
        } else {
            "gains"
        };
        format!(
            "partitioning {verb} {:.0}% of {} throughput here ({:.0} → {:.0} {} on {} → {} CPUs; {:.0}% per remaining CPU)",
            self.percent.abs(),
            s.workload,
            s.throughput,
            p.throughput,
            s.unit,
            s.cpus.len(),
            p.cpus.len(),
            self.per_cpu_percent
        )
    }
}

/// What partitioning costs the rest of the machine: the CPUs it takes, ordinary work's
/// throughput where the cost probe measured it, and the load's throughput partitioned
/// against shared (geometric mean over stressors).
fn cost(
    shared: Option<&LoadDescription>,
    partitioned: Option<&LoadDescription>,
    work: Option<&WorkCost>,
    m: &Machine,
) -> Option<String> {
    if m.online_cpus == 0 {
        return None;
    }
    let mut text = format!(
        "partitioning takes {} of {} CPUs from ordinary work",
        m.isolated_cpus, m.online_cpus
    );
    if let Some(w) = work {
        text.push_str(&format!("; {}", w.sentence()));
    }
    if let Some(ratio) = throughput_ratio(shared, partitioned) {
        text.push_str(&format!(
            "; the load kept {:.0}% of its shared throughput while partitioned (stress-ng bogo-ops/s, geometric mean)",
            ratio * 100.0
        ));
    }
    Some(text)
}

/// Partitioned over shared throughput, geometric mean over the stressors both report.
pub fn throughput_ratio(
    shared: Option<&LoadDescription>,
    partitioned: Option<&LoadDescription>,
) -> Option<f64> {
    let (s, p) = (shared?, partitioned?);
    let logs: Vec<f64> = s
        .throughput
        .iter()
        .filter_map(|a| {
            let b = p.throughput.iter().find(|b| b.stressor == a.stressor)?;
            (a.bogo_ops_per_s > 0.0 && b.bogo_ops_per_s > 0.0)
                .then(|| (b.bogo_ops_per_s / a.bogo_ops_per_s).ln())
        })
        .collect();
    (!logs.is_empty()).then(|| (logs.iter().sum::<f64>() / logs.len() as f64).exp())
}

/// What a reader needs to read the figures right.
fn notes(r: &Requirement, shared: &Phase, partitioned: &Phase, m: &Machine) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(c) = partitioned.cycle.as_ref().or(shared.cycle.as_ref()) {
        // Ten misses' worth of activations at least, or a miss rate cannot be told apart.
        let needed = (10.0 / r.miss_rate).ceil();
        if !r.is_hard() && (c.activations as f64) < needed {
            out.push(format!(
                "{} activations are too few to tell a miss rate of {}: about {needed} are needed — give a longer --duration",
                c.activations,
                percent(r.miss_rate)
            ));
        }
    }
    if let (Some(s), Some(p)) = (&shared.cycle, &partitioned.cycle) {
        if p.latency.p50 > s.latency.p50 && m.cpuidle_driver.is_none() && m.hypervisor.is_some() {
            out.push(format!(
                "the median rose from {} shared to {} partitioned: an isolated CPU is idle between activations, and an idle vCPU halts, so every wakeup goes through the hypervisor; this machine has no cpuidle driver, so idle = \"poll\" cannot help — a task that must wake faster can spin until its next period, or boot with idle=poll",
                human(s.latency.p50),
                human(p.latency.p50)
            ));
        }
    }
    let stretches =
        [shared, partitioned].map(|p| p.noise.as_ref().and_then(|n| n.stretch.as_ref()));
    if stretches.iter().flatten().any(|s| !s.tasks_excluded) {
        out.push("the busy-loop gaps were not attributed, so other tasks' time counts as interruptions of the budget: the response is over-stated on a shared CPU".to_string());
    }
    if stretches.iter().flatten().any(|s| s.incomplete) {
        out.push("the busy loop dropped gaps it had no room for: the interruptions of the budget are a lower bound".to_string());
    }
    if [shared, partitioned].iter().any(|p| {
        p.cycle.as_ref().is_some_and(|c| c.interrupted)
            || p.noise.as_ref().is_some_and(|n| n.interrupted)
    }) {
        out.push("interrupted: the figures cover only what was measured".to_string());
    }
    out
}
