//! Tracing and cache/memory-bandwidth allocation: is tracefs mounted, which
//! tracers and event groups exist; is resctrl mounted and which resources it offers.

use serde::{Deserialize, Serialize};

use crate::cgroup::{mounts_of_type, Mount};
use crate::reader::Reader;

/// Where tracefs lives when it is not in the mount table (debugfs auto-mount).
pub const DEBUGFS_TRACING: &str = "/sys/kernel/debug/tracing";

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tracefs {
    pub mount: String,
    pub tracers: Vec<String>,
    pub current_tracer: Option<String>,
    /// Event groups (`irq`, `sched`, `timer`, …).
    pub event_groups: Vec<String>,
}

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

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tracing {
    pub tracefs: Option<Tracefs>,
    pub resctrl: Option<Resctrl>,
    /// The CPU advertises cache or bandwidth allocation (rdt_a, cat_l3, mba, …).
    pub resctrl_capable: bool,
}

/// CPU flags that mean resctrl allocation hardware is there.
pub const RESCTRL_FLAGS: &[&str] = &["rdt_a", "cat_l3", "cat_l2", "mba", "cdp_l3"];

impl Tracing {
    pub fn read(r: &mut Reader, mounts: &[Mount], cpu_flags: &[String]) -> Self {
        let tracefs_mount = mounts_of_type(mounts, "tracefs")
            .next()
            .map(|m| m.target.clone())
            .or_else(|| {
                r.exists(&format!("{DEBUGFS_TRACING}/available_tracers"))
                    .then(|| DEBUGFS_TRACING.to_string())
            });
        let tracefs = tracefs_mount.map(|mount| Tracefs {
            tracers: r
                .value(&format!("{mount}/available_tracers"))
                .map(|t| t.split_whitespace().map(str::to_string).collect())
                .unwrap_or_default(),
            current_tracer: r.value(&format!("{mount}/current_tracer")),
            event_groups: {
                let ev = format!("{mount}/events");
                // A group is a directory with an `enable` switch (reading it also
                // keeps the group in captured fixtures, where empty directories vanish).
                r.list(&ev)
                    .into_iter()
                    .filter(|n| {
                        r.is_dir(&format!("{ev}/{n}"))
                            && r.optional(&format!("{ev}/{n}/enable")).is_some()
                    })
                    .collect()
            },
            mount,
        });
        let resctrl = mounts_of_type(mounts, "resctrl")
            .next()
            .map(|m| read_resctrl(r, &m.target));
        Tracing {
            tracefs,
            resctrl,
            resctrl_capable: cpu_flags
                .iter()
                .any(|f| RESCTRL_FLAGS.contains(&f.as_str())),
        }
    }
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
    let groups = r
        .list(mount)
        .into_iter()
        .filter(|n| {
            n != "info"
                && !n.starts_with("mon_")
                && r.is_dir(&format!("{mount}/{n}"))
                && r.optional(&format!("{mount}/{n}/cpus_list")).is_some()
        })
        .collect();
    Resctrl {
        mount: mount.to_string(),
        resources,
        groups,
        schemata: r.optional(&format!("{mount}/schemata")),
    }
}
