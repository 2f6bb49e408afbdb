//! The human view of a mem result: one row per buffer size, the chase and stream
//! per-access times side by side (p50, p99, p99.9, max), then how the run was set up.

use std::fmt::Write as _;

use super::{label, sweep, HugePages, MemSettings, Pattern};
use crate::result::BenchResult;
use crate::session::Bench as _;
use crate::stats::PercentileCells;

/// Picoseconds as nanoseconds with two decimals (`1.53`).
pub fn ns_of_ps(ps: u64) -> String {
    format!("{:.2}", ps as f64 / 1000.0)
}

pub fn table(result: &BenchResult<MemSettings>) -> String {
    let s = &result.settings;
    let mut rows: Vec<Vec<String>> = vec![[
        "size",
        "chase p50",
        "p99",
        "p99.9",
        "max",
        "stream p50",
        "p99",
        "p99.9",
        "max",
    ]
    .map(String::from)
    .to_vec()];
    let mut percentiles = PercentileCells::default();
    for &bytes in &s.sizes {
        let mut row = vec![sweep::human_size(bytes)];
        for pattern in [Pattern::Chase, Pattern::Stream] {
            let figures = result
                .groups
                .iter()
                .find(|g| g.label == label(pattern, bytes))
                .and_then(|g| g.metric("access"))
                .map(|m| m.summary);
            match figures {
                Some(f) => {
                    row.extend(
                        [(0.50, f.p50), (0.99, f.p99), (0.999, f.p99_9)]
                            .map(|(q, v)| percentiles.cell(f.count, q, v, ns_of_ps)),
                    );
                    row.push(ns_of_ps(f.max));
                }
                None => row.extend(std::iter::repeat_n("-".to_string(), 4)),
            }
        }
        rows.push(row);
    }
    let mut out = String::new();
    let _ = writeln!(out, "{}", s.title());
    let _ = writeln!(out, "ns per access (one cache line):");
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    for row in &rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (cell, w))| {
                if c == 0 {
                    format!("{cell:<w$}")
                } else {
                    format!("{cell:>w$}")
                }
            })
            .collect();
        let _ = writeln!(out, "{}", cells.join("  ").trim_end());
    }
    if let Some(note) = percentiles.footnote() {
        let _ = writeln!(out, "{note}");
    }
    let _ = writeln!(out, "sizes: {}", s.sweep);
    let _ = writeln!(
        out,
        "memory: NUMA node {} ({}); {}; {}",
        s.node,
        if s.node_bound {
            "bound with mbind"
        } else {
            "the only node: recorded, not bound"
        },
        match s.huge_pages {
            HugePages::None => "4 KiB pages (THP declined)".to_string(),
            HugePages::Thp => format!(
                "transparent huge pages requested ({})",
                sweep::human_size(s.huge_page_bytes)
            ),
            HugePages::Hugetlb =>
                format!("hugetlb pages of {}", sweep::human_size(s.huge_page_bytes)),
        },
        if s.threads.mlock {
            "locked and prefaulted"
        } else {
            "prefaulted, not locked"
        }
    );
    for (k, v) in &result.merged.derived {
        let _ = writeln!(out, "{k}: {v:.2}");
    }
    out.push_str(&crate::output::run_notes(result));
    out
}
