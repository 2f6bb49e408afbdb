//! `tame host …`: host-layer utilities.
use std::path::PathBuf;

use crate::Context;

#[derive(clap::Subcommand)]
pub enum HostCommand {
    /// Copy the files the host layer reads into a fixture tree (replay it with `--root DIR`).
    Capture {
        /// An empty or not yet existing directory.
        dir: PathBuf,
    },
}

pub fn run(ctx: &Context, cmd: HostCommand) -> anyhow::Result<i32> {
    match cmd {
        HostCommand::Capture { dir } => capture(ctx, &dir),
    }
}

fn capture(ctx: &Context, dir: &std::path::Path) -> anyhow::Result<i32> {
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
    println!(
        "captured {} files and {} directories into {}",
        report.files,
        report.dirs,
        dir.display()
    );
    for s in &report.skipped {
        eprintln!("skipped {s}");
    }
    Ok(0)
}
