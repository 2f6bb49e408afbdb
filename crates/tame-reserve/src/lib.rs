//! Guaranteed CPU shares ("25 % of every 40 ms") behind one interface, three ways:
//! a user-space scheduling server (after the SONiC scheduling server), SCHED_DEADLINE,
//! and cgroup CPU bandwidth (a cap, not a guarantee). Also the admission analysis of
//! periodic task sets (`tame reserve --check`). The study that measures the backends is the
//! crate tame-reserve-study (`tame bench reserve`).

pub mod admission;
pub mod backend;
pub mod bandwidth;
pub mod cgroup;
pub mod deadline;
pub mod error;
pub mod kit;
pub mod reservation;
pub mod server;
pub mod spec;
pub mod view;
pub mod work;

pub use error::ReserveError;
pub use spec::{Backend, Request};
