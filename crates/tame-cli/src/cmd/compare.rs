//! `tame compare A.json B.json`: reads two results and prints the comparison that
//! `tame_bench::compare` makes of them.

use std::path::{Path, PathBuf};

use tame_bench::compare::{self, Compared, Comparison};

use crate::output::JsonOut;
use crate::{bad_input, Context};

#[derive(clap::Args)]
pub struct CompareArgs {
    /// The baseline result (JSON from any `tame bench … --json`).
    a: PathBuf,
    /// The result compared with it (the same bench).
    b: PathBuf,
    /// Write the comparison as JSON to FILE, or `-` for stdout.
    #[arg(long, value_name = "FILE|-")]
    json: Option<String>,
}

#[derive(serde::Serialize)]
struct Versioned<'a> {
    schema: &'static str,
    #[serde(flatten)]
    comparison: &'a Comparison,
}

/// A result file, refused as bad input when it cannot be read or is not a result.
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
    Compared::from_value(raw).map_err(|e| {
        bad_input(format!(
            "{} is not a tame bench result: {e} — give a result written with `tame bench … --json FILE`",
            path.display()
        ))
    })
}

pub fn run(_ctx: &Context, args: CompareArgs) -> anyhow::Result<i32> {
    let (a, b) = (read(&args.a)?, read(&args.b)?);
    let comparison = Comparison::new(
        &args.a.display().to_string(),
        &a,
        &args.b.display().to_string(),
        &b,
    )?;
    let json = JsonOut::open(args.json.as_deref(), "comparison")?;
    let versioned = Versioned {
        schema: compare::COMPARE_SCHEMA,
        comparison: &comparison,
    };
    json.emit(&versioned, &compare::table(&comparison))?;
    Ok(0)
}
