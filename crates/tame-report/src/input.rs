//! Reading the inputs: any JSON document tame writes, recognised by its own version field
//! (`schema_version` + `bench`, an assess report's `schema`, a reserve study's `schema`,
//! or `tame compare --json`'s shape), read as JSON first and then as its Rust type, so a
//! file that is not one of them is refused with what it lacks.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;
use tame_assess::report::ASSESS_SCHEMA;
use tame_assess::AssessReport;
use tame_bench::compare::{Compared, COMPARE_SCHEMA};
use tame_bench::sweep::{Sweep, SWEEP_SCHEMA};
use tame_reserve_study::result::{ReserveResult, ReserveSettings};
use tame_reserve_study::{Report as ReserveReport, REPORT_SCHEMA};

use crate::error::{invalid, Result};

/// The benches whose results this tame draws, with the schema versions it reads.
const BENCH_VERSIONS: &[(&str, &[u32])] = &[
    ("cycle", &[1]),
    ("sleep", &[1]),
    ("fwq", &[1]),
    ("noise", &[1]),
    ("ipc", &[1, 2]),
    ("cost", &[1]),
    ("reserve", &[1]),
    ("mem", &[1]),
    ("cache", &[1]),
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
    /// A bench result (`tame bench … --json`), with the noise findings when a noise result.
    Bench(Box<Compared>),
    /// `tame compare --json`.
    Compare(Box<CompareDoc>),
    /// `tame assess` (its `assess.json`).
    Assess(Box<AssessReport>),
    /// The reserve study: `tame bench reserve --json`, or the report an older
    /// `tame-reserve-kit bench --json` wrote.
    Reserve(Box<ReserveDoc>),
}

/// The reserve study's tables, and the result of the common schema around them where it
/// came from `tame bench reserve` (per-window shares, frame distances, command line).
#[derive(Clone, Debug)]
pub struct ReserveDoc {
    pub report: ReserveReport,
    pub result: Option<tame_bench::BenchResult<ReserveSettings>>,
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

/// `a cycle result`, `an ipc result`.
pub fn a_result(bench: &str) -> String {
    let article = if bench.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    format!("{article} {bench} result")
}

/// `tame compare --json` as written by `tame_bench::compare::Comparison`.
#[derive(Clone, Debug, Deserialize)]
pub struct CompareDoc {
    pub bench: String,
    pub a: String,
    pub b: String,
    pub rows: Vec<CompareRow>,
    #[serde(default)]
    pub notes: Vec<String>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct CompareRow {
    pub group: String,
    pub name: String,
    #[serde(default)]
    pub unit: String,
    pub a: Option<f64>,
    pub b: Option<f64>,
    pub diff: Option<f64>,
    pub ratio: Option<f64>,
    #[serde(default)]
    pub beyond_spread: Option<bool>,
}

const WHAT_TO_GIVE: &str = "give a result written with `tame bench … --json FILE` (a sweep too), `tame compare --json FILE`, an assess report (`assess.json`) or a reserve study report";

/// Read and recognise one file.
pub fn read(path: &Path) -> Result<Vec<Input>> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| invalid(format!("cannot read {file}: {e} — {WHAT_TO_GIVE}")))?;
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| invalid(format!("{file} is not JSON ({e}) — {WHAT_TO_GIVE}")))?;
    if let Some(steps) = sweep_steps(&file, &value)? {
        return Ok(steps);
    }
    let doc = recognise(&file, value)?;
    Ok(vec![Input { file, doc }])
}

/// A sweep (`tame bench sleep --tasks 1..12`) is read as its steps, each an input of its
/// own named after the step (`sweep.json [tasks=4]`); `None` when `value` is no sweep.
fn sweep_steps(file: &str, value: &Value) -> Result<Option<Vec<Input>>> {
    let Some(schema) = value.get("schema").and_then(Value::as_str) else {
        return Ok(None);
    };
    if !schema.starts_with("tame.sweep/") {
        return Ok(None);
    }
    if schema != SWEEP_SCHEMA {
        return Err(invalid(format!(
            "{file}: a sweep of schema {schema}, which this tame does not read (it reads {SWEEP_SCHEMA}) — render it with the tame that wrote it"
        )));
    }
    let sweep: Sweep = serde_json::from_value(value.clone()).map_err(|e| {
        invalid(format!(
            "{file} looks like a sweep but does not read as one ({e}) — it may be damaged or edited; write it again with this tame"
        ))
    })?;
    if sweep.results.is_empty() {
        return Err(invalid(format!(
            "{file}: a sweep without a single measured step — run it again and let the first step finish"
        )));
    }
    sweep
        .results
        .iter()
        .zip(&sweep.values)
        .map(|(result, v)| {
            let step = format!("{file} [{}={v}]", sweep.parameter);
            let value = serde_json::to_value(result).map_err(|e| invalid(e.to_string()))?;
            Ok(Input {
                doc: recognise(&step, value)?,
                file: step,
            })
        })
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

/// What the JSON document is, refused when it is none of tame's or of a version this tame
/// does not read.
pub fn recognise(file: &str, value: Value) -> Result<Doc> {
    let Some(obj) = value.as_object() else {
        return Err(invalid(format!(
            "{file} is not a tame result: it is JSON but not an object — {WHAT_TO_GIVE}"
        )));
    };
    let not_valid = |what: &str, e: serde_json::Error| {
        invalid(format!(
            "{file} looks like {what} but does not read as one ({e}) — it may be damaged or edited; write it again with this tame"
        ))
    };
    if let Some(version) = obj.get("schema_version") {
        let Some(bench) = obj.get("bench").and_then(Value::as_str) else {
            return Err(invalid(format!(
                "{file} is not a tame result: it has a schema_version but no `bench` — {WHAT_TO_GIVE}"
            )));
        };
        let Some((_, versions)) = BENCH_VERSIONS.iter().find(|(b, _)| *b == bench) else {
            let known: Vec<&str> = BENCH_VERSIONS.iter().map(|(b, _)| *b).collect();
            return Err(invalid(format!(
                "{file} is a result of bench `{bench}`, which this tame does not draw (it draws {}) — render it with the tame that wrote it",
                known.join(", ")
            )));
        };
        let v = version.as_u64().unwrap_or(u64::MAX);
        if !versions.iter().any(|k| u64::from(*k) == v) {
            let tool = obj
                .get("tool_version")
                .and_then(Value::as_str)
                .unwrap_or("?");
            return Err(invalid(format!(
                "{file}: a {bench} result of schema_version {version}, which this tame does not read (it reads {}) — render it with the tame that wrote it (tame {tool})",
                versions.iter().map(u32::to_string).collect::<Vec<_>>().join(" and ")
            )));
        }
        let what = a_result(bench);
        if bench == "reserve" {
            let r: ReserveResult =
                serde_json::from_value(value.clone()).map_err(|e| not_valid(&what, e))?;
            return Ok(Doc::Reserve(Box::new(ReserveDoc {
                report: r.reserve,
                result: Some(r.result),
            })));
        }
        return Compared::from_value(value.clone())
            .map(|c| Doc::Bench(Box::new(c)))
            .map_err(|e| not_valid(&what, e));
    }
    match obj.get("schema") {
        Some(Value::String(s)) if s.starts_with("tame.assess/") => {
            if s != ASSESS_SCHEMA {
                return Err(invalid(format!(
                    "{file}: an assess report of schema {s}, which this tame does not read (it reads {ASSESS_SCHEMA}) — render it with the tame that wrote it"
                )));
            }
            return serde_json::from_value(value.clone())
                .map(|r| Doc::Assess(Box::new(r)))
                .map_err(|e| not_valid("an assess report", e));
        }
        Some(Value::Number(n)) if obj.contains_key("overhead") && obj.contains_key("stability") => {
            if n.as_u64() != Some(u64::from(REPORT_SCHEMA)) {
                return Err(invalid(format!(
                    "{file}: a reserve study report of schema {n}, which this tame does not read (it reads {REPORT_SCHEMA}) — render it with the tame that wrote it"
                )));
            }
            return serde_json::from_value(value.clone())
                .map(|report| {
                    Doc::Reserve(Box::new(ReserveDoc {
                        report,
                        result: None,
                    }))
                })
                .map_err(|e| not_valid("a reserve study report", e));
        }
        Some(Value::String(s)) if s.starts_with("tame.compare/") => {
            if s != COMPARE_SCHEMA {
                return Err(invalid(format!(
                    "{file}: a comparison of schema {s}, which this tame does not read (it reads {COMPARE_SCHEMA}) — render it with the tame that wrote it"
                )));
            }
            return serde_json::from_value(value.clone())
                .map(|c| Doc::Compare(Box::new(c)))
                .map_err(|e| not_valid("a comparison (tame compare --json)", e));
        }
        Some(other) => {
            return Err(invalid(format!(
                "{file} is not a tame result: its schema {other} is none of tame's — {WHAT_TO_GIVE}"
            )))
        }
        None => {}
    }
    // A comparison written before comparisons named their schema.
    if ["bench", "a", "b", "rows"]
        .iter()
        .all(|k| obj.contains_key(*k))
    {
        return serde_json::from_value(value.clone())
            .map(|c| Doc::Compare(Box::new(c)))
            .map_err(|e| not_valid("a comparison (tame compare --json)", e));
    }
    Err(invalid(format!(
        "{file} is not a tame result: it has no `schema_version` and `bench` (a bench result), no `schema` (an assess or reserve report) and no `rows` (a comparison) — {WHAT_TO_GIVE}"
    )))
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
