//! How busy each CPU is right now: /proc/interrupts (device IRQs, the local timer LOC,
//! IPIs such as RES/CAL/TLB), /proc/softirqs (TIMER, HRTIMER, RCU, SCHED, NET_RX, …)
//! and the per-CPU `steal` time of /proc/stat, read twice an interval apart.
//!
//! A [`ActivitySnapshot`] is one reading (pure parsing of the three texts); [`rates`]
//! turns two of them and the time between into per-CPU rates, in whole events per
//! second (steal in per mille of the CPU's time). Odd or hostile text gives no panic:
//! what does not parse is left out.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::irq::{parse_interrupts, split_device_text, InterruptsTable, PROC_INTERRUPTS};
use crate::virt::{parse_stat_steal, CpuSteal, PROC_STAT};
use crate::Root;

pub const PROC_SOFTIRQS: &str = "/proc/softirqs";

/// One reading of the per-CPU counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ActivitySnapshot {
    pub interrupts: InterruptsTable,
    /// /proc/softirqs has the layout of /proc/interrupts (a CPU header, `TIMER: n n …`).
    pub softirqs: InterruptsTable,
    pub steal: Vec<CpuSteal>,
}

/// A device IRQ and how often it fired on one CPU.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BusyIrq {
    pub number: u32,
    /// The action (device) names, e.g. `virtio1-req.0`.
    pub name: String,
    pub per_s: u64,
}

/// What disturbed one CPU during the interval, per second.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuRates {
    pub cpu: u32,
    /// Device IRQs (numbered lines of /proc/interrupts, the ARM arch_timer excepted).
    pub device_irqs: u64,
    /// The device IRQ that fired most here, if any did.
    pub busiest_irq: Option<BusyIrq>,
    /// Local timer interrupts (LOC; arch_timer on ARM).
    pub local_timer: u64,
    /// Inter-processor interrupts (RES, CAL, TLB, IWI; IPIn on ARM).
    pub ipis: u64,
    /// TIMER and HRTIMER softirqs.
    pub timer_softirqs: u64,
    /// Every other softirq (RCU, SCHED, NET_RX, BLOCK, …).
    pub other_softirqs: u64,
    /// Stolen share of the CPU's time, per mille; None when /proc/stat gave no time for it.
    pub steal_permille: Option<u64>,
}

impl CpuRates {
    /// The timer work the CPU did: local timer interrupts and timer softirqs.
    pub fn timer(&self) -> u64 {
        self.local_timer.saturating_add(self.timer_softirqs)
    }
}

/// Per-CPU rates over one interval.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuActivity {
    /// How long the sample was, in milliseconds.
    pub interval_ms: u64,
    /// One entry per CPU seen in both readings, by CPU number.
    pub cpus: Vec<CpuRates>,
}

impl CpuActivity {
    pub fn cpu(&self, cpu: u32) -> Option<&CpuRates> {
        self.cpus.iter().find(|c| c.cpu == cpu)
    }
}

/// A table in the layout of /proc/interrupts, leaving out the lines that do not parse
/// (empty when the header does not).
pub fn parse_table_leniently(text: &str) -> InterruptsTable {
    if let Ok(t) = parse_interrupts(text) {
        return t;
    }
    let mut lines = text.lines().skip_while(|l| l.trim().is_empty());
    let Some(header) = lines.next() else {
        return InterruptsTable::default();
    };
    let Ok(mut table) = parse_interrupts(header) else {
        return InterruptsTable::default();
    };
    // Slow, but only for text the strict parser refused: each line with the header.
    for line in lines.filter(|l| !l.trim().is_empty()) {
        if let Ok(t) = parse_interrupts(&format!("{header}\n{line}")) {
            table.lines.extend(t.lines);
        }
    }
    table
}

/// The per-CPU lines of /proc/stat that parse.
pub fn parse_steal_leniently(text: &str) -> Vec<CpuSteal> {
    text.lines()
        .filter(|l| l.starts_with("cpu"))
        .filter_map(|l| parse_stat_steal(l).ok())
        .flatten()
        .collect()
}

/// One reading from the three texts.
pub fn parse_snapshot(interrupts: &str, softirqs: &str, stat: &str) -> ActivitySnapshot {
    ActivitySnapshot {
        interrupts: parse_table_leniently(interrupts),
        softirqs: parse_table_leniently(softirqs),
        steal: parse_steal_leniently(stat),
    }
}

/// What a line of /proc/interrupts counts.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Device(u32),
    LocalTimer,
    Ipi,
    Other,
}

fn kind(label: &str, name: &str) -> Kind {
    match label.parse::<u32>() {
        Ok(_) if name.split(", ").any(|a| a == "arch_timer") => Kind::LocalTimer,
        Ok(n) => Kind::Device(n),
        Err(_) => match label {
            "LOC" => Kind::LocalTimer,
            "RES" | "CAL" | "TLB" | "IWI" => Kind::Ipi,
            l if l.starts_with("IPI") => Kind::Ipi,
            _ => Kind::Other,
        },
    }
}

/// Events per second: `delta` over `micros` (not zero), rounded down.
fn per_s(delta: u64, micros: u128) -> u64 {
    u64::try_from(u128::from(delta) * 1_000_000 / micros).unwrap_or(u64::MAX)
}

/// For each line of `after` that `before` has too (by label), its increase on each CPU
/// both have a column for. A count that went down (a reset) counts as no increase.
fn deltas<'a>(
    before: &InterruptsTable,
    after: &'a InterruptsTable,
) -> Vec<(&'a str, &'a str, BTreeMap<u32, u64>)> {
    let earlier: HashMap<&str, &[u64]> = before
        .lines
        .iter()
        .map(|l| (l.label.as_str(), l.counts.as_slice()))
        .collect();
    let column: HashMap<u32, usize> = before
        .cpus
        .iter()
        .enumerate()
        .map(|(i, &c)| (c, i))
        .collect();
    let mut out = Vec::new();
    for line in &after.lines {
        let Some(old) = earlier.get(line.label.as_str()) else {
            continue;
        };
        let mut per_cpu = BTreeMap::new();
        for (i, &cpu) in after.cpus.iter().enumerate() {
            let (Some(&new), Some(&j)) = (line.counts.get(i), column.get(&cpu)) else {
                continue;
            };
            let Some(&was) = old.get(j) else { continue };
            per_cpu.insert(cpu, new.saturating_sub(was));
        }
        out.push((line.label.as_str(), line.text.as_str(), per_cpu));
    }
    out
}

/// Per-CPU rates between two readings `interval` apart. CPUs are those /proc/interrupts
/// has a column for in both; a zero interval gives no rates.
pub fn rates(
    before: &ActivitySnapshot,
    after: &ActivitySnapshot,
    interval: Duration,
) -> CpuActivity {
    let micros = interval.as_micros();
    let interval_ms = u64::try_from(interval.as_millis()).unwrap_or(u64::MAX);
    if micros == 0 {
        return CpuActivity {
            interval_ms,
            cpus: Vec::new(),
        };
    }
    let mut cpus: BTreeMap<u32, CpuRates> = after
        .interrupts
        .cpus
        .iter()
        .filter(|c| before.interrupts.cpus.contains(c))
        .map(|&cpu| {
            (
                cpu,
                CpuRates {
                    cpu,
                    ..Default::default()
                },
            )
        })
        .collect();
    // Counts first (summed, then divided once), the busiest device IRQ as a count too.
    let mut sums: BTreeMap<u32, [u64; 5]> = BTreeMap::new();
    let mut busiest: BTreeMap<u32, (u64, u32, String)> = BTreeMap::new();
    for (label, text, per_cpu) in deltas(&before.interrupts, &after.interrupts) {
        let (_, _, name) = split_device_text(text);
        let k = kind(label, &name);
        for (cpu, d) in per_cpu {
            let s = sums.entry(cpu).or_default();
            match k {
                Kind::Device(n) => {
                    s[0] = s[0].saturating_add(d);
                    let top = busiest.entry(cpu).or_insert((0, n, String::new()));
                    if d > top.0 {
                        *top = (d, n, name.clone());
                    }
                }
                Kind::LocalTimer => s[1] = s[1].saturating_add(d),
                Kind::Ipi => s[2] = s[2].saturating_add(d),
                Kind::Other => {}
            }
        }
    }
    for (label, _, per_cpu) in deltas(&before.softirqs, &after.softirqs) {
        let i = if matches!(label, "TIMER" | "HRTIMER") {
            3
        } else {
            4
        };
        for (cpu, d) in per_cpu {
            let s = sums.entry(cpu).or_default();
            s[i] = s[i].saturating_add(d);
        }
    }
    for (cpu, r) in cpus.iter_mut() {
        let s = sums.get(cpu).copied().unwrap_or_default();
        r.device_irqs = per_s(s[0], micros);
        r.local_timer = per_s(s[1], micros);
        r.ipis = per_s(s[2], micros);
        r.timer_softirqs = per_s(s[3], micros);
        r.other_softirqs = per_s(s[4], micros);
        r.busiest_irq = busiest
            .get(cpu)
            .filter(|(d, _, _)| *d > 0)
            .map(|(d, number, name)| BusyIrq {
                number: *number,
                name: name.clone(),
                per_s: per_s(*d, micros),
            });
        let was = before.steal.iter().find(|s| s.cpu == *cpu);
        let now = after.steal.iter().find(|s| s.cpu == *cpu);
        if let (Some(was), Some(now)) = (was, now) {
            let total = now.total_ticks.saturating_sub(was.total_ticks);
            let stolen = now.steal_ticks.saturating_sub(was.steal_ticks);
            r.steal_permille = (total > 0).then(|| stolen.min(total) * 1000 / total);
        }
    }
    CpuActivity {
        interval_ms,
        cpus: cpus.into_values().collect(),
    }
}

impl Root {
    /// One reading of the per-CPU counters; a file that cannot be read leaves its part empty.
    pub fn activity_snapshot(&self) -> ActivitySnapshot {
        let read = |p: &str| self.read(p).unwrap_or_default();
        parse_snapshot(
            &read(PROC_INTERRUPTS),
            &read(PROC_SOFTIRQS),
            &read(PROC_STAT),
        )
    }

    /// The per-CPU rates over `interval`: read, sleep, read again. The time between the
    /// readings is measured, not assumed.
    pub fn sample_activity(&self, interval: Duration) -> CpuActivity {
        let before = self.activity_snapshot();
        let start = std::time::Instant::now();
        std::thread::sleep(interval);
        let after = self.activity_snapshot();
        rates(&before, &after, start.elapsed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const INTERRUPTS_1: &str = "           CPU0       CPU1
 26:          0         14  IO-APIC   4-edge      ttyS0
 36:          0      33340 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0
 38:          5       1301 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0
LOC:      16417      19028   Local timer interrupts
RES:        100        200   Rescheduling interrupts
CAL:      31863      28576   Function call interrupts
NMI:          0          0   Non-maskable interrupts
ERR:          0
";
    const INTERRUPTS_2: &str = "           CPU0       CPU1
 26:          0         14  IO-APIC   4-edge      ttyS0
 36:          0      35340 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0
 38:         15       1401 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0
LOC:      16667      19528   Local timer interrupts
RES:        110        200   Rescheduling interrupts
CAL:      31873      28576   Function call interrupts
NMI:          9          9   Non-maskable interrupts
ERR:          3
";
    const SOFTIRQS_1: &str = "                    CPU0       CPU1
          HI:          0          1
       TIMER:       1000       2000
      NET_RX:         10         20
       SCHED:        500        600
     HRTIMER:          0         10
         RCU:        700        800
";
    const SOFTIRQS_2: &str = "                    CPU0       CPU1
          HI:          0          1
       TIMER:       1250       2100
      NET_RX:         10        420
       SCHED:        600        600
     HRTIMER:          0         20
         RCU:        800        900
";
    const STAT_1: &str = "cpu  59170 0 17324 118884 952 0 173 214 0 0
cpu0 28301 0 8374 61398 185 0 15 91 0 0
cpu1 30869 0 8950 57486 767 0 157 123 0 0
intr 701725 0 0
";
    const STAT_2: &str = "cpu  59370 0 17324 118884 952 0 173 234 0 0
cpu0 28351 0 8374 61448 185 0 15 91 0 0
cpu1 30919 0 8950 57516 767 0 157 143 0 0
intr 701725 0 0
";

    #[test]
    fn two_readings_two_seconds_apart_give_rates_per_second() {
        let a = parse_snapshot(INTERRUPTS_1, SOFTIRQS_1, STAT_1);
        let b = parse_snapshot(INTERRUPTS_2, SOFTIRQS_2, STAT_2);
        let r = rates(&a, &b, Duration::from_secs(2));
        assert_eq!(r.interval_ms, 2000);
        let cpu1 = r.cpu(1).unwrap();
        // IRQ 36: 2000 in 2 s, IRQ 38: 100; NMI and ERR are no device IRQs.
        assert_eq!(cpu1.device_irqs, 1050);
        assert_eq!(
            cpu1.busiest_irq,
            Some(BusyIrq {
                number: 36,
                name: "virtio1-req.0".into(),
                per_s: 1000
            })
        );
        assert_eq!((cpu1.local_timer, cpu1.ipis), (250, 0));
        // TIMER 100 + HRTIMER 10 over 2 s; NET_RX 400 and RCU 100 are the others.
        assert_eq!((cpu1.timer_softirqs, cpu1.other_softirqs), (55, 250));
        assert_eq!(cpu1.timer(), 305);
        // 20 of 100 ticks stolen.
        assert_eq!(cpu1.steal_permille, Some(200));
        let cpu0 = r.cpu(0).unwrap();
        assert_eq!(
            (cpu0.device_irqs, cpu0.local_timer, cpu0.ipis),
            (5, 125, 10)
        );
        assert_eq!(cpu0.busiest_irq.as_ref().map(|b| b.number), Some(38));
        assert_eq!(cpu0.steal_permille, Some(0));
    }

    #[test]
    fn no_interval_no_rates_and_a_reset_counter_counts_nothing() {
        let a = parse_snapshot(INTERRUPTS_2, SOFTIRQS_2, STAT_2);
        let b = parse_snapshot(INTERRUPTS_1, SOFTIRQS_1, STAT_1);
        assert!(rates(&a, &b, Duration::ZERO).cpus.is_empty());
        let r = rates(&a, &b, Duration::from_secs(1));
        assert_eq!(r.cpu(1).unwrap().device_irqs, 0);
        assert_eq!(r.cpu(1).unwrap().steal_permille, None);
    }

    #[test]
    fn arm_local_timer_and_ipis() {
        let a = "   CPU0 CPU1\n 11: 10 20 GICv3 30 Level arch_timer\n 12: 1 1 GICv3 40 Level eth0\nIPI0: 5 5 Rescheduling interrupts\n";
        let b = "   CPU0 CPU1\n 11: 60 20 GICv3 30 Level arch_timer\n 12: 2 1 GICv3 40 Level eth0\nIPI0: 9 5 Rescheduling interrupts\n";
        let r = rates(
            &parse_snapshot(a, "", ""),
            &parse_snapshot(b, "", ""),
            Duration::from_secs(1),
        );
        let cpu0 = r.cpu(0).unwrap();
        assert_eq!((cpu0.local_timer, cpu0.device_irqs, cpu0.ipis), (50, 1, 4));
        assert_eq!(cpu0.steal_permille, None);
    }

    #[test]
    fn lines_that_do_not_parse_are_left_out() {
        let t = parse_table_leniently(
            "  CPU0 CPU1\nnonsense\n 5: 1 2 IO-APIC x\nLOC: 99999999999999999999999 1\n",
        );
        assert_eq!(t.cpus, vec![0, 1]);
        assert_eq!(t.lines.len(), 1);
        assert_eq!(
            parse_table_leniently("garbage\n 5: 1\n"),
            InterruptsTable::default()
        );
        let s = parse_steal_leniently("cpu0 1 2\ncpu1 1 1 1 1 1 1 1 1 0 0\ncpux 1\n");
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].cpu, 1);
    }

    #[test]
    fn a_fixture_root_is_read_through_root() {
        // dev-vm was captured without /proc/softirqs: that part is empty, the rest is read.
        let root = Root::new(tame_testing::committed_fixture("dev-vm"));
        let s = root.activity_snapshot();
        assert_eq!(s.interrupts.cpus, vec![0, 1]);
        assert_eq!(s.steal.len(), 2);
        assert!(s.softirqs.lines.is_empty());
        let r = rates(&s, &s, Duration::from_secs(1));
        assert_eq!(r.cpus.len(), 2);
        assert_eq!(r.cpu(1).unwrap().device_irqs, 0);
    }

    proptest! {
        #[test]
        fn odd_text_never_panics(a in "(\\PC{0,40}\n){0,6}", b in "(\\PC{0,40}\n){0,6}", ms in 0u64..5000) {
            let x = parse_snapshot(&a, &b, &a);
            let y = parse_snapshot(&b, &a, &b);
            let _ = rates(&x, &y, Duration::from_millis(ms));
        }
    }
}
