//! Virtualisation: whether we run under a hypervisor, whose, and how much
//! time it steals from each vCPU (noise no guest can remove).

use serde::{Deserialize, Serialize};

use crate::error::ParseError;
use crate::reader::Reader;

pub const PROC_STAT: &str = "/proc/stat";
pub const HYPERVISOR_TYPE: &str = "/sys/hypervisor/type";
pub const DMI_VENDOR: &str = "/sys/class/dmi/id/sys_vendor";
pub const DMI_PRODUCT: &str = "/sys/class/dmi/id/product_name";

/// Ticks (USER_HZ) a CPU spent, and how many of them were stolen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuSteal {
    pub cpu: u32,
    pub steal_ticks: u64,
    pub total_ticks: u64,
}

impl CpuSteal {
    /// Stolen share since boot, in parts per million.
    pub fn steal_ppm(&self) -> u64 {
        (self.steal_ticks * 1_000_000)
            .checked_div(self.total_ticks)
            .unwrap_or(0)
    }
}

/// The per-CPU lines of /proc/stat (`cpuN user nice system idle iowait irq softirq steal …`).
pub fn parse_stat_steal(text: &str) -> Result<Vec<CpuSteal>, ParseError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut w = line.split_whitespace();
        let Some(label) = w.next() else { continue };
        let Some(cpu) = label.strip_prefix("cpu").and_then(|n| n.parse().ok()) else {
            continue;
        };
        let vals: Vec<u64> = w
            .map(|v| v.parse())
            .collect::<Result<_, _>>()
            .map_err(|_| ParseError::new(i + 1, format!("non-numeric time in {label}")))?;
        if vals.len() < 8 {
            return Err(ParseError::new(
                i + 1,
                format!("{label} has {} times, need 8", vals.len()),
            ));
        }
        // guest and guest_nice are already counted in user and nice.
        let total = vals.iter().take(8).sum();
        out.push(CpuSteal {
            cpu,
            steal_ticks: vals[7],
            total_ticks: total,
        });
    }
    Ok(out)
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Virtualisation {
    /// The CPU's `hypervisor` flag.
    pub hypervisor: bool,
    /// Who, when anything tells (`/sys/hypervisor/type`, DMI, a paravirtual clocksource).
    pub vendor: Option<String>,
    pub vendor_source: Option<String>,
    pub steal: Vec<CpuSteal>,
}

impl Virtualisation {
    pub fn total_steal_ppm(&self) -> u64 {
        let s: u64 = self.steal.iter().map(|c| c.steal_ticks).sum();
        let t: u64 = self.steal.iter().map(|c| c.total_ticks).sum();
        (s * 1_000_000).checked_div(t).unwrap_or(0)
    }

    pub fn read(r: &mut Reader, cpu_flags: &[String], clocksources: &[String]) -> Self {
        let hypervisor = cpu_flags.iter().any(|f| f == "hypervisor");
        let steal = match r.required(PROC_STAT).map(|t| parse_stat_steal(&t)) {
            Some(Ok(s)) => s,
            Some(Err(e)) => {
                r.parse_problem(PROC_STAT, e);
                Vec::new()
            }
            None => Vec::new(),
        };
        let mut v = Virtualisation {
            hypervisor,
            steal,
            ..Default::default()
        };
        if !hypervisor {
            return v;
        }
        let found = [HYPERVISOR_TYPE, DMI_VENDOR].iter().find_map(|p| {
            r.value(p)
                .filter(|s| !s.is_empty())
                .map(|s| (s, p.to_string()))
        });
        let (vendor, source) = match found {
            Some((s, p)) => (Some(s), Some(p)),
            None => match vendor_from_clocksources(clocksources) {
                Some(s) => (
                    Some(s.to_string()),
                    Some("available_clocksource".to_string()),
                ),
                None => (None, None),
            },
        };
        v.vendor = vendor;
        v.vendor_source = source;
        v
    }
}

/// Paravirtual clocksources name their hypervisor.
pub fn vendor_from_clocksources(clocksources: &[String]) -> Option<&'static str> {
    clocksources.iter().find_map(|c| match c.as_str() {
        "kvm-clock" => Some("KVM"),
        "xen" => Some("Xen"),
        "hyperv_clocksource_tsc_page" | "hyperv_clocksource_msr" => Some("Hyper-V"),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steal_from_proc_stat() {
        let s = parse_stat_steal("cpu  5991 0 2744 48326 395 0 35 49 0 0\ncpu0 2608 0 1028 25104 18 0 8 17 0 0\ncpu1 3382 0 1716 23222 376 0 27 31 0 0\nintr 1 2\n").unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[1].steal_ticks, 31);
        assert_eq!(s[1].total_ticks, 3382 + 1716 + 23222 + 376 + 27 + 31);
        assert!(parse_stat_steal("cpu0 1 2\n").is_err());
        assert_eq!(
            vendor_from_clocksources(&["tsc".into(), "kvm-clock".into()]),
            Some("KVM")
        );
    }
}
