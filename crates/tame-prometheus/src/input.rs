//! What `tame export prometheus` reads: the documents `tame report` draws (bench
//! results, sweeps, assess reports, reserve studies — through `tame_results::recognise`,
//! the one recogniser both use) and two it does not draw: `tame check --json`
//! (`schema` `tame.check/1`) and `tame status --json` (`schema` 1 with `applied`, `drift`
//! and `audit`). Anything else — a comparison included, which holds differences, not
//! figures of a machine — is refused with what to give instead.

use std::io::Read;
use std::path::Path;

use serde_json::Value;
use tame_check::CheckReport;
use tame_partition::status::Status;
use tame_results::{Doc, Kind, Refusal};

use crate::Error;

/// The largest file read: a recorded assess report is ~0.5 MB, a long sweep a few MB.
const MAX_BYTES: u64 = 64 << 20;

const WHAT_TO_GIVE: &str = "give a bench result (`tame bench … --json FILE`, a sweep too), `tame check --json`, `tame status --json`, a reserve study or an assess report (`assess.json`)";

/// One document, recognised.
#[derive(Clone, Debug)]
pub enum Export {
    /// A bench result; `step` names a sweep's step (`tasks=4`).
    Bench {
        compared: Box<tame_bench::compare::Compared>,
        step: Option<String>,
    },
    Check(Box<CheckReport>),
    Status(Box<Status>),
    Assess(Box<tame_assess::AssessReport>),
    Reserve(Box<tame_results::ReserveDoc>),
}

/// One input file with what it holds (a sweep holds several results).
#[derive(Clone, Debug)]
pub struct Input {
    pub file: String,
    pub docs: Vec<Export>,
}

/// Read and recognise one file.
pub fn read(path: &Path) -> Result<Input, Error> {
    let file = path.display().to_string();
    let cannot =
        |e: std::io::Error| Error::Input(format!("cannot read {file}: {e} — {WHAT_TO_GIVE}"));
    let bytes =
        bounded(std::fs::File::open(path).map_err(cannot)?, &file).map_err(|e| match e {
            Bounded::Io(e) => cannot(e),
            Bounded::TooLarge(e) => e,
        })?;
    let value: Value = serde_json::from_slice(&bytes)
        .map_err(|e| Error::Input(format!("{file} is not JSON ({e}) — {WHAT_TO_GIVE}")))?;
    let docs = recognise(&file, value)?;
    Ok(Input { file, docs })
}

enum Bounded {
    Io(std::io::Error),
    TooLarge(Error),
}

/// At most MAX_BYTES of `from`, refused above. Read through `take`, not sized by the file's
/// metadata: a FIFO, /dev/zero or a /proc file report length 0 and may never end.
fn bounded(from: impl Read, file: &str) -> Result<Vec<u8>, Bounded> {
    let mut bytes = Vec::new();
    from.take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(Bounded::Io)?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(Bounded::TooLarge(Error::Input(format!(
            "{file} holds more than the {} MiB a tame result takes — {WHAT_TO_GIVE}",
            MAX_BYTES >> 20
        ))));
    }
    Ok(bytes)
}

/// The kinds of document it reads; a comparison is recognised only to be refused with why.
const READS: &[Kind] = Kind::ALL;

/// What the JSON document is.
pub fn recognise(file: &str, value: Value) -> Result<Vec<Export>, Error> {
    let doc = tame_results::recognise(file, value, READS).map_err(refused)?;
    Ok(match doc {
        Doc::Sweep(sweep) => sweep
            .steps
            .into_iter()
            .map(|step| match step.doc {
                Doc::Bench(compared) => Ok(Export::Bench {
                    compared,
                    step: Some(step.name),
                }),
                _ => Err(Error::Input(format!(
                    "{file} [{}]: a sweep's step that is not a bench result — write it again with this tame",
                    step.name
                ))),
            })
            .collect::<Result<_, _>>()?,
        Doc::Bench(compared) => vec![Export::Bench {
            compared,
            step: None,
        }],
        Doc::Check(r) => vec![Export::Check(r)],
        Doc::Status(s) => vec![Export::Status(s)],
        Doc::Assess(r) => vec![Export::Assess(r)],
        Doc::Reserve(r) => vec![Export::Reserve(r)],
        Doc::Compare(_) => {
            return Err(Error::Input(format!(
                "{file} is a comparison (tame compare --json): it holds differences between two results, not figures of a machine — export the results themselves: tame export prometheus A.json B.json"
            )))
        }
    })
}

/// The refusal with what to do about it: for the documents only export reads (a check
/// report, a sweep, a status) as `tame report` words it for its own, for any other what
/// export reads.
fn refused(r: Refusal) -> Error {
    let own = matches!(r.kind(), Some(Kind::Check | Kind::Sweep | Kind::Status));
    Error::Input(match &r {
        Refusal::TooNew(_) if own => {
            format!("{r} — export it with the tame that wrote it")
        }
        Refusal::Damaged { .. } if own => {
            format!("{r} — it may be damaged or edited; write it again with this tame")
        }
        Refusal::Step { .. } => r.to_string(),
        _ => format!("{r} — {WHAT_TO_GIVE}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refused(value: Value) -> String {
        match recognise("x.json", value) {
            Err(Error::Input(m)) => m,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_file_without_a_size_is_read_to_the_limit_and_refused_above_it() {
        // /dev/zero's metadata says 0 bytes and it never ends: the bound must come from
        // reading, not from the size the file claims.
        let e = read(Path::new("/dev/zero")).unwrap_err().to_string();
        assert!(e.contains("/dev/zero holds more than the 64 MiB"), "{e}");
        let at_limit = bounded(std::io::repeat(b' ').take(MAX_BYTES), "f");
        assert_eq!(at_limit.ok().map(|b| b.len() as u64), Some(MAX_BYTES));
        assert!(matches!(
            bounded(std::io::repeat(b' ').take(MAX_BYTES + 1), "f"),
            Err(Bounded::TooLarge(_))
        ));
    }

    #[test]
    fn unknown_documents_are_refused_with_what_to_give() {
        let m = refused(json!({"hello": 1}));
        assert!(m.contains("x.json is not a tame result"), "{m}");
        assert!(m.contains("tame status --json"), "{m}");
        let m = refused(json!({"schema": "tame.check/9"}));
        assert!(m.contains("does not read (it reads tame.check/1)"), "{m}");
        let m = refused(json!({"schema": 7, "applied": true, "drift": [], "audit": {}}));
        assert!(m.contains("a status of schema 7"), "{m}");
        let m = refused(
            json!({"schema": "tame.compare/1", "bench": "cycle", "a": "a", "b": "b", "rows": []}),
        );
        assert!(m.contains("is a comparison"), "{m}");
        let m = refused(json!({"schema": "tame.check/1", "cpus": 3}));
        assert!(
            m.contains("looks like a check report but does not read as one"),
            "{m}"
        );
    }
}
