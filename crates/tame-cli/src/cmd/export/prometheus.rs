//! `tame export prometheus [RESULT.json…]` (placeholder until the exporter lands).

use crate::{bad_input, Context};

#[derive(clap::Args)]
pub struct PrometheusArgs {}

pub fn run(_ctx: &Context, _args: PrometheusArgs) -> anyhow::Result<i32> {
    Err(bad_input("tame export prometheus is not available yet"))
}
