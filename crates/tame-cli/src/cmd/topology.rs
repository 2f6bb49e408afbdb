// Placeholder until the host layer lands; owned by the host/check work.
use crate::Context;

#[derive(clap::Args)]
pub struct TopologyArgs {}

pub fn run(_ctx: &Context, _args: TopologyArgs) -> anyhow::Result<i32> {
    anyhow::bail!("not available yet")
}
