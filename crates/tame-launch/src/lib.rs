//! Placing programs on isolated CPUs: `tame run` starts a program already
//! placed (cgroup, affinity, policy, RT-time limit set between fork and exec;
//! memory locked by a preload library inside the new program), and
//! `tame detach` / `tame attach` move a running program's threads out and
//! back, recording every thread's previous state before changing it.
//! `target` checks where a program may go (CPUs, an applied partition and
//! its cgroup, the partition access rules, the policy) before any of these.
//!
//! `spawn` is the one door for every process tame starts, in every crate: the
//! [`spawn::Spawn`] builder (one program-resolution rule, placement, policy, limits,
//! process group, parent-death signal, stdio; every call in the child checked) and
//! [`spawn::fork::Fork`] for the children that run a function instead of a program.
//! `tests/it/one_door.rs` fails when another crate forks or spawns.

pub mod detach;
pub mod error;
pub mod preload;
pub mod proc;
pub mod ps;
pub mod run;
pub mod spawn;
pub mod target;
pub mod view;

pub use error::LaunchError;
