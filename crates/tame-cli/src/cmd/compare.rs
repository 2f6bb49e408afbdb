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
    /// A B: the baseline result and the one compared with it (JSON from any `tame bench …
    /// --json`, the same bench). With --gate: BASELINE… NEW, one or more baseline results
    /// or directories of them (each *.json in it), the new result last.
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

/// A result file, refused as bad input when it cannot be read or is not a bench result
/// (recognised by `tame_results`, as `tame report` and `tame export prometheus` do).
fn read(path: &Path) -> anyhow::Result<Compared> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        bad_input(format!(
            "cannot read {}: {e} — give the path of a result written with --json",
            path.display()
        ))
    })?;
    let raw: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        bad_input(format!(
            "{} is not JSON: {e} — give a result written with `tame bench … --json FILE`",
            path.display()
        ))
    })?;
    let file = path.display().to_string();
    match tame_results::recognise(&file, raw, &[Kind::Bench]) {
        Ok(Doc::Bench(compared)) => Ok(*compared),
        // Only bench results are asked for: anything else came back refused.
        Ok(_) => unreachable!("tame_results returned a kind compare did not ask for"),
        Err(e) => Err(bad_input(format!(
            "{} is not a tame bench result: {e} — give a result written with `tame bench … --json FILE`",
            path.display()
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
            let r = read(&f)?;
            baseline.push((f.display().to_string(), r));
        }
    }
    let new_name = new_path.display().to_string();
    let verdict = Gate::new(&baseline, &new_name, &read(new_path)?, rule)?;
    let json = JsonOut::open(args.json.as_deref(), "gate verdict")?;
    let versioned = Versioned::new(&verdict);
    json.emit(&versioned, &gate::table(&verdict))?;
    Ok(if verdict.passed { 0 } else { EXIT_GATE_FAILED })
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
    let comparison = Comparison::new(
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
