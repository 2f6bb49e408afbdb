//! Views of a result: the human table, cyclictest's histogram text layout,
//! and the raw samples CSV.

mod histogram;
mod samples;
mod table;

pub use histogram::{write_cyclictest_histogram, write_primary_histogram};
pub use samples::{write_all_samples_csv, write_samples_csv};
pub use table::{run_notes, table};

/// Format nanoseconds for people: 850ns, 15.23µs, 3.401ms, 1.200s.
pub fn human_ns(ns: u64) -> String {
    match ns {
        0..=9_999 => format!("{ns}ns"),
        10_000..=999_999 => format!("{:.2}µs", ns as f64 / 1e3),
        1_000_000..=999_999_999 => format!("{:.3}ms", ns as f64 / 1e6),
        _ => format!("{:.3}s", ns as f64 / 1e9),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_units() {
        assert_eq!(human_ns(850), "850ns");
        assert_eq!(human_ns(15_234), "15.23µs");
        assert_eq!(human_ns(3_401_000), "3.401ms");
        assert_eq!(human_ns(1_200_000_000), "1.200s");
    }
}
