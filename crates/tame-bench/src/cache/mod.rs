//! `tame bench cache`: cache interference on a real-time task (the DROPS paper's
//! experiment). A fixed piece of real-time work — an n×n matrix multiply, 64×64 by
//! default as in the paper — is timed per iteration on the measured CPU, alone and while a
//! competitor on another CPU writes through a buffer of twice the last-level cache. The
//! configurations alternate round by round (`--rounds`) so drift hits both alike.
//!
//! Result layout (docs/results.md): one group per configuration, labelled `alone` and
//! `with competitor`, with the metric `iteration` (ns per multiply), the counter
//! `competitor_lines` (cache lines the competitor wrote while that configuration was
//! timed) and the spread of `iteration p50` over the rounds. The merged group, labelled
//! `slowdown`, holds `slowdown_p50`, `slowdown_p99_9` and `slowdown_max`: the figure with
//! the competitor over the figure alone. `settings.cache_ways` says which L3 ways the run
//! had (resctrl), or that they cannot be split here.

mod competitor;
mod kernel;
pub mod ways;

pub use competitor::Competitor;
pub use kernel::Matrices;
pub use ways::{CacheWays, WaysState};

use std::fmt::Write as _;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tame_host::CpuList;
use tame_rt::Clock;

use crate::engine::{self, RunControl, ThreadSettings};
use crate::error::{failed, invalid, Result};
use crate::measure::{Measured, SampleBuffer};
use crate::report::GroupSource;
use crate::result::{BenchResult, GroupResult, Spread};
use crate::session::{Bench, Prepared};
use crate::stats::{Recorder, Summary};

pub const ALONE: &str = "alone";
pub const WITH_COMPETITOR: &str = "with competitor";
/// The paper's matrix size.
pub const DEFAULT_MATRIX: u32 = 64;
/// How long the measuring thread waits for the competitor to pause or to have written its
/// whole buffer once before it gives up.
const COMPETITOR_WAIT_NS: u64 = 10_000_000_000;

/// The competitor: where it runs and what it writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompetitorSettings {
    pub cpu: u32,
    /// Its buffer: twice the last-level cache (at least 8 MiB).
    pub buffer_bytes: u64,
}

impl CompetitorSettings {
    /// A competitor on `cpu` for a last-level cache of `llc_kib` (None: unknown, 32 MiB assumed).
    pub fn new(cpu: u32, llc_kib: Option<u64>) -> Self {
        let llc = llc_kib.unwrap_or(32 * 1024) * 1024;
        CompetitorSettings {
            cpu,
            buffer_bytes: (2 * llc).max(8 << 20),
        }
    }
}

/// What `tame bench cache` was asked to do; recorded in the result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheSettings {
    /// The measured CPU (one).
    pub cpus: CpuList,
    /// None with --no-competitor (the baseline alone).
    pub competitor: Option<CompetitorSettings>,
    /// n of the n×n f64 matrix multiply.
    pub matrix: u32,
    /// Bytes of the three matrices: the work's working set.
    pub working_set_bytes: u64,
    /// Timed iterations per configuration and round.
    pub iterations: u64,
    pub rounds: u32,
    pub cache_ways: CacheWays,
    pub threads: ThreadSettings,
}

impl CacheSettings {
    /// Validated settings.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        cpu: u32,
        competitor: Option<CompetitorSettings>,
        matrix: u32,
        iterations: u64,
        rounds: u32,
        cache_ways: CacheWays,
        threads: ThreadSettings,
    ) -> Result<Self> {
        if let Some(c) = competitor {
            if c.cpu == cpu {
                return Err(invalid(format!(
                    "--competitor-cpu {cpu} is the measured CPU — the competitor must run on another CPU (or pass --no-competitor for the baseline alone)"
                )));
            }
        }
        if !(8..=1024).contains(&matrix) {
            return Err(invalid(format!(
                "--matrix {matrix} is out of range — use 8..1024 (the paper's is 64)"
            )));
        }
        if !(10..=10_000_000).contains(&iterations) {
            return Err(invalid(format!(
                "--iterations {iterations} is out of range — use 10..10000000"
            )));
        }
        if !(1..=10_000).contains(&rounds) {
            return Err(invalid(format!(
                "--rounds {rounds} is out of range — use 1..10000"
            )));
        }
        Ok(CacheSettings {
            cpus: CpuList::from_cpus([cpu]),
            competitor,
            matrix,
            working_set_bytes: Matrices::bytes(matrix as usize),
            iterations,
            rounds,
            cache_ways,
            threads,
        })
    }

    pub fn cpu(&self) -> u32 {
        self.cpus.first().unwrap_or(0)
    }

    /// The configurations of a round, in the order they run.
    pub fn labels(&self) -> Vec<&'static str> {
        match self.competitor {
            Some(_) => vec![ALONE, WITH_COMPETITOR],
            None => vec![ALONE],
        }
    }
}

/// `--duration`: the iterations per configuration and round that make a run of `rounds` ×
/// `configurations` last about `duration_ns`, from the fastest of a few multiplies timed
/// here (on whatever CPU this thread is on: a guess, which the run then measures).
pub fn iterations_for(duration_ns: u64, matrix: u32, rounds: u32, configurations: usize) -> u64 {
    let mut m = Matrices::new(matrix as usize);
    m.multiply();
    let fastest = (0..5)
        .map(|_| {
            let t0 = std::time::Instant::now();
            m.multiply();
            t0.elapsed().as_nanos() as u64
        })
        .min()
        .unwrap_or(1);
    iterations_from(duration_ns, fastest, rounds, configurations)
}

/// Iterations of `multiply_ns` each that fill `duration_ns` over `rounds` × `configurations`,
/// within the range `--iterations` takes.
pub fn iterations_from(
    duration_ns: u64,
    multiply_ns: u64,
    rounds: u32,
    configurations: usize,
) -> u64 {
    let per = multiply_ns.max(1) * u64::from(rounds.max(1)) * configurations.max(1) as u64;
    (duration_ns / per).clamp(10, 10_000_000)
}

/// One configuration measured.
pub struct CacheOutput {
    pub label: &'static str,
    pub cpu: u32,
    /// Time per multiply, ns.
    pub iteration: Recorder,
    /// The median of each round.
    pub round_p50: Option<Spread>,
    /// Lines the competitor wrote while this configuration was timed.
    pub competitor_lines: u64,
    samples: SampleBuffer,
}

impl GroupSource for CacheOutput {
    fn cpu(&self) -> Option<u32> {
        Some(self.cpu)
    }
    fn recorders(&self) -> Vec<(&'static str, &'static str, &Recorder)> {
        vec![("iteration", "ns", &self.iteration)]
    }
    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("competitor_lines", self.competitor_lines)]
    }
    fn samples(&self) -> &SampleBuffer {
        &self.samples
    }
}

/// One configuration's output from its iterations' raw clock deltas, `per_round` a round.
pub fn summarise(
    clock: &Clock,
    label: &'static str,
    cpu: u32,
    raw: &[u64],
    per_round: usize,
    competitor_lines: u64,
) -> CacheOutput {
    let mut iteration = Recorder::new();
    let mut round_p50: Option<Spread> = None;
    for round in raw.chunks(per_round.max(1)) {
        let mut ns: Vec<u64> = round.iter().map(|&r| clock.raw_delta_ns(r)).collect();
        ns.iter().for_each(|&v| iteration.record(v));
        ns.sort_unstable();
        let p50 = ns[(ns.len() - 1) / 2] as f64;
        match &mut round_p50 {
            Some(s) => s.include(p50),
            None => round_p50 = Some(Spread::of(p50)),
        }
    }
    CacheOutput {
        label,
        cpu,
        iteration,
        round_p50,
        competitor_lines,
        samples: SampleBuffer::with_capacity(0),
    }
}

/// The slowdowns of `with` over `alone`: p50, p99.9 and max.
pub fn slowdowns(alone: &Summary, with: &Summary) -> Vec<(&'static str, f64)> {
    [
        ("slowdown_p50", alone.p50, with.p50, Some(0.50)),
        ("slowdown_p99_9", alone.p99_9, with.p99_9, Some(0.999)),
        ("slowdown_max", alone.max, with.max, None),
    ]
    .into_iter()
    // A ratio of percentiles only where both sides' samples support them.
    .filter(|(_, a, _, q)| *a > 0 && q.is_none_or(|q| alone.supports(q) && with.supports(q)))
    .map(|(name, a, w, _)| (name, w as f64 / a as f64))
    .collect()
}

/// The merged group of a cache result with a competitor, labelled `slowdown`.
pub fn slowdown_group(groups: &[GroupResult]) -> Option<GroupResult> {
    let figure = |label: &str| {
        groups
            .iter()
            .find(|g| g.label == label)
            .and_then(|g| g.metric("iteration"))
            .map(|m| m.summary)
    };
    let (alone, with) = (figure(ALONE)?, figure(WITH_COMPETITOR)?);
    Some(GroupResult {
        label: "slowdown".into(),
        derived: slowdowns(&alone, &with)
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        ..GroupResult::default()
    })
}

/// Spin (no system call) until `done`, at most [`COMPETITOR_WAIT_NS`].
fn spin_until(
    clock: &Clock,
    what: &str,
    done: impl Fn() -> bool,
) -> std::result::Result<(), String> {
    let t0 = clock.raw();
    while !done() {
        if clock.raw_delta_ns(clock.raw().wrapping_sub(t0)) > COMPETITOR_WAIT_NS {
            return Err(format!("the competitor did not {what} within 10 s"));
        }
        std::hint::spin_loop();
    }
    Ok(())
}

impl Bench for CacheSettings {
    type Output = CacheOutput;
    const NAME: &'static str = "cache";
    const LABEL_BY_CPU: bool = true;

    fn threads(&self) -> &ThreadSettings {
        &self.threads
    }
    fn cpus(&self) -> Option<&CpuList> {
        Some(&self.cpus)
    }
    fn deadline_period_ns(&self) -> u64 {
        10_000_000
    }
    /// About half a nanosecond per multiply-add.
    fn expected_ns(&self) -> u64 {
        let per = u64::from(self.matrix).pow(3) / 2;
        per * self.per_thread()
    }
    /// The competitor's first pass over its buffer comes on top.
    fn load_runtime_ns(&self) -> u64 {
        self.expected_ns() + 30_000_000_000
    }
    fn thread_count(&self) -> usize {
        1
    }
    fn per_thread(&self) -> u64 {
        self.iterations * u64::from(self.rounds) * self.labels().len() as u64
    }
    fn title(&self) -> String {
        format!(
            "tame bench cache: {}×{} f64 matrix multiply ({} KiB) on CPU {}, {}, {} rounds of {} iterations per configuration, {}",
            self.matrix,
            self.matrix,
            self.working_set_bytes / 1024,
            self.cpus,
            match &self.competitor {
                Some(c) => format!(
                    "competitor on CPU {} writing {} MiB",
                    c.cpu,
                    c.buffer_bytes >> 20
                ),
                None => "no competitor".to_string(),
            },
            self.rounds,
            self.iterations,
            self.threads.label()
        )
    }
    fn measure(
        &self,
        prepared: &Prepared,
        control: &RunControl,
        _sample_capacity: usize,
        tick: impl FnMut(u64),
    ) -> Result<Measured<CacheOutput>> {
        // Forked before any measuring thread exists, from tame's own cgroup.
        let competitor = self
            .competitor
            .map(|c| Competitor::start(c.cpu, c.buffer_bytes))
            .transpose()
            .map_err(|e| failed(format!("bench cache: {e}")))?
            .map(Arc::new);
        let settings = self.clone();
        let clock = prepared.clock;
        let thread_control = control.clone();
        let body = move |gate: &engine::StartGate, progress: &dyn Fn(u64)| {
            let competitor = competitor.as_deref();
            measure_rounds(
                &settings,
                &clock,
                &thread_control,
                competitor,
                gate,
                progress,
            )
        };
        let (cpu, setup) = (self.cpu(), &prepared.setup);
        engine::measure_groups(cpu, setup, self.threads.mlock, control, tick, "cache", body)
    }
    fn derive(result: &mut BenchResult<Self>, measured: &Measured<CacheOutput>) {
        for (group, out) in result.groups.iter_mut().zip(&measured.outputs) {
            group.label = out.label.to_string();
            if let Some(s) = out.round_p50 {
                group.spread.insert("iteration p50".into(), s);
            }
        }
        if let Some(merged) = slowdown_group(&result.groups) {
            result.merged = merged;
        }
    }
    fn view(result: &BenchResult<Self>) -> String {
        let s = &result.settings;
        let mut out = crate::output::table(result, &s.title());
        if let Some(c) = &s.competitor {
            let _ = writeln!(
                out,
                "competitor: a process on CPU {} writing one word per cache line through {} MiB (twice the last-level cache), paused while `alone` is timed",
                c.cpu,
                c.buffer_bytes >> 20
            );
        }
        let _ = writeln!(out, "resctrl: {}", s.cache_ways.note);
        out
    }
}

/// The measuring thread: every round times each configuration in turn.
fn measure_rounds(
    s: &CacheSettings,
    clock: &Clock,
    control: &RunControl,
    competitor: Option<&Competitor>,
    gate: &engine::StartGate,
    progress: &dyn Fn(u64),
) -> std::result::Result<Vec<CacheOutput>, String> {
    let labels = s.labels();
    let per = s.iterations as usize;
    // Sized before the gate: the timed loop only stores into it.
    let mut raw: Vec<Vec<u64>> = labels
        .iter()
        .map(|_| vec![0u64; per * s.rounds as usize])
        .collect();
    let mut lines = vec![0u64; labels.len()];
    let mut matrices = Matrices::new(s.matrix as usize);
    matrices.multiply();
    if gate.wait().is_none() {
        return Ok(Vec::new());
    }
    let mut done = vec![0usize; labels.len()];
    'rounds: for _ in 0..s.rounds {
        for (ci, label) in labels.iter().enumerate() {
            if let Some(c) = competitor {
                if *label == ALONE {
                    c.pause();
                    spin_until(clock, "pause", || c.is_paused())?;
                } else {
                    let from = c.lines();
                    c.run();
                    spin_until(clock, "write its whole buffer once", || {
                        c.lines() >= from + c.buffer_lines
                    })?;
                }
            }
            // Its own working set back in the cache before the timed iterations.
            matrices.multiply();
            let lines_before = competitor.map_or(0, Competitor::lines);
            for _ in 0..per {
                if control.stopped() {
                    break 'rounds;
                }
                let t0 = clock.raw();
                matrices.multiply();
                raw[ci][done[ci]] = clock.raw().wrapping_sub(t0);
                done[ci] += 1;
                progress(done.iter().sum::<usize>() as u64);
            }
            lines[ci] += competitor.map_or(0, Competitor::lines) - lines_before;
        }
    }
    if let Some(c) = competitor {
        c.pause();
    }
    Ok(labels
        .iter()
        .enumerate()
        .map(|(ci, label)| summarise(clock, label, s.cpu(), &raw[ci][..done[ci]], per, lines[ci]))
        .collect())
}

#[cfg(test)]
mod tests;
