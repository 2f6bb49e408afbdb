//! What a tame JSON document is: the one recogniser behind `tame report`, `tame export
//! prometheus` and `tame compare`. A document is recognised by its own schema fields (the
//! convention of [`tame_host::schema`]): `schema_version` + `bench` (a bench result), a
//! tagged `schema` (`tame.sweep/1`, `tame.assess/1`, `tame.compare/1`, `tame.check/1`), or
//! a numbered `schema` with the fields that tell which older document it is (a status,
//! a reserve study report) — read as JSON first and then as its Rust type, so a file that
//! is not one of them is refused with what it lacks.
//!
//! Each caller says which [`Kind`]s it reads; a document of another kind is refused as
//! one whose schema is none of tame's, as each caller did before it had this crate. A
//! [`Refusal`] displays what is wrong; the caller adds what to do (each command words
//! that for itself: "render it…", "export it…").
//!
//! It is also the home of the one output document whose data's crate cannot hold it:
//! [`ipc_ls`] (tame-ipc depends on nothing).

pub mod ipc_ls;

use serde::Deserialize;
use serde_json::Value;
use tame_assess::AssessReport;
use tame_bench::compare::{Compared, Comparison};
use tame_bench::sweep::Sweep;
use tame_bench::BenchResult;
use tame_check::CheckReport;
use tame_host::{Document, Schema};
use tame_partition::status::Status;
use tame_reserve_study::result::{ReserveResult, ReserveSettings};
use tame_reserve_study::Report as ReserveReport;

/// The assess report before the work ran at every activation: still read.
const ASSESS_V1: &str = "tame.assess/1";

/// The benches whose results this tame reads, with the schema versions it reads.
pub const BENCH_VERSIONS: &[(&str, &[u32])] = &[
    ("cycle", &[1]),
    ("sleep", &[1]),
    ("fwq", &[1]),
    ("noise", &[1]),
    ("ipc", &[1, 2, tame_bench::ipc::SCHEMA.version]),
    ("cost", &[1]),
    ("reserve", &[1]),
    ("mem", &[1]),
    ("cache", &[1]),
    ("job", &[1]),
    ("watch", &[1]),
];

/// The kinds of document tame reads back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A bench result (`tame bench … --json`); a reserve result is one too where the caller
    /// does not read [`Kind::Reserve`].
    Bench,
    /// A sweep (`tame bench sleep --tasks 1..12 --json`): bench results, one per step.
    Sweep,
    /// `tame compare --json`.
    Compare,
    /// `tame assess` (its `assess.json`).
    Assess,
    /// The reserve study: `tame bench reserve --json`, or the report an older
    /// `tame-reserve-kit bench --json` wrote.
    Reserve,
    /// `tame check --json`.
    Check,
    /// `tame status --json`.
    Status,
}

impl Kind {
    /// Every kind, for a reader of all of them (tame export prometheus).
    pub const ALL: &'static [Kind] = &[
        Kind::Bench,
        Kind::Sweep,
        Kind::Compare,
        Kind::Assess,
        Kind::Reserve,
        Kind::Check,
        Kind::Status,
    ];
}

/// One document, recognised and read into its type.
#[derive(Clone, Debug)]
pub enum Doc {
    /// A bench result, with the findings beside it of a noise or watch result.
    Bench(Box<Compared>),
    Sweep(Box<SweepDoc>),
    Compare(Box<CompareDoc>),
    Assess(Box<AssessReport>),
    Reserve(Box<ReserveDoc>),
    Check(Box<CheckReport>),
    Status(Box<Status>),
}

/// A sweep's steps, in order, each recognised as a document of its own.
#[derive(Clone, Debug)]
pub struct SweepDoc {
    /// The swept setting (`tasks`).
    pub parameter: String,
    pub steps: Vec<Step>,
}

/// One step of a sweep.
#[derive(Clone, Debug)]
pub struct Step {
    /// `tasks=4`.
    pub name: String,
    pub doc: Doc,
}

/// The reserve study's tables, and the result of the common schema around them where it
/// came from `tame bench reserve` (per-window shares, frame distances, command line).
#[derive(Clone, Debug)]
pub struct ReserveDoc {
    pub report: ReserveReport,
    pub result: Option<BenchResult<ReserveSettings>>,
}

/// `tame compare --json` read back ([`Comparison`] as written, its spreads left out).
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
    /// A percentile one side cannot support: the samples it needs (that side is null).
    #[serde(default)]
    pub needs_samples: Option<u64>,
}

/// Why a document was not read. Displays what is wrong; the caller adds what to do.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error("{file} is not a tame result: it is JSON but not an object")]
    NotAnObject { file: String },
    #[error("{file} is not a tame result: it has a schema_version but no `bench`")]
    NoBench { file: String },
    #[error(
        "{file} is a result of bench `{bench}`, which this tame does not draw (it draws {})",
        known_benches()
    )]
    UnknownBench { file: String, bench: String },
    /// A version of a known document this tame does not read (a newer tame wrote it).
    #[error("{0}")]
    TooNew(Box<TooNew>),
    /// It names a known document but does not read as one.
    #[error("{file} looks like {what} but does not read as one ({error})")]
    Damaged {
        file: String,
        kind: Kind,
        what: String,
        error: serde_json::Error,
    },
    #[error("{file} is not a tame result: its schema {schema} is none of tame's")]
    UnknownSchema { file: String, schema: Value },
    #[error("{file} is not a tame result: it has no `schema_version` and `bench` (a bench result), no `schema` (an assess or reserve report) and no `rows` (a comparison)")]
    Unrecognised { file: String },
    /// A sweep's step could not be taken out of it (`file` names the step).
    #[error("{file}: {error}")]
    Step {
        file: String,
        error: serde_json::Error,
    },
}

/// A known document of a version this tame does not read.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {what} of {field} {found}, which this tame does not read (it reads {reads})")]
pub struct TooNew {
    pub file: String,
    pub kind: Kind,
    /// `an assess report`, `a cycle result`.
    pub what: String,
    /// `schema` or `schema_version`.
    pub field: &'static str,
    pub found: String,
    pub reads: String,
    /// The `tool_version` of a bench result (`?` when it has none).
    pub tool: String,
}

impl Refusal {
    /// The kind of document it looked like, where it named one.
    pub fn kind(&self) -> Option<Kind> {
        match self {
            Refusal::TooNew(t) => Some(t.kind),
            Refusal::Damaged { kind, .. } => Some(*kind),
            Refusal::NoBench { .. } | Refusal::UnknownBench { .. } => Some(Kind::Bench),
            Refusal::Step { .. } => Some(Kind::Sweep),
            _ => None,
        }
    }
}

/// `1`, `1 and 2`, `1, 2 and 3`.
fn listed(versions: &[u32]) -> String {
    let words: Vec<String> = versions.iter().map(u32::to_string).collect();
    match words.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => words.join(""),
    }
}

fn known_benches() -> String {
    let known: Vec<&str> = BENCH_VERSIONS.iter().map(|(b, _)| *b).collect();
    known.join(", ")
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

/// What the JSON document `value` (read from `file`) is, of the kinds in `reads`; refused
/// when it is none of them or of a version this tame does not read.
pub fn recognise(file: &str, value: Value, reads: &[Kind]) -> Result<Doc, Refusal> {
    let Some(obj) = value.as_object() else {
        return Err(Refusal::NotAnObject { file: file.into() });
    };
    if let Some(version) = obj.get("schema_version") {
        let head = BenchHead {
            bench: obj.get("bench").and_then(Value::as_str).map(str::to_owned),
            version: version.clone(),
            tool: obj
                .get("tool_version")
                .and_then(Value::as_str)
                .map(str::to_owned),
        };
        return bench_result(file, head, value, reads);
    }
    let tagged = |schema: Schema, kind: Kind, s: &str| reads.contains(&kind) && schema.names(s);
    let numbered_with = |kind: Kind, keys: &[&str]| {
        reads.contains(&kind) && keys.iter().all(|k| obj.contains_key(*k))
    };
    // `Some(found)` where the document's schema names `schema` in a version this tame does
    // not read.
    let stale_tag = |schema: Schema, s: &str| (!schema.is_tag(s)).then(|| s.to_string());
    let stale_number = |schema: Schema, n: &serde_json::Number| {
        (n.as_u64() != Some(u64::from(schema.version))).then(|| n.to_string())
    };
    match obj.get("schema") {
        Some(Value::String(s)) if tagged(AssessReport::SCHEMA, Kind::Assess, s) => {
            // A tame.assess/1 report reads into the same type (its cycle figures and verdict).
            let stale = (s != ASSESS_V1)
                .then(|| stale_tag(AssessReport::SCHEMA, s))
                .flatten();
            let known = Known::new(file, Kind::Assess, "an assess report", AssessReport::SCHEMA);
            known
                .read(value, stale, "an assess report")
                .map(Doc::Assess)
        }
        Some(Value::String(s)) if tagged(<Sweep>::SCHEMA, Kind::Sweep, s) => {
            let stale = stale_tag(<Sweep>::SCHEMA, s);
            let known = Known::new(file, Kind::Sweep, "a sweep", <Sweep>::SCHEMA);
            let sweep: Box<Sweep> = known.read(value, stale, "a sweep")?;
            sweep_steps(file, *sweep, reads).map(|s| Doc::Sweep(Box::new(s)))
        }
        Some(Value::String(s)) if tagged(Comparison::SCHEMA, Kind::Compare, s) => {
            let stale = stale_tag(Comparison::SCHEMA, s);
            let known = Known::new(file, Kind::Compare, "a comparison", Comparison::SCHEMA);
            known.read(value, stale, COMPARISON).map(Doc::Compare)
        }
        Some(Value::String(s)) if tagged(CheckReport::SCHEMA, Kind::Check, s) => {
            let stale = stale_tag(CheckReport::SCHEMA, s);
            let known = Known::new(file, Kind::Check, "a check report", CheckReport::SCHEMA);
            known.read(value, stale, "a check report").map(Doc::Check)
        }
        // A status and a reserve study report are numbered: told apart by their fields.
        Some(Value::Number(n)) if numbered_with(Kind::Status, &["applied", "drift", "audit"]) => {
            let stale = stale_number(Status::SCHEMA, n);
            let known = Known::new(file, Kind::Status, "a status", Status::SCHEMA);
            known
                .read(value, stale, "a status (tame status --json)")
                .map(Doc::Status)
        }
        Some(Value::Number(n)) if numbered_with(Kind::Reserve, &["overhead", "stability"]) => {
            let stale = stale_number(ReserveReport::SCHEMA, n);
            let what = "a reserve study report";
            let known = Known::new(file, Kind::Reserve, what, ReserveReport::SCHEMA);
            known.read(value, stale, what).map(|report| {
                Doc::Reserve(Box::new(ReserveDoc {
                    report: *report,
                    result: None,
                }))
            })
        }
        Some(other) => Err(Refusal::UnknownSchema {
            file: file.into(),
            schema: other.clone(),
        }),
        // A comparison written before comparisons named their schema.
        None if reads.contains(&Kind::Compare)
            && ["bench", "a", "b", "rows"]
                .iter()
                .all(|k| obj.contains_key(*k)) =>
        {
            let known = Known::new(file, Kind::Compare, "a comparison", Comparison::SCHEMA);
            known.read(value, None, COMPARISON).map(Doc::Compare)
        }
        None => Err(Refusal::Unrecognised { file: file.into() }),
    }
}

/// How a refused comparison is named.
const COMPARISON: &str = "a comparison (tame compare --json)";

/// A document whose schema named one of tame's: read into its type, or refused with why.
struct Known<'a> {
    file: &'a str,
    kind: Kind,
    /// `an assess report`: what a newer version is called.
    what: &'a str,
    schema: Schema,
}

impl<'a> Known<'a> {
    fn new(file: &'a str, kind: Kind, what: &'a str, schema: Schema) -> Self {
        Known {
            file,
            kind,
            what,
            schema,
        }
    }

    /// `value` as a `T`; refused as too new where `stale` holds the version found, as
    /// damaged (`looks like {read_as}`) where it does not read.
    fn read<T: serde::de::DeserializeOwned>(
        &self,
        value: Value,
        stale: Option<String>,
        read_as: &str,
    ) -> Result<Box<T>, Refusal> {
        if let Some(found) = stale {
            return Err(Refusal::TooNew(Box::new(TooNew {
                file: self.file.into(),
                kind: self.kind,
                what: self.what.into(),
                field: "schema",
                found,
                reads: self.schema.to_string(),
                tool: String::new(),
            })));
        }
        serde_json::from_value(value)
            .map(Box::new)
            .map_err(|error| Refusal::Damaged {
                file: self.file.into(),
                kind: self.kind,
                what: read_as.into(),
                error,
            })
    }
}

/// A document with a `schema_version`: a bench result of a bench and version this tame reads.
/// What a bench result says of itself before it is read.
struct BenchHead {
    bench: Option<String>,
    version: Value,
    tool: Option<String>,
}

fn bench_result(file: &str, head: BenchHead, value: Value, reads: &[Kind]) -> Result<Doc, Refusal> {
    let BenchHead {
        bench,
        version,
        tool,
    } = head;
    let Some(bench) = bench else {
        return Err(Refusal::NoBench { file: file.into() });
    };
    let bench = bench.as_str();
    let Some((_, versions)) = BENCH_VERSIONS.iter().find(|(b, _)| *b == bench) else {
        return Err(Refusal::UnknownBench {
            file: file.into(),
            bench: bench.into(),
        });
    };
    let v = version.as_u64().unwrap_or(u64::MAX);
    if !versions.iter().any(|k| u64::from(*k) == v) {
        let tool = tool.as_deref().unwrap_or("?");
        return Err(Refusal::TooNew(Box::new(TooNew {
            file: file.into(),
            kind: Kind::Bench,
            what: format!("a tame bench {bench} result"),
            field: "schema_version",
            found: version.to_string(),
            reads: listed(versions),
            tool: tool.into(),
        })));
    }
    let damaged = |error| Refusal::Damaged {
        file: file.into(),
        kind: Kind::Bench,
        what: a_result(bench),
        error,
    };
    if bench == "reserve" && reads.contains(&Kind::Reserve) {
        let r: ReserveResult = serde_json::from_value(value).map_err(damaged)?;
        return Ok(Doc::Reserve(Box::new(ReserveDoc {
            report: r.reserve,
            result: Some(r.result),
        })));
    }
    Compared::from_value(value)
        .map(|c| Doc::Bench(Box::new(c)))
        .map_err(damaged)
}

/// Each step of a sweep, recognised as a document named `FILE [tasks=4]` (a sweep inside
/// a sweep is none of tame's).
fn sweep_steps(file: &str, sweep: Sweep, reads: &[Kind]) -> Result<SweepDoc, Refusal> {
    let step_reads: Vec<Kind> = reads
        .iter()
        .copied()
        .filter(|k| *k != Kind::Sweep)
        .collect();
    let steps = sweep
        .results
        .iter()
        .zip(&sweep.values)
        .map(|(result, v)| {
            let name = format!("{}={v}", sweep.parameter);
            let step_file = format!("{file} [{name}]");
            let value = serde_json::to_value(result).map_err(|error| Refusal::Step {
                file: step_file.clone(),
                error,
            })?;
            let doc = recognise(&step_file, value, &step_reads)?;
            Ok(Step { name, doc })
        })
        .collect::<Result<Vec<_>, Refusal>>()?;
    Ok(SweepDoc {
        parameter: sweep.parameter,
        steps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ALL: &[Kind] = Kind::ALL;

    fn refused(value: Value, reads: &[Kind]) -> String {
        match recognise("x.json", value, reads) {
            Err(r) => r.to_string(),
            Ok(d) => panic!("expected a refusal, got {d:?}"),
        }
    }

    #[test]
    fn a_kind_the_caller_does_not_read_is_none_of_tames() {
        let check = json!({"schema": "tame.check/9"});
        assert_eq!(
            refused(check.clone(), ALL),
            "x.json: a check report of schema tame.check/9, which this tame does not read (it reads tame.check/1)"
        );
        assert_eq!(
            refused(check, &[Kind::Bench]),
            "x.json is not a tame result: its schema \"tame.check/9\" is none of tame's"
        );
        let status = json!({"schema": 7, "applied": true, "drift": [], "audit": {}});
        assert_eq!(
            refused(status.clone(), ALL),
            "x.json: a status of schema 7, which this tame does not read (it reads 1)"
        );
        assert!(refused(status, &[Kind::Reserve]).contains("its schema 7 is none of tame's"));
    }

    #[test]
    fn a_watch_result_is_read_with_its_findings() {
        let text = include_str!("../../tame-report/tests/fixtures/watch.json");
        let value: Value = serde_json::from_str(text).unwrap();
        let Ok(Doc::Bench(c)) = recognise("watch.json", value, &[Kind::Bench]) else {
            panic!("a watch result is a bench result");
        };
        assert_eq!(c.result.bench, "watch");
        let w = c.watch.expect("its findings, read beside it");
        assert_eq!(w.threads.len(), c.result.groups.len());
        assert!(c.noise.is_none());
    }

    #[test]
    fn bench_results_are_read_by_bench_and_version() {
        let too_new = json!({"schema_version": 9, "bench": "ipc", "tool_version": "9.0"});
        let r = recognise("x.json", too_new, ALL).unwrap_err();
        assert_eq!(
            r.to_string(),
            "x.json: a tame bench ipc result of schema_version 9, which this tame does not read (it reads 1, 2 and 3)"
        );
        assert!(matches!(r, Refusal::TooNew(ref t) if t.tool == "9.0"));
        let unknown = refused(json!({"schema_version": 1, "bench": "nope"}), ALL);
        assert!(unknown.starts_with("x.json is a result of bench `nope`, which this tame does not draw (it draws cycle, sleep"), "{unknown}");
        let damaged = refused(json!({"schema_version": 1, "bench": "cycle"}), ALL);
        assert!(
            damaged.starts_with("x.json looks like a cycle result but does not read as one ("),
            "{damaged}"
        );
        assert_eq!(
            refused(json!({"hello": 1}), ALL),
            "x.json is not a tame result: it has no `schema_version` and `bench` (a bench result), no `schema` (an assess or reserve report) and no `rows` (a comparison)"
        );
        assert_eq!(
            refused(json!([1]), ALL),
            "x.json is not a tame result: it is JSON but not an object"
        );
    }
}
