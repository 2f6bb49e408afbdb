//! Views of a result: the human table, cyclictest's histogram text layout,
//! and the raw samples CSV.

mod histogram;
mod samples;
mod table;

pub use histogram::{write_cyclictest_histogram, write_primary_histogram};
pub use samples::{write_all_samples_csv, write_samples_csv};
pub use table::{run_notes, table};
