//! /proc/timer_list: the hrtimers armed on each CPU, by callback (what will wake
//! an isolated CPU). Readable by root only.

use std::collections::BTreeMap;

use crate::{CpuList, Root};

pub const PROC_TIMER_LIST: &str = "/proc/timer_list";

/// Armed hrtimers per CPU, counted by callback.
pub type ArmedTimers = BTreeMap<u32, BTreeMap<String, u32>>;

/// The callbacks of the hrtimers armed on `cpus`
/// (` #0: <ptr>, tick_nohz_handler, S:01` lines under `cpu: N`).
pub fn parse_armed(timer_list: &str, cpus: &CpuList) -> ArmedTimers {
    let mut out: ArmedTimers = BTreeMap::new();
    let mut cpu = None;
    for line in timer_list.lines() {
        if let Some(n) = line.strip_prefix("cpu: ") {
            cpu = n.trim().parse::<u32>().ok().filter(|c| cpus.contains(*c));
            continue;
        }
        if line.starts_with("Tick Device") {
            cpu = None;
        }
        let Some(c) = cpu else { continue };
        let t = line.trim_start();
        if !t.starts_with('#') || !t.contains(": <") {
            continue;
        }
        if let Some(func) = t.split(", ").nth(1) {
            *out.entry(c)
                .or_default()
                .entry(func.to_string())
                .or_default() += 1;
        }
    }
    out
}

/// The hrtimers armed on `cpus` now; empty when /proc/timer_list cannot be read.
pub fn read_armed(root: &Root, cpus: &CpuList) -> ArmedTimers {
    parse_armed(&root.read(PROC_TIMER_LIST).unwrap_or_default(), cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hrtimers_of_the_asked_cpus_by_callback() {
        let text = "now at 1 nsecs\n\ncpu: 0\n clock 0:\nactive timers:\n #0: <00>, tick_nohz_handler, S:01\n\
                    cpu: 1\n clock 0:\nactive timers:\n #0: <0a>, tick_nohz_handler, S:01\n # expires at 1-2 nsecs [in 1 to 2 nsecs]\n\
                    \x20#1: <0b>, hrtimer_wakeup, S:01\n #2: <0c>, hrtimer_wakeup, S:01\n\
                    Tick Device: mode:     1\n #9: <0d>, nothing, S:01\n";
        let got = parse_armed(text, &CpuList::parse("1").unwrap());
        assert_eq!(got.len(), 1);
        assert_eq!(got[&1]["tick_nohz_handler"], 1);
        assert_eq!(got[&1]["hrtimer_wakeup"], 2);
        assert!(!got[&1].contains_key("nothing"));
        let none = std::path::Path::new("/nonexistent-root");
        assert!(read_armed(&Root::new(none), &CpuList::parse("1").unwrap()).is_empty());
    }
}
