//! CPU lists in the kernel's two spellings: the list format (`0-3,8,10-15:2/4`,
//! as in `cpus`, `isolcpus=`, `smp_affinity_list`) and the hex mask format
//! (`ff,00000003`, as in `smp_affinity` and `default_smp_affinity`).

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The largest CPU number we accept; the kernel's NR_CPUS ceiling is 8192.
pub const MAX_CPU: u32 = 8191;

/// An ordered set of CPU numbers.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CpuList(BTreeSet<u32>);

/// Why a CPU list or mask could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid CPU list {input:?}: {reason}")]
pub struct CpuListError {
    pub input: String,
    pub reason: String,
}

impl CpuList {
    pub fn new() -> Self {
        Self::default()
    }

    /// Parse the kernel list format. An empty (or all-blank) string is the empty set.
    pub fn parse(input: &str) -> Result<Self, CpuListError> {
        let err = |reason: String| CpuListError {
            input: input.to_string(),
            reason,
        };
        let mut set = BTreeSet::new();
        let text = input.trim();
        if text.is_empty() {
            return Ok(Self(set));
        }
        for group in text.split(',') {
            let group = group.trim();
            if group.is_empty() {
                return Err(err("empty element between commas".into()));
            }
            let (range, stride) = match group.split_once(':') {
                Some((r, s)) => (r, Some(s)),
                None => (group, None),
            };
            let (lo, hi) = match range.split_once('-') {
                Some((a, b)) => (parse_cpu(a).map_err(&err)?, parse_cpu(b).map_err(&err)?),
                None => {
                    let c = parse_cpu(range).map_err(&err)?;
                    (c, c)
                }
            };
            if lo > hi {
                return Err(err(format!("range {lo}-{hi} runs backwards")));
            }
            let (used, size) = match stride {
                None => (1, 1),
                Some(s) => {
                    let (u, g) = s
                        .split_once('/')
                        .ok_or_else(|| err(format!("stride {s:?} must be USED/GROUP")))?;
                    let u: u32 = u
                        .trim()
                        .parse()
                        .map_err(|_| err(format!("bad stride {s:?}")))?;
                    let g: u32 = g
                        .trim()
                        .parse()
                        .map_err(|_| err(format!("bad stride {s:?}")))?;
                    if u == 0 || g == 0 || u > g {
                        return Err(err(format!("stride {s:?} needs 0 < USED <= GROUP")));
                    }
                    (u, g)
                }
            };
            let mut cpu = lo;
            while cpu <= hi {
                if (cpu - lo) % size < used {
                    set.insert(cpu);
                }
                cpu += 1;
            }
        }
        Ok(Self(set))
    }

    /// Parse the hex mask format: 32-bit words separated by commas, most significant first.
    pub fn parse_mask(input: &str) -> Result<Self, CpuListError> {
        let text = input.trim();
        let err = |reason: &str| CpuListError {
            input: input.to_string(),
            reason: reason.to_string(),
        };
        if text.is_empty() {
            return Err(err("empty mask"));
        }
        let mut set = BTreeSet::new();
        let words: Vec<&str> = text.split(',').collect();
        for (i, word) in words.iter().rev().enumerate() {
            if word.is_empty() || word.len() > 8 {
                return Err(err("each comma-separated word must be 1-8 hex digits"));
            }
            let bits = u32::from_str_radix(word, 16).map_err(|_| err("not a hex number"))?;
            for b in 0..32u32 {
                if bits & (1 << b) != 0 {
                    let cpu = i as u32 * 32 + b;
                    if cpu > MAX_CPU {
                        return Err(err("mask names CPUs beyond the kernel's limit"));
                    }
                    set.insert(cpu);
                }
            }
        }
        Ok(Self(set))
    }

    /// Format as a hex mask, covering at least `nr_cpus` bits (as the kernel prints it).
    pub fn to_mask(&self, nr_cpus: u32) -> String {
        let top = self
            .0
            .iter()
            .next_back()
            .map_or(0, |c| c + 1)
            .max(nr_cpus)
            .max(1);
        let words = top.div_ceil(32) as usize;
        let mut w = vec![0u32; words];
        for &c in &self.0 {
            w[(c / 32) as usize] |= 1 << (c % 32);
        }
        let mut out = Vec::with_capacity(words);
        for (i, word) in w.iter().rev().enumerate() {
            // The kernel pads every word but the first to 8 digits; the first only to the CPU count.
            if i == 0 {
                let digits = (((top - 1) % 32) / 4 + 1) as usize;
                out.push(format!("{word:0digits$x}"));
            } else {
                out.push(format!("{word:08x}"));
            }
        }
        out.join(",")
    }

    pub fn from_cpus(cpus: impl IntoIterator<Item = u32>) -> Self {
        Self(cpus.into_iter().collect())
    }

    pub fn insert(&mut self, cpu: u32) -> bool {
        self.0.insert(cpu)
    }

    pub fn contains(&self, cpu: u32) -> bool {
        self.0.contains(&cpu)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = u32> + ExactSizeIterator + '_ {
        self.0.iter().copied()
    }

    pub fn first(&self) -> Option<u32> {
        self.0.iter().next().copied()
    }

    pub fn last(&self) -> Option<u32> {
        self.0.iter().next_back().copied()
    }

    pub fn is_subset(&self, other: &CpuList) -> bool {
        self.0.is_subset(&other.0)
    }

    pub fn union(&self, other: &CpuList) -> CpuList {
        Self(self.0.union(&other.0).copied().collect())
    }

    pub fn intersection(&self, other: &CpuList) -> CpuList {
        Self(self.0.intersection(&other.0).copied().collect())
    }

    pub fn difference(&self, other: &CpuList) -> CpuList {
        Self(self.0.difference(&other.0).copied().collect())
    }

    /// Whether a thread can be placed on these CPUs: at least one, all online, and all
    /// within `allowed`, the affinity it inherits (tame's own, which its cpuset bounds).
    /// The one check behind `tame bench --cpus` and `tame run/detach --cpus`.
    pub fn check_usable(&self, online: &CpuList, allowed: &CpuList) -> Result<(), UnusableCpus> {
        if self.is_empty() {
            return Err(UnusableCpus::Empty);
        }
        let offline = self.difference(online);
        if !offline.is_empty() {
            return Err(UnusableCpus::Offline {
                offline,
                online: online.clone(),
            });
        }
        let refused = self.difference(allowed);
        if !refused.is_empty() {
            return Err(UnusableCpus::NotAllowed {
                refused,
                allowed: allowed.clone(),
            });
        }
        Ok(())
    }
}

/// Why a CPU list cannot take a thread (see [`CpuList::check_usable`]); the message
/// says what, why and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnusableCpus {
    #[error("the CPU list is empty — name at least one CPU, e.g. --cpus 0, or --cpus all")]
    Empty,
    #[error("CPU {offline} is not online on this machine (online: {online}) — pick CPUs from the online list")]
    Offline { offline: CpuList, online: CpuList },
    #[error("CPU {refused} is online but this process may not run there (its affinity/cpuset allows {allowed}) — pick CPUs from {allowed}, or run tame from a cpuset that includes them")]
    NotAllowed { refused: CpuList, allowed: CpuList },
}

fn parse_cpu(s: &str) -> Result<u32, String> {
    let s = s.trim();
    let n: u32 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a CPU number"))?;
    if n > MAX_CPU {
        return Err(format!("CPU {n} is beyond the kernel's limit of {MAX_CPU}"));
    }
    Ok(n)
}

/// The canonical kernel list spelling: ascending, ranges collapsed (`0-3,8`).
impl fmt::Display for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut iter = self.0.iter().copied().peekable();
        while let Some(lo) = iter.next() {
            let mut hi = lo;
            while iter.peek() == Some(&(hi + 1)) {
                hi = iter.next().unwrap_or(hi);
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if lo == hi {
                write!(f, "{lo}")?;
            } else {
                write!(f, "{lo}-{hi}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuList({self})")
    }
}

impl FromStr for CpuList {
    type Err = CpuListError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl Serialize for CpuList {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for CpuList {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::parse(&s).map_err(serde::de::Error::custom)
    }
}

impl FromIterator<u32> for CpuList {
    fn from_iter<T: IntoIterator<Item = u32>>(iter: T) -> Self {
        Self(iter.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_kernel_list_spellings() {
        assert_eq!(CpuList::parse("0-3,8").unwrap().to_string(), "0-3,8");
        assert_eq!(
            CpuList::parse(" 5 ").unwrap().iter().collect::<Vec<_>>(),
            vec![5]
        );
        assert!(CpuList::parse("").unwrap().is_empty());
        assert!(CpuList::parse("\n").unwrap().is_empty());
        // Strided groups, as in isolcpus=: use 2 of every 4 CPUs from 0 to 11.
        assert_eq!(
            CpuList::parse("0-11:2/4").unwrap().to_string(),
            "0-1,4-5,8-9"
        );
    }

    #[test]
    fn rejects_malformed_lists_with_the_reason() {
        for bad in ["a", "3-1", "1,,2", "1-", "0-3:0/4", "0-3:5/4", "9000"] {
            let e = CpuList::parse(bad).unwrap_err();
            assert_eq!(e.input, bad);
            assert!(!e.reason.is_empty());
        }
    }

    #[test]
    fn usable_cpus_are_some_online_and_allowed() {
        let l = |s: &str| CpuList::parse(s).unwrap();
        let (online, allowed) = (l("0-3"), l("0-2"));
        assert_eq!(l("1-2").check_usable(&online, &allowed), Ok(()));
        assert_eq!(
            CpuList::new().check_usable(&online, &allowed),
            Err(UnusableCpus::Empty)
        );
        let e = l("2-5").check_usable(&online, &allowed).unwrap_err();
        assert_eq!(
            e.to_string(),
            "CPU 4-5 is not online on this machine (online: 0-3) — pick CPUs from the online list"
        );
        let e = l("2-3").check_usable(&online, &allowed).unwrap_err();
        assert_eq!(
            e,
            UnusableCpus::NotAllowed {
                refused: l("3"),
                allowed: l("0-2")
            }
        );
        assert!(e.to_string().starts_with(
            "CPU 3 is online but this process may not run there (its affinity/cpuset allows 0-2)"
        ));
    }

    #[test]
    fn masks_round_trip_in_kernel_spelling() {
        assert_eq!(CpuList::parse_mask("3").unwrap().to_string(), "0-1");
        assert_eq!(
            CpuList::parse_mask("00000001,00000000")
                .unwrap()
                .to_string(),
            "32"
        );
        assert_eq!(CpuList::parse("0-1").unwrap().to_mask(2), "3");
        assert_eq!(CpuList::parse("0").unwrap().to_mask(2), "1");
        assert_eq!(
            CpuList::parse("32").unwrap().to_mask(64),
            "00000001,00000000"
        );
        assert_eq!(CpuList::parse("0-7").unwrap().to_mask(8), "ff");
        assert!(CpuList::parse_mask("xyz").is_err());
        assert!(CpuList::parse_mask("").is_err());
    }

    proptest! {
        #[test]
        fn display_then_parse_is_identity(cpus in proptest::collection::btree_set(0u32..1024, 0..64)) {
            let list = CpuList(cpus);
            prop_assert_eq!(CpuList::parse(&list.to_string()).unwrap(), list.clone());
            prop_assert_eq!(CpuList::parse_mask(&list.to_mask(1024)).unwrap(), list);
        }

        #[test]
        fn parse_never_panics(s in "\\PC{0,40}") {
            let _ = CpuList::parse(&s);
            let _ = CpuList::parse_mask(&s);
        }

        #[test]
        fn ranges_contain_exactly_their_cpus(lo in 0u32..500, len in 0u32..100) {
            let list = CpuList::parse(&format!("{}-{}", lo, lo + len)).unwrap();
            prop_assert_eq!(list.len() as u32, len + 1);
            prop_assert!(list.contains(lo) && list.contains(lo + len));
        }
    }
}
