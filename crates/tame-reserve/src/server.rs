//! The server backend: `tame serve`, a user-space scheduling server after SONiC's.
//! A SCHED_FIFO 99 thread per CPU hands out slices: clients wait at nice 19 and are
//! raised to SCHED_FIFO 98 for their slice, in EDF order. Who may reserve what is a
//! policy's; a watchdog process, forked before anything runs real-time, and a restore
//! record beside the socket give every client its policy and affinity back if the server
//! dies.

pub mod account;
pub mod client;
pub mod conn;
pub mod daemon;
pub mod edf;
pub mod live;
pub mod log;
pub mod policy;
pub mod protocol;
pub mod record;
pub mod scheduler;
pub mod thread;
pub mod watchdog;

/// Where `tame serve` listens unless told otherwise.
pub const DEFAULT_SOCKET: &str = "/run/tame/serve.sock";
/// The scheduler threads' priority, and the clients' during their slice (just below).
pub const SERVER_PRIORITY: i32 = 99;
pub const CLIENT_PRIORITY: i32 = 98;
