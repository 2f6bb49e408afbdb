//! `tame report RESULT.json… [-o DIR]`: reads results and writes `tame_report`'s page and
//! figures; refusals of the inputs are bad input (exit 2), nothing written.

use std::path::PathBuf;

use crate::output::print_out;
use crate::Context;

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

pub fn run(_ctx: &Context, args: ReportArgs) -> anyhow::Result<i32> {
    let inputs = tame_report::read(&args.results)?;
    let rendered = tame_report::render(&inputs)?;
    let written = tame_report::write(&rendered, &args.out)?;
    print_out(&format!(
        "wrote {} ({} as SVG beside it)\n",
        args.out.join(tame_report::INDEX).display(),
        tame_rt::plural::count(written.len() as u64 - 1, "figure", "figures")
    ))?;
    Ok(0)
}
