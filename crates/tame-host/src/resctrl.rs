//! Cache and memory-bandwidth allocation (resctrl): is it mounted, which
//! resources it offers (L3 ways, MB), its groups, and the default group's schemata.

use serde::{Deserialize, Serialize};

use crate::cgroup::TAME_PREFIX;
use crate::mounts::{mounts_of_type, Mount};
use crate::reader::Reader;

/// CPU flags that mean resctrl allocation hardware is there.
pub const RESCTRL_FLAGS: &[&str] = &["rdt_a", "cat_l3", "cat_l2", "mba", "cdp_l3"];

/// A resctrl resource (L3, L2, MB, L3_MON …) from `info/`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResctrlResource {
    pub name: String,
    pub num_closids: Option<u32>,
    /// Capacity bitmask of all ways (cache resources).
    pub cbm_mask: Option<String>,
    pub min_cbm_bits: Option<u32>,
    /// Bandwidth granularity in percent (MB).
    pub bandwidth_gran: Option<u32>,
    pub min_bandwidth: Option<u32>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resctrl {
    pub mount: String,
    pub resources: Vec<ResctrlResource>,
    /// Control groups below the mount (other than info/mon_*).
    pub groups: Vec<String>,
    /// The default group's schemata.
    pub schemata: Option<String>,
}

/// One resctrl control group (a directory below the mount).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResctrlGroup {
    pub dir: String,
}

impl ResctrlGroup {
    /// Its allocation, one `RESOURCE:DOMAIN=VALUE;…` line per resource.
    pub fn schemata(&self) -> String {
        format!("{}/schemata", self.dir)
    }

    /// The CPUs whose work uses this group.
    pub fn cpus_list(&self) -> String {
        format!("{}/cpus_list", self.dir)
    }

    /// The tasks that use this group.
    pub fn tasks(&self) -> String {
        format!("{}/tasks", self.dir)
    }
}

impl Resctrl {
    /// The default group: the mount itself.
    pub fn default_group(&self) -> ResctrlGroup {
        ResctrlGroup {
            dir: self.mount.clone(),
        }
    }

    /// A group below the mount (it may not exist yet).
    pub fn group(&self, name: &str) -> ResctrlGroup {
        ResctrlGroup {
            dir: format!("{}/{name}", self.mount.trim_end_matches('/')),
        }
    }

    pub fn resource(&self, name: &str) -> Option<&ResctrlResource> {
        self.resources.iter().find(|r| r.name == name)
    }

    /// The number of L3 cache ways (bits of the L3 capacity bitmask), if L3 allocation exists.
    pub fn l3_ways(&self) -> Option<u32> {
        self.resource("L3")
            .and_then(|r| r.cbm_mask.as_deref())
            .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
            .map(u64::count_ones)
    }

    /// The domain ids of one resource in the default group's schemata.
    pub fn domains(&self, resource: &str) -> Vec<u32> {
        schemata_domains(self.schemata.as_deref().unwrap_or_default(), resource)
    }

    /// Read resctrl where the mount table says it is mounted; `None` when it is not.
    pub fn read(r: &mut Reader, mounts: &[Mount]) -> Option<Self> {
        let mount = &mounts_of_type(mounts, "resctrl").next()?.target;
        Some(read_resctrl(r, mount))
    }
}

/// Domain ids of one resource line of a resctrl schemata (`L3:0=fff;1=fff`).
pub fn schemata_domains(schemata: &str, resource: &str) -> Vec<u32> {
    schemata
        .lines()
        .filter_map(|l| l.trim().split_once(':'))
        .filter(|(r, _)| r.trim() == resource)
        .flat_map(|(_, doms)| {
            doms.split(';')
                .filter_map(|d| d.split_once('=')?.0.trim().parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

fn read_resctrl(r: &mut Reader, mount: &str) -> Resctrl {
    let info = format!("{mount}/info");
    let mut resources = Vec::new();
    for name in r.list(&info) {
        let d = format!("{info}/{name}");
        if !r.is_dir(&d) {
            continue;
        }
        resources.push(ResctrlResource {
            num_closids: r.number(&format!("{d}/num_closids")),
            cbm_mask: r.value(&format!("{d}/cbm_mask")),
            min_cbm_bits: r.number(&format!("{d}/min_cbm_bits")),
            bandwidth_gran: r.number(&format!("{d}/bandwidth_gran")),
            min_bandwidth: r.number(&format!("{d}/min_bandwidth")),
            name,
        });
    }
    let names = r.list(mount);
    let groups = names
        .iter()
        .filter(|n| {
            *n != "info"
                && !n.starts_with("mon_")
                && r.is_dir(&format!("{mount}/{n}"))
                && r.optional(&format!("{mount}/{n}/cpus_list")).is_some()
        })
        .cloned()
        .collect();
    let mut model = Resctrl {
        mount: mount.to_string(),
        resources,
        groups,
        schemata: None,
    };
    model.schemata = r.knob(&model.default_group().schemata());
    for name in names.iter().filter(|n| n.starts_with(TAME_PREFIX)) {
        let g = model.group(name);
        if r.is_dir(&g.dir) {
            crate::knobs::keep_dir(r, &g.dir, None);
            r.knob(&g.schemata());
            r.knob(&g.cpus_list());
        }
    }
    model
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemata_domains_per_resource() {
        let s = "    L3:0=fff;1=fff\n    MB:0=100;1=100\n";
        assert_eq!(schemata_domains(s, "L3"), vec![0, 1]);
        assert_eq!(schemata_domains(s, "MB"), vec![0, 1]);
        assert!(schemata_domains(s, "L2").is_empty());
    }

    #[test]
    fn the_two_socket_fixture_has_l3_ways_mb_and_domains() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/hosts/two-socket-smt");
        let root = crate::Root::new(dir);
        let mut r = Reader::new(&root);
        let mounts = crate::mounts::read_mounts(&mut r);
        let rc = Resctrl::read(&mut r, &mounts).unwrap();
        assert_eq!(rc.l3_ways(), Some(12));
        assert!(rc.resource("MB").is_some());
        assert_eq!(rc.domains("L3"), vec![0, 1]);
        assert_eq!(rc.domains("MB"), vec![0, 1]);
        assert_eq!(rc.group("tame-rt").tasks(), "/sys/fs/resctrl/tame-rt/tasks");
        assert_eq!(
            r.knobs.text("/sys/fs/resctrl/schemata"),
            rc.schemata.as_deref()
        );
        assert!(r.problems.is_empty(), "{:?}", r.problems);
    }
}
