//! `tame assess`: can this machine run the user's time-critical work beside Linux, and
//! what does it take? The user states the work ([`requirement`]); assess chooses the
//! CPUs to isolate ([`layout`]), measures periodic wakeups and busy-loop noise shared
//! under load and inside an applied partition ([`run`]), always reverts, and decides
//! ([`verdict`]) — real time or real fast — from figures ([`figures`]) kept in one
//! versioned report ([`report`]).

pub mod attribution;
pub mod cost;
pub mod error;
pub mod figures;
pub mod knobs;
pub mod layout;
pub mod program;
pub mod report;
pub mod requirement;
pub mod rounds;
pub mod run;
pub mod stretch;
pub mod temporary;
pub mod verdict;

pub use error::AssessError;
pub use report::AssessReport;
pub use requirement::Requirement;
pub use run::{assess, Length, Observer, Options};
