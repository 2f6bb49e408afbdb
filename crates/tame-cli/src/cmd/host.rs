//! `tame host …`: host-layer utilities.
use std::path::PathBuf;

use tame_host::capture::CaptureDoc;

use crate::output::print_json;
use crate::Context;

#[derive(clap::Subcommand)]
pub enum HostCommand {
    /// Copy the files the host layer reads into a fixture tree (replay it with `--root DIR`).
    Capture {
        /// An empty or not yet existing directory.
        dir: PathBuf,
        /// Print what was copied as JSON (schema tame.host.capture/1).
        #[arg(long)]
        json: bool,
    },
}

pub fn run(ctx: &Context, cmd: HostCommand) -> anyhow::Result<i32> {
    match cmd {
        HostCommand::Capture { dir, json } => capture(ctx, &dir, json),
    }
}

fn capture(ctx: &Context, dir: &std::path::Path, json: bool) -> anyhow::Result<i32> {
    ctx.require_root_dir()?;
    if dir.exists() {
        let empty = std::fs::read_dir(dir)
            .map(|mut d| d.next().is_none())
            .unwrap_or(false);
        if !empty {
            return Err(crate::bad_input(format!(
                "{} is not an empty directory — capture writes a whole tree and would mix it with what is there — give a new or empty directory",
                dir.display()
            )));
        }
    }
    let report = tame_host::capture::capture(&ctx.root, dir)?;
    if json {
        print_json(&CaptureDoc::new(dir, &report))?;
        return Ok(0);
    }
    println!("{}", report.summary(dir));
    for s in &report.skipped {
        eprintln!("skipped {s}");
    }
    Ok(0)
}
