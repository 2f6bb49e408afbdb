//! Reading the inputs: the documents tame report draws (bench results, sweeps, comparisons,
//! assess reports, reserve studies), recognised by `tame_results::recognise` — the one
//! recogniser, shared with `tame export prometheus` and `tame compare` — and refused in
//! tame report's words.

use std::path::Path;

use serde_json::Value;
use tame_bench::compare::Compared;
pub use tame_results::{a_result, CompareDoc, CompareRow, ReserveDoc};
use tame_results::{Kind, Refusal};

use crate::error::{invalid, ReportError, Result};

/// The kinds of document tame report draws.
const DRAWS: &[Kind] = &[
    Kind::Bench,
    Kind::Sweep,
    Kind::Compare,
    Kind::Assess,
    Kind::Reserve,
];

/// One input file, recognised.
#[derive(Clone, Debug)]
pub struct Input {
    /// The file as the user named it.
    pub file: String,
    pub doc: Doc,
}

#[derive(Clone, Debug)]
pub enum Doc {
    /// A bench result (`tame bench … --json`, a watch's result too), with the findings beside
    /// it of a noise or watch result.
    Bench(Box<Compared>),
    /// `tame compare --json`.
    Compare(Box<CompareDoc>),
    /// `tame assess` (its `assess.json`).
    Assess(Box<tame_assess::AssessReport>),
    /// The reserve study: `tame bench reserve --json`, or the report an older
    /// `tame-reserve-kit bench --json` wrote.
    Reserve(Box<ReserveDoc>),
}

impl Doc {
    /// What it is, in words: `a cycle result`, `an assess report`.
    pub fn what(&self) -> String {
        match self {
            Doc::Bench(c) => a_result(&c.result.bench),
            Doc::Compare(c) => format!("a comparison of {} results", c.bench),
            Doc::Assess(_) => "an assess report".into(),
            Doc::Reserve(_) => "a reserve study report".into(),
        }
    }
}

const WHAT_TO_GIVE: &str = "give a result written with `tame bench … --json FILE` (a sweep too), `tame compare --json FILE`, an assess report (`assess.json`) or a reserve study report";

/// Read and recognise one file.
pub fn read(path: &Path) -> Result<Vec<Input>> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| invalid(format!("cannot read {file}: {e} — {WHAT_TO_GIVE}")))?;
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| invalid(format!("{file} is not JSON ({e}) — {WHAT_TO_GIVE}")))?;
    let doc = tame_results::recognise(&file, value, DRAWS).map_err(refused)?;
    // A sweep (`tame bench sleep --tasks 1..12`) is read as its steps, each an input of its
    // own named after the step (`sweep.json [tasks=4]`).
    let tame_results::Doc::Sweep(sweep) = doc else {
        return Ok(vec![Input {
            doc: drawn(&file, doc)?,
            file,
        }]);
    };
    if sweep.steps.is_empty() {
        return Err(invalid(format!(
            "{file}: a sweep without a single measured step — run it again and let the first step finish"
        )));
    }
    sweep
        .steps
        .into_iter()
        .map(|step| {
            let file = format!("{file} [{}]", step.name);
            Ok(Input {
                doc: drawn(&file, step.doc)?,
                file,
            })
        })
        .collect()
}

/// A recognised document as drawn; the recogniser returns only the kinds in [`DRAWS`],
/// and steps only of a sweep.
fn drawn(file: &str, doc: tame_results::Doc) -> Result<Doc> {
    Ok(match doc {
        tame_results::Doc::Bench(c) => Doc::Bench(c),
        tame_results::Doc::Compare(c) => Doc::Compare(c),
        tame_results::Doc::Assess(r) => Doc::Assess(r),
        tame_results::Doc::Reserve(r) => Doc::Reserve(r),
        tame_results::Doc::Sweep(_)
        | tame_results::Doc::Check(_)
        | tame_results::Doc::Status(_) => {
            return Err(invalid(format!(
                "{file} is not a tame result that tame report draws — {WHAT_TO_GIVE}"
            )))
        }
    })
}

/// The refusal with what to do about it, in tame report's words.
fn refused(r: Refusal) -> ReportError {
    invalid(match &r {
        Refusal::TooNew(t) if t.kind == Kind::Bench => {
            format!(
                "{r} — render it with the tame that wrote it (tame {})",
                t.tool
            )
        }
        Refusal::TooNew(_) | Refusal::UnknownBench { .. } => {
            format!("{r} — render it with the tame that wrote it")
        }
        Refusal::Damaged { .. } => {
            format!("{r} — it may be damaged or edited; write it again with this tame")
        }
        Refusal::Step { error, .. } => error.to_string(),
        Refusal::NotAnObject { .. }
        | Refusal::NoBench { .. }
        | Refusal::UnknownSchema { .. }
        | Refusal::Unrecognised { .. } => format!("{r} — {WHAT_TO_GIVE}"),
    })
}

/// The inputs drawn together, refused when they do not belong on one page: results of one
/// bench (overlaid), or one comparison, assess report or reserve study by itself.
pub fn check_together(inputs: &[Input]) -> Result<()> {
    let Some(first) = inputs.first() else {
        return Err(invalid(
            "no input — name one or more results: tame report RESULT.json…",
        ));
    };
    if inputs.len() == 1 {
        return Ok(());
    }
    for input in inputs {
        if !matches!(input.doc, Doc::Bench(_)) {
            return Err(invalid(format!(
                "{} is {}, which is drawn by itself — give it alone: tame report {}",
                input.file,
                input.doc.what(),
                input.file
            )));
        }
    }
    let bench = |i: &Input| match &i.doc {
        Doc::Bench(c) => c.result.bench.clone(),
        _ => unreachable!("checked above: every input is a bench result"),
    };
    let b0 = bench(first);
    if let Some(other) = inputs.iter().find(|i| bench(i) != b0) {
        return Err(invalid(format!(
            "{} is {} and {} {} — results are overlaid only when they come from the same bench: make one report per bench",
            first.file,
            a_result(&b0),
            other.file,
            a_result(&bench(other))
        )));
    }
    Ok(())
}
