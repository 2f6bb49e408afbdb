//! The measurement engine: measuring loops (cycle, sleep, fwq, and job — a periodic task
//! that runs calibrated work each activation, under `tame assess`), the threads that run
//! them, background load, statistics and the versioned result schema.
//!
//! Measuring loops allocate nothing and make no system call besides the sleep
//! and clock reads: recorders and sample buffers are sized before the common
//! start, and progress is an atomic store.

pub mod cache;
pub mod compare;
pub mod confidence;
pub mod cost;
pub mod cycle;
pub mod distribution;
pub mod engine;
pub mod error;
pub mod fwq;
pub mod ipc;
pub mod job;
pub mod json;
pub mod load;
pub mod measure;
pub mod mem;
pub mod noise;
pub mod output;
pub mod placement;
pub mod report;
pub mod result;
pub mod session;
pub mod sleep;
pub mod stats;
pub mod stress_ng;
pub mod sweep;
pub mod target;
pub mod timeline;
pub mod units;
pub mod watch;

pub use error::{BenchError, Result};
pub use result::{BenchResult, Calibration, GroupResult, Metric, Spread};
pub use stats::{Recorder, Summary};
