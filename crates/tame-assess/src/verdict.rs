//! The answer: does the requirement hold shared, partitioned, or not at all; how sure that
//! is; what limits it; and the next step with its cost — real time or real fast (seed 001's
//! decision: when an ordinary process meets the requirement, partitioning only costs the
//! rest of the machine). Pure: drawn from the figures alone, so recorded results give the
//! same verdict as the live run.
//!
//! A claim about misses is a claim about a probability from a finite run: every
//! configuration's misses of its activations give a one-sided Clopper–Pearson bound
//! ([`tame_bench::confidence`]) at the requirement's confidence. It is *met* only when the
//! upper bound is at or below the tolerated miss rate, *not met* when the lower bound is
//! above it (for a hard requirement: any miss), and otherwise undecided — with the
//! activations that would decide.

use serde::{Deserialize, Serialize};
use tame_bench::confidence;
use tame_bench::load::LoadDescription;
use tame_rt::plural::count;
use tame_trace::attribute::NoiseClass;

use crate::attribution::{self, Attribution, RebootFix};
use crate::figures::{JobFigures, NoiseFigures, WorkThroughput};
use crate::report::Phase;
use crate::requirement::{human, percent, rate, Requirement};
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
    /// Measured, but not enough to decide at the stated confidence (or, for a hard
    /// requirement, no miss seen: a miss rate of 0 cannot be shown by measurement).
    Inconclusive,
    /// Not met shared, and the partitioned phase was not measured; or nothing measured.
    Unknown,
}

/// What one configuration's activations show about the requirement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The miss rate's upper bound is at or below the tolerated rate.
    Met,
    /// More misses than tolerated, at the stated confidence (hard: any miss).
    NotMet,
    /// The bounds straddle the tolerated rate: more activations would decide.
    Inconclusive,
    /// Hard requirement, no miss: only an upper bound on the miss rate can be shown.
    NoMissSeen,
}

/// Whether the requirement held in one configuration, how sure that is, and by how much.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Holds {
    /// Shown to hold: [`Status::Met`].
    pub holds: bool,
    /// Absent in reports before tame.assess/2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    pub activations: u64,
    /// Activations that completed after their deadline.
    pub late: u64,
    pub late_fraction: f64,
    /// The miss probability is below this with the stated confidence (Clopper–Pearson).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub miss_bound: Option<f64>,
    /// … and above this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub miss_lower: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    /// Activations in all that would decide an undecided status, if the observed miss
    /// fraction held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activations_to_decide: Option<u64>,
    /// What the busy loop saw interruptions take from one computation of the budget (the
    /// worst when hard, the average share otherwise): an explanation, not the verdict's basis.
    #[serde(default)]
    pub stretch_ns: u64,
    /// The response (release to completion) at the tolerated miss rate; the maximum when
    /// hard or when the activations cannot support that quantile.
    pub response_ns: u64,
    /// Deadline minus response: how much room is left (negative: how much is missing).
    pub margin_ns: i64,
    /// The round of this configuration with the most misses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worst_round: Option<u32>,
}

impl Holds {
    /// The status in words: `met`, `not met`, `inconclusive`, `no miss seen`; a report
    /// before tame.assess/2 (no status) says `met` or `not met`.
    pub fn status_text(&self) -> &'static str {
        match self.status {
            Some(Status::Met) => "met",
            Some(Status::NotMet) => "not met",
            Some(Status::Inconclusive) => "inconclusive",
            Some(Status::NoMissSeen) => "no miss seen",
            None if self.holds => "met",
            None => "not met",
        }
    }

    /// Whether the requirement held over `job`'s activations. A requirement with another
    /// budget than the one the work was calibrated to is read with every response moved
    /// by the difference (`AssessReport::decide_for`).
    pub fn of(job: &JobFigures, noise: Option<&NoiseFigures>, r: &Requirement) -> Self {
        // A completion misses when response + shift > deadline.
        let counted_deadline = (i128::from(r.deadline_ns) - budget_shift(job, r))
            .clamp(0, i128::from(u64::MAX)) as u64;
        let n = job.activations;
        let late = job.late(counted_deadline);
        let c = r.confidence;
        let upper = confidence::upper_bound(late, n, c);
        let lower = confidence::lower_bound(late, n, c);
        let status = if r.is_hard() {
            if late > 0 {
                Status::NotMet
            } else {
                Status::NoMissSeen
            }
        } else if upper <= r.miss_rate {
            Status::Met
        } else if lower > r.miss_rate {
            Status::NotMet
        } else {
            Status::Inconclusive
        };
        let to_decide = (status == Status::Inconclusive)
            .then(|| confidence::activations_to_decide(late, n, r.miss_rate, c))
            .flatten();
        // The quantile of the tolerated rate where the activations support it (never for a
        // hard requirement: its quantile is the maximum).
        let response_ns = moved(
            job,
            r,
            if tame_bench::stats::supports(n, 1.0 - r.miss_rate) {
                job.response_within(r.miss_rate)
            } else {
                job.response.max
            },
        );
        let stretch_ns = noise
            .and_then(|n| n.stretch.as_ref())
            .map_or(0, |s| s.for_budget(r.budget_ns, r.is_hard()));
        Holds {
            holds: status == Status::Met,
            status: Some(status),
            activations: n,
            late,
            late_fraction: late as f64 / n.max(1) as f64,
            miss_bound: Some(upper),
            miss_lower: Some(lower),
            confidence: Some(c),
            activations_to_decide: to_decide,
            stretch_ns,
            response_ns,
            margin_ns: (i128::from(r.deadline_ns) - i128::from(response_ns))
                .clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64,
            worst_round: None,
        }
    }

    /// `0 of 15600 activations missed; miss rate < 0.0192% at 95% confidence; response
    /// 1.2ms — 200µs short`.
    pub fn describe(&self) -> String {
        let margin = if self.margin_ns >= 0 {
            format!("{} to spare", human(self.margin_ns as u64))
        } else {
            format!("{} short", human(self.margin_ns.unsigned_abs()))
        };
        let bound = match (self.miss_bound, self.confidence) {
            (Some(b), Some(c)) => format!("; miss rate < {} at {} confidence", rate(b), percent(c)),
            _ => String::new(),
        };
        let worst = self
            .worst_round
            .filter(|_| self.late > 0)
            .map_or(String::new(), |w| format!(" (most in round {w})"));
        format!(
            "{} of {} activations missed{worst} ({}){bound}; response {} — {margin}",
            self.late,
            self.activations,
            rate(self.late_fraction),
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
    /// Fixes the check found that need a reboot (boot parameters, another kernel), each
    /// with its finding (reports before kept the text alone).
    pub reboot_fixes: Vec<RebootFix>,
    /// Check findings that warn or fail, one line each.
    pub findings: Vec<String>,
    /// Where the spec was written, if it was.
    pub spec_file: Option<String>,
    /// On bare metal: the SMIs counted on the work's first CPU while it was measured
    /// (MSR_SMI_COUNT), or why they could not be; `None` in a VM and in older reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smis: Option<SmiCount>,
}

/// System Management Interrupts during the measurement, where they can be counted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SmiCount {
    Counted(u64),
    Unavailable(String),
}

impl SmiCount {
    /// `12 SMIs were counted while it was measured (MSR_SMI_COUNT)`.
    fn sentence(&self) -> String {
        match self {
            SmiCount::Counted(n) => format!(
                "{} counted on the work's CPU while it was measured (MSR_SMI_COUNT)",
                count(*n, "SMI was", "SMIs were")
            ),
            SmiCount::Unavailable(why) => format!("SMIs could not be counted: {why}"),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub outcome: Outcome,
    /// One sentence.
    pub headline: String,
    pub shared: Option<Holds>,
    pub partitioned: Option<Holds>,
    /// What the verdict rests on: activations, rounds, minutes, confidence.
    #[serde(default)]
    pub rests_on: String,
    /// Set when the activations are too few for what the verdict would claim (the rule
    /// of three): said beside the verdict, which stands as the bounds give it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub too_few: Option<String>,
    /// What limits it, worst first.
    pub limits: Vec<String>,
    /// What to do next.
    pub next_step: String,
    /// What that costs the rest of the machine.
    pub cost: Option<String>,
    pub notes: Vec<String>,
}

/// The share of each round the work is measured for (the busy loop takes the rest): what
/// turns activations into a `--duration`.
pub const JOB_SHARE_PERCENT: u64 = 65;

pub fn decide(r: &Requirement, shared: &Phase, partitioned: &Phase, m: &Machine) -> Verdict {
    // A phase cut short before its first activation counts as not measured.
    let measured = |p: &Phase| p.job.clone().filter(|j| j.activations > 0);
    let (shared_job, part_job) = (measured(shared), measured(partitioned));
    let holds = |job: &Option<JobFigures>, p: &Phase| {
        job.as_ref().map(|j| {
            let mut h = Holds::of(j, p.noise.as_ref(), r);
            h.worst_round = p.worst_round;
            h
        })
    };
    let shared_holds = holds(&shared_job, shared);
    let part_holds = holds(&part_job, partitioned);
    let best = part_job.as_ref().or(shared_job.as_ref());
    let best_noise = partitioned.noise.as_ref().or(shared.noise.as_ref());
    let mut notes = notes(shared, partitioned, m);
    let interrupted = [shared, partitioned]
        .iter()
        .any(|p| p.job.as_ref().is_some_and(|j| j.interrupted));
    let (outcome, headline, next_step) = if interrupted {
        (
            Outcome::Unknown,
            "interrupted before the measurements were complete: no verdict".to_string(),
            "run the assessment to its end (Ctrl-C stopped it)".to_string(),
        )
    } else if shared.job.is_none() && shared.cycle.is_some() {
        (
            Outcome::Unknown,
            "this report was written before tame.assess/2 (the work was not run): its verdict is not redrawn".to_string(),
            "assess again with this tame".to_string(),
        )
    } else {
        let advice = Advice {
            r,
            shared_job: shared_job.as_ref(),
            best,
            best_noise,
            attribution: Attribution::of(best_noise),
            partitioned,
            m,
        };
        advice.outcome((&shared_holds, &part_holds), &mut notes)
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
        rests_on: rests_on(r, shared, partitioned),
        too_few: too_few(r, [shared_holds.as_ref(), part_holds.as_ref()]),
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
        cost: cost(r, (shared, partitioned), work_cost.as_ref(), m),
        notes,
    }
}

/// `31200 activations (15600 shared, 15600 partitioned) in 3 interleaved rounds each,
/// 31.2 s of work measured; bounds at 95% confidence`.
fn rests_on(r: &Requirement, shared: &Phase, partitioned: &Phase) -> String {
    let n = |p: &Phase| p.job.as_ref().map_or(0, |j| j.activations);
    let rounds = shared.rounds.max(partitioned.rounds);
    format!(
        "{} activations ({} shared, {} partitioned) in {} each, {} of work measured; miss-rate bounds at {} confidence",
        n(shared) + n(partitioned),
        n(shared),
        n(partitioned),
        count(u64::from(rounds), "round", "interleaved rounds"),
        human((n(shared) + n(partitioned)).saturating_mul(r.period_ns)),
        percent(r.confidence)
    )
}

/// The rule of three: no miss in `n` activations shows a miss rate below about 3/n at
/// 95 % confidence, so showing a miss rate of `p` takes at least 3/p activations.
pub fn rule_of_three(p: f64) -> u64 {
    (3.0 / p).ceil() as u64
}

/// The miss rate a hard requirement's run is sized to show (`--duration auto`): a miss
/// rate of 0 cannot be shown, only one below this.
pub const HARD_TARGET_BOUND: f64 = 0.0001;

/// Whether the configurations the verdict rests on — those not shown to miss: a miss
/// shown is shown by any number of activations — had too few activations to show the
/// tolerated miss rate (for a hard deadline, [`HARD_TARGET_BOUND`]) by the rule of three;
/// what that means and how long would do.
fn too_few(r: &Requirement, holds: [Option<&Holds>; 2]) -> Option<String> {
    let fewest = holds
        .iter()
        .flatten()
        .filter(|h| matches!(h.status, Some(s) if s != Status::NotMet))
        .map(|h| h.activations)
        .min()?;
    let p = if r.is_hard() {
        HARD_TARGET_BOUND
    } else {
        r.miss_rate
    };
    let needed = rule_of_three(p);
    if fewest >= needed {
        return None;
    }
    let measure = format!(
        "measure --duration {} per configuration, or --duration auto",
        human(duration_for(needed, r.period_ns))
    );
    Some(if r.is_hard() {
        format!(
            "too few activations for a hard deadline: {fewest} per configuration without a miss show at best a miss rate below about {} (the rule of three: no miss in N activations shows a miss rate below about 3/N, at 95% confidence), and no number of them shows 0; showing {} takes about {needed} — {measure}",
            rate(3.0 / fewest.max(1) as f64),
            rate(p)
        )
    } else {
        format!(
            "too few activations to show a miss rate of {}: {fewest} per configuration, and even with no miss that takes about {needed} (the rule of three: no miss in N activations shows a miss rate below about 3/N, at 95% confidence) — {measure}",
            rate(p)
        )
    })
}

/// How long each configuration must be measured for `activations`: the `--duration` that
/// gives them (the work takes [`JOB_SHARE_PERCENT`] of it).
pub fn duration_for(activations: u64, period_ns: u64) -> u64 {
    activations.saturating_mul(period_ns).saturating_mul(100) / JOB_SHARE_PERCENT
}

/// A response measured with the work calibrated to `job.budget_ns`, read for `r`'s budget.
fn moved(job: &JobFigures, r: &Requirement, ns: u64) -> u64 {
    (i128::from(ns) + budget_shift(job, r)).clamp(0, i128::from(u64::MAX)) as u64
}

/// How much longer `r`'s budget is than the one the work ran with.
fn budget_shift(job: &JobFigures, r: &Requirement) -> i128 {
    i128::from(r.budget_ns) - i128::from(job.budget_ns)
}

/// What the outcome is drawn from.
struct Advice<'a> {
    r: &'a Requirement,
    shared_job: Option<&'a JobFigures>,
    best: Option<&'a JobFigures>,
    best_noise: Option<&'a NoiseFigures>,
    /// What took the busy loop's time where the verdict rests: what the advice follows.
    attribution: Option<Attribution<'a>>,
    partitioned: &'a Phase,
    m: &'a Machine,
}

impl Advice<'_> {
    /// The outcome, its headline and the next step, from each configuration's status.
    fn outcome(
        &self,
        holds: (&Option<Holds>, &Option<Holds>),
        notes: &mut Vec<String>,
    ) -> (Outcome, String, String) {
        let status = |h: &Option<Holds>| h.as_ref().and_then(|h| h.status);
        match holds {
            (Some(s), _) if s.holds => (
                Outcome::RealFastIsEnough,
                format!("met shared: {}", s.describe()),
                self.real_fast_step(),
            ),
            (_, Some(p)) if p.holds => (
                Outcome::PartitionNeeded,
                format!("met only partitioned: {}", p.describe()),
                self.partition_step(),
            ),
            (s, Some(p))
                if status(holds.1) == Some(Status::NotMet)
                    && s.as_ref().is_none_or(|s| s.status == Some(Status::NotMet)) =>
            {
                if let Some(s) = s {
                    notes.push(format!("shared: {}", s.describe()));
                }
                (
                    Outcome::NotMet,
                    format!("not met, not even partitioned: {}", p.describe()),
                    self.not_met_step(p.stretch_ns),
                )
            }
            (Some(s), None) if s.status == Some(Status::NotMet) => {
                notes.push(format!("shared: {}", s.describe()));
                (
                    Outcome::Unknown,
                    "not met shared; the partitioned configuration was not measured".to_string(),
                    format!(
                        "the partitioned configuration was not measured ({}) — fix that and assess again to see whether a partition meets it",
                        self.partitioned
                            .not_measured
                            .as_deref()
                            .unwrap_or("no reason recorded")
                    ),
                )
            }
            (None, None) => (
                Outcome::Unknown,
                "nothing was measured".to_string(),
                "run the assessment to its end (it stopped before the first measurement)"
                    .to_string(),
            ),
            (s, p) => self.undecided(s.as_ref(), p.as_ref(), notes),
        }
    }

    fn real_fast_step(&self) -> String {
        format!(
            "real fast is enough: run the work as an ordinary SCHED_FIFO process (chrt -f 80 CMD, or tame run --cpus {} --shared-ok --policy fifo -- CMD); no partition is needed",
            self.shared_job.map_or(String::new(), |j| j.cpus.to_string())
        )
    }

    fn partition_step(&self) -> String {
        let m = self.m;
        let fixes = self.reboot_fixes();
        let margin = match self.beyond_the_guest() {
            Some(why) => format!("; for more margin: {why}"),
            None if !fixes.is_empty() => format!(
                "; for more margin, these changes need a reboot: {}",
                fixes.join("; ")
            ),
            None => String::new(),
        };
        format!(
            "apply the spec: tame apply {} (then start the work with tame run -p {} -- CMD){margin}",
            m.spec_file.as_deref().unwrap_or("SPEC"),
            m.partition,
        )
    }

    /// The reboot fixes that remove something the busy loop saw (every latency fix when
    /// the gaps were not attributed).
    fn reboot_fixes(&self) -> Vec<&str> {
        match &self.attribution {
            Some(a) => a.fixes_for(&self.m.reboot_fixes),
            None => attribution::latency_fixes(&self.m.reboot_fixes),
        }
    }

    /// When what no guest event explains took most of the time: whose it is and that no
    /// reboot removes it.
    fn beyond_the_guest(&self) -> Option<String> {
        let a = self.attribution.as_ref().filter(|a| a.beyond_the_guest())?;
        let took = format!(
            "{:.3}% of the busy loop, gaps up to {}, against {:.3}% for every guest source together",
            a.beyond_share,
            human(a.beyond_max_ns),
            a.guest_share
        );
        Some(match &self.m.hypervisor {
            Some(hv) => format!(
                "what interrupts the work most is the hypervisor ({hv}): stalls no guest event explains took {took} — no reboot, boot parameter or PREEMPT_RT removes them: run it on bare metal or on a host that dedicates and pins this vCPU"
            ),
            None => format!(
                "what interrupts the work most is firmware or hardware (SMIs): gaps no kernel event explains took {took}{} — no reboot, boot parameter or PREEMPT_RT removes them: look for firmware settings that raise SMIs, update the firmware, or use another machine",
                self.m.smis.as_ref().map_or(String::new(), |s| format!("; {}", s.sentence()))
            ),
        })
    }

    /// Neither configuration shown to meet it, one not ruled out: what was shown, and
    /// what would decide.
    fn undecided(
        &self,
        shared: Option<&Holds>,
        partitioned: Option<&Holds>,
        notes: &mut Vec<String>,
    ) -> (Outcome, String, String) {
        let r = self.r;
        fn open(h: Option<&Holds>) -> Option<&Holds> {
            h.filter(|h| h.status != Some(Status::NotMet))
        }
        // The configuration that could still meet it: shared first (real fast), then partitioned.
        let (name, h, step) = match (open(shared), open(partitioned)) {
            (Some(s), _) => ("shared", s, self.real_fast_step()),
            (None, Some(p)) => ("partitioned", p, self.partition_step()),
            // Both ruled out is not met, decided before this is asked.
            _ => (
                "partitioned",
                partitioned
                    .or(shared)
                    .expect("a configuration was measured"),
                self.partition_step(),
            ),
        };
        for (other, o) in [("shared", shared), ("partitioned", partitioned)] {
            if let Some(o) = o.filter(|_| other != name) {
                notes.push(format!("{other}: {}", o.describe()));
            }
        }
        if partitioned.is_none() {
            if let Some(why) = &self.partitioned.not_measured {
                notes.push(format!(
                    "the partitioned configuration was not measured: {why}"
                ));
            }
        }
        let bound = h.miss_bound.unwrap_or(1.0);
        let c = percent(r.confidence);
        if r.is_hard() {
            // Zero misses can only bound the rate: show the rate these activations do show,
            // and what ten times less would take.
            let shown = 10f64.powf(bound.log10().ceil());
            let tenth = shown / 10.0;
            let more = confidence::activations_for_bound(tenth, r.confidence);
            let headline = format!(
                "no miss seen {name}, but a miss rate of 0 cannot be shown by measurement: no miss in {} activations — the miss rate is below {} at {c} confidence",
                h.activations,
                rate(bound)
            );
            let next = format!(
                "state the miss rate the work can tolerate (--miss-rate): these measurements already show one below {} (--miss-rate {}); showing {} would take about {more} activations (--duration {} per configuration). If that is enough: {step}",
                rate(shown),
                rate(shown),
                rate(tenth),
                human(duration_for(more, r.period_ns))
            );
            return (Outcome::Inconclusive, headline, next);
        }
        let headline = format!("undecided at {c} confidence {name}: {}", h.describe());
        let next = match h.activations_to_decide {
            Some(total) => format!(
                "measure longer: about {total} activations per configuration would decide if the miss fraction held (--duration {}, or --duration auto); if it is met then: {step}",
                human(duration_for(total, r.period_ns))
            ),
            None => format!(
                "the observed miss fraction ({}) is the tolerated one: no length of measurement decides it — tolerate a little more, or remove what causes the misses (see the limits)",
                percent(h.late_fraction)
            ),
        };
        (Outcome::Inconclusive, headline, next)
    }

    /// Why no configuration meets it, and what could: the most fundamental cause first.
    fn not_met_step(&self, stretch_ns: u64) -> String {
        let r = self.r;
        let bound = r.latency_bound_ns();
        let waited = self.best.map_or(0, |j| j.start_delay.min);
        let fastest = self.best.map(|j| moved(j, r, j.response.min));
        // When even the earliest start leaves room, interruptions of the work break it.
        if stretch_ns > 0 && waited <= bound && fastest.is_some_and(|f| f <= r.deadline_ns) {
            return format!(
                "the work fits when it is not interrupted (its fastest activation took {} of the {} deadline), but interruptions take up to {} from each {} of work (see the limits): {}",
                human(fastest.unwrap_or(0)),
                human(r.deadline_ns),
                human(stretch_ns),
                human(r.budget_ns),
                self.cause_step(bound.saturating_sub(waited))
            );
        }
        self.cause_step(bound)
    }

    /// The most fundamental cause of what is missing, and what could remove it: `room` is
    /// what the work can afford to lose to the cause.
    fn cause_step(&self, room: u64) -> String {
        let (r, m) = (self.r, self.m);
        let bound = r.latency_bound_ns();
        // Gaps no kernel event explains are beyond any guest setting or boot parameter, hard
        // or soft requirement: the hypervisor's stalls in a VM, firmware (SMIs) or hardware
        // on bare metal.
        let stall = self.best_noise.and_then(|n| n.unexplained_max_ns);
        if let Some(stall) = stall.filter(|&s| s > room) {
            let (stall, room) = (human(stall), human(room));
            return match &m.hypervisor {
                Some(hv) => format!(
                    "this machine cannot meet it: the hypervisor ({hv}) alone stalls the CPU for up to {stall} (gaps no guest event explains), more than the {room} the work can wait — run it on bare metal or on a host that dedicates and pins this vCPU"
                ),
                None => {
                    let smis = m
                        .smis
                        .as_ref()
                        .map_or(String::new(), |s| format!("; {}", s.sentence()));
                    format!(
                        "this machine cannot meet it: SMIs or firmware stall the CPU for up to {stall} (gaps no kernel event explains{smis}), more than the {room} the work can wait — no reboot, boot parameter or PREEMPT_RT removes them: look for firmware settings that raise SMIs (power and thermal management, USB legacy emulation, error reporting), update the firmware, or use another machine"
                    )
                }
            };
        }
        if let Some(j) = self.best {
            if j.start_delay.min > bound {
                return format!(
                    "this machine cannot meet it: even the fastest wakeup took {}, more than the {} the work can wait — relax the deadline, or let the task spin instead of sleeping (tame bench cycle --busy-wait shows what that gives)",
                    human(j.start_delay.min),
                    human(bound)
                );
            }
            if moved(j, r, j.response.min) > r.deadline_ns {
                return format!(
                    "this machine cannot meet it: even the fastest activation took {} (the work alone {}), more than the {} deadline — relax the deadline or shorten the work",
                    human(moved(j, r, j.response.min)),
                    human(moved(j, r, j.run_time.min)),
                    human(r.deadline_ns)
                );
            }
        }
        if let Some(why) = self.beyond_the_guest() {
            return format!("this machine is unlikely to meet it: {why}");
        }
        let fixes = self.reboot_fixes();
        if !fixes.is_empty() {
            return format!(
                "these changes need a reboot, then assess again: {}",
                fixes.join("; ")
            );
        }
        if !m.preempt_rt {
            return "a PREEMPT_RT kernel is needed: what is left comes from kernel work a partition cannot move away (see the limits)".to_string();
        }
        let measured = self
            .best
            .map_or(0, |j| moved(j, r, j.response_within(r.miss_rate)));
        format!(
            "relax the requirement (or shorten the budget): the work completed within {} at the tolerated miss rate, and must within {}",
            human(measured),
            human(r.deadline_ns)
        )
    }
}

/// What limits the response, worst first: the wakeup floor, overruns, the work's own
/// run time, attributed sources of noise, what no guest event explains, and the check's
/// findings.
fn limits(
    r: &Requirement,
    job: Option<&JobFigures>,
    noise: Option<&NoiseFigures>,
    holds: Option<&Holds>,
    m: &Machine,
) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(j) = job {
        if j.start_delay.min.saturating_add(r.budget_ns) > r.deadline_ns {
            out.push(format!(
                "the fastest wakeup took {}",
                human(j.start_delay.min)
            ));
        }
        if j.run_time.max > j.budget_ns.saturating_mul(2) && j.budget_ns > 0 {
            out.push(format!(
                "the work itself took up to {} (calibrated to {}; median {}): it was interrupted or slowed while it ran",
                human(j.run_time.max),
                human(j.budget_ns),
                human(j.run_time.p50)
            ));
        }
        if j.overruns > 0 {
            out.push(format!(
                "{} activations ran past the next release, delaying the ones after them",
                j.overruns
            ));
        }
    }
    if let Some(h) = holds.filter(|h| h.stretch_ns > 0) {
        out.push(format!(
            "in the busy loop, interruptions took up to {} from {} of work ({})",
            human(h.stretch_ns),
            human(r.budget_ns),
            if r.is_hard() {
                "the most lost in one budget-long computation"
            } else {
                "the average share of lost time"
            }
        ));
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
    // Findings are `id: what was found`; lockdown limits what tame may set, not latency.
    out.extend(
        m.findings
            .iter()
            .filter(|f| attribution::bears_on_latency(f.split(':').next().unwrap_or("")))
            .take(5)
            .map(|f| format!("check: {f}")),
    );
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
            // Rounded to a whole percent; never "-0%".
            self.per_cpu_percent.round() + 0.0
        )
    }
}

/// What partitioning costs the rest of the machine: the CPUs it takes, ordinary work's
/// throughput where the cost probe measured it, and the load's throughput partitioned
/// against shared (geometric mean over stressors).
fn cost(
    r: &Requirement,
    (shared, partitioned): (&Phase, &Phase),
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
    match load_kept(r, shared, partitioned) {
        Some(LoadKept::Ratio(ratio)) if ratio <= 1.0 => text.push_str(&format!(
            "; the load kept {:.0}% of its shared throughput while partitioned (stress-ng bogo-ops/s, geometric mean)",
            ratio * 100.0
        )),
        Some(LoadKept::Ratio(ratio)) => text.push_str(&format!(
            "; the load got more done partitioned, on fewer CPUs, than shared ({ratio:.2}× its shared throughput, stress-ng bogo-ops/s, geometric mean)"
        )),
        Some(LoadKept::TooShort { phase_ns, duration_ns }) => text.push_str(&format!(
            "; the load's throughput is not compared: each round's load ran about {}, and below {} stress-ng's start-up (files, memory, sockets) decides its rate — --duration {} per configuration or more compares it",
            human(phase_ns),
            human(MIN_LOAD_PHASE_NS),
            human(duration_ns)
        )),
        None => {}
    }
    Some(text)
}

/// The shortest load phase whose stress-ng rates are compared: in a shorter one its
/// start-up (writing files, filling memory, opening sockets) is most of the phase, and
/// the rates say more about that than about the load.
pub const MIN_LOAD_PHASE_NS: u64 = 1_000_000_000;

/// The load's throughput partitioned against shared, where the phases were long enough
/// to say.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LoadKept {
    /// Partitioned over shared ([`throughput_ratio`]).
    Ratio(f64),
    /// A round's load ran `phase_ns`, below [`MIN_LOAD_PHASE_NS`]; `duration_ns` per
    /// configuration would reach it.
    TooShort { phase_ns: u64, duration_ns: u64 },
}

/// The load's throughput partitioned against shared, or why it is not compared; `None`
/// when either has no rates (no load, the user's own load, not measured).
pub fn load_kept(r: &Requirement, shared: &Phase, partitioned: &Phase) -> Option<LoadKept> {
    let ratio = throughput_ratio(shared.load.as_ref(), partitioned.load.as_ref())?;
    // The load runs while the work does: a round's load phase is its activations' periods.
    let phase = |p: &Phase| {
        p.job
            .as_ref()
            .map(|j| j.activations / u64::from(p.rounds.max(1)) * r.period_ns)
    };
    let shortest = [phase(shared), phase(partitioned)]
        .into_iter()
        .flatten()
        .min();
    match shortest {
        Some(phase_ns) if phase_ns < MIN_LOAD_PHASE_NS => {
            let rounds = u64::from(shared.rounds.max(partitioned.rounds).max(1));
            Some(LoadKept::TooShort {
                phase_ns,
                duration_ns: MIN_LOAD_PHASE_NS * rounds * 100 / JOB_SHARE_PERCENT,
            })
        }
        _ => Some(LoadKept::Ratio(ratio)),
    }
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
fn notes(shared: &Phase, partitioned: &Phase, m: &Machine) -> Vec<String> {
    let mut out = Vec::new();
    if let (Some(s), Some(p)) = (&shared.job, &partitioned.job) {
        if p.start_delay.p50 > s.start_delay.p50
            && m.cpuidle_driver.is_none()
            && m.hypervisor.is_some()
        {
            out.push(format!(
                "the median wakeup rose from {} shared to {} partitioned: an isolated CPU is idle between activations, and an idle vCPU halts, so every wakeup goes through the hypervisor; this machine has no cpuidle driver, so idle = \"poll\" cannot help — a task that must wake faster can spin until its next period, or boot with idle=poll",
                human(s.start_delay.p50),
                human(p.start_delay.p50)
            ));
        }
        if s.run_time.p50 > 0 && p.run_time.p50 > 0 {
            let slowdown = s.run_time.p50 as f64 / p.run_time.p50 as f64;
            if !(0.95..=1.05).contains(&slowdown) {
                out.push(format!(
                    "the work itself took {} (median) shared and {} partitioned: {}",
                    human(s.run_time.p50),
                    human(p.run_time.p50),
                    if slowdown > 1.0 {
                        format!("{slowdown:.2}× slower shared (cache, memory or SMT contention, frequency)")
                    } else {
                        format!("{:.2}× slower partitioned", 1.0 / slowdown)
                    }
                ));
            }
        }
    }
    let stretches =
        [shared, partitioned].map(|p| p.noise.as_ref().and_then(|n| n.stretch.as_ref()));
    if stretches.iter().flatten().any(|s| !s.tasks_excluded) {
        out.push("the busy-loop gaps were not attributed, so other tasks' time counts as interruptions: the busy loop over-states what a real-time task loses on a shared CPU".to_string());
    }
    if stretches.iter().flatten().any(|s| s.incomplete) {
        out.push(
            "the busy loop dropped gaps it had no room for: its interruptions are a lower bound"
                .to_string(),
        );
    }
    if [shared, partitioned].iter().any(|p| {
        p.job.as_ref().is_some_and(|j| j.interrupted)
            || p.noise.as_ref().is_some_and(|n| n.interrupted)
    }) {
        out.push("interrupted: the figures cover only what was measured".to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holds(status: Status, activations: u64) -> Holds {
        Holds {
            holds: status == Status::Met,
            status: Some(status),
            activations,
            late: 0,
            late_fraction: 0.0,
            miss_bound: None,
            miss_lower: None,
            confidence: Some(0.95),
            activations_to_decide: None,
            stretch_ns: 0,
            response_ns: 0,
            margin_ns: 0,
            worst_round: None,
        }
    }

    fn requirement(miss_rate: f64) -> Requirement {
        Requirement::new(1_000_000, 100_000, None, miss_rate, 1).unwrap()
    }

    #[test]
    fn the_rule_of_three_sizes_what_a_miss_rate_needs() {
        assert_eq!(rule_of_three(0.001), 3000);
        assert_eq!(rule_of_three(0.0001), 30_000);
        assert_eq!(rule_of_three(0.3), 10);
    }

    #[test]
    fn a_verdict_from_too_few_activations_says_so() {
        // issue 35, item 3: `--duration 200ms` drew a hard-deadline verdict from 129
        // activations per configuration without a word on how few that is.
        let no_miss = holds(Status::NoMissSeen, 129);
        assert_eq!(
            too_few(&requirement(0.0), [Some(&no_miss), None]).unwrap(),
            "too few activations for a hard deadline: 129 per configuration without a miss show at best a miss rate below about 2.33% (the rule of three: no miss in N activations shows a miss rate below about 3/N, at 95% confidence), and no number of them shows 0; showing 0.01% takes about 30000 — measure --duration 46.154s per configuration, or --duration auto"
        );
        let open = holds(Status::Inconclusive, 648);
        assert_eq!(
            too_few(&requirement(0.001), [Some(&open), Some(&open)]).unwrap(),
            "too few activations to show a miss rate of 0.1%: 648 per configuration, and even with no miss that takes about 3000 (the rule of three: no miss in N activations shows a miss rate below about 3/N, at 95% confidence) — measure --duration 4.615s per configuration, or --duration auto"
        );
        // Enough, or a miss shown (any number of activations shows one): nothing to say.
        assert_eq!(
            too_few(&requirement(0.001), [Some(&holds(Status::Met, 3000)), None]),
            None
        );
        assert_eq!(
            too_few(&requirement(0.0), [Some(&holds(Status::NotMet, 129)), None]),
            None
        );
    }
}
