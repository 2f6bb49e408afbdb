//! CPU lists in the kernel's two spellings: the list format (`0-3,8,10-15:2/4`,
//! as in `cpus`, `isolcpus=`, `smp_affinity_list`) and the hex mask format
//! (`ff,00000003`, as in `smp_affinity` and `default_smp_affinity`).

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The largest CPU number we accept; the kernel's NR_CPUS ceiling is 8192.
pub const MAX_CPU: u32 = 8191;

/// An ordered set of CPU numbers.
///
/// Kept as its ranges (`lo..=hi`), ascending, neither overlapping nor touching, so equal
/// sets have equal ranges: a host model of 1024 CPUs holds thousands of lists of hundreds
/// of CPUs (every IRQ's affinity), one or two ranges each. Ordered as the ascending
/// sequences of their CPUs compare.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct CpuList(Vec<(u32, u32)>);

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
        let mut set = CpuList::new();
        let text = input.trim();
        if text.is_empty() {
            return Ok(set);
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
            // Groups of `used` CPUs every `size`, the last one cut at `hi`.
            let mut start = lo;
            while start <= hi {
                set.insert_range(start, start.saturating_add(used - 1).min(hi));
                match start.checked_add(size) {
                    Some(next) => start = next,
                    None => break,
                }
            }
        }
        Ok(set)
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
        let mut set = CpuList::new();
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
        Ok(set)
    }

    /// Format as a hex mask, covering at least `nr_cpus` bits (as the kernel prints it).
    pub fn to_mask(&self, nr_cpus: u32) -> String {
        let top = self.last().map_or(0, |c| c + 1).max(nr_cpus).max(1);
        let words = top.div_ceil(32) as usize;
        let mut w = vec![0u32; words];
        for c in self.iter() {
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
        let mut set = CpuList::new();
        for c in cpus {
            set.insert(c);
        }
        set
    }

    /// Add every CPU from `lo` to `hi`, both included (`lo <= hi`).
    fn insert_range(&mut self, lo: u32, hi: u32) {
        match self.0.last_mut() {
            None => self.0.push((lo, hi)),
            // After the last range: the usual case, lists being written in ascending order.
            Some(last) if lo > last.1 => {
                if lo - last.1 == 1 {
                    last.1 = hi;
                } else {
                    self.0.push((lo, hi));
                }
            }
            Some(_) => *self = self.union(&CpuList(vec![(lo, hi)])),
        }
    }

    pub fn insert(&mut self, cpu: u32) -> bool {
        let Some(&(_, top)) = self.0.last() else {
            self.0.push((cpu, cpu));
            return true;
        };
        if cpu > top {
            self.insert_range(cpu, cpu);
            return true;
        }
        // The first range that ends at or after `cpu` (there is one: the last).
        let i = self.0.partition_point(|&(_, hi)| hi < cpu);
        let lo = self.0[i].0;
        if lo <= cpu {
            return false;
        }
        // Between range i - 1 (if any) and range i, touching either or both.
        let joins_prev = i > 0 && self.0[i - 1].1 + 1 == cpu;
        let joins_next = cpu + 1 == lo;
        match (joins_prev, joins_next) {
            (true, true) => {
                self.0[i - 1].1 = self.0[i].1;
                self.0.remove(i);
            }
            (true, false) => self.0[i - 1].1 = cpu,
            (false, true) => self.0[i].0 = cpu,
            (false, false) => self.0.insert(i, (cpu, cpu)),
        }
        true
    }

    pub fn contains(&self, cpu: u32) -> bool {
        let i = self.0.partition_point(|&(_, hi)| hi < cpu);
        self.0.get(i).is_some_and(|&(lo, _)| lo <= cpu)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.iter().map(|&(lo, hi)| (hi - lo) as usize + 1).sum()
    }

    /// `CPU 3` or `CPUs 3-5`, for messages (with [`tame_rt::plural::word`] for the verb).
    pub fn named(&self) -> String {
        format!(
            "{} {self}",
            tame_rt::plural::word(self.len() as u64, "CPU", "CPUs")
        )
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = u32> + ExactSizeIterator + '_ {
        Iter {
            cpus: self.0.iter().flat_map(|&(lo, hi)| lo..=hi),
            left: self.len(),
        }
    }

    pub fn first(&self) -> Option<u32> {
        self.0.first().map(|r| r.0)
    }

    pub fn last(&self) -> Option<u32> {
        self.0.last().map(|r| r.1)
    }

    pub fn is_subset(&self, other: &CpuList) -> bool {
        // Each range of ours lies within one of theirs (theirs do not touch).
        let mut theirs = other.0.iter().peekable();
        self.0.iter().all(|&(lo, hi)| {
            while theirs.next_if(|t| t.1 < lo).is_some() {}
            theirs.peek().is_some_and(|t| t.0 <= lo && hi <= t.1)
        })
    }

    pub fn union(&self, other: &CpuList) -> CpuList {
        let (mut a, mut b) = (self.0.iter().peekable(), other.0.iter().peekable());
        let mut out: Vec<(u32, u32)> = Vec::with_capacity(self.0.len() + other.0.len());
        loop {
            let next = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) if x.0 <= y.0 => a.next(),
                (Some(_), Some(_)) => b.next(),
                (Some(_), None) => a.next(),
                (None, _) => b.next(),
            };
            let Some(&(lo, hi)) = next else {
                break;
            };
            match out.last_mut() {
                Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
                _ => out.push((lo, hi)),
            }
        }
        Self(out)
    }

    pub fn intersection(&self, other: &CpuList) -> CpuList {
        let (a, b) = (&self.0, &other.0);
        let (mut i, mut j) = (0, 0);
        let mut out = Vec::new();
        while i < a.len() && j < b.len() {
            let lo = a[i].0.max(b[j].0);
            let hi = a[i].1.min(b[j].1);
            if lo <= hi {
                out.push((lo, hi));
            }
            if a[i].1 < b[j].1 {
                i += 1;
            } else {
                j += 1;
            }
        }
        Self(out)
    }

    pub fn difference(&self, other: &CpuList) -> CpuList {
        let b = &other.0;
        let mut j = 0;
        let mut out = Vec::new();
        for &(lo, hi) in &self.0 {
            // Skip their ranges wholly below this one; what is left starts at `from`.
            while j < b.len() && b[j].1 < lo {
                j += 1;
            }
            let mut from = lo;
            let mut k = j;
            let mut done = false;
            while k < b.len() && b[k].0 <= hi {
                if b[k].0 > from {
                    out.push((from, b[k].0 - 1));
                }
                if b[k].1 >= hi {
                    done = true;
                    break;
                }
                from = b[k].1 + 1;
                k += 1;
            }
            if !done {
                out.push((from, hi));
            }
        }
        Self(out)
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

/// The CPUs of a [`CpuList`], counted (so the iterator knows its length).
struct Iter<I> {
    cpus: I,
    left: usize,
}

impl<I: Iterator<Item = u32>> Iterator for Iter<I> {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        let c = self.cpus.next()?;
        self.left -= 1;
        Some(c)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<I: DoubleEndedIterator<Item = u32>> DoubleEndedIterator for Iter<I> {
    fn next_back(&mut self) -> Option<u32> {
        let c = self.cpus.next_back()?;
        self.left -= 1;
        Some(c)
    }
}

impl<I: Iterator<Item = u32>> ExactSizeIterator for Iter<I> {}

impl PartialOrd for CpuList {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// As the ascending sequences of their CPUs compare (as `BTreeSet<u32>` does).
impl Ord for CpuList {
    fn cmp(&self, other: &Self) -> Ordering {
        for (a, b) in self.0.iter().zip(&other.0) {
            if a.0 != b.0 {
                // The lower start is the lower CPU where the sequences part.
                return a.0.cmp(&b.0);
            }
            if a.1 != b.1 {
                // Equal up to the shorter range's end; the longer one goes on with the
                // next CPU, the shorter one with a later CPU, or ends (a prefix: less).
                let (short_is_self, short_list, i) = if a.1 < b.1 {
                    (true, self, a)
                } else {
                    (false, other, b)
                };
                let short_goes_on = short_list.last() != Some(i.1);
                let short_vs_long = if short_goes_on {
                    Ordering::Greater
                } else {
                    Ordering::Less
                };
                return if short_is_self {
                    short_vs_long
                } else {
                    short_vs_long.reverse()
                };
            }
        }
        self.0.len().cmp(&other.0.len())
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
        for &(lo, hi) in &self.0 {
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
        Self::from_cpus(iter)
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
    fn a_list_is_named_in_the_singular_or_the_plural() {
        assert_eq!(CpuList::parse("1").unwrap().named(), "CPU 1");
        assert_eq!(CpuList::parse("0-1").unwrap().named(), "CPUs 0-1");
        assert_eq!(CpuList::parse("2,4").unwrap().named(), "CPUs 2,4");
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
            let list = CpuList::from_cpus(cpus.iter().copied());
            prop_assert_eq!(CpuList::parse(&list.to_string()).unwrap(), list.clone());
            prop_assert_eq!(CpuList::parse_mask(&list.to_mask(1024)).unwrap(), list);
        }

        /// Every operation agrees with the same sets as `BTreeSet<u32>`, which this type was.
        #[test]
        fn set_operations_agree_with_a_tree_set(
            a in proptest::collection::btree_set(0u32..200, 0..80),
            b in proptest::collection::btree_set(0u32..200, 0..80),
            probe in 0u32..210,
        ) {
            use std::collections::BTreeSet;
            let (x, y) = (CpuList::from_cpus(a.iter().copied()), CpuList::from_cpus(b.iter().copied()));
            let set = |l: &CpuList| l.iter().collect::<BTreeSet<u32>>();
            prop_assert_eq!(set(&x), a.clone());
            prop_assert_eq!(x.iter().rev().collect::<Vec<_>>(), a.iter().rev().copied().collect::<Vec<_>>());
            prop_assert_eq!(x.iter().len(), a.len());
            prop_assert_eq!(x.len(), a.len());
            prop_assert_eq!(x.first(), a.first().copied());
            prop_assert_eq!(x.last(), a.last().copied());
            prop_assert_eq!(x.contains(probe), a.contains(&probe));
            prop_assert_eq!(set(&x.union(&y)), a.union(&b).copied().collect::<BTreeSet<_>>());
            prop_assert_eq!(set(&x.intersection(&y)), a.intersection(&b).copied().collect::<BTreeSet<_>>());
            prop_assert_eq!(set(&x.difference(&y)), a.difference(&b).copied().collect::<BTreeSet<_>>());
            prop_assert_eq!(x.is_subset(&y), a.is_subset(&b));
            prop_assert_eq!(x.cmp(&y), a.cmp(&b));
            prop_assert_eq!(x == y, a == b);
            // Equal sets are equal however they were built (and print the same).
            let built = x.union(&y).difference(&y).union(&x.intersection(&y));
            prop_assert_eq!(&built, &x);
            prop_assert_eq!(CpuList::parse(&x.to_string()).unwrap(), x.clone());
            let mut inserted = x.clone();
            prop_assert_eq!(inserted.insert(probe), !a.contains(&probe));
            let mut a2 = a.clone();
            a2.insert(probe);
            prop_assert_eq!(set(&inserted), a2);
        }

        #[test]
        fn strided_groups_are_the_cpus_the_rule_names(lo in 0u32..100, len in 0u32..100, used in 1u32..6, extra in 0u32..6) {
            let size = used + extra;
            let list = CpuList::parse(&format!("{}-{}:{}/{}", lo, lo + len, used, size)).unwrap();
            let want: Vec<u32> = (lo..=lo + len).filter(|c| (c - lo) % size < used).collect();
            prop_assert_eq!(list.iter().collect::<Vec<_>>(), want);
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
