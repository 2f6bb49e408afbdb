//! Which L3 cache ways the measured partition had (resctrl), read from the host model:
//! the partition's resctrl group is `tame-NAME`, made by `tame apply` where the spec gives
//! the partition `cache_ways`. Where the machine has no cache allocation the result says
//! so: the ways cannot be split here.

use serde::{Deserialize, Serialize};
use tame_host::cgroup::TAME_PREFIX;
use tame_host::cpu::{cpu_flags, PROC_CPUINFO};
use tame_host::mounts::read_mounts;
use tame_host::reader::Reader;
use tame_host::resctrl::{Resctrl, RESCTRL_FLAGS};
use tame_host::Root;

/// How the L3 was shared during the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WaysState {
    /// No L3 cache allocation here (no resctrl, or no L3 resource): nothing can be split.
    Unavailable,
    /// Not measured in a partition: the default group's ways, shared with everything.
    Shared,
    /// In a partition whose spec gives no `cache_ways`: it shares the system's ways.
    NotRequested,
    /// The partition's group holds its own ways.
    Split,
    /// The spec asks for ways but the partition's resctrl group is not there.
    Missing,
}

/// What the result records about cache ways.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheWays {
    pub state: WaysState,
    /// The same in words, for the table.
    pub note: String,
    /// Ways of the L3 (bits of its capacity bitmask), where allocation exists.
    pub l3_ways: Option<u32>,
    /// The partition's `cache_ways` in the applied spec.
    pub requested: Option<u32>,
    /// The partition's resctrl group directory.
    pub group: Option<String>,
    /// The group's L3 line (`L3:0=f00;1=f00`).
    pub schemata: Option<String>,
    /// Ways set in the first domain's mask.
    pub ways: Option<u32>,
}

/// The partition measured in: its name and its spec's `cache_ways`.
#[derive(Clone, Copy, Debug)]
pub struct Partition<'a> {
    pub name: &'a str,
    pub cache_ways: Option<u32>,
}

/// Read resctrl below `root` and say what `partition` (None: a shared run) had.
pub fn read(root: &Root, partition: Option<Partition>) -> CacheWays {
    let mut r = Reader::new(root);
    let mounts = read_mounts(&mut r);
    let resctrl = Resctrl::read(&mut r, &mounts);
    let capable = root
        .read(PROC_CPUINFO)
        .map(|t| cpu_flags(&t))
        .unwrap_or_default()
        .iter()
        .any(|f| RESCTRL_FLAGS.contains(&f.as_str()));
    let group = partition.map(|p| {
        resctrl
            .as_ref()
            .map(|rc| rc.group(&format!("{TAME_PREFIX}{}", p.name)).schemata())
            .unwrap_or_default()
    });
    let schemata = group.and_then(|g| r.knobs.text(&g).map(str::to_string));
    from_model(resctrl.as_ref(), capable, partition, schemata.as_deref())
}

/// The same from what was read: the resctrl model, whether the CPU reports allocation
/// hardware, and the partition group's schemata (None when absent).
pub fn from_model(
    resctrl: Option<&Resctrl>,
    capable: bool,
    partition: Option<Partition>,
    group_schemata: Option<&str>,
) -> CacheWays {
    let l3_ways = resctrl.and_then(Resctrl::l3_ways);
    let mut w = CacheWays {
        state: WaysState::Unavailable,
        note: String::new(),
        l3_ways,
        requested: partition.and_then(|p| p.cache_ways),
        group: None,
        schemata: None,
        ways: None,
    };
    let (Some(rc), Some(hw)) = (resctrl, l3_ways) else {
        w.note = format!(
            "cache ways cannot be split here: {} — the run shares the whole L3",
            match (resctrl, capable) {
                (None, false) => "the CPU reports no cache allocation (none of rdt_a, cat_l3, cat_l2, mba, cdp_l3; a VM rarely passes it through) and resctrl is not mounted",
                (None, true) => "the CPU has cache allocation but resctrl is not mounted (mount -t resctrl resctrl /sys/fs/resctrl)",
                (Some(_), _) => "resctrl offers no L3 allocation on this machine",
            }
        );
        return w;
    };
    let Some(p) = partition else {
        w.state = WaysState::Shared;
        w.note = format!(
            "shared run: the L3's {hw} ways are shared with everything (measure with -p in a partition with cache_ways to split them)"
        );
        return w;
    };
    let dir = rc.group(&format!("{TAME_PREFIX}{}", p.name)).dir;
    let Some(asked) = p.cache_ways else {
        w.state = WaysState::NotRequested;
        w.note = format!(
            "partition {} has no cache_ways in its spec: it shares the L3's {hw} ways with the system",
            p.name
        );
        return w;
    };
    let line = group_schemata.and_then(|s| {
        s.lines()
            .map(str::trim)
            .find(|l| l.split_once(':').is_some_and(|(r, _)| r.trim() == "L3"))
            .map(str::to_string)
    });
    w.group = Some(dir.clone());
    let Some(line) = line else {
        w.state = WaysState::Missing;
        w.note = format!(
            "partition {} asks for {asked} cache ways but its resctrl group {dir} has no L3 schemata — is the spec applied? (tame status)",
            p.name
        );
        return w;
    };
    let ways = first_mask(&line).map(u64::count_ones);
    w.state = WaysState::Split;
    w.note = format!(
        "partition {} has its own cache ways: {line} ({} of {hw} ways, group {dir})",
        p.name,
        ways.map_or("?".to_string(), |n| n.to_string())
    );
    w.schemata = Some(line);
    w.ways = ways;
    w
}

/// The first domain's capacity bitmask of an `L3:0=f00;1=f00` line.
fn first_mask(line: &str) -> Option<u64> {
    let (_, domains) = line.split_once(':')?;
    let (_, mask) = domains.split(';').next()?.split_once('=')?;
    u64::from_str_radix(mask.trim(), 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host with L3 allocation (12 ways, two domains) and partition `rt` applied with
    /// four ways, written as tame-host reads it.
    fn resctrl_host(with_group: bool) -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().unwrap();
        let put = |path: &str, text: &str| {
            let p = dir.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        put(
            "proc/mounts",
            "resctrl /sys/fs/resctrl resctrl rw,relatime 0 0\n",
        );
        put(
            "proc/cpuinfo",
            "processor\t: 0\nflags\t\t: fpu rdt_a cat_l3\n",
        );
        put("sys/fs/resctrl/info/L3/cbm_mask", "fff\n");
        put("sys/fs/resctrl/info/L3/num_closids", "16\n");
        put("sys/fs/resctrl/schemata", "L3:0=0ff;1=0ff\n");
        put("sys/fs/resctrl/cpus_list", "0-7\n");
        if with_group {
            put(
                "sys/fs/resctrl/tame-rt/schemata",
                "    L3:0=f00;1=f00\n    MB:0=100;1=100\n",
            );
            put("sys/fs/resctrl/tame-rt/cpus_list", "2-3\n");
            put("sys/fs/resctrl/tame-rt/tasks", "");
        }
        let root = Root::new(dir.path());
        (dir, root)
    }

    #[test]
    fn a_partitions_ways_are_read_from_its_group() {
        let (_d, root) = resctrl_host(true);
        let rt = Partition {
            name: "rt",
            cache_ways: Some(4),
        };
        let w = read(&root, Some(rt));
        assert_eq!(w.state, WaysState::Split, "{}", w.note);
        assert_eq!(w.l3_ways, Some(12));
        assert_eq!(w.schemata.as_deref(), Some("L3:0=f00;1=f00"));
        assert_eq!((w.ways, w.requested), (Some(4), Some(4)));
        assert_eq!(w.group.as_deref(), Some("/sys/fs/resctrl/tame-rt"));
        assert!(w.note.contains("4 of 12 ways"), "{}", w.note);
        // A shared run, and a partition without cache_ways, share the ways.
        assert_eq!(read(&root, None).state, WaysState::Shared);
        let plain = Partition {
            name: "rt",
            cache_ways: None,
        };
        assert_eq!(read(&root, Some(plain)).state, WaysState::NotRequested);
    }

    #[test]
    fn ways_asked_for_but_not_applied_are_reported_missing() {
        let (_d, root) = resctrl_host(false);
        let w = read(
            &root,
            Some(Partition {
                name: "rt",
                cache_ways: Some(4),
            }),
        );
        assert_eq!(w.state, WaysState::Missing);
        assert!(w.note.contains("is the spec applied"), "{}", w.note);
    }

    #[test]
    fn without_resctrl_the_ways_cannot_be_split() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proc")).unwrap();
        std::fs::write(dir.path().join("proc/mounts"), "proc /proc proc rw 0 0\n").unwrap();
        std::fs::write(dir.path().join("proc/cpuinfo"), "flags\t: fpu sse\n").unwrap();
        let w = read(&Root::new(dir.path()), None);
        assert_eq!(w.state, WaysState::Unavailable);
        assert!(
            w.note.starts_with(
                "cache ways cannot be split here: the CPU reports no cache allocation"
            ),
            "{}",
            w.note
        );
        assert_eq!(first_mask("L3:0=00f;1=00f"), Some(0xf));
    }
}
