//! `tame report RESULT.json… [-o DIR]`: reads results and writes `tame_report`'s page and
//! figures; refusals of the inputs are bad input (exit 2), nothing written.

use std::path::PathBuf;

use tame_report::ReportError;

use crate::output::print_out;
use crate::{bad_input, Context};

#[derive(clap::Args)]
pub struct ReportArgs {
    /// Results to draw: bench results (`tame bench … --json`; several of one bench are
    /// overlaid), or one comparison (`tame compare --json`), assess report or reserve study.
    #[arg(required = true, value_name = "RESULT.json")]
    results: Vec<PathBuf>,
    /// Directory for index.html and one SVG file per figure (created when missing).
    #[arg(
        short = 'o',
        long = "out",
        value_name = "DIR",
        default_value = "tame-report"
    )]
    out: PathBuf,
}

fn classify(e: ReportError) -> anyhow::Error {
    if e.is_bad_input() {
        bad_input(e.to_string())
    } else {
        e.into()
    }
}

pub fn run(_ctx: &Context, args: ReportArgs) -> anyhow::Result<i32> {
    let inputs = tame_report::read(&args.results).map_err(classify)?;
    let rendered = tame_report::render(&inputs).map_err(classify)?;
    let written = tame_report::write(&rendered, &args.out).map_err(classify)?;
    print_out(&format!(
        "wrote {} ({} figures as SVG beside it)\n",
        args.out.join(tame_report::INDEX).display(),
        written.len() - 1
    ))?;
    Ok(0)
}
