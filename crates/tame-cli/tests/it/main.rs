//! tame-cli's integration tests: one binary, its former test files as modules, so the
//! workspace links one test executable here instead of one per file (docs/testing.md).
//! Tests that change the machine, measure it or need CPUs of their own (an applied
//! partition confines every task, this binary's threads too) hold
//! `tame_testing::serial::module`, so no two such modules overlap; the others run beside
//! anything.

mod assess_cli;
mod assess_system;
mod bench_cli;
mod bench_cost_cli;
mod bench_cost_system;
mod bench_mem_cli;
mod bench_mem_system;
mod bench_reserve;
mod cgroup_v2;
mod common;
mod compare_gate_cli;
mod enable_cli;
mod export_kubernetes_cli;
mod export_prometheus;
mod guard_system;
mod install;
mod ipc_cli;
mod json_cli;
mod launch_cli;
mod launch_partition;
mod noise_cli;
mod numbers_cli;
mod partition_cli;
mod report_cli;
mod reproductions;
mod run_all_script;
mod serve_metrics;
mod watch_system;
