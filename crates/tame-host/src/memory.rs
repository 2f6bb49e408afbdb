//! Memory behaviour that disturbs latency: transparent huge pages, swap,
//! automatic NUMA balancing, KSM and the vmstat update interval.

use serde::{Deserialize, Serialize};

use crate::error::ParseError;
use crate::reader::{bracketed, Reader};

pub const THP: &str = "/sys/kernel/mm/transparent_hugepage";
pub const SWAPS: &str = "/proc/swaps";
pub const NUMA_BALANCING: &str = "/proc/sys/kernel/numa_balancing";
pub const KSM_RUN: &str = "/sys/kernel/mm/ksm/run";
pub const STAT_INTERVAL: &str = "/proc/sys/vm/stat_interval";
pub const SWAPPINESS: &str = "/proc/sys/vm/swappiness";
pub const MEMINFO: &str = "/proc/meminfo";

/// An active swap area.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwapArea {
    pub name: String,
    pub kind: String,
    pub size_kib: u64,
    pub used_kib: u64,
    pub priority: i32,
}

/// Parse /proc/swaps (a header line, then one line per area).
pub fn parse_swaps(text: &str) -> Result<Vec<SwapArea>, ParseError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().skip(1) {
        if line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        let bad = || {
            ParseError::new(
                i + 1,
                format!("expected NAME TYPE SIZE USED PRIORITY: {line:?}"),
            )
        };
        if f.len() < 5 {
            return Err(bad());
        }
        out.push(SwapArea {
            name: f[0].to_string(),
            kind: f[1].to_string(),
            size_kib: f[2].parse().map_err(|_| bad())?,
            used_kib: f[3].parse().map_err(|_| bad())?,
            priority: f[4].parse().map_err(|_| bad())?,
        });
    }
    Ok(out)
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Memory {
    /// always | madvise | never.
    pub thp_enabled: Option<String>,
    pub thp_defrag: Option<String>,
    pub swaps: Vec<SwapArea>,
    pub swappiness: Option<u32>,
    /// 0 off, 1 normal, 2 memory tiering.
    pub numa_balancing: Option<u32>,
    pub ksm_running: Option<bool>,
    pub stat_interval_s: Option<u32>,
}

impl Memory {
    pub fn read(r: &mut Reader) -> Self {
        let swaps = match r.optional(SWAPS).map(|t| parse_swaps(&t)) {
            Some(Ok(s)) => s,
            Some(Err(e)) => {
                r.parse_problem(SWAPS, e);
                Vec::new()
            }
            None => Vec::new(),
        };
        Memory {
            thp_enabled: r
                .optional(&format!("{THP}/enabled"))
                .and_then(|t| bracketed(&t)),
            thp_defrag: r
                .optional(&format!("{THP}/defrag"))
                .and_then(|t| bracketed(&t)),
            swaps,
            swappiness: r.number(SWAPPINESS),
            numa_balancing: r.number(NUMA_BALANCING),
            ksm_running: r.number::<u32>(KSM_RUN).map(|n| n == 1),
            stat_interval_s: r.number(STAT_INTERVAL),
        }
    }
}

/// What a bench that allocates large buffers needs of /proc/meminfo (KiB).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemInfo {
    /// Memory available for new allocations without swapping (`MemAvailable`).
    pub available_kib: Option<u64>,
    /// Free pages of the default huge page pool (`HugePages_Free`, a count of pages).
    pub huge_pages_free: Option<u64>,
    /// The default huge page size (`Hugepagesize`).
    pub huge_page_kib: Option<u64>,
}

/// The fields of /proc/meminfo a [`MemInfo`] holds (`MemAvailable:  24098820 kB`).
pub fn parse_meminfo(text: &str) -> MemInfo {
    let field = |name: &str| {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == name).then(|| v.split_whitespace().next()?.parse().ok())?
        })
    };
    MemInfo {
        available_kib: field("MemAvailable"),
        huge_pages_free: field("HugePages_Free"),
        huge_page_kib: field("Hugepagesize"),
    }
}

impl crate::Root {
    /// Available memory and the huge page pool (`/proc/meminfo`).
    pub fn meminfo(&self) -> Result<MemInfo, crate::HostError> {
        Ok(parse_meminfo(&self.read(MEMINFO)?))
    }

    /// The transparent huge page mode (`always`, `madvise` or `never`), if the kernel has THP.
    pub fn thp_enabled(&self) -> Option<String> {
        let text = self.read_optional(format!("{THP}/enabled")).ok()??;
        bracketed(&text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_fields_in_kib_and_pages() {
        let m = parse_meminfo(
            "MemTotal:       24684092 kB\nMemAvailable:   24098820 kB\nHugePages_Free:        3\nHugepagesize:       2048 kB\n",
        );
        assert_eq!(
            m,
            MemInfo {
                available_kib: Some(24_098_820),
                huge_pages_free: Some(3),
                huge_page_kib: Some(2048),
            }
        );
        assert_eq!(parse_meminfo("MemTotal: 1 kB\n"), MemInfo::default());
    }

    #[test]
    fn swaps() {
        assert!(
            parse_swaps("Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n")
                .unwrap()
                .is_empty()
        );
        let s =
            parse_swaps("Filename Type Size Used Priority\n/swapfile file 2097148 0 -2\n").unwrap();
        assert_eq!(s[0].size_kib, 2097148);
        assert_eq!(s[0].priority, -2);
        assert_eq!(parse_swaps("h\n/x file y 0 1\n").unwrap_err().line, 2);
    }
}
