//! Noise attribution from tracefs events.
//!
//! - [`tracefs`]: a tracing session (private instance where possible) whose
//!   every change is journaled and restored byte for byte;
//! - [`capture`]: reading the per-CPU pipes while a detector runs;
//! - [`event`]: parsing tracefs' text into events;
//! - [`idle`]: the switches out of idle some kernels leave out of the trace, put back;
//! - [`attribute`]: charging each gap's time to the innermost OS activity, the
//!   rest to "unexplained" (hypervisor, SMI, hardware), with a handler's time far
//!   beyond its typical duration ("unexplained within local_timer").

pub mod attribute;
pub mod capture;
pub mod event;
pub mod idle;
pub mod tracefs;

pub use attribute::{AttributedGap, Gap, NoiseClass, Share, Timeline};
pub use event::{Event, EventKind, Timestamp};
pub use tracefs::{CaptureSpec, TraceClock, TraceError, TraceSession};
