//! CPU topology: which CPUs exist and are online, how they group into
//! packages, cores and SMT siblings, which caches they share, the NUMA nodes
//! with their CPUs and memory, and the NUMA node of each PCI device.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::error::ParseError;
use crate::reader::Reader;
use crate::{CpuList, HostError, Root};

pub const SYS_CPU: &str = "/sys/devices/system/cpu";
pub const SYS_NODE: &str = "/sys/devices/system/node";
pub const SYS_PCI: &str = "/sys/bus/pci/devices";
pub const PROC_CPUINFO: &str = "/proc/cpuinfo";

/// One logical CPU.
/// The CPUs the kernel took out of scheduler domains at boot (`isolcpus=domain`).
pub const ISOLATED_CPUS: &str = "/sys/devices/system/cpu/isolated";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cpu {
    pub id: u32,
    pub online: bool,
    /// physical_package_id (the socket).
    pub package: Option<u32>,
    pub die: Option<u32>,
    /// core_id, unique within a package.
    pub core: Option<u32>,
    /// The hardware threads of this CPU's core, itself included.
    pub thread_siblings: CpuList,
    /// The NUMA node it belongs to.
    pub node: Option<u32>,
}

/// A cache and the CPUs that share it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cache {
    pub level: u8,
    /// Data, Instruction or Unified.
    pub kind: String,
    pub size_kib: Option<u64>,
    pub ways: Option<u32>,
    pub id: Option<u32>,
    pub cpus: CpuList,
}

/// A NUMA node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaNode {
    pub id: u32,
    pub cpus: CpuList,
    pub mem_total_kib: Option<u64>,
    pub mem_free_kib: Option<u64>,
}

/// A PCI device and its locality.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PciDevice {
    /// `0000:00:02.0`.
    pub address: String,
    pub class: Option<String>,
    pub vendor: Option<String>,
    pub device: Option<String>,
    /// None where the firmware reports no locality (-1).
    pub numa_node: Option<u32>,
}

/// SMT state from /sys/devices/system/cpu/smt.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Smt {
    /// on | off | forceoff | notsupported | notimplemented.
    pub control: Option<String>,
    pub active: Option<bool>,
}

/// The CPU side of the machine.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTopology {
    pub online: CpuList,
    pub possible: CpuList,
    pub present: CpuList,
    /// /sys/devices/system/cpu/isolated: CPUs taken out of scheduler domains (isolcpus=domain).
    pub isolated: CpuList,
    /// /sys/devices/system/cpu/nohz_full, present only when the kernel has NO_HZ_FULL.
    pub nohz_full: Option<CpuList>,
    pub smt: Smt,
    /// `model name` of the first processor.
    pub model_name: Option<String>,
    /// Flags of the first processor in /proc/cpuinfo.
    pub flags: Vec<String>,
    pub cpus: Vec<Cpu>,
    /// Each distinct cache once.
    pub caches: Vec<Cache>,
    pub nodes: Vec<NumaNode>,
    pub pci_devices: Vec<PciDevice>,
}

impl CpuTopology {
    pub fn cpu(&self, id: u32) -> Option<&Cpu> {
        // Read in order from CPU 0, the list is indexed by id: look there first (callers
        // ask for every CPU, a search each made that quadratic on 1024 CPUs).
        match self.cpus.get(id as usize) {
            Some(c) if c.id == id => Some(c),
            _ => self.cpus.iter().find(|c| c.id == id),
        }
    }

    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }

    /// Packages present (sockets).
    pub fn packages(&self) -> Vec<u32> {
        let mut p: Vec<u32> = self.cpus.iter().filter_map(|c| c.package).collect();
        p.sort_unstable();
        p.dedup();
        p
    }

    /// Number of physical cores (distinct package/core pairs).
    pub fn core_count(&self) -> usize {
        let mut v: Vec<(Option<u32>, Option<u32>, Option<u32>)> = self
            .cpus
            .iter()
            .map(|c| (c.package, c.die, c.core))
            .collect();
        v.sort_unstable();
        v.dedup();
        v.len()
    }

    /// The online SMT siblings of `cpu`, itself excluded.
    pub fn online_siblings(&self, cpu: u32) -> CpuList {
        self.cpu(cpu)
            .map(|c| {
                c.thread_siblings
                    .intersection(&self.online)
                    .difference(&CpuList::from_cpus([cpu]))
            })
            .unwrap_or_default()
    }

    /// The largest (last-level) cache shared by `cpu`.
    pub fn last_level_cache(&self, cpu: u32) -> Option<&Cache> {
        self.caches
            .iter()
            .filter(|c| c.cpus.contains(cpu) && c.kind != "Instruction")
            .max_by_key(|c| c.level)
    }

    pub fn read(r: &mut Reader) -> Self {
        let list = |r: &mut Reader, f: &str| r.cpu_list(&format!("{SYS_CPU}/{f}"));
        let online = list(r, "online");
        if online.is_none() {
            r.required(&format!("{SYS_CPU}/online"));
        }
        let mut topo = CpuTopology {
            online: online.unwrap_or_default(),
            possible: list(r, "possible").unwrap_or_default(),
            present: list(r, "present").unwrap_or_default(),
            isolated: list(r, "isolated").unwrap_or_default(),
            nohz_full: list(r, "nohz_full"),
            smt: Smt {
                control: r.value(&format!("{SYS_CPU}/smt/control")),
                active: r.flag(&format!("{SYS_CPU}/smt/active")),
            },
            ..Default::default()
        };
        if let Some(info) = r.required(PROC_CPUINFO) {
            topo.flags = cpu_flags(&info);
            topo.model_name = cpuinfo_field(&info, "model name");
        }
        topo.nodes = read_nodes(r);
        let ids = {
            let listed = r.numbered(SYS_CPU, "cpu");
            if listed.is_empty() {
                topo.possible.iter().collect()
            } else {
                listed
            }
        };
        let mut seen = BTreeSet::new();
        for id in ids {
            topo.cpus.push(read_cpu(r, id, &topo.online, &topo.nodes));
            read_caches(r, id, &mut seen, &mut topo.caches);
        }
        topo.caches.sort_by(|a, b| {
            (a.level, &a.kind, a.cpus.first()).cmp(&(b.level, &b.kind, b.cpus.first()))
        });
        topo.pci_devices = read_pci(r);
        topo
    }
}

fn read_cpu(r: &mut Reader, id: u32, online: &CpuList, nodes: &[NumaNode]) -> Cpu {
    let t = format!("{SYS_CPU}/cpu{id}/topology");
    let thread_siblings = r
        .cpu_list(&format!("{t}/thread_siblings_list"))
        .or_else(|| r.cpu_list(&format!("{t}/core_cpus_list")))
        .unwrap_or_else(|| CpuList::from_cpus([id]));
    Cpu {
        id,
        online: online.contains(id),
        package: r.number(&format!("{t}/physical_package_id")),
        die: r.number(&format!("{t}/die_id")),
        core: r.number(&format!("{t}/core_id")),
        thread_siblings,
        node: nodes.iter().find(|n| n.cpus.contains(id)).map(|n| n.id),
    }
}

fn read_caches(
    r: &mut Reader,
    cpu: u32,
    seen: &mut BTreeSet<(u32, CpuList)>,
    caches: &mut Vec<Cache>,
) {
    let base = format!("{SYS_CPU}/cpu{cpu}/cache");
    for index in r.numbered(&base, "index") {
        let dir = format!("{base}/index{index}");
        // A cache shared by many CPUs is read once: its shared list alone tells it was seen.
        let Some(cpus) = r.cpu_list(&format!("{dir}/shared_cpu_list")) else {
            continue;
        };
        if !seen.insert((index, cpus.clone())) {
            continue;
        }
        let Some(level) = r.number::<u8>(&format!("{dir}/level")) else {
            continue;
        };
        caches.push(Cache {
            level,
            kind: r.value(&format!("{dir}/type")).unwrap_or_default(),
            size_kib: r
                .value(&format!("{dir}/size"))
                .and_then(|s| parse_size_kib(&s)),
            ways: r.number(&format!("{dir}/ways_of_associativity")),
            id: r.number(&format!("{dir}/id")),
            cpus,
        });
    }
}

fn read_nodes(r: &mut Reader) -> Vec<NumaNode> {
    let mut out = Vec::new();
    for id in r.numbered(SYS_NODE, "node") {
        let dir = format!("{SYS_NODE}/node{id}");
        let (total, free) = r
            .optional(&format!("{dir}/meminfo"))
            .map(|t| parse_node_meminfo(&t))
            .unwrap_or((None, None));
        out.push(NumaNode {
            id,
            cpus: r.cpu_list(&format!("{dir}/cpulist")).unwrap_or_default(),
            mem_total_kib: total,
            mem_free_kib: free,
        });
    }
    out
}

fn read_pci(r: &mut Reader) -> Vec<PciDevice> {
    let mut out = Vec::new();
    for address in r.list(SYS_PCI) {
        let dir = format!("{SYS_PCI}/{address}");
        let node: Option<i64> = r.number(&format!("{dir}/numa_node"));
        out.push(PciDevice {
            class: r.value(&format!("{dir}/class")),
            vendor: r.value(&format!("{dir}/vendor")),
            device: r.value(&format!("{dir}/device")),
            numa_node: node.and_then(|n| u32::try_from(n).ok()),
            address,
        });
    }
    out
}

/// A sysfs cache size (`32K`, `1024K`, `32M`) in KiB.
pub fn parse_size_kib(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.chars().last()? {
        'K' => (&s[..s.len() - 1], 1),
        'M' => (&s[..s.len() - 1], 1024),
        'G' => (&s[..s.len() - 1], 1024 * 1024),
        _ => (s, 1),
    };
    num.parse::<u64>().ok().map(|n| n * mult)
}

/// MemTotal and MemFree (KiB) of a node's meminfo (`Node 0 MemTotal:  4548812 kB`).
pub fn parse_node_meminfo(text: &str) -> (Option<u64>, Option<u64>) {
    let field = |name: &str| {
        text.lines().find_map(|l| {
            let mut w = l.split_whitespace();
            // "Node" "0" "MemTotal:" "4548812" "kB"
            let key = w.nth(2)?;
            (key.trim_end_matches(':') == name).then(|| w.next()?.parse().ok())?
        })
    };
    (field("MemTotal"), field("MemFree"))
}

/// The flags of the first processor in /proc/cpuinfo.
pub fn cpu_flags(cpuinfo: &str) -> Vec<String> {
    cpuinfo_field(cpuinfo, "flags")
        .map(|f| f.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// A field of the first processor in /proc/cpuinfo.
pub fn cpuinfo_field(cpuinfo: &str, name: &str) -> Option<String> {
    cpuinfo.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == name).then(|| v.trim().to_string())
    })
}

impl Root {
    /// The online CPUs (`/sys/devices/system/cpu/online`).
    pub fn cpus_online(&self) -> Result<CpuList, HostError> {
        let path = format!("{SYS_CPU}/online");
        let text = self.read_trimmed(&path)?;
        CpuList::parse(&text).map_err(|e| ParseError::new(1, e.to_string()).at(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_meminfo() {
        assert_eq!(parse_size_kib("32K"), Some(32));
        assert_eq!(parse_size_kib("32M\n"), Some(32 * 1024));
        assert_eq!(parse_size_kib("x"), None);
        let (t, f) = parse_node_meminfo(
            "Node 0 MemTotal:        4548812 kB\nNode 0 MemFree:         4148456 kB\n",
        );
        assert_eq!((t, f), (Some(4548812), Some(4148456)));
    }

    #[test]
    fn cpuinfo_fields() {
        let info = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu tsc hypervisor\n\nprocessor\t: 1\nflags\t\t: other\n";
        assert_eq!(cpu_flags(info), vec!["fpu", "tsc", "hypervisor"]);
        assert_eq!(
            cpuinfo_field(info, "model name").as_deref(),
            Some("AMD EPYC")
        );
    }
}
