// Placeholder until the host layer lands; owned by the host/check work.
use crate::Context;

#[derive(clap::Args)]
pub struct CheckArgs {}

pub fn run(_ctx: &Context, _args: CheckArgs) -> anyhow::Result<i32> {
    anyhow::bail!("not available yet")
}
