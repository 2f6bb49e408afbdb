//! Buffer sizes: as the user writes them (`16K,1M,64M`), and the default sweep derived
//! from the measured CPU's caches, bounded by the memory available.

use serde::{Deserialize, Serialize};
use tame_host::cpu::CpuTopology;

use crate::error::{invalid, Result};

pub const KIB: u64 = 1024;
pub const MIB: u64 = 1024 * KIB;
/// The smallest buffer: the paper's L1 point (16 KiB).
pub const MIN_SIZE: u64 = 16 * KIB;
/// The largest buffer: the paper's DRAM point (512 MiB).
pub const MAX_SIZE: u64 = 512 * MIB;
/// Sizes are whole pages.
pub const PAGE: u64 = 4 * KIB;

/// A data or unified cache the measured CPU uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheLevel {
    pub level: u8,
    pub size_kib: u64,
}

/// The data and unified caches of `cpu`, one per level, smallest level first.
pub fn caches_of(topology: &CpuTopology, cpu: u32) -> Vec<CacheLevel> {
    let mut out: Vec<CacheLevel> = topology
        .caches
        .iter()
        .filter(|c| c.cpus.contains(cpu) && c.kind != "Instruction")
        .filter_map(|c| {
            Some(CacheLevel {
                level: c.level,
                size_kib: c.size_kib?,
            })
        })
        .collect();
    out.sort_by_key(|c| c.level);
    out.dedup_by_key(|c| c.level);
    out
}

/// The default sweep: for each cache level half its size (well inside it) and twice its
/// size (spilling into the next level), and four times the last level (DRAM: a random
/// chase then misses the last level three times in four), within 16 KiB..512 MiB.
/// Without cache sizes: every power of four from 16 KiB to 256 MiB.
pub fn default_sweep(caches: &[CacheLevel]) -> Vec<u64> {
    let mut sizes: Vec<u64> = if caches.is_empty() {
        (0..8).map(|i| MIN_SIZE << (2 * i)).collect()
    } else {
        let mut v = vec![MIN_SIZE];
        for c in caches {
            let bytes = c.size_kib * KIB;
            v.extend([bytes / 2, bytes * 2]);
        }
        if let Some(last) = caches.last() {
            v.push(last.size_kib * KIB * 4);
        }
        v
    };
    for s in &mut sizes {
        *s = (*s).clamp(MIN_SIZE, MAX_SIZE) / PAGE * PAGE;
    }
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

/// The largest buffer that may be allocated with `available_kib` of memory available:
/// three quarters of it, leaving the rest to the system and the load.
pub fn largest_fitting(available_kib: u64) -> u64 {
    available_kib.saturating_mul(KIB) / 4 * 3
}

/// A buffer size as people write it (`tame_rt::size::parse_bytes`), within the sweep's
/// range and a whole number of pages.
pub fn parse_size(text: &str) -> Result<u64> {
    let t = text.trim();
    let bytes = tame_rt::size::parse_bytes(t);
    let Some(bytes) = bytes else {
        return Err(invalid(format!(
            "--sizes: {t:?} is not a size — write sizes such as 16K, 1M or 64M (K, M, G are powers of 1024)"
        )));
    };
    if !(MIN_SIZE..=MAX_SIZE).contains(&bytes) {
        return Err(invalid(format!(
            "--sizes: {t} is out of range — buffers are 16K..512M"
        )));
    }
    if !bytes.is_multiple_of(PAGE) {
        return Err(invalid(format!(
            "--sizes: {t} is not a whole number of 4 KiB pages — use a multiple of 4K"
        )));
    }
    Ok(bytes)
}

/// A comma-separated list of sizes, smallest first, each once.
pub fn parse_sizes(text: &str) -> Result<Vec<u64>> {
    let mut sizes = text
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(parse_size)
        .collect::<Result<Vec<u64>>>()?;
    if sizes.is_empty() {
        return Err(invalid(
            "--sizes: no size given — write sizes such as 16K,1M,64M",
        ));
    }
    sizes.sort_unstable();
    sizes.dedup();
    Ok(sizes)
}

/// `64KiB`, `1MiB`, `1536KiB`: the largest power-of-1024 unit that divides it.
pub fn human_size(bytes: u64) -> String {
    for (div, unit) in [(1024 * MIB, "GiB"), (MIB, "MiB"), (KIB, "KiB")] {
        if bytes >= div && bytes.is_multiple_of(div) {
            return format!("{}{unit}", bytes / div);
        }
    }
    format!("{bytes}B")
}

#[cfg(test)]
mod tests {
    use super::*;
    use tame_host::cpu::Cache;
    use tame_host::CpuList;

    fn cache(level: u8, kind: &str, kib: u64, cpus: &str) -> Cache {
        Cache {
            level,
            kind: kind.into(),
            size_kib: Some(kib),
            ways: None,
            id: None,
            cpus: CpuList::parse(cpus).unwrap(),
        }
    }

    /// This VM's caches as tame-host reads them (lscpu -C: L1d 32K, L1i 32K, L2 512K per
    /// core, L3 32M shared).
    fn dev_vm() -> CpuTopology {
        CpuTopology {
            caches: vec![
                cache(1, "Data", 32, "0"),
                cache(1, "Instruction", 32, "0"),
                cache(1, "Data", 32, "1"),
                cache(1, "Instruction", 32, "1"),
                cache(2, "Unified", 512, "1"),
                cache(2, "Unified", 512, "0"),
                cache(3, "Unified", 32 * 1024, "0-1"),
            ],
            ..CpuTopology::default()
        }
    }

    #[test]
    fn the_sweep_crosses_every_level_and_reaches_dram() {
        let caches = caches_of(&dev_vm(), 1);
        assert_eq!(
            caches,
            vec![
                CacheLevel {
                    level: 1,
                    size_kib: 32
                },
                CacheLevel {
                    level: 2,
                    size_kib: 512
                },
                CacheLevel {
                    level: 3,
                    size_kib: 32 * 1024
                }
            ]
        );
        let sweep: Vec<String> = default_sweep(&caches).into_iter().map(human_size).collect();
        assert_eq!(
            sweep,
            ["16KiB", "64KiB", "256KiB", "1MiB", "16MiB", "64MiB", "128MiB"]
        );
    }

    #[test]
    fn the_sweep_stays_in_range_and_has_a_fallback() {
        // A 256 MiB last level: 4× is 1 GiB, clamped to 512 MiB; 8 KiB L1 halves below 16 KiB.
        let caches = [
            CacheLevel {
                level: 1,
                size_kib: 8,
            },
            CacheLevel {
                level: 3,
                size_kib: 256 * 1024,
            },
        ];
        let s = default_sweep(&caches);
        assert_eq!(s.first(), Some(&MIN_SIZE));
        assert_eq!(s.last(), Some(&MAX_SIZE));
        let fallback = default_sweep(&[]);
        assert_eq!(fallback.len(), 8);
        assert_eq!((fallback[0], fallback[7]), (16 * KIB, 256 * MIB));
        assert_eq!(largest_fitting(1024), 768 * KIB);
    }

    #[test]
    fn sizes_parse_with_units_and_refuse_what_is_out_of_range() {
        assert_eq!(
            parse_sizes("64M, 16K,1MiB,16k").unwrap(),
            vec![16 * KIB, MIB, 64 * MIB]
        );
        assert_eq!(parse_size("524288K").unwrap(), MAX_SIZE);
        for (bad, needle) in [
            ("8K", "out of range"),
            ("1G", "out of range"),
            ("17K", "4 KiB pages"),
            ("lots", "not a size"),
            ("16Q", "not a size"),
            ("99999999999999999999G", "not a size"),
        ] {
            let e = parse_sizes(bad).unwrap_err();
            assert!(
                e.is_bad_input() && e.to_string().contains(needle),
                "{bad}: {e}"
            );
        }
        assert!(parse_sizes(",")
            .unwrap_err()
            .to_string()
            .contains("no size"));
        assert_eq!(human_size(1536 * KIB), "1536KiB");
        assert_eq!(human_size(2 * 1024 * MIB), "2GiB");
    }
}
