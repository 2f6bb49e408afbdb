//! One module per command: each owns its clap `Args` and a `run(&Context, Args) -> anyhow::Result<i32>`
//! that turns the arguments into a library call and its result into output.

pub mod assess;
pub mod bench;
pub mod bench_cache;
pub mod bench_cost;
pub mod bench_ipc;
pub mod bench_mem;
pub mod bench_reserve;
pub mod check;
pub mod compare;
pub mod enable;
pub mod export;
pub mod generate;
pub mod guard;
pub mod host;
pub mod ipc;
pub mod launch;
pub mod measuring;
pub mod metrics;
pub mod noise;
pub mod partition;
pub mod report;
pub mod reserve;
pub mod serve;
pub mod topology;
pub mod watch;
