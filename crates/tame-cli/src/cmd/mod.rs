//! One module per command: each owns its clap `Args` and a `run(&Context, Args) -> anyhow::Result<i32>`.

pub mod bench;
pub mod check;
pub mod host;
pub mod ipc;
pub mod launch;
pub mod partition;
pub mod topology;
