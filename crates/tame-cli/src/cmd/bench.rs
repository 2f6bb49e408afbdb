use crate::Context;

#[derive(clap::Subcommand)]
pub enum BenchCommand {
    /// Periodic wakeups with absolute deadlines.
    Cycle,
}

pub fn run(_ctx: &Context, _cmd: BenchCommand) -> anyhow::Result<i32> {
    anyhow::bail!("not available yet")
}
