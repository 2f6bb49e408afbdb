//! Tracing: is tracefs mounted, which tracers and event groups exist. Its model
//! also holds resctrl's (read by [`crate::resctrl`]), where the host model's JSON
//! has always had it.

use serde::{Deserialize, Serialize};

use crate::mounts::{mounts_of_type, Mount};
use crate::reader::Reader;
use crate::resctrl::{Resctrl, RESCTRL_FLAGS};

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

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tracing {
    pub tracefs: Option<Tracefs>,
    pub resctrl: Option<Resctrl>,
    /// The CPU advertises cache or bandwidth allocation (rdt_a, cat_l3, mba, …).
    pub resctrl_capable: bool,
}

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
        let resctrl = Resctrl::read(r, mounts);
        Tracing {
            tracefs,
            resctrl,
            resctrl_capable: cpu_flags
                .iter()
                .any(|f| RESCTRL_FLAGS.contains(&f.as_str())),
        }
    }
}
