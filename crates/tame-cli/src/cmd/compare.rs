//! `tame compare A.json B.json`: reads two results and prints the comparison that
//! `tame_bench::compare` makes of them; with `--gate BASELINE… NEW`, the regression gate
//! of `tame_bench::compare::gate` (exit 1 when a figure is worse).

use std::path::{Path, PathBuf};

use tame_bench::compare::gate::{self, Gate, Rule};
use tame_bench::compare::{self, Compared, Comparison};
use tame_host::schema::Versioned;
use tame_results::{Doc, Kind};

use crate::error::bad_input_from;
use crate::output::JsonOut;
use crate::{bad_input, Context};

#[derive(clap::Args)]
pub struct CompareArgs {
    /// A B: the baseline and the one compared with it, of one kind: two results of one bench
    /// (`tame bench … --json`), two sweeps (compared step by step) or two assess reports
    /// (compared configuration by configuration). With --gate: BASELINE… NEW, one or more
    /// baseline results or directories of them (each *.json in it), the new result last.
    #[arg(required = true, num_args = 2.., value_name = "RESULT")]
    results: Vec<PathBuf>,
    /// Regression gate: judge the last result against the others' run-to-run spread; exit 1
    /// when a figure is worse (docs/bench.md, "compare --gate").
    #[arg(long)]
    gate: bool,
    /// With --gate: how much worse than the baseline's worst run FIGURE may get, as a ratio
    /// ≥ 1 (`latency p99_9=1.2`, `latency=1.1`, `p99=1.1`, `missed_periods=2`, `*=1.1` for
    /// every figure; default 1.05). Repeatable.
    #[arg(long, value_name = "FIGURE=RATIO", requires = "gate")]
    threshold: Vec<String>,
    /// With --gate: judge each time metric's maximum too (one outlier decides it).
    #[arg(long, requires = "gate")]
    max: bool,
    /// Write the comparison (or the gate's verdict) as JSON to FILE, or `-` for stdout.
    #[arg(long, value_name = "FILE|-")]
    json: Option<String>,
}

/// The exit code of a gate that found a figure worse (2 stays bad input).
pub const EXIT_GATE_FAILED: i32 = 1;

/// What compare reads: a bench result, a sweep (its steps) or an assess report.
enum Input {
    Bench(Box<Compared>),
    Sweep(Vec<compare::Step>),
    Assess(Box<Compared>),
}

/// What compare accepts, for the messages that refuse something else.
const ACCEPTS: &str = "two results of one bench (`tame bench … --json FILE`), two sweeps (`tame bench sleep --tasks 1..4 --json FILE`) or two assess reports (`OUT/assess.json`)";

impl Input {
    /// `a cycle result`, `a sweep of sleep over tasks (tasks=1, tasks=2)`, `an assess report`.
    fn describe(&self) -> String {
        match self {
            Input::Bench(c) => tame_results::a_result(&c.result.bench),
            Input::Sweep(steps) => {
                let names: Vec<&str> = steps.iter().map(|(n, _)| n.as_str()).collect();
                let bench = steps.first().map_or("?", |(_, c)| c.result.bench.as_str());
                format!("a sweep of {bench} ({})", names.join(", "))
            }
            Input::Assess(_) => "an assess report".into(),
        }
    }
}

/// A document compare reads, refused as bad input when it cannot be read or is none of
/// them (recognised by `tame_results`, as `tame report` and `tame export prometheus` do;
/// another of tame's documents is named, with what compare takes instead).
fn read(path: &Path) -> anyhow::Result<Input> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        bad_input(format!(
            "cannot read {}: {e} — give the path of a result written with --json",
            path.display()
        ))
    })?;
    let raw: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        bad_input(format!(
            "{} is not JSON: {e} — give {ACCEPTS}",
            path.display()
        ))
    })?;
    let file = path.display().to_string();
    match tame_results::recognise(&file, raw, Kind::ALL) {
        Ok(Doc::Bench(compared)) => Ok(Input::Bench(compared)),
        Ok(Doc::Sweep(sweep)) => sweep_steps(&file, *sweep).map(Input::Sweep),
        Ok(Doc::Assess(report)) => Ok(Input::Assess(Box::new(Compared {
            result: tame_report::assess::phases_result(&report),
            noise: None,
            watch: None,
        }))),
        Ok(other) => Err(bad_input(format!(
            "{file} is {}, which compare does not compare — give {ACCEPTS}",
            what_else(&other)
        ))),
        Err(e) => Err(bad_input(format!("{e} — give {ACCEPTS}"))),
    }
}

/// The steps of a sweep, each a bench result.
fn sweep_steps(file: &str, sweep: tame_results::SweepDoc) -> anyhow::Result<Vec<compare::Step>> {
    sweep
        .steps
        .into_iter()
        .map(|step| match step.doc {
            Doc::Bench(c) => Ok((step.name, *c)),
            other => Err(bad_input(format!(
                "{file}: step {} is {}, not a bench result — give {ACCEPTS}",
                step.name,
                what_else(&other)
            ))),
        })
        .collect()
}

/// How a document compare does not compare is named.
fn what_else(doc: &Doc) -> &'static str {
    match doc {
        Doc::Compare(_) => "a comparison (tame compare --json)",
        Doc::Reserve(_) => "a reserve study report",
        Doc::Check(_) => "a check report (tame check --json)",
        Doc::Status(_) => "a status (tame status --json)",
        Doc::Bench(_) => "a bench result",
        Doc::Sweep(_) => "a sweep",
        Doc::Assess(_) => "an assess report",
    }
}

/// A single bench result, for the gate (which judges one run against others).
fn read_result(path: &Path) -> anyhow::Result<Compared> {
    match read(path)? {
        Input::Bench(c) => Ok(*c),
        other => Err(bad_input(format!(
            "{} is {} — --gate judges single bench results (`tame bench … --json FILE`); compare it without --gate",
            path.display(),
            other.describe()
        ))),
    }
}

/// The result files a path names: itself, or each `*.json` in it (sorted) when it is a
/// directory; a directory without one is refused.
fn expand(path: &Path) -> anyhow::Result<Vec<PathBuf>> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let entries = std::fs::read_dir(path)
        .map_err(|e| bad_input_from(format!("cannot list {}", path.display()), e))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json") && p.is_file())
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(bad_input(format!(
            "{} holds no *.json result — give baseline results or a directory of them",
            path.display()
        )));
    }
    Ok(files)
}

fn run_gate(args: &CompareArgs) -> anyhow::Result<i32> {
    let mut rule = Rule {
        with_max: args.max,
        ..Rule::default()
    };
    for t in &args.threshold {
        rule.threshold(t)?;
    }
    let (new_path, baseline_paths) = args.results.split_last().expect("clap: two or more");
    let mut baseline = Vec::new();
    for p in baseline_paths {
        for f in expand(p)? {
            let r = read_result(&f)?;
            baseline.push((f.display().to_string(), r));
        }
    }
    let new_name = new_path.display().to_string();
    let verdict = Gate::new(&baseline, &new_name, &read_result(new_path)?, rule)?;
    let json = JsonOut::open(args.json.as_deref(), "gate verdict")?;
    let versioned = Versioned::new(&verdict);
    json.emit(&versioned, &gate::table(&verdict))?;
    Ok(if verdict.passed { 0 } else { EXIT_GATE_FAILED })
}

/// Two documents of one kind compared: results as they are, sweeps step by step, assess
/// reports configuration by configuration; two of different kinds are refused, naming both.
fn compare_inputs(a_name: &str, a: &Input, b_name: &str, b: &Input) -> anyhow::Result<Comparison> {
    Ok(match (a, b) {
        (Input::Bench(x), Input::Bench(y)) | (Input::Assess(x), Input::Assess(y)) => {
            Comparison::new(a_name, x, b_name, y)?
        }
        (Input::Sweep(x), Input::Sweep(y)) => Comparison::of_sweeps(a_name, x, b_name, y)?,
        _ => {
            let rounds = if [a, b].iter().any(|i| matches!(i, Input::Assess(_))) {
                " (each round of an assessment also keeps its own result beside assess.json — shared-1-job.json, partitioned-1-job.json, … —, a result of bench job)"
            } else {
                ""
            };
            return Err(bad_input(format!(
                "{a_name} is {} and {b_name} is {} — compare {ACCEPTS}{rounds}",
                a.describe(),
                b.describe()
            )));
        }
    })
}

pub fn run(_ctx: &Context, args: CompareArgs) -> anyhow::Result<i32> {
    if args.gate {
        return run_gate(&args);
    }
    let [a_path, b_path] = args.results.as_slice() else {
        return Err(bad_input(format!(
            "tame compare takes two results, A and B ({} given) — or --gate BASELINE… NEW to judge one against several",
            args.results.len()
        )));
    };
    let (a, b) = (read(a_path)?, read(b_path)?);
    let comparison = compare_inputs(
        &a_path.display().to_string(),
        &a,
        &b_path.display().to_string(),
        &b,
    )?;
    let json = JsonOut::open(args.json.as_deref(), "comparison")?;
    let versioned = Versioned::new(&comparison);
    json.emit(&versioned, &compare::table(&comparison))?;
    Ok(0)
}
