//! `tame bench cycle | sleep | fwq`: arguments into settings, `tame_bench::session::run`,
//! and the result into its views (table, JSON, histogram, samples). `ipc` and `noise`
//! live in their own modules.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;

use anyhow::Context as _;
use tame_bench::cycle::CycleSettings;
use tame_bench::engine::{ThreadSettings, MEASURING_PRIORITY};
use tame_bench::fwq::FwqSettings;
use tame_bench::load::LoadSpec;
use tame_bench::session::{self, Bench, Conditions, Finished};
use tame_bench::sleep::SleepSettings;
use tame_bench::sweep::{Steps, Sweep};
use tame_bench::units::parse_duration_ns;
use tame_bench::{engine, output};
use tame_rt::{ClockKind, Policy};

use super::measuring::{self, install_stop_handler, parse_clock, progress, Partitioned};
use crate::error::finished;
use crate::output::{create, JsonOut};
use crate::Context;

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
    /// What a partition costs ordinary work: throughput of stress-ng classes and a compile loop, shared vs partitioned.
    Cost(super::bench_cost::CostArgs),
    /// Reserved CPU shares: overhead, stability under load and a periodic client, for the server, deadline and cgroup backends.
    Reserve(super::bench_reserve::ReserveBenchArgs),
    /// Memory-access time per buffer size, 16 KiB..512 MiB: a pointer chase and a stream, ns per access.
    Mem(super::bench_mem::MemArgs),
    /// Cache interference: a 64×64 matrix multiply timed alone and beside a cache-thrashing competitor.
    Cache(super::bench_cache::CacheArgs),
}

/// Options every bench shares.
#[derive(clap::Args, Clone)]
pub struct CommonArgs {
    /// Scheduling policy of the measuring threads: fifo, rr, deadline or other.
    #[arg(long, default_value = "fifo")]
    policy: Policy,
    /// Static priority (fifo/rr: 1..99; default 95).
    #[arg(long, allow_hyphen_values = true)]
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
    /// Background load during the run: any of cpu,io,hdd,vm,sock,build,cache,stream,rt.
    #[arg(long, value_name = "LIST")]
    load: Option<String>,
    /// CPUs the load runs on (default: all online CPUs; with -p, the system partition's).
    #[arg(long, value_name = "LIST")]
    load_cpus: Option<String>,
    /// Measure inside this applied partition (`tame apply`): its CPUs unless --cpus picks
    /// some of them; the measuring threads join its cgroup, tame and the load stay outside.
    #[arg(short = 'p', long, value_name = "NAME")]
    partition: Option<String>,
    /// Where `tame apply` keeps its journal (default /var/lib/tame below --root): read for
    /// -p, and to name the partition of a --cpus CPU outside tame's cpuset.
    #[arg(long, value_name = "DIR")]
    journal_dir: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct CycleArgs {
    /// CPUs to measure on, one thread each (`all`, or a list such as 0,2-3; default all,
    /// or with -p every CPU of the partition).
    #[arg(long)]
    cpus: Option<String>,
    /// Period between wakeups (50us..10s).
    #[arg(long, allow_hyphen_values = true, default_value = "1ms")]
    interval: String,
    /// How long to run (default 10s unless --loops is given).
    #[arg(long, allow_hyphen_values = true, conflicts_with = "loops")]
    duration: Option<String>,
    /// Number of periods per CPU.
    #[arg(long, allow_hyphen_values = true)]
    loops: Option<u64>,
    /// Spin until each deadline instead of sleeping.
    #[arg(long)]
    busy_wait: bool,
    /// Hold /dev/cpu_dma_latency at this many µs for the run (keeps deep idle states off).
    #[arg(long, allow_hyphen_values = true, value_name = "US")]
    dma_latency: Option<u32>,
    /// Raw samples as CSV (timestamp_ns,cpu,value_ns).
    #[arg(long, visible_alias = "raw", value_name = "FILE", value_parser = samples_file)]
    samples: Option<PathBuf>,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(clap::Args)]
pub struct SleepArgs {
    /// CPUs the tasks are spread over round-robin (default: unpinned).
    #[arg(long)]
    cpus: Option<String>,
    /// Number of sleeping tasks running at once (may exceed the CPU count); a range (1..12)
    /// or a list (1,2,4,8) sweeps it: one run per value, jitter against the number of tasks.
    #[arg(long, default_value = "1", value_name = "N|A..B|LIST", value_parser = task_steps)]
    tasks: Steps,
    /// The relative sleep d.
    #[arg(long, allow_hyphen_values = true, default_value = "1ms")]
    sleep: String,
    /// How long to run (default 10s unless --loops is given).
    #[arg(long, allow_hyphen_values = true, conflicts_with = "loops")]
    duration: Option<String>,
    /// Sleeps per task.
    #[arg(long, allow_hyphen_values = true)]
    loops: Option<u64>,
    /// Raw samples as CSV (timestamp_ns,cpu,value_ns).
    #[arg(long, visible_alias = "raw", value_name = "FILE", value_parser = samples_file)]
    samples: Option<PathBuf>,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(clap::Args)]
pub struct FwqArgs {
    /// CPUs to measure on, one thread each (`all`, or a list such as 0,2-3; default all,
    /// or with -p every CPU of the partition).
    #[arg(long)]
    cpus: Option<String>,
    /// The work quantum one sample should take.
    #[arg(long, allow_hyphen_values = true, default_value = "100us")]
    quantum: String,
    /// How many quanta to time: the number of samples per CPU.
    #[arg(
        long,
        allow_hyphen_values = true,
        default_value_t = 10_000,
        value_name = "N"
    )]
    quanta: u64,
    /// Raw samples as CSV (sample index as timestamp_ns, cpu, excess ns).
    #[arg(long, visible_alias = "raw", value_name = "FILE", value_parser = samples_file)]
    samples: Option<PathBuf>,
    #[command(flatten)]
    common: CommonArgs,
}

fn task_steps(text: &str) -> Result<Steps, String> {
    Steps::parse(text, "--tasks", tame_bench::sleep::MAX_TASKS).map_err(|e| e.to_string())
}

/// `--samples FILE`, the raw-sample file of every bench that has one. A bare number is
/// refused: it is what fwq's `--samples` meant before (a count, now `--quanta`), not a file.
pub(super) fn samples_file(text: &str) -> Result<PathBuf, String> {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "--samples takes the FILE the raw samples are written to, not a count — the number of samples is --quanta N for fwq, --loops N for cycle and sleep, --round-trips N for ipc; to write to a file named {text}, give ./{text}"
        ));
    }
    Ok(PathBuf::from(text))
}

pub fn run(ctx: &Context, cmd: BenchCommand) -> anyhow::Result<i32> {
    match cmd {
        BenchCommand::Cycle(a) => run_cycle(ctx, a),
        BenchCommand::Sleep(a) => run_sleep(ctx, a),
        BenchCommand::Fwq(a) => run_fwq(ctx, a),
        BenchCommand::Ipc(a) => super::bench_ipc::run(ctx, a),
        BenchCommand::Noise(a) => super::noise::run(ctx, a),
        BenchCommand::Cost(a) => super::bench_cost::run(ctx, a),
        BenchCommand::Reserve(a) => super::bench_reserve::run(ctx, a),
        BenchCommand::Mem(a) => super::bench_mem::run(ctx, a),
        BenchCommand::Cache(a) => super::bench_cache::run(ctx, a),
    }
}

impl CommonArgs {
    pub(super) fn threads(&self, default_clock: ClockKind) -> ThreadSettings {
        ThreadSettings::new(
            self.policy,
            self.priority,
            MEASURING_PRIORITY,
            !self.no_mlock,
            self.clock.unwrap_or(default_clock),
        )
    }

    pub(super) fn partitioned(&self, ctx: &Context) -> anyhow::Result<Option<Partitioned>> {
        measuring::partition(ctx, self.partition.as_deref(), self.journal_dir.as_deref())
    }

    fn load(
        &self,
        ctx: &Context,
        partitioned: Option<&Partitioned>,
    ) -> anyhow::Result<Option<LoadSpec>> {
        measuring::load(
            ctx,
            self.load.as_deref(),
            self.load_cpus.as_deref(),
            partitioned,
        )
    }
}

fn duration(text: Option<&str>) -> anyhow::Result<Option<u64>> {
    Ok(text.map(parse_duration_ns).transpose()?)
}

fn run_cycle(ctx: &Context, a: CycleArgs) -> anyhow::Result<i32> {
    let partitioned = a.common.partitioned(ctx)?;
    let settings = CycleSettings::new(
        measuring::measured_cpus(
            ctx,
            a.cpus.as_deref(),
            partitioned.as_ref(),
            a.common.journal_dir.as_deref(),
        )?,
        parse_duration_ns(&a.interval)?,
        duration(a.duration.as_deref())?,
        a.loops,
        a.common.threads(ClockKind::Monotonic),
        a.busy_wait,
        a.dma_latency,
    )?;
    measure(ctx, settings, &a.common, partitioned, a.samples)
}

fn run_sleep(ctx: &Context, a: SleepArgs) -> anyhow::Result<i32> {
    let partitioned = a.common.partitioned(ctx)?;
    // Unpinned unless --cpus (or -p) names CPUs.
    let cpus = match (&a.cpus, &partitioned) {
        (None, None) => None,
        (cpus, p) => Some(measuring::measured_cpus(
            ctx,
            cpus.as_deref(),
            p.as_ref(),
            a.common.journal_dir.as_deref(),
        )?),
    };
    let settings = |tasks| {
        SleepSettings::new(
            cpus.clone(),
            tasks,
            parse_duration_ns(&a.sleep)?,
            duration(a.duration.as_deref())?,
            a.loops,
            a.common.threads(ClockKind::Monotonic),
        )
        .map_err(anyhow::Error::from)
    };
    if let Some(tasks) = a.tasks.single() {
        return measure(ctx, settings(tasks)?, &a.common, partitioned, a.samples);
    }
    // Every step is validated before the first one runs.
    let steps: Vec<SleepSettings> = a
        .tasks
        .values()
        .iter()
        .map(|&n| settings(n))
        .collect::<anyhow::Result<_>>()?;
    sweep(
        ctx,
        steps,
        a.tasks.values(),
        &a.common,
        partitioned,
        a.samples,
    )
}

/// Run the sleep bench once per step, one after the other, into one sweep document; Ctrl-C
/// ends the sweep with the steps measured so far.
fn sweep(
    ctx: &Context,
    steps: Vec<SleepSettings>,
    values: &[usize],
    common: &CommonArgs,
    partitioned: Option<Partitioned>,
    samples: Option<PathBuf>,
) -> anyhow::Result<i32> {
    if samples.is_some() || common.histogram.is_some() {
        return Err(crate::error::bad_input(
            "--samples and --histogram write one run's data, and a --tasks range or list is one run per value — give one --tasks value with them, or drop them",
        ));
    }
    let load = common.load(ctx, partitioned.as_ref())?;
    let json = JsonOut::open(common.json.as_deref(), "JSON result")?;
    let control = install_stop_handler()?;
    let mut doc: Sweep<SleepSettings> =
        Sweep::new("sleep", "tasks", values, ctx.command_line.clone());
    for (settings, n) in steps.into_iter().zip(values) {
        eprintln!("tasks = {n}");
        let done = run_session(
            ctx,
            settings,
            load.as_ref(),
            partitioned.as_ref(),
            &control,
            0,
        )?;
        let interrupted = done.result.interrupted;
        doc.results.push(done.result);
        if interrupted || control.stopped() {
            doc.interrupted = true;
            break;
        }
    }
    json.emit(&doc, &doc.table("jitter"))?;
    Ok(finished(doc.interrupted))
}

/// One run of `settings` under the load and in the partition, with a progress bar.
fn run_session<B: Bench>(
    ctx: &Context,
    settings: B,
    load: Option<&LoadSpec>,
    partitioned: Option<&Partitioned>,
    control: &tame_bench::engine::RunControl,
    sample_capacity: usize,
) -> anyhow::Result<Finished<B>> {
    let tick = progress(settings.progress_total(), Some(settings.expected_ns()));
    Ok(session::run(
        &ctx.root,
        settings,
        Conditions {
            load,
            placement: partitioned.map(|p| &p.placement),
        },
        control,
        sample_capacity,
        tick,
        ctx.command_line.clone(),
    )?)
}

fn run_fwq(ctx: &Context, a: FwqArgs) -> anyhow::Result<i32> {
    let partitioned = a.common.partitioned(ctx)?;
    let cpus = measuring::measured_cpus(
        ctx,
        a.cpus.as_deref(),
        partitioned.as_ref(),
        a.common.journal_dir.as_deref(),
    )?;
    let quantum_ns = parse_duration_ns(&a.quantum)?;
    // Cycles are part of the FWQ report, so prefer the TSC where it is invariant.
    let threads = a.common.threads(engine::preferred_clock(&ctx.root));
    let settings = FwqSettings::new(cpus, quantum_ns, a.quanta, threads)?;
    measure(ctx, settings, &a.common, partitioned, a.samples)
}

/// Run `settings` and write the result where asked; the exit code says whether Ctrl-C cut
/// the run short.
pub(super) fn measure<B: Bench>(
    ctx: &Context,
    settings: B,
    common: &CommonArgs,
    partitioned: Option<Partitioned>,
    samples: Option<PathBuf>,
) -> anyhow::Result<i32> {
    let load = common.load(ctx, partitioned.as_ref())?;
    let capacity = settings.sample_capacity(samples.is_some())?;
    let outputs = Outputs::open(common, samples.as_ref())?;
    let control = install_stop_handler()?;
    let done = run_session(
        ctx,
        settings,
        load.as_ref(),
        partitioned.as_ref(),
        &control,
        capacity,
    )?;
    outputs.write(&done)?;
    Ok(finished(done.result.interrupted))
}

/// Output files, opened (created) before anything runs so an unwritable path is bad input.
struct Outputs {
    json: JsonOut,
    histogram: Option<File>,
    samples: Option<File>,
}

impl Outputs {
    fn open(common: &CommonArgs, samples: Option<&PathBuf>) -> anyhow::Result<Self> {
        Ok(Self {
            json: JsonOut::open(common.json.as_deref(), "JSON result")?,
            histogram: common
                .histogram
                .as_ref()
                .map(|p| create(p, "histogram"))
                .transpose()?,
            samples: samples.map(|p| create(p, "samples")).transpose()?,
        })
    }

    fn write<B: Bench>(self, done: &Finished<B>) -> anyhow::Result<()> {
        let outputs = &done.measured.outputs;
        if let Some(mut w) = self.histogram {
            output::write_primary_histogram(&mut w, outputs)
                .context("cannot write the histogram")?;
        }
        if let Some(w) = self.samples {
            let mut w = std::io::BufWriter::new(w);
            output::write_all_samples_csv(&mut w, outputs)
                .and_then(|()| w.flush())
                .context("cannot write the samples")?;
        }
        let table = B::view(&done.result);
        self.json.emit(&done.result, &table)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        bench: BenchCommand,
    }

    fn parse(argv: &[&str]) -> Result<BenchCommand, clap::Error> {
        let mut full = vec!["tame-bench"];
        full.extend_from_slice(argv);
        Cli::try_parse_from(full).map(|c| c.bench)
    }

    #[test]
    fn samples_is_the_raw_sample_file_of_cycle_sleep_and_fwq() {
        let Ok(BenchCommand::Fwq(a)) = parse(&["fwq", "--samples", "fwq.csv", "--quanta", "300"])
        else {
            panic!("fwq --samples FILE --quanta N parses");
        };
        assert_eq!((a.samples, a.quanta), (Some(PathBuf::from("fwq.csv")), 300));
        let Ok(BenchCommand::Fwq(a)) = parse(&["fwq", "--raw", "r.csv"]) else {
            panic!("--raw stays an alias");
        };
        assert_eq!(
            (a.samples, a.quanta),
            (Some(PathBuf::from("r.csv")), 10_000)
        );
        let Ok(BenchCommand::Cycle(a)) = parse(&["cycle", "--samples", "c.csv"]) else {
            panic!("cycle --samples FILE parses");
        };
        assert_eq!(a.samples, Some(PathBuf::from("c.csv")));
        let Ok(BenchCommand::Sleep(a)) = parse(&["sleep", "--raw", "./20000"]) else {
            panic!("sleep --raw FILE parses");
        };
        assert_eq!(a.samples, Some(PathBuf::from("./20000")));
    }

    #[test]
    fn a_count_given_to_samples_is_refused_naming_the_count_flags() {
        for bench in ["fwq", "cycle", "sleep", "ipc"] {
            let e = parse(&[bench, "--samples", "20000"])
                .err()
                .expect("refused");
            assert_eq!(e.exit_code(), 2, "{bench}");
            let text = e.to_string();
            assert!(
                text.contains("--samples takes the FILE the raw samples are written to, not a count — the number of samples is --quanta N for fwq, --loops N for cycle and sleep, --round-trips N for ipc; to write to a file named 20000, give ./20000"),
                "{bench}: {text}"
            );
        }
    }
}
