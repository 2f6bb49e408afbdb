//! The figures a verdict is drawn from, taken out of a bench's result: for the periodic
//! wakeups, every intended activation's latency (missed ones included: no coordinated
//! omission) with its histogram, so any deadline can be checked against it later; for the
//! busy loop, the noise share and what caused it.

use serde::{Deserialize, Serialize};
use tame_bench::cycle::CycleSettings;
use tame_bench::job::JobSettings;
use tame_bench::noise::{CpuNoise, NoiseResult, NoiseRun};
use tame_bench::session::Finished;
use tame_bench::{Recorder, Summary};
use tame_host::CpuList;
use tame_trace::attribute::NoiseClass;

use crate::stretch::Stretch;

/// Periodic wakeups on the measured CPUs, merged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CycleFigures {
    pub cpus: CpuList,
    pub period_ns: u64,
    /// Intended activations measured.
    pub activations: u64,
    /// Activations whose deadline passed before the thread even woke.
    pub missed_periods: u64,
    /// Latency of every intended activation, ns.
    pub latency: Summary,
    /// The latency histogram: (value ns, count), ascending, 3 significant digits.
    pub histogram: Vec<(u64, u64)>,
    pub interrupted: bool,
}

impl CycleFigures {
    pub fn from_run(done: &Finished<CycleSettings>) -> Self {
        let mut merged = Recorder::new();
        let mut missed = 0;
        for out in &done.measured.outputs {
            merged.merge(&out.latency);
            missed += out.missed;
        }
        Self::from_recorder(
            done.result.settings.cpus.clone(),
            done.result.settings.interval_ns,
            &merged,
            missed,
            done.result.interrupted,
        )
    }

    pub fn from_recorder(
        cpus: CpuList,
        period_ns: u64,
        latency: &Recorder,
        missed_periods: u64,
        interrupted: bool,
    ) -> Self {
        let histogram = histogram_of(latency);
        CycleFigures {
            cpus,
            period_ns,
            activations: latency.count(),
            missed_periods,
            latency: latency.summary(),
            histogram,
            interrupted,
        }
    }

    /// Activations whose latency exceeded `bound_ns` (counted at histogram resolution,
    /// never below the exact maximum).
    pub fn late(&self, bound_ns: u64) -> u64 {
        above(&self.histogram, &self.latency, bound_ns)
    }

    /// The latency that all but `fraction` of activations stayed within.
    pub fn latency_within(&self, fraction: f64) -> u64 {
        within(&self.histogram, &self.latency, self.activations, fraction)
    }
}

/// A recorder's histogram as (value ns, count), ascending, 3 significant digits.
pub fn histogram_of(r: &Recorder) -> Vec<(u64, u64)> {
    r.histogram()
        .iter_recorded()
        .map(|v| {
            (
                r.histogram().highest_equivalent(v.value_iterated_to()),
                v.count_at_value(),
            )
        })
        .collect()
}

/// Values above `bound` in a histogram (never below one when the exact maximum is above).
fn above(histogram: &[(u64, u64)], summary: &Summary, bound: u64) -> u64 {
    if summary.max <= bound {
        return 0;
    }
    let counted: u64 = histogram
        .iter()
        .filter(|(value, _)| *value > bound)
        .map(|(_, n)| n)
        .sum();
    counted.max(1)
}

/// The value all but `fraction` of `count` values stayed within.
fn within(histogram: &[(u64, u64)], summary: &Summary, count: u64, fraction: f64) -> u64 {
    if fraction <= 0.0 || count == 0 {
        return summary.max;
    }
    let allowed = (fraction * count as f64).floor() as u64;
    let mut above = 0;
    for &(value, n) in histogram.iter().rev() {
        if above + n > allowed {
            return value.min(summary.max);
        }
        above += n;
    }
    summary.min
}

/// The work run at every activation on the measured CPUs (`tame_bench::job`), merged over
/// the rounds of one configuration: every activation's response (release to completion),
/// the delay before it started and the work's own run time.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct JobFigures {
    pub cpus: CpuList,
    pub period_ns: u64,
    /// The deadline misses were counted against, from each release.
    pub deadline_ns: u64,
    /// The work each activation ran was calibrated to take this long undisturbed.
    pub budget_ns: u64,
    pub activations: u64,
    /// Activations that completed after their deadline (counted exactly).
    pub misses: u64,
    /// Activations that completed after the next release, delaying the next one.
    pub overruns: u64,
    /// Completion − release, ns.
    pub response: Summary,
    /// The response histogram: (value ns, count), ascending, 3 significant digits.
    pub response_histogram: Vec<(u64, u64)>,
    /// Start − release: the wakeup, or the previous job still running.
    pub start_delay: Summary,
    /// Completion − start: how long the work itself took.
    pub run_time: Summary,
    pub interrupted: bool,
}

impl JobFigures {
    /// Completions later than `deadline_ns` after their release: exact for the deadline
    /// the run counted, at histogram resolution for any other.
    pub fn late(&self, deadline_ns: u64) -> u64 {
        if deadline_ns == self.deadline_ns {
            return self.misses;
        }
        above(&self.response_histogram, &self.response, deadline_ns)
    }

    /// The response all but `fraction` of activations stayed within.
    pub fn response_within(&self, fraction: f64) -> u64 {
        within(
            &self.response_histogram,
            &self.response,
            self.activations,
            fraction,
        )
    }
}

/// One configuration's job outputs, merged as the rounds finish.
#[derive(Clone, Debug, Default)]
pub struct JobTotals {
    response: Recorder,
    start_delay: Recorder,
    run_time: Recorder,
    misses: u64,
    overruns: u64,
    interrupted: bool,
    settings: Option<JobSettings>,
}

impl JobTotals {
    /// Add a round's run.
    pub fn add(&mut self, done: &Finished<JobSettings>) {
        for out in &done.measured.outputs {
            self.response.merge(&out.response);
            self.start_delay.merge(&out.start_delay);
            self.run_time.merge(&out.run_time);
            self.misses += out.misses;
            self.overruns += out.overruns;
        }
        self.interrupted |= done.result.interrupted;
        self.settings
            .get_or_insert_with(|| done.result.settings.clone());
    }

    /// Add a round of a watched program: the thread the verdict is about, judged
    /// against the requirement in `job`.
    pub fn add_watched(
        &mut self,
        work: &tame_bench::watch::analyze::ThreadRecorders,
        job: &JobSettings,
        interrupted: bool,
    ) {
        self.response.merge(&work.response);
        self.start_delay.merge(&work.wake);
        self.run_time.merge(&work.run);
        self.misses += work.misses;
        self.overruns += work.overruns;
        self.interrupted |= interrupted;
        self.settings.get_or_insert_with(|| job.clone());
    }

    /// The figures so far; `None` before the first round.
    pub fn figures(&self, budget_ns: u64) -> Option<JobFigures> {
        let s = self.settings.as_ref()?;
        Some(JobFigures {
            cpus: s.cpus.clone(),
            period_ns: s.period_ns,
            deadline_ns: s.deadline_ns,
            budget_ns,
            activations: self.response.count(),
            misses: self.misses,
            overruns: self.overruns,
            response: self.response.summary(),
            response_histogram: histogram_of(&self.response),
            start_delay: self.start_delay.summary(),
            run_time: self.run_time.summary(),
            interrupted: self.interrupted,
        })
    }
}

/// Ordinary work's throughput in one phase: `tame bench cost`'s cpu workload (stress-ng cpu,
/// one instance per CPU of the configuration) run briefly after the phase's measurements,
/// with no other load — what the verdict states partitioning costs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkThroughput {
    /// What ran: `stress-ng cpu`.
    pub workload: String,
    /// What the throughput counts: `bogo-ops/s`.
    pub unit: String,
    /// The CPUs it ran on (shared: all online; partitioned: the system partition's).
    pub cpus: CpuList,
    pub throughput: f64,
}

/// One source of noise, summed over the measured CPUs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Source {
    pub class: NoiseClass,
    pub source: String,
    pub count: u64,
    pub total_ns: u64,
    pub max_ns: u64,
    /// Of the measured run time.
    pub share_percent: f64,
}

/// The busy loop on the measured CPUs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NoiseFigures {
    /// The worst CPU's share of time lost to gaps.
    pub share_percent: f64,
    pub max_gap_ns: u64,
    /// Whether gaps were attributed (tracefs); why not, when not.
    pub attributed: bool,
    pub attribution_note: Option<String>,
    /// Unexplained by any guest event (hypervisor, SMI, hardware): share and longest.
    pub unexplained_share_percent: Option<f64>,
    pub unexplained_max_ns: Option<u64>,
    /// Largest total first.
    pub sources: Vec<Source>,
    pub interrupted: bool,
    /// What the interruptions cost one computation of the requirement's budget.
    #[serde(default)]
    pub stretch: Option<Stretch>,
    /// The busy loop's run time, summed over the measured CPUs (0 in reports before
    /// tame.assess/2): what the rounds' figures are weighted by when merged.
    #[serde(default)]
    pub run_ns: u64,
}

/// Sources kept in the figures.
const TOP_SOURCES: usize = 8;

impl NoiseFigures {
    /// The figures of a run, with the stretch of a computation of `budget_ns` by work of
    /// kernel priority `work_prio` ([`crate::stretch::kernel_priority`]).
    pub fn from_run(run: &NoiseRun, budget_ns: u64, work_prio: i32) -> Self {
        let r = &run.result;
        let cpus: Vec<(u64, &[tame_trace::attribute::AttributedGap])> = r
            .noise
            .cpus
            .iter()
            .map(|c| {
                let gaps = run
                    .gaps
                    .iter()
                    .find(|(cpu, _)| *cpu == c.cpu)
                    .map_or(&[][..], |(_, g)| &g[..]);
                (c.run_ns, gaps)
            })
            .collect();
        let dropped = r.noise.cpus.iter().map(|c| c.gaps_dropped).sum();
        NoiseFigures {
            stretch: Some(Stretch::measure(
                budget_ns,
                work_prio,
                &cpus,
                r.noise.attribution.available,
                dropped,
            )),
            ..Self::from_result(r)
        }
    }

    pub fn from_result(r: &NoiseResult) -> Self {
        let cpus = &r.noise.cpus;
        let run_ns: u64 = cpus.iter().map(|c| c.run_ns).sum::<u64>().max(1);
        let share = cpus
            .iter()
            .map(|c| c.noise_share_percent)
            .fold(0.0, f64::max);
        let max_gap_ns = r.result.merged.metric("gap").map_or(0, |m| m.summary.max);
        let mut sources: Vec<Source> = Vec::new();
        for s in cpus.iter().flat_map(|c| &c.sources) {
            match sources
                .iter_mut()
                .find(|x| x.class == s.class && x.source == s.source)
            {
                Some(x) => {
                    x.count += s.tally.count;
                    x.total_ns += s.tally.total_ns;
                    x.max_ns = x.max_ns.max(s.tally.max_ns);
                }
                None => sources.push(Source {
                    class: s.class,
                    source: s.source.clone(),
                    count: s.tally.count,
                    total_ns: s.tally.total_ns,
                    max_ns: s.tally.max_ns,
                    share_percent: 0.0,
                }),
            }
        }
        for s in &mut sources {
            s.share_percent = s.total_ns as f64 * 100.0 / run_ns as f64;
        }
        sources.sort_by_key(|s| std::cmp::Reverse(s.total_ns));
        let attributed = r.noise.attribution.available;
        let (unexplained_share_percent, unexplained_max_ns) = if attributed {
            let (total, max) = unexplained_of(cpus);
            (Some(total as f64 * 100.0 / run_ns as f64), Some(max))
        } else {
            (None, None)
        };
        sources.truncate(TOP_SOURCES);
        NoiseFigures {
            share_percent: share,
            max_gap_ns,
            attributed,
            attribution_note: r.noise.attribution.reason.clone(),
            unexplained_share_percent,
            unexplained_max_ns,
            sources,
            interrupted: r.result.interrupted,
            stretch: None,
            run_ns,
        }
    }

    /// The rounds of one configuration as one: totals summed, longest gaps the longest,
    /// shares weighted by each round's run time (the worst CPU's share, as in a round).
    pub fn merge(rounds: &[&NoiseFigures]) -> Option<NoiseFigures> {
        rounds.first()?;
        let weight = |n: &NoiseFigures| n.run_ns.max(1) as f64;
        let total_weight: f64 = rounds.iter().map(|n| weight(n)).sum();
        let weighted = |f: &dyn Fn(&NoiseFigures) -> f64| {
            rounds.iter().map(|n| f(n) * weight(n)).sum::<f64>() / total_weight
        };
        let run_ns = rounds.iter().map(|n| n.run_ns).sum::<u64>();
        let mut sources: Vec<Source> = Vec::new();
        for s in rounds.iter().flat_map(|n| &n.sources) {
            match sources
                .iter_mut()
                .find(|x| x.class == s.class && x.source == s.source)
            {
                Some(x) => {
                    x.count += s.count;
                    x.total_ns += s.total_ns;
                    x.max_ns = x.max_ns.max(s.max_ns);
                }
                None => sources.push(s.clone()),
            }
        }
        for s in &mut sources {
            s.share_percent = s.total_ns as f64 * 100.0 / run_ns.max(1) as f64;
        }
        sources.sort_by_key(|s| std::cmp::Reverse(s.total_ns));
        sources.truncate(TOP_SOURCES);
        let attributed = rounds.iter().all(|n| n.attributed);
        let stretches: Vec<&Stretch> = rounds.iter().filter_map(|n| n.stretch.as_ref()).collect();
        let stretch = stretches.first().map(|s| Stretch {
            budget_ns: s.budget_ns,
            worst_ns: stretches.iter().map(|s| s.worst_ns).max().unwrap_or(0),
            mean_share_percent: weighted(&|n| {
                n.stretch.as_ref().map_or(0.0, |s| s.mean_share_percent)
            }),
            tasks_excluded: stretches.iter().all(|s| s.tasks_excluded),
            incomplete: stretches.iter().any(|s| s.incomplete),
        });
        Some(NoiseFigures {
            share_percent: weighted(&|n| n.share_percent),
            max_gap_ns: rounds.iter().map(|n| n.max_gap_ns).max().unwrap_or(0),
            attributed,
            attribution_note: rounds.iter().find_map(|n| n.attribution_note.clone()),
            unexplained_share_percent: attributed
                .then(|| weighted(&|n| n.unexplained_share_percent.unwrap_or(0.0))),
            unexplained_max_ns: attributed
                .then(|| rounds.iter().filter_map(|n| n.unexplained_max_ns).max())
                .flatten(),
            sources,
            interrupted: rounds.iter().any(|n| n.interrupted),
            stretch,
            run_ns,
        })
    }
}

/// The unexplained time of the measured CPUs: total and the most in one gap. From the
/// class, not the sources: those split a gap's unexplained time into its part inside a
/// stalled handler (`within local_timer`) and the rest, and the hypervisor stall is the
/// gap's whole.
fn unexplained_of(cpus: &[CpuNoise]) -> (u64, u64) {
    cpus.iter()
        .flat_map(|c| &c.classes)
        .filter(|c| c.class == NoiseClass::Unexplained)
        .fold((0, 0), |(t, m), c| {
            (t + c.tally.total_ns, m.max(c.tally.max_ns))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(values: &[u64]) -> CycleFigures {
        let mut r = Recorder::new();
        values.iter().for_each(|&v| r.record(v));
        CycleFigures::from_recorder(CpuList::parse("1").unwrap(), 1_000_000, &r, 0, false)
    }

    /// A CPU whose one gap held a tick stalled 2 995 µs beyond its median and 3 µs with
    /// the detector believed running, another whose gap was 1 ms plainly unexplained.
    #[test]
    fn a_stall_within_a_handler_counts_as_unexplained() {
        use tame_trace::attribute::{tally, Gap, Timeline};
        use tame_trace::event::{parse_text, Timestamp};
        let mut text = String::new();
        for k in 0..12u64 {
            let (at, end) = (k * 4_000, k * 4_000 + if k == 5 { 3_000 } else { 5 });
            text += &format!(
                "      tame-noise-4242    [002] d.h1.   812.{at:06}: local_timer_entry: vector=236\n      \
                 tame-noise-4242    [002] d.h1.   812.{end:06}: local_timer_exit: vector=236\n"
            );
        }
        let mut events = Vec::new();
        parse_text(&text, Timestamp::SecsUsecs, &mut events);
        let stalled = Timeline::build(&events, 4242).attribute(&[Gap {
            start_ns: 812_020_000_000 - 2_000,
            duration_ns: 3_003_000,
        }]);
        let plain = Timeline::build(&[], 4242).attribute(&[Gap {
            start_ns: 5_000,
            duration_ns: 1_000_000,
        }]);
        let cpu = |cpu, gaps: &[tame_trace::AttributedGap]| {
            let (classes, sources) = tally(gaps);
            CpuNoise {
                cpu,
                run_ns: 100_000_000,
                noise_ns: gaps[0].duration_ns,
                noise_share_percent: 0.0,
                available_percent: 100.0,
                gaps: 1,
                gaps_dropped: 0,
                without_capture: Default::default(),
                with_capture: Default::default(),
                attributed_ns: None,
                unexplained_ns: Some(gaps[0].unexplained_ns),
                events: 0,
                events_lost: 0,
                classes,
                sources,
            }
        };
        let cpus = [cpu(2, &stalled), cpu(3, &plain)];
        // The worst gap's whole unexplained time, not its larger part (2 995 µs).
        assert_eq!(unexplained_of(&cpus), (2_998_000 + 1_000_000, 2_998_000));
    }

    #[test]
    fn late_activations_are_counted_against_any_bound() {
        let f = figures(&[10_000, 20_000, 30_000, 900_000, 2_000_000]);
        assert_eq!(f.activations, 5);
        assert_eq!(f.late(2_000_000), 0);
        assert_eq!(f.late(1_000_000), 1);
        assert_eq!(f.late(25_000), 3);
        assert_eq!(f.late(0), 5);
    }

    #[test]
    fn the_tolerated_quantile_drops_only_the_allowed_worst() {
        let f = figures(&[10_000, 20_000, 30_000, 900_000, 2_000_000]);
        assert_eq!(f.latency_within(0.0), 2_000_000);
        // One in five may miss: the second worst counts.
        let v = f.latency_within(0.2);
        assert!((899_000..=901_000).contains(&v), "{v}");
        // Below one activation's worth: nothing may be dropped.
        assert_eq!(f.latency_within(0.1), 2_000_000);
    }
}
