//! `tame bench noise`: every gap on a CPU, and what caused it.
//!
//! A [`detector`] per target CPU records gaps in a tight clock-reading loop
//! while `tame-trace` captures the OS's events on those CPUs (a private
//! tracefs instance, trace clock matching the detector's clock, restored
//! afterwards). Each gap is then charged to the OS activity inside it, the
//! rest to "unexplained" (hypervisor, SMI, hardware). Without tracefs the
//! gaps are reported alone, with the reason.

pub mod detector;
pub mod view;

use serde::{Deserialize, Serialize};
use tame_host::{CpuList, Root};
use tame_rt::{Clock, ClockKind};
use tame_trace::attribute::{tally, AttributedGap, ClassTally, Gap, SourceTally, Timeline};
use tame_trace::capture::{Capture, Captured};
use tame_trace::tracefs::{CaptureSpec, TraceClock, TraceSession};

use crate::engine::{RunControl, ThreadSettings};
use crate::error::{invalid, Result};
use crate::report;
use crate::result::BenchResult;
use crate::session;

pub use detector::{DetectorOutput, DetectorPlan, RawGap};

/// The shortest and longest run of the detector (`--duration`).
pub const MIN_DURATION_NS: u64 = 10_000_000;
pub const MAX_DURATION_NS: u64 = 86_400_000_000_000;
/// Gaps shorter than this are never reported: below it a gap is cache and TLB misses.
pub const MIN_THRESHOLD_NS: u64 = 1_000;
/// The automatic threshold is this many times the measured loop floor (at least 1 µs).
pub const FLOOR_MULTIPLE: u64 = 5;
/// At most one stored gap per this much run time (a gap is 16 bytes).
const RUN_NS_PER_STORED_GAP: u64 = 10_000;
const MAX_STORED_GAPS: usize = 4_000_000;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoiseSettings {
    pub cpus: CpuList,
    pub duration_ns: u64,
    /// The requested threshold; `None` picks [`auto_threshold`] of the loop floor.
    pub threshold_ns: Option<u64>,
    pub threads: ThreadSettings,
    /// Capture tracefs events to attribute gaps.
    pub attribute: bool,
}

/// The detector's static priority at fifo/rr unless asked: the lowest, so that any other
/// real-time work shows as noise.
pub const DETECTOR_PRIORITY: i32 = 1;

impl NoiseSettings {
    /// Validated settings: the duration and threshold in range.
    pub fn new(
        cpus: CpuList,
        duration_ns: u64,
        threshold_ns: Option<u64>,
        threads: ThreadSettings,
        attribute: bool,
    ) -> Result<Self> {
        Self::validate_shape(duration_ns, threshold_ns)?;
        Ok(NoiseSettings {
            cpus,
            duration_ns,
            threshold_ns,
            threads,
            attribute,
        })
    }

    /// The heading of the report.
    pub fn title(&self) -> String {
        format!(
            "tame bench noise: {}, {}, detector {}",
            self.cpus.named(),
            tame_rt::duration::format_ns_as(self.duration_ns, tame_rt::duration::NsStyle::Fixed),
            self.threads.label()
        )
    }

    pub fn validate_shape(duration_ns: u64, threshold_ns: Option<u64>) -> Result<()> {
        if !(MIN_DURATION_NS..=MAX_DURATION_NS).contains(&duration_ns) {
            return Err(invalid(format!(
                "duration {} is out of range — use 10ms..24h (e.g. --duration 10s)",
                tame_rt::duration::format_ns(duration_ns)
            )));
        }
        if let Some(t) = threshold_ns {
            if !(100..=1_000_000_000).contains(&t) {
                return Err(invalid(format!(
                    "threshold {} is out of range — use 100ns..1s (e.g. --threshold 1us), or leave it out for {FLOOR_MULTIPLE}× the loop floor", tame_rt::duration::format_ns(t)
                )));
            }
        }
        Ok(())
    }
}

/// The default threshold: a few loop floors, never below 1 µs.
pub fn auto_threshold(loop_floor_ns: u64) -> u64 {
    (loop_floor_ns * FLOOR_MULTIPLE).max(MIN_THRESHOLD_NS)
}

/// Gaps kept per CPU for a run of `duration_ns` (more are counted, not kept).
pub fn gap_capacity(duration_ns: u64) -> usize {
    ((duration_ns / RUN_NS_PER_STORED_GAP) as usize + 1024).min(MAX_STORED_GAPS)
}

/// Whether and how gaps were attributed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttributionStatus {
    pub available: bool,
    /// Why not, when not.
    pub reason: Option<String>,
    pub trace_clock: Option<TraceClock>,
    /// The tracefs directory used (a private instance, normally).
    pub tracefs_dir: Option<String>,
    pub events_enabled: Vec<String>,
    /// Events this kernel does not have (e.g. `nmi/nmi_handler`).
    pub events_missing: Vec<String>,
    /// Tracing settings that could not be restored (empty when all are back).
    pub restore_problems: Vec<String>,
    /// Settings left by an earlier, killed run that were restored before this one.
    pub recovered: Vec<String>,
}

/// One CPU's noise, summed up.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuNoise {
    pub cpu: u32,
    pub run_ns: u64,
    /// Sum of all gaps.
    pub noise_ns: u64,
    pub noise_share_percent: f64,
    pub available_percent: f64,
    pub gaps: u64,
    pub gaps_dropped: u64,
    /// Overhead of capture: the detector's shortest and mean loop iteration
    /// (picoseconds) and noise share in a short run before capture starts,
    /// and the same during the captured run.
    pub without_capture: LoopFigures,
    pub with_capture: LoopFigures,
    /// Gap time charged to OS activity, and the rest (only with attribution).
    pub attributed_ns: Option<u64>,
    pub unexplained_ns: Option<u64>,
    pub events: u64,
    pub events_lost: u64,
    /// Top offenders first (largest total).
    pub classes: Vec<ClassTally>,
    pub sources: Vec<SourceTally>,
}

/// A detector's loop, for the overhead comparison.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LoopFigures {
    pub run_ns: u64,
    pub loop_floor_ps: u64,
    pub mean_loop_ps: u64,
    pub noise_share_percent: f64,
}

impl LoopFigures {
    fn of(out: &DetectorOutput) -> Self {
        LoopFigures {
            run_ns: out.run_ns,
            loop_floor_ps: out.loop_floor_ps,
            mean_loop_ps: out.mean_loop_ps,
            noise_share_percent: out.noise_share_percent(),
        }
    }
}

/// Length of the uncaptured detector run that gives the overhead baseline.
pub const BASELINE_NS: u64 = 200_000_000;

/// What the noise bench adds to the common result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NoiseFindings {
    /// The gap threshold used, ns.
    pub threshold_ns: u64,
    pub attribution: AttributionStatus,
    pub cpus: Vec<CpuNoise>,
}

/// The common result with the noise findings beside it (`noise` at the top
/// level), so readers of the common schema read it unchanged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NoiseResult {
    #[serde(flatten)]
    pub result: BenchResult<NoiseSettings>,
    pub noise: NoiseFindings,
}

impl NoiseResult {
    pub fn to_json(&self) -> String {
        crate::json::pretty(self).expect("results serialise: all keys are strings")
    }
}

/// A finished run: the result and every gap with its attribution, per CPU.
pub struct NoiseRun {
    pub result: NoiseResult,
    pub gaps: Vec<(u32, Vec<AttributedGap>)>,
}

/// Capture in progress.
struct Tracing {
    session: TraceSession,
    capture: Capture,
}

fn trace_clock_for(kind: ClockKind) -> TraceClock {
    match kind {
        ClockKind::Tsc => TraceClock::X86Tsc,
        ClockKind::Monotonic => TraceClock::Mono,
    }
}

/// Start capture, or say why not. Nothing is left changed on failure.
fn start_tracing(
    root: &Root,
    cpus: &[u32],
    online: &CpuList,
    clock: TraceClock,
    status: &mut AttributionStatus,
) -> Option<Tracing> {
    let spec = CaptureSpec::new(cpus.to_vec(), clock, "noise");
    let mut session = match TraceSession::start(root, &spec) {
        Ok(s) => s,
        Err(e) => {
            status.reason = Some(e.to_string());
            return None;
        }
    };
    let pipes: Vec<_> = cpus.iter().map(|&c| (c, session.pipe_path(c))).collect();
    // The reader stays off the measured CPUs where any are left.
    let reader_cpus: Vec<u32> = online.iter().filter(|c| !cpus.contains(c)).collect();
    let capture = match Capture::start(&pipes, clock.timestamp(), &reader_cpus) {
        Ok(c) => c,
        Err(e) => {
            status.reason = Some(format!("cannot read the trace pipes: {e} — gaps only"));
            return None;
        }
    };
    if let Err(e) = session.begin() {
        status.reason = Some(format!("cannot start tracing: {e} — gaps only"));
        let _ = capture.finish();
        return None;
    }
    status.available = true;
    status.trace_clock = Some(clock);
    status.tracefs_dir = Some(session.dir().to_string());
    let (on, missing) = session.events();
    status.events_enabled = on.to_vec();
    status.events_missing = missing.to_vec();
    status.recovered = session.recovered().to_vec();
    Some(Tracing { session, capture })
}

fn stop_tracing(mut t: Tracing, status: &mut AttributionStatus) -> Captured {
    if let Err(e) = t.session.end() {
        status.restore_problems.push(e.to_string());
    }
    let captured = t.capture.finish();
    let report = t.session.restore();
    status.restore_problems.extend(report.not_restored);
    captured
}

/// Map a raw clock reading onto the common ns time line (the same function
/// for gaps and x86-tsc event stamps, so they join exactly).
fn to_ns(clock: &Clock, raw: u64) -> u64 {
    match clock.calibration() {
        Some(c) => c.cycles_to_ns(raw),
        None => raw,
    }
}

/// One CPU's summary and attributed gaps: its gaps joined with its events.
fn cpu_findings(
    out: &DetectorOutput,
    base: &DetectorOutput,
    captured: Option<&Captured>,
    clock: &Clock,
    trace_clock: TraceClock,
) -> (CpuNoise, Vec<AttributedGap>) {
    let cpu = out.cpu.unwrap_or(0);
    let share = out.noise_share_percent();
    let gaps: Vec<Gap> = out
        .gaps
        .iter()
        .map(|g| Gap {
            start_ns: to_ns(clock, g.start),
            duration_ns: clock.raw_delta_ns(g.duration),
        })
        .collect();
    let (attributed, events, lost) = match captured {
        Some(c) => {
            let mut events = c.events.get(&cpu).cloned().unwrap_or_default();
            if trace_clock == TraceClock::X86Tsc {
                for e in events.iter_mut() {
                    e.ts = to_ns(clock, e.ts);
                }
            }
            let timeline = Timeline::build(&events, out.tid);
            (
                Some(timeline.attribute(&gaps)),
                events.len() as u64,
                c.lost.get(&cpu).copied().unwrap_or(0),
            )
        }
        None => (None, 0, 0),
    };
    let (classes, sources) = attributed.as_deref().map(tally).unwrap_or_default();
    let unexplained = attributed
        .as_ref()
        .map(|a| a.iter().map(|g| g.unexplained_ns).sum::<u64>());
    let summary = CpuNoise {
        cpu,
        run_ns: out.run_ns,
        noise_ns: out.noise_ns,
        noise_share_percent: share,
        available_percent: 100.0 - share,
        gaps: out.gaps.len() as u64 + out.gaps_dropped,
        gaps_dropped: out.gaps_dropped,
        without_capture: LoopFigures::of(base),
        with_capture: LoopFigures::of(out),
        attributed_ns: unexplained.map(|u| out.noise_ns - u.min(out.noise_ns)),
        unexplained_ns: unexplained,
        events,
        events_lost: lost,
        classes,
        sources,
    };
    // Without events a gap has no shares and no unexplained part: it is unattributed.
    let attributed = attributed.unwrap_or_else(|| {
        gaps.iter()
            .map(|g| AttributedGap {
                start_ns: g.start_ns,
                duration_ns: g.duration_ns,
                shares: Vec::new(),
                unexplained_ns: 0,
                unexplained_within: Vec::new(),
            })
            .collect()
    });
    (summary, attributed)
}

/// The CPU's noise share and what is left available, as derived figures of its group.
fn add_shares(group: &mut crate::result::GroupResult, out: &DetectorOutput) {
    let share = out.noise_share_percent();
    group.derived.insert("noise_share_percent".into(), share);
    group
        .derived
        .insert("cpu_available_percent".into(), 100.0 - share);
}

/// Run the whole bench: validate, start capture and load, detect, restore, attribute.
pub fn run(
    root: &Root,
    settings: NoiseSettings,
    conditions: session::Conditions,
    control: &RunControl,
    tick: impl FnMut(u64),
    command_line: Vec<String>,
) -> Result<NoiseRun> {
    NoiseSettings::validate_shape(settings.duration_ns, settings.threshold_ns)?;
    let prepared = session::prepare(
        root,
        &settings.threads,
        Some(&settings.cpus),
        conditions,
        1_000_000,
    )?;
    let load = conditions.load;
    let threshold_ns = settings
        .threshold_ns
        .unwrap_or_else(|| auto_threshold(prepared.calibration.loop_floor_ns));
    let cpus: Vec<u32> = settings.cpus.iter().collect();
    let online = prepared.environment.online_cpus.clone();
    let running = session::start_load(load, BASELINE_NS + settings.duration_ns + 5_000_000_000)?;
    // This thread wakes every 100 ms while the detectors run: not on their CPUs.
    let _elsewhere = crate::engine::WaitingThreadAway::from(&cpus);
    // The overhead baseline: the same detector, under the same load, before capture starts.
    let mut plan = DetectorPlan {
        cpus: cpus.clone(),
        duration_ns: BASELINE_NS,
        threshold_ns,
        gap_capacity: gap_capacity(BASELINE_NS),
        setup: prepared.setup.clone(),
        prefault: settings.threads.mlock,
    };
    // On an error the load stops when `running` is dropped.
    let baseline = detector::run(&plan, prepared.clock, control, |_| {});
    // On v2 the process joined the partition with its detectors: back out before the
    // trace reader starts. (The detectors of the measured run join again, and the process
    // with them: see `placement` for what that means on v2.)
    prepared.leave_partition()?;
    let baseline = baseline?;
    let mut status = AttributionStatus::default();
    let trace_clock = trace_clock_for(prepared.clock.kind());
    let tracing = if settings.attribute {
        start_tracing(root, &cpus, &online, trace_clock, &mut status)
    } else {
        status.reason = Some("attribution was not asked for (--no-trace)".into());
        None
    };
    plan.duration_ns = settings.duration_ns;
    plan.gap_capacity = gap_capacity(settings.duration_ns);
    let measured = detector::run(&plan, prepared.clock, control, tick);
    let captured = tracing.map(|t| stop_tracing(t, &mut status));
    prepared.leave_partition()?;
    let measured = measured?;
    let mut result = session::assemble(
        "noise",
        &prepared,
        settings,
        &measured,
        running,
        command_line,
        true,
    );
    let mut per_cpu = Vec::new();
    let mut all_gaps = Vec::new();
    for ((group, out), base) in result
        .groups
        .iter_mut()
        .zip(&measured.outputs)
        .zip(&baseline.outputs)
    {
        let (cpu_noise, attributed) =
            cpu_findings(out, base, captured.as_ref(), &prepared.clock, trace_clock);
        add_shares(group, out);
        all_gaps.push((cpu_noise.cpu, attributed));
        per_cpu.push(cpu_noise);
    }
    report::worst_derived(&result.groups, &mut result.merged);
    if let Some(c) = &captured {
        status.restore_problems.extend(c.errors.iter().cloned());
    }
    Ok(NoiseRun {
        result: NoiseResult {
            result,
            noise: NoiseFindings {
                threshold_ns,
                attribution: status,
                cpus: per_cpu,
            },
        },
        gaps: all_gaps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threshold_is_a_few_floors_but_at_least_a_microsecond() {
        assert_eq!(auto_threshold(20), 1_000);
        assert_eq!(auto_threshold(400), 2_000);
    }

    #[test]
    fn shapes_out_of_range_are_refused_with_advice() {
        assert!(NoiseSettings::validate_shape(1_000_000_000, None).is_ok());
        let e = NoiseSettings::validate_shape(1_000, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("10ms..24h"), "{e}");
        let e = NoiseSettings::validate_shape(1_000_000_000, Some(5))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--threshold"), "{e}");
    }

    #[test]
    fn gap_buffer_is_bounded() {
        assert_eq!(gap_capacity(10_000_000_000), 1_001_024);
        assert_eq!(gap_capacity(u64::MAX / 2), MAX_STORED_GAPS);
    }
}
