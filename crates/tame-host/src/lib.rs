//! The host layer: the machine as data.
//!
//! Every file tame reads from /sys, /proc, cgroupfs or tracefs is read through a
//! [`Root`], so logic can run on a fixture tree in tests and on `/` for real.
//! Parsers take text and return models; they never touch the file system.

pub mod cpulist;
pub mod environment;
pub mod error;
pub mod root;

pub use cpulist::CpuList;
pub use error::HostError;
pub use root::Root;
