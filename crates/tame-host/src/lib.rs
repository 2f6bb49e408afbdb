//! The host layer: the machine as data, and the one door to it.
//!
//! Every file tame reads or writes in /sys, /proc, cgroupfs or tracefs, and every
//! thread-placement system call, goes through a [`Root`] and its
//! [`backend::HostBackend`], so logic runs on a fixture tree in tests and on `/`
//! for real. Parsers take text and return models; they never touch the file system.
//! Test tooling (fixture backend, synthetic hosts) lives in the `tame-testing` crate.

pub mod accounts;
pub mod activity;
pub mod backend;
pub mod capture;
pub mod cgroup;
pub mod cpu;
pub mod cpulist;
pub mod environment;
pub mod error;
pub mod failure;
pub mod irq;
pub mod journal;
pub mod kernel;
pub mod knobs;
pub mod load;
pub mod memory;
pub mod model;
pub mod mounts;
pub mod msr;
pub mod placement;
pub mod power;
pub mod privilege;
pub mod process;
pub mod reader;
pub mod regular_file;
pub mod resctrl;
pub mod root;
pub mod sched;
pub mod schema;
pub mod socket;
pub mod timer_list;
pub mod tracing;
pub mod utc;
pub mod virt;

pub use cpulist::{CpuList, UnusableCpus};
pub use error::{HostError, Unreadable};
pub use failure::Failure;
pub use model::HostModel;
pub use root::Root;
pub use schema::{Document, Schema};
