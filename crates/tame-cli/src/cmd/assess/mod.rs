//! `tame assess`: the requirement from the arguments, `tame_assess::assess`, and the
//! report as a summary (with a progress bar per phase), JSON and an output directory.

mod view;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use tame_assess::requirement::{
    parse_confidence, parse_miss_rate, parse_target_bound, Requirement,
};
use tame_assess::run::{Length, Observer, Options, Program};
use tame_bench::load::LoadKind;
use tame_bench::units::parse_duration_ns;

use super::measuring::install_stop_handler;
use crate::error::finished;
use crate::output::JsonOut;
use crate::{bad_input, Context};

#[derive(clap::Args)]
pub struct AssessArgs {
    /// How often the work runs.
    #[arg(long, allow_hyphen_values = true, default_value = "1ms")]
    period: String,
    /// CPU time one activation needs (default: a tenth of the deadline).
    #[arg(long, allow_hyphen_values = true)]
    budget: Option<String>,
    /// Latency bound from the intended start of an activation to the end of its work (default: the period).
    #[arg(long, allow_hyphen_values = true)]
    deadline: Option<String>,
    /// Fraction of activations that may end late: 0 (hard, the default), 0.001 or 0.1%.
    #[arg(long, allow_hyphen_values = true, default_value = "0")]
    miss_rate: String,
    /// Isolated CPUs the work needs.
    #[arg(long, allow_hyphen_values = true, default_value_t = 1)]
    cpus: u32,
    /// How long each configuration (shared, partitioned) is measured over all its rounds:
    /// about two thirds the work at every activation, one third busy-loop noise; or `auto`:
    /// long enough to show --target-bound with no miss, at most --max-duration.
    #[arg(long, allow_hyphen_values = true, default_value = "24s")]
    duration: String,
    /// Rounds of each configuration, interleaved (shared, partitioned, shared, …); they
    /// share --duration.
    #[arg(long, allow_hyphen_values = true, default_value_t = tame_assess::run::DEFAULT_ROUNDS)]
    rounds: u32,
    /// Confidence of the miss-rate bounds the verdict states: 0.95 or 95%.
    #[arg(long, allow_hyphen_values = true, default_value = "95%")]
    confidence: String,
    /// With --duration auto: the miss-rate bound to be able to show (default: --miss-rate,
    /// or 0.01% when no miss is tolerated).
    #[arg(long, allow_hyphen_values = true)]
    target_bound: Option<String>,
    /// With --duration auto: the most time per configuration.
    #[arg(long, allow_hyphen_values = true, default_value = "10m")]
    max_duration: String,
    /// The working set each activation's work touches (default: half the CPU's L2 cache).
    #[arg(long, value_name = "SIZE")]
    working_set: Option<String>,
    /// Background load beside the work: any of cpu,io,hdd,vm,sock,build,cache,stream,rt, or
    /// `none`. The default adds last-level-cache (cache) and memory-bandwidth (stream)
    /// pressure, which a partition cannot remove; rt adds a competing SCHED_FIFO 80 thread
    /// per load CPU (root).
    #[arg(long, default_value = DEFAULT_LOAD)]
    load: String,
    /// Run your own load instead of --load: `sh -c CMD` in a process group of its own on
    /// the load CPUs, ended (SIGTERM, then SIGKILL) when each phase ends; its throughput is
    /// not measured.
    #[arg(long, value_name = "CMD", conflicts_with = "load")]
    load_cmd: Option<String>,
    /// Assess your own partition spec instead of the generated one (its first isolated partition holds the work).
    #[arg(long, value_name = "FILE")]
    spec: Option<PathBuf>,
    /// Measure in today's minimal partition (CPUs, idle limit, memory node) without the
    /// knobs beyond them (performance governor, watchdogs off, an idle SMT sibling), to
    /// compare with.
    #[arg(long, conflicts_with = "spec")]
    minimal: bool,
    /// Give the SMT siblings of the work's CPUs to the system (and its load) instead of
    /// leaving them idle in the partition.
    #[arg(long, conflicts_with = "spec")]
    share_core: bool,
    /// Where the spec, every raw result and the report (assess.json) are written.
    #[arg(long, value_name = "DIR", default_value = "tame-assess")]
    out: PathBuf,
    /// Write the report as JSON to FILE, or to stdout with `-` (the summary then goes to stderr).
    #[arg(long, value_name = "FILE|-")]
    json: Option<String>,
    /// Do not attribute noise with tracefs (gaps only).
    #[arg(long)]
    no_trace: bool,
    /// Do not measure ordinary work's throughput after each phase (stress-ng cpu, 2 s per
    /// phase), so the verdict states no measured cost of partitioning.
    #[arg(long)]
    no_cost: bool,
    /// Where the partition's journal lives (default /var/lib/tame below --root).
    #[arg(long, value_name = "DIR")]
    journal_dir: Option<PathBuf>,
    /// With -- CMD: which of the program's threads the verdict is about, as thread ids or a
    /// regular expression on their names (default: the one with the most activations).
    #[arg(long, value_name = "TIDS|REGEX", requires = "program")]
    threads: Option<String>,
    /// Your own program as the work instead of the calibrated one: watched shared (on the
    /// chosen CPU) and inside the partition, under the same load and rounds (tame watch).
    #[arg(last = true, value_name = "CMD")]
    program: Vec<std::ffi::OsString>,
}

/// `--load` unless given: the ordinary disturbances, and the two a partition cannot remove
/// (shared last-level cache, memory bandwidth).
pub const DEFAULT_LOAD: &str = "cpu,io,hdd,vm,sock,cache,stream";

/// `--duration auto` for a hard requirement: size the run to show a miss rate below 0.01 %.
const DEFAULT_HARD_TARGET_BOUND: f64 = 0.0001;

fn duration(text: &str, what: &str) -> anyhow::Result<u64> {
    parse_duration_ns(text).map_err(|e| bad_input(format!("{what}: {e}")))
}

fn options(ctx: &Context, a: &AssessArgs) -> anyhow::Result<Options> {
    let period_ns = duration(&a.period, "--period")?;
    let budget_ns = match &a.budget {
        Some(b) => match duration(b, "--budget")? {
            0 => {
                return Err(bad_input(
                    "--budget 0: the work needs some CPU time in each period — give it, e.g. --budget 100us, or leave it out for a tenth of the deadline",
                ))
            }
            ns => ns,
        },
        None => period_ns / 10,
    };
    let deadline_ns = a
        .deadline
        .as_deref()
        .map(|d| duration(d, "--deadline"))
        .transpose()?;
    let requirement = Requirement::new(
        period_ns,
        budget_ns,
        deadline_ns,
        parse_miss_rate(&a.miss_rate)?,
        a.cpus,
    )?
    .with_confidence(parse_confidence(&a.confidence)?)?;
    let length = if a.duration.trim() == "auto" {
        let target_bound = match &a.target_bound {
            Some(t) => parse_target_bound(t)?,
            None if requirement.is_hard() => DEFAULT_HARD_TARGET_BOUND,
            None => requirement.miss_rate,
        };
        Length::Auto {
            target_bound,
            max_ns: duration(&a.max_duration, "--max-duration")?,
        }
    } else {
        if a.target_bound.is_some() {
            return Err(bad_input(
                "--target-bound sizes --duration auto — give --duration auto, or drop --target-bound",
            ));
        }
        Length::Fixed(duration(&a.duration, "--duration")?)
    };
    let working_set_bytes = a
        .working_set
        .as_deref()
        .map(|w| {
            tame_rt::size::parse_bytes(w).ok_or_else(|| {
                bad_input(format!(
                    "--working-set {w:?} is not a size — give one such as 256K or 1M"
                ))
            })
        })
        .transpose()?;
    // The user's command replaces the default load (clap refuses it beside an explicit --load).
    let load = if a.load_cmd.is_some() || a.load.trim() == "none" {
        Vec::new()
    } else {
        LoadKind::parse_list(&a.load)?
    };
    if let Some(cmd) = &a.load_cmd {
        tame_bench::load::validate_command(cmd)?;
    }
    let spec = a
        .spec
        .as_ref()
        .map(|p| {
            std::fs::read_to_string(p)
                .map(|text| (p.display().to_string(), text))
                .map_err(|e| {
                    bad_input(format!(
                        "cannot read spec {}: {e} — give the path of a partition spec (see examples/)",
                        p.display()
                    ))
                })
        })
        .transpose()?;
    Ok(Options {
        requirement,
        length,
        rounds: a.rounds,
        working_set_bytes,
        load,
        load_cmd: a.load_cmd.clone(),
        spec,
        minimal: a.minimal,
        share_core: a.share_core,
        journal_dir: ctx.journal_dir(a.journal_dir.as_deref()),
        out_dir: Some(a.out.clone()),
        attribute: !a.no_trace,
        cost_probe: !a.no_cost,
        command_line: ctx.command_line.clone(),
        program: (!a.program.is_empty()).then(|| Program {
            argv: a.program.clone(),
            threads: a.threads.clone(),
        }),
    })
}

pub fn run(ctx: &Context, a: AssessArgs) -> anyhow::Result<i32> {
    ctx.require_root_dir()?;
    let options = options(ctx, &a)?;
    // First: Ctrl-C while the machine is read still ends the run as an interruption
    // (exit 130, what was measured reported), not by the signal.
    let control = install_stop_handler()?;
    let mut progress = Progress::new();
    progress.phase("reading the machine", 0);
    // Everything is validated before the first file is opened or the machine changes.
    let prepared = tame_assess::run::prepare(&ctx.root, &options)?;
    let json = JsonOut::open(a.json.as_deref(), "JSON report")?;
    let report = prepared.run(&control, &mut progress)?;
    progress.finish();
    let page = write_report_page(&a.out);
    json.emit(&report, &view::summary(&report, &a.out, page.as_deref()))?;
    Ok(finished(report.interrupted))
}

/// `tame report`'s page of the assessment, from the assess.json just written, into
/// `OUT/report/`. A page that cannot be drawn costs the user a picture, not the verdict:
/// the reason goes to stderr and the command goes on.
fn write_report_page(out: &Path) -> Option<PathBuf> {
    let drawn = tame_report::read(&[out.join("assess.json")])
        .and_then(|inputs| tame_report::render(&inputs))
        .and_then(|rendered| tame_report::write(&rendered, &out.join(REPORT_DIR)));
    match drawn {
        Ok(_) => Some(out.join(REPORT_DIR).join(tame_report::INDEX)),
        Err(e) => {
            eprintln!("tame assess: no report page: {e}");
            None
        }
    }
}

/// Where in `--out` the report page goes.
pub const REPORT_DIR: &str = "report";

/// Phases and their progress on stderr: a bar on a terminal, one line per phase otherwise.
struct Progress {
    terminal: bool,
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    fn new() -> Self {
        Progress {
            terminal: std::io::stderr().is_terminal(),
            bar: None,
        }
    }

    fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

impl Observer for Progress {
    fn phase(&mut self, title: &str, expected_ns: u64) {
        self.finish();
        if self.terminal && expected_ns > 0 {
            let bar = indicatif::ProgressBar::new(1000);
            bar.set_style(
                indicatif::ProgressStyle::with_template("{prefix:32} [{bar:30}] {elapsed}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            bar.set_prefix(title.to_string());
            self.bar = Some(bar);
        } else {
            eprintln!("tame assess: {title}");
        }
    }

    fn progress(&mut self, permille: u64) {
        if let Some(b) = &self.bar {
            b.set_position(permille.min(1000));
        }
    }

    fn note(&mut self, text: &str) {
        match &self.bar {
            Some(b) => b.println(format!("tame assess: {text}")),
            None => eprintln!("tame assess: {text}"),
        }
    }
}
