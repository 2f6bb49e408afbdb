//! `tame export prometheus RESULT.json… [-o FILE] [--config NAME]`: tame's result
//! documents as Prometheus text exposition (`tame_prometheus`, series in docs/metrics.md).
//! With `-o` the file is replaced atomically — written beside it under a name the textfile
//! collector ignores, then renamed — so node_exporter never reads half a file.

use std::path::{Path, PathBuf};

use tame_prometheus::Options;

use crate::output::print_out;
use crate::{bad_input, Context};

#[derive(clap::Args)]
pub struct PrometheusArgs {
    /// Documents to export: bench results (`tame bench … --json`, sweeps too),
    /// `tame check --json`, `tame status --json`, a reserve study or an assess report.
    #[arg(required = true, value_name = "RESULT.json")]
    results: Vec<PathBuf>,
    /// Write to FILE (atomically, readable by all: node_exporter's textfile collector
    /// reads `*.prom` in its directory) instead of stdout.
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    out: Option<PathBuf>,
    /// The `config` label of bench results, in place of their partition's name (`shared`
    /// outside one): to tell apart results of one configuration.
    #[arg(long, value_name = "NAME")]
    config: Option<String>,
}

pub fn run(_ctx: &Context, args: PrometheusArgs) -> anyhow::Result<i32> {
    let options = Options {
        config: args.config.clone(),
    };
    // An input the user must change is bad input through `tame_host::error::LayerError`.
    let text = tame_prometheus::export(&args.results, &options)?;
    match &args.out {
        None => print_out(&text)?,
        Some(path) => write_atomically(path, &text)?,
    }
    Ok(0)
}

/// Write `text` to `path` at once ([`crate::output::replace_file`]).
fn write_atomically(path: &Path, text: &str) -> anyhow::Result<()> {
    if path.is_dir() {
        return Err(bad_input(format!(
            "{} is a directory — name the file to write in it, e.g. {}",
            path.display(),
            path.join("tame.prom").display()
        )));
    }
    crate::output::replace_file(path, text).map_err(|e| {
        bad_input(format!(
            "cannot write {}: {e} — choose a file in a writable directory (node_exporter's --collector.textfile.directory)",
            path.display()
        ))
    })
}
