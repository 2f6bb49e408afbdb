// Placeholder until tame-ipc lands; owned by the ipc work.
use crate::Context;

#[derive(clap::Subcommand)]
pub enum IpcCommand {
    /// List shared-memory channel segments.
    Ls,
}

pub fn run(_ctx: &Context, _cmd: IpcCommand) -> anyhow::Result<i32> {
    anyhow::bail!("not available yet")
}
