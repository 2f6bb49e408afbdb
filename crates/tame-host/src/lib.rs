//! The host layer: the machine as data.
//!
//! Every file tame reads from /sys, /proc, cgroupfs or tracefs is read through a
//! [`Root`], so logic can run on a fixture tree in tests and on `/` for real.
//! Parsers take text and return models; they never touch the file system.

pub mod accounts;
pub mod capture;
pub mod cgroup;
pub mod cpu;
pub mod cpulist;
pub mod environment;
pub mod error;
pub mod irq;
pub mod journal;
pub mod kernel;
pub mod knobs;
pub mod memory;
pub mod model;
pub mod mounts;
pub mod power;
pub mod privilege;
pub mod process;
pub mod reader;
pub mod resctrl;
pub mod root;
pub mod sched;
pub mod synthetic;
pub mod testing;
pub mod timer_list;
pub mod tracing;
pub mod virt;

pub use cpulist::CpuList;
pub use error::{HostError, Unreadable};
pub use model::HostModel;
pub use root::Root;
