// Placeholder until the host layer lands; owned by the host/check work.
use crate::Context;

#[derive(clap::Subcommand)]
pub enum HostCommand {
    /// Copy the files the host layer reads into a fixture tree.
    Capture { dir: std::path::PathBuf },
}

pub fn run(_ctx: &Context, _cmd: HostCommand) -> anyhow::Result<i32> {
    anyhow::bail!("not available yet")
}
