//! `tame export kubelet SPEC` and `tame export performance-profile SPEC` (placeholders
//! until the exporters land).

use crate::{bad_input, Context};

#[derive(clap::Args)]
pub struct KubeletArgs {}

#[derive(clap::Args)]
pub struct ProfileArgs {}

pub fn run_kubelet(_ctx: &Context, _args: KubeletArgs) -> anyhow::Result<i32> {
    Err(bad_input("tame export kubelet is not available yet"))
}

pub fn run_profile(_ctx: &Context, _args: ProfileArgs) -> anyhow::Result<i32> {
    Err(bad_input(
        "tame export performance-profile is not available yet",
    ))
}
