//! `tame bench cycle | sleep | fwq`: argument parsing and output for the
//! measurement engine in `tame-bench`.

use std::fs::File;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::Context as _;
use tame_bench::cycle::{self, CycleSettings};
use tame_bench::engine::{RunControl, ThreadSettings};
use tame_bench::fwq::{self, FwqSettings};
use tame_bench::load::{LoadKind, LoadSpec};
use tame_bench::measure::Measured;
use tame_bench::report::{self, GroupSource};
use tame_bench::session::{self, Prepared};
use tame_bench::sleep::{self, SleepSettings};
use tame_bench::units::parse_duration_ns;
use tame_bench::{output, BenchError, BenchResult};
use tame_host::CpuList;
use tame_rt::memory::DmaLatencyGuard;
use tame_rt::{ClockKind, Policy};

use crate::error::EXIT_INTERRUPTED;
use crate::{bad_input, Context};

#[derive(clap::Subcommand)]
pub enum BenchCommand {
    /// Periodic wakeups at absolute deadlines (start + k·interval): latency, missed periods, period deviation.
    Cycle(CycleArgs),
    /// Relative nanosleep jitter, (t1 − t0) − d, from one or many tasks at once.
    Sleep(SleepArgs),
    /// Fixed work quantum: how much each run of a fixed loop of work exceeds the fastest one.
    Fwq(FwqArgs),
    /// Shared-memory channels vs pipe, Unix socket, mq and rtrb: one-way latency and throughput between two CPUs.
    Ipc(super::bench_ipc::IpcBenchArgs),
    /// Every gap on the measured CPUs and what caused it (IRQs, softirqs, ticks, IPIs, threads, unexplained).
    Noise(super::noise::NoiseArgs),
}

/// Options every bench shares.
#[derive(clap::Args, Clone)]
pub struct CommonArgs {
    /// Scheduling policy of the measuring threads: fifo, rr, deadline or other.
    #[arg(long, default_value = "fifo")]
    policy: Policy,
    /// Static priority (fifo/rr: 1..99; default 95).
    #[arg(long)]
    priority: Option<i32>,
    /// Lock and prefault memory before measuring (the default).
    #[arg(long, overrides_with = "no_mlock")]
    mlock: bool,
    /// Do not lock memory.
    #[arg(long)]
    no_mlock: bool,
    /// Clock for measuring: monotonic, or tsc (only where the TSC is invariant).
    #[arg(long, value_parser = parse_clock)]
    clock: Option<ClockKind>,
    /// Write the result as JSON to FILE, or to stdout with `-` (the table then goes to stderr).
    #[arg(long, value_name = "FILE|-")]
    json: Option<String>,
    /// Write per-thread histograms in cyclictest's `-h` text layout (1 µs rows).
    #[arg(long, value_name = "FILE")]
    histogram: Option<PathBuf>,
    /// Background load during the run: any of cpu,io,hdd,vm,sock,build.
    #[arg(long, value_name = "LIST")]
    load: Option<String>,
    /// CPUs the load runs on (default: all online CPUs).
    #[arg(long, value_name = "LIST")]
    load_cpus: Option<String>,
}

#[derive(clap::Args)]
pub struct CycleArgs {
    /// CPUs to measure on, one thread each (`all`, or a list such as 0,2-3).
    #[arg(long, default_value = "all")]
    cpus: String,
    /// Period between wakeups (50us..10s).
    #[arg(long, default_value = "1ms")]
    interval: String,
    /// How long to run (default 10s unless --loops is given).
    #[arg(long, conflicts_with = "loops")]
    duration: Option<String>,
    /// Number of periods per CPU.
    #[arg(long)]
    loops: Option<u64>,
    /// Spin until each deadline instead of sleeping.
    #[arg(long)]
    busy_wait: bool,
    /// Hold /dev/cpu_dma_latency at this many µs for the run (keeps deep idle states off).
    #[arg(long, value_name = "US")]
    dma_latency: Option<u32>,
    /// Raw samples as CSV (timestamp_ns,cpu,value_ns).
    #[arg(long, visible_alias = "raw", value_name = "FILE")]
    samples: Option<PathBuf>,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(clap::Args)]
pub struct SleepArgs {
    /// CPUs the tasks are spread over round-robin (default: unpinned).
    #[arg(long)]
    cpus: Option<String>,
    /// Number of sleeping tasks running at once (may exceed the CPU count).
    #[arg(long, default_value_t = 1)]
    tasks: usize,
    /// The relative sleep d.
    #[arg(long, default_value = "1ms")]
    sleep: String,
    /// How long to run (default 10s unless --loops is given).
    #[arg(long, conflicts_with = "loops")]
    duration: Option<String>,
    /// Sleeps per task.
    #[arg(long)]
    loops: Option<u64>,
    /// Raw samples as CSV (timestamp_ns,cpu,value_ns).
    #[arg(long, visible_alias = "raw", value_name = "FILE")]
    samples: Option<PathBuf>,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(clap::Args)]
pub struct FwqArgs {
    /// CPUs to measure on, one thread each.
    #[arg(long, default_value = "all")]
    cpus: String,
    /// The work quantum one sample should take.
    #[arg(long, default_value = "100us")]
    quantum: String,
    /// How many times to time the work.
    #[arg(long, default_value_t = 10_000)]
    samples: u64,
    /// Raw samples as CSV (sample index as timestamp_ns, cpu, excess ns).
    #[arg(long, value_name = "FILE")]
    raw: Option<PathBuf>,
    #[command(flatten)]
    common: CommonArgs,
}

pub(super) fn parse_clock(s: &str) -> Result<ClockKind, String> {
    match s {
        "monotonic" => Ok(ClockKind::Monotonic),
        "tsc" => Ok(ClockKind::Tsc),
        _ => Err(format!("unknown clock {s:?}: use monotonic or tsc")),
    }
}

pub fn run(ctx: &Context, cmd: BenchCommand) -> anyhow::Result<i32> {
    match cmd {
        BenchCommand::Cycle(a) => run_cycle(ctx, a),
        BenchCommand::Sleep(a) => run_sleep(ctx, a),
        BenchCommand::Fwq(a) => run_fwq(ctx, a),
        BenchCommand::Ipc(a) => super::bench_ipc::run(ctx, a),
        BenchCommand::Noise(a) => super::noise::run(ctx, a),
    }
}

/// Library errors: `Invalid` is the user's to fix (exit 2), the rest are failures.
pub(super) fn lift(e: BenchError) -> anyhow::Error {
    match e {
        BenchError::Invalid(m) => bad_input(m),
        BenchError::Failed(m) => anyhow::anyhow!(m),
    }
}

fn duration_arg(text: &str) -> anyhow::Result<u64> {
    parse_duration_ns(text).map_err(lift)
}

pub(super) fn cpu_list_arg(ctx: &Context, text: &str, what: &str) -> anyhow::Result<CpuList> {
    if text.trim() == "all" {
        return online_cpus(ctx);
    }
    CpuList::parse(text).map_err(|e| {
        bad_input(format!(
            "{what}: {e} — write CPUs as a list such as 0,2-3, or `all`"
        ))
    })
}

pub(super) fn online_cpus(ctx: &Context) -> anyhow::Result<CpuList> {
    let text = ctx
        .root
        .read_trimmed("/sys/devices/system/cpu/online")
        .context("cannot tell which CPUs are online")?;
    CpuList::parse(&text).context("cannot parse the online CPU list")
}

impl CommonArgs {
    fn threads(&self, default_clock: ClockKind) -> ThreadSettings {
        let priority = self.priority.unwrap_or(match self.policy {
            Policy::Fifo | Policy::Rr => 95,
            _ => 0,
        });
        ThreadSettings {
            policy: self.policy,
            priority,
            mlock: !self.no_mlock,
            clock: self.clock.unwrap_or(default_clock),
        }
    }

    fn load(&self, ctx: &Context) -> anyhow::Result<Option<LoadSpec>> {
        load_spec(ctx, self.load.as_deref(), self.load_cpus.as_deref())
    }
}

/// `--load` and `--load-cpus` as a load spec (the load CPUs default to all online CPUs).
pub(super) fn load_spec(
    ctx: &Context,
    load: Option<&str>,
    load_cpus: Option<&str>,
) -> anyhow::Result<Option<LoadSpec>> {
    let Some(kinds) = load else {
        if load_cpus.is_some() {
            return Err(bad_input(
                "--load-cpus without --load — say which load to run, e.g. --load cpu,io",
            ));
        }
        return Ok(None);
    };
    let kinds = LoadKind::parse_list(kinds).map_err(lift)?;
    let cpus = match load_cpus {
        Some(list) => cpu_list_arg(ctx, list, "--load-cpus")?,
        None => online_cpus(ctx)?,
    };
    Ok(Some(LoadSpec { kinds, cpus }))
}

/// The TSC where it is invariant (cheapest to read, cycles come free), else CLOCK_MONOTONIC.
pub(super) fn preferred_clock(ctx: &Context) -> ClockKind {
    let invariant = tame_host::environment::RunEnvironment::capture(&ctx.root).invariant_tsc;
    if invariant && tame_rt::clock::TSC_AVAILABLE {
        ClockKind::Tsc
    } else {
        ClockKind::Monotonic
    }
}

/// Output files, opened (created) before anything runs so an unwritable path is bad input.
struct Outputs {
    json: Option<Box<dyn Write>>,
    json_to_stdout: bool,
    histogram: Option<File>,
    samples: Option<File>,
}

pub(super) fn create(path: &PathBuf, what: &str) -> anyhow::Result<File> {
    File::create(path).map_err(|e| {
        bad_input(format!(
            "cannot write the {what} file {}: {e} — choose a path in a writable directory",
            path.display()
        ))
    })
}

impl Outputs {
    fn open(common: &CommonArgs, samples: Option<&PathBuf>) -> anyhow::Result<Self> {
        let (json, json_to_stdout): (Option<Box<dyn Write>>, bool) = match common.json.as_deref() {
            None => (None, false),
            Some("-") => (Some(Box::new(std::io::stdout())), true),
            Some(path) => (
                Some(Box::new(create(&PathBuf::from(path), "JSON result")?)),
                false,
            ),
        };
        Ok(Self {
            json,
            json_to_stdout,
            histogram: common
                .histogram
                .as_ref()
                .map(|p| create(p, "histogram"))
                .transpose()?,
            samples: samples.map(|p| create(p, "samples")).transpose()?,
        })
    }

    fn write<S: serde::Serialize, T: GroupSource>(
        mut self,
        result: &BenchResult<S>,
        measured: &Measured<T>,
        title: &str,
    ) -> anyhow::Result<()> {
        if let Some(w) = self.histogram.as_mut() {
            let primary: Vec<&tame_bench::Recorder> = measured
                .outputs
                .iter()
                .filter_map(|o| o.recorders().first().map(|r| r.2))
                .collect();
            let max_us = primary.iter().filter_map(|r| r.max()).max().unwrap_or(0) / 1000;
            let rows = (max_us as usize + 1).clamp(100, 100_000);
            output::write_cyclictest_histogram(w, &primary, rows)
                .context("cannot write the histogram")?;
        }
        if let Some(w) = self.samples.as_mut() {
            let mut w = std::io::BufWriter::new(w);
            output::write_samples_csv(
                &mut w,
                measured.outputs.iter().map(|o| (o.cpu(), o.samples())),
            )
            .context("cannot write the samples")?;
        }
        let table = output::table(result, title);
        if let Some(w) = self.json.as_mut() {
            writeln!(w, "{}", result.to_json()).context("cannot write the JSON result")?;
        }
        if self.json_to_stdout {
            eprint!("{table}");
        } else {
            print!("{table}");
        }
        Ok(())
    }
}

/// Ctrl-C and SIGTERM set the stop flag: measuring threads finish their
/// current iteration, the load is stopped and what was measured is reported.
pub(super) fn install_stop_handler() -> anyhow::Result<RunControl> {
    let flag = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, flag.clone())
            .context("cannot install the Ctrl-C handler")?;
    }
    Ok(RunControl::with_flag(flag))
}

/// A progress bar on stderr for runs over 2 s, only when stderr is a terminal.
fn progress(total: u64, expected_ns: u64) -> impl FnMut(u64) {
    let bar = (std::io::stderr().is_terminal() && expected_ns > 2_000_000_000).then(|| {
        let bar = indicatif::ProgressBar::new(total);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{elapsed_precise} [{bar:40}] {percent}% {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        bar
    });
    move |done| {
        if let Some(b) = &bar {
            b.set_position(done);
            if done >= total {
                b.finish_and_clear();
            }
        }
    }
}

const DEFAULT_DURATION_NS: u64 = 10_000_000_000;

fn loops_for(duration: Option<&str>, loops: Option<u64>, period_ns: u64) -> anyhow::Result<u64> {
    let n = match (loops, duration) {
        (Some(n), _) => n,
        (None, Some(d)) => duration_arg(d)? / period_ns,
        (None, None) => DEFAULT_DURATION_NS / period_ns,
    };
    if n == 0 {
        return Err(bad_input(
            "the run would have no periods: the duration is shorter than one period — lengthen --duration or give --loops",
        ));
    }
    Ok(n)
}

/// Samples kept per thread for --samples: all of them, within a memory bound.
fn sample_capacity(wanted: bool, per_thread: u64, threads: usize) -> anyhow::Result<usize> {
    const MAX_SAMPLES_TOTAL: u64 = 100_000_000;
    if !wanted {
        return Ok(0);
    }
    if per_thread.saturating_mul(threads as u64) > MAX_SAMPLES_TOTAL {
        return Err(bad_input(format!(
            "raw samples for {per_thread} periods × {threads} threads exceed {MAX_SAMPLES_TOTAL} (1.6 GB) — shorten the run or drop --samples"
        )));
    }
    Ok(per_thread as usize)
}

fn finish<S: serde::Serialize, T: GroupSource>(
    result: BenchResult<S>,
    measured: &Measured<T>,
    outputs: Outputs,
    title: &str,
) -> anyhow::Result<i32> {
    outputs.write(&result, measured, title)?;
    Ok(if result.interrupted {
        EXIT_INTERRUPTED
    } else {
        0
    })
}

fn run_cycle(ctx: &Context, a: CycleArgs) -> anyhow::Result<i32> {
    let cpus = cpu_list_arg(ctx, &a.cpus, "--cpus")?;
    let interval_ns = duration_arg(&a.interval)?;
    CycleSettings::validate_interval(interval_ns).map_err(lift)?;
    let loops = loops_for(a.duration.as_deref(), a.loops, interval_ns)?;
    let settings = CycleSettings {
        cpus: cpus.clone(),
        interval_ns,
        loops,
        threads: a.common.threads(ClockKind::Monotonic),
        busy_wait: a.busy_wait,
        dma_latency_us: a.dma_latency,
    };
    let load = a.common.load(ctx)?;
    let capacity = sample_capacity(a.samples.is_some(), loops, cpus.len())?;
    let outputs = Outputs::open(&a.common, a.samples.as_ref())?;
    let prepared = session::prepare(
        &ctx.root,
        &settings.threads,
        Some(&cpus),
        load.as_ref(),
        interval_ns,
    )
    .map_err(lift)?;
    let _dma = hold_dma_latency(a.dma_latency)?;
    let control = install_stop_handler()?;
    let expected = loops * interval_ns;
    let running = session::start_load(load.as_ref(), expected).map_err(lift)?;
    let measured = cycle::run(
        &settings,
        prepared.sched,
        prepared.clock,
        &control,
        capacity,
        progress(loops * cpus.len() as u64, expected),
    )
    .map_err(lift)?;
    let title = format!(
        "tame bench cycle: {} CPU(s) {}, interval {}, {} periods each, {}{}",
        cpus.len(),
        cpus,
        output::human_ns(interval_ns),
        loops,
        sched_label(&settings.threads),
        if a.busy_wait { ", busy-wait" } else { "" }
    );
    let result = assemble("cycle", &prepared, settings, &measured, running, ctx, true);
    finish(result, &measured, outputs, &title)
}

fn run_sleep(ctx: &Context, a: SleepArgs) -> anyhow::Result<i32> {
    let cpus = a
        .cpus
        .as_deref()
        .map(|c| cpu_list_arg(ctx, c, "--cpus"))
        .transpose()?;
    let sleep_ns = duration_arg(&a.sleep)?;
    SleepSettings::validate_shape(a.tasks, sleep_ns).map_err(lift)?;
    let loops = loops_for(a.duration.as_deref(), a.loops, sleep_ns)?;
    let settings = SleepSettings {
        cpus: cpus.clone(),
        tasks: a.tasks,
        sleep_ns,
        loops,
        threads: a.common.threads(ClockKind::Monotonic),
    };
    let load = a.common.load(ctx)?;
    let capacity = sample_capacity(a.samples.is_some(), loops, a.tasks)?;
    let outputs = Outputs::open(&a.common, a.samples.as_ref())?;
    let prepared = session::prepare(
        &ctx.root,
        &settings.threads,
        cpus.as_ref(),
        load.as_ref(),
        sleep_ns.max(1_000_000),
    )
    .map_err(lift)?;
    let control = install_stop_handler()?;
    let expected = loops * sleep_ns;
    let running = session::start_load(load.as_ref(), expected).map_err(lift)?;
    let measured = sleep::run(
        &settings,
        prepared.sched,
        prepared.clock,
        &control,
        capacity,
        progress(loops * a.tasks as u64, expected),
    )
    .map_err(lift)?;
    let title = format!(
        "tame bench sleep: {} task(s) on {}, nanosleep {}, {} sleeps each, {}",
        a.tasks,
        cpus.as_ref()
            .map_or("any CPU".to_string(), |c| format!("CPUs {c}")),
        output::human_ns(sleep_ns),
        loops,
        sched_label(&settings.threads)
    );
    let result = assemble("sleep", &prepared, settings, &measured, running, ctx, false);
    finish(result, &measured, outputs, &title)
}

fn run_fwq(ctx: &Context, a: FwqArgs) -> anyhow::Result<i32> {
    let cpus = cpu_list_arg(ctx, &a.cpus, "--cpus")?;
    let quantum_ns = duration_arg(&a.quantum)?;
    FwqSettings::validate_shape(quantum_ns, a.samples).map_err(lift)?;
    // Cycles are part of the FWQ report, so prefer the TSC where it is invariant.
    let default_clock = preferred_clock(ctx);
    let settings = FwqSettings {
        cpus: cpus.clone(),
        quantum_ns,
        samples: a.samples,
        threads: a.common.threads(default_clock),
    };
    let load = a.common.load(ctx)?;
    let capacity = sample_capacity(a.raw.is_some(), a.samples, cpus.len())?;
    let outputs = Outputs::open(&a.common, a.raw.as_ref())?;
    let prepared = session::prepare(
        &ctx.root,
        &settings.threads,
        Some(&cpus),
        load.as_ref(),
        quantum_ns.max(1_000_000),
    )
    .map_err(lift)?;
    let control = install_stop_handler()?;
    let expected = a.samples * quantum_ns;
    let running = session::start_load(load.as_ref(), expected + 5_000_000_000).map_err(lift)?;
    let measured = fwq::run(
        &settings,
        prepared.sched,
        prepared.clock,
        &control,
        capacity,
        progress(a.samples * cpus.len() as u64, expected),
    )
    .map_err(lift)?;
    let title = format!(
        "tame bench fwq: {} CPU(s) {}, quantum {}, {} samples each, {}",
        cpus.len(),
        cpus,
        output::human_ns(quantum_ns),
        a.samples,
        sched_label(&settings.threads)
    );
    let mut result = assemble("fwq", &prepared, settings, &measured, running, ctx, true);
    for (group, out) in result.groups.iter_mut().zip(&measured.outputs) {
        report::fwq_derived(group, Some(out.noise_share_ppm));
    }
    report::worst_derived(&result.groups, &mut result.merged);
    finish(result, &measured, outputs, &title)
}

fn assemble<S, T: GroupSource>(
    bench: &str,
    prepared: &Prepared,
    settings: S,
    measured: &Measured<T>,
    running: Option<tame_bench::load::RunningLoad>,
    ctx: &Context,
    label_by_cpu: bool,
) -> BenchResult<S> {
    session::assemble(
        bench,
        prepared,
        settings,
        measured,
        running,
        ctx.command_line.clone(),
        label_by_cpu,
    )
}

fn sched_label(t: &ThreadSettings) -> String {
    match t.policy {
        Policy::Fifo | Policy::Rr => format!("{} {}", t.policy, t.priority),
        p => p.to_string(),
    }
}

fn hold_dma_latency(us: Option<u32>) -> anyhow::Result<Option<DmaLatencyGuard>> {
    us.map(|us| {
        DmaLatencyGuard::open(us).map_err(|e| {
            bad_input(format!(
                "cannot hold /dev/cpu_dma_latency at {us} µs: {e} — it needs root; run as root or drop --dma-latency"
            ))
        })
    })
    .transpose()
}
