//! The best partition tame can build here, beyond CPUs: each knob the isolated CPUs get
//! (cpufreq governor, lockup watchdogs, idle limit, an idle SMT sibling), why it was set
//! or why it could not be, and — after the rounds — what the busy loop saw of what it
//! removes, shared against partitioned. `--minimal` leaves them out, so the two
//! partitions can be compared. Boot parameters cannot be set at run time: the ones the
//! partitioned rounds give a measured reason for are listed with that reason.

use serde::{Deserialize, Serialize};
use tame_host::power::governor_path;
use tame_host::sched::WATCHDOG_CPUMASK;
use tame_host::{CpuList, HostModel};
use tame_partition::Role;
use tame_trace::attribute::{NoiseClass, SourceTally};

use crate::error::{invalid, AssessError};
use crate::layout::Layout;
use crate::rounds::{Configuration, Round};

/// The governor that keeps a CPU at its highest frequency.
const PERFORMANCE: &str = "performance";
/// The hrtimer callback of the soft- and hard-lockup watchdogs.
const WATCHDOG_TIMER: &str = "watchdog_timer_fn";

/// Which knob.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KnobName {
    Governor,
    Watchdog,
    Idle,
    Smt,
}

impl std::fmt::Display for KnobName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            KnobName::Governor => "governor",
            KnobName::Watchdog => "watchdog",
            KnobName::Idle => "idle",
            KnobName::Smt => "smt",
        })
    }
}

/// One knob of the isolated partition.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Knob {
    pub name: KnobName,
    /// What it is set to, or would be.
    pub setting: String,
    /// Set in the applied spec.
    pub applied: bool,
    /// Why it is set, or why not here.
    pub why: String,
    /// What the rounds measured of what it removes; `None` where nothing can be seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<String>,
}

/// A boot parameter the partitioned rounds give a measured reason for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RebootOption {
    pub parameter: String,
    pub reason: String,
}

/// Add the knobs to the generated partition (not with `minimal`): the spec, its text and
/// its warnings are redrawn; the knobs say what was set and why.
pub fn strengthen(
    model: &HostModel,
    layout: &mut Layout,
    minimal: bool,
) -> Result<Vec<Knob>, AssessError> {
    let cpus = layout.isolated.clone();
    let mut knobs = vec![
        governor(model, &cpus),
        watchdog(model, &cpus),
        idle(layout),
        smt(model, layout),
    ];
    if minimal {
        for k in &mut knobs {
            if matches!(k.name, KnobName::Governor | KnobName::Watchdog) && k.applied {
                k.applied = false;
                k.why = format!("--minimal: left out ({})", k.why);
            }
        }
        return Ok(knobs);
    }
    let Some(rt) = layout
        .spec
        .partitions
        .iter_mut()
        .find(|p| p.role == Role::Isolated && p.name == layout.partition)
    else {
        return Ok(knobs);
    };
    for k in knobs.iter().filter(|k| k.applied) {
        match k.name {
            KnobName::Governor => rt.governor = Some(PERFORMANCE.to_string()),
            KnobName::Watchdog => rt.watchdog = Some(false),
            _ => {}
        }
    }
    let header = layout.spec_text.lines().next().unwrap_or("").to_string();
    layout.spec_text = format!("{header}\n{}", layout.spec.to_toml());
    layout.warnings = tame_partition::plan(&layout.spec, model)
        .map_err(|e| invalid(format!("the generated spec with its knobs cannot be applied here: {e} — assess with --minimal (the partition without them)")))?
        .warnings;
    Ok(knobs)
}

/// `performance` on every isolated CPU where cpufreq offers it: a CPU that changes
/// frequency under the work changes how long the work takes.
fn governor(model: &HostModel, cpus: &CpuList) -> Knob {
    let setting = format!("cpufreq governor {PERFORMANCE} on CPU {cpus}");
    let knobs = &model.knobs;
    let without: CpuList =
        CpuList::from_cpus(cpus.iter().filter(|&c| !knobs.exists(&governor_path(c))));
    let not_offered: CpuList = CpuList::from_cpus(cpus.iter().filter(|&c| {
        knobs
            .available_governors(c)
            .is_some_and(|av| !av.iter().any(|g| g == PERFORMANCE))
    }));
    let (applied, why) = if !without.is_empty() {
        (false, format!("CPU {without} has no cpufreq: the frequency is not the guest's to set (a VM's vCPU runs at what the host gives it; on bare metal, a BIOS without frequency scaling runs at a fixed one)"))
    } else if !not_offered.is_empty() {
        (false, format!("cpufreq on CPU {not_offered} does not offer {PERFORMANCE}: the highest fixed frequency is the driver's to give"))
    } else {
        (true, "the CPU stays at its highest frequency: a frequency change under the work changes how long it takes".to_string())
    };
    Knob {
        name: KnobName::Governor,
        setting,
        applied,
        why,
        effect: None,
    }
}

/// The isolated CPUs out of kernel.watchdog_cpumask where the watchdogs run there.
fn watchdog(model: &HostModel, cpus: &CpuList) -> Knob {
    let setting = format!("CPU {cpus} out of kernel.watchdog_cpumask");
    let nmi = match model.sched.nmi_watchdog {
        Some(true) => "nmi_watchdog is on, one setting for the whole machine: left alone, the mask stops the hard-lockup detector on these CPUs too",
        Some(false) => "nmi_watchdog is off here (one setting for the whole machine)",
        None => "nmi_watchdog is not offered by this kernel",
    };
    let running = model
        .sched
        .watchdog_cpus
        .as_ref()
        .map(|w| w.intersection(cpus));
    let (applied, why) = if !model.knobs.exists(WATCHDOG_CPUMASK) {
        (false, "this kernel has no kernel.watchdog_cpumask (built without the lockup detectors): none runs here".to_string())
    } else if model.sched.watchdog == Some(false) {
        (
            false,
            format!("the lockup watchdogs are off on every CPU (kernel.watchdog = 0); {nmi}"),
        )
    } else if running.as_ref().is_some_and(CpuList::is_empty) {
        (
            false,
            format!("the lockup watchdogs do not run on CPU {cpus} already; {nmi}"),
        )
    } else {
        (true, format!("the soft-lockup watchdog's timer fires every {} s on each CPU in the mask and wakes the stop-class migration thread there, which preempts any real-time task; {nmi}", watchdog_period_s(model)))
    };
    Knob {
        name: KnobName::Watchdog,
        setting,
        applied,
        why,
        effect: None,
    }
}

/// The soft-lockup watchdog's sample period: 2/5 of watchdog_thresh (10 s by default).
fn watchdog_period_s(model: &HostModel) -> String {
    let thresh = model.sched.watchdog_thresh_s.unwrap_or(10);
    let tenths = u64::from(thresh) * 4;
    format!("{}.{}", tenths / 10, tenths % 10)
        .trim_end_matches(".0")
        .to_string()
}

/// The idle limit the layout chose (it needs a cpuidle driver).
fn idle(layout: &Layout) -> Knob {
    let set = layout
        .spec
        .partitions
        .iter()
        .find(|p| p.name == layout.partition)
        .and_then(|p| p.idle.clone());
    let (applied, why) = match &set {
        Some(_) => (true, "an idle CPU polls instead of entering a sleep state, so a wakeup does not wait for it to leave one".to_string()),
        None => (false, "no cpuidle driver: an idle CPU halts whatever the limit (a vCPU exits to the hypervisor); boot with idle=poll, or let the work spin until its next period".to_string()),
    };
    Knob {
        name: KnobName::Idle,
        setting: format!(
            "idle = \"{}\" on CPU {}",
            set.as_deref().unwrap_or("poll"),
            layout.isolated
        ),
        applied,
        why,
        effect: None,
    }
}

/// The SMT siblings of the work's CPUs: idle in the partition (the layout's choice), or
/// shared.
fn smt(model: &HostModel, layout: &Layout) -> Knob {
    let work = layout.work();
    let siblings = CpuList::from_cpus(
        work.iter()
            .flat_map(|c| model.cpus.online_siblings(c).iter().collect::<Vec<_>>()),
    )
    .difference(work);
    let idle = layout.isolated.difference(work);
    let (applied, why) = if siblings.is_empty() {
        (
            false,
            "no SMT sibling shares a core with the work's CPUs here (one thread per core)"
                .to_string(),
        )
    } else if idle == siblings {
        (true, "no load shares the work's cores: their execution units and L1/L2 caches are the work's alone".to_string())
    } else {
        (false, format!("sibling(s) {siblings} are not left idle: system work may share the core (--share-core, --minimal, or no whole core to spare)"))
    };
    Knob {
        name: KnobName::Smt,
        setting: if siblings.is_empty() {
            format!("the SMT siblings of CPU {work} idle in the partition")
        } else {
            format!("SMT sibling(s) {siblings} of CPU {work} idle in the partition")
        },
        applied,
        why,
        effect: None,
    }
}

/// Every source the busy loop saw on `cpus` in the rounds of `configuration` (one entry
/// per round and CPU), and the busy loop's run time there.
fn seen<'a>(
    rounds: &'a [Round],
    configuration: Configuration,
    cpus: &CpuList,
) -> (Vec<&'a SourceTally>, u64) {
    let measured = rounds
        .iter()
        .filter(|r| r.configuration == configuration)
        .filter_map(|r| r.results.noise.as_ref())
        .flat_map(|noise| noise.noise.cpus.iter().filter(|c| cpus.contains(c.cpu)));
    let (mut all, mut run_ns) = (Vec::new(), 0);
    for cpu in measured {
        run_ns += cpu.run_ns;
        all.extend(cpu.sources.iter());
    }
    (all, run_ns)
}

/// Occurrences of the sources `matches` accepts, and their total time.
fn count(sources: &[&SourceTally], matches: impl Fn(&SourceTally) -> bool) -> (u64, u64) {
    sources
        .iter()
        .filter(|s| matches(s))
        .fold((0, 0), |(n, t), s| {
            (n + s.tally.count, t + s.tally.total_ns)
        })
}

/// `3 in 6.9 s (0.43/s, 12.1 µs in all)`.
fn rate(n: u64, total_ns: u64, run_ns: u64) -> String {
    if run_ns == 0 {
        return "not measured".to_string();
    }
    let per_s = n as f64 * 1e9 / run_ns as f64;
    format!(
        "{n} in {} of busy loop ({per_s:.2}/s, {} in all)",
        crate::requirement::human(run_ns),
        crate::requirement::human(total_ns)
    )
}

fn is_watchdog(s: &SourceTally) -> bool {
    s.class == NoiseClass::Timer && s.source == WATCHDOG_TIMER
}

/// What each knob removed, as the busy loop on the work's CPUs saw it shared and
/// partitioned (it sees what interrupts it for longer than its gap threshold).
pub fn measure_effects(knobs: &mut [Knob], rounds: &[Round], cpus: &CpuList) {
    let (shared, shared_ns) = seen(rounds, Configuration::Shared, cpus);
    let (part, part_ns) = seen(rounds, Configuration::Partitioned, cpus);
    if shared_ns == 0 || part_ns == 0 {
        return;
    }
    for k in knobs.iter_mut() {
        k.effect = match k.name {
            KnobName::Watchdog => {
                let (sn, st) = count(&shared, is_watchdog);
                let (pn, pt) = count(&part, is_watchdog);
                Some(format!(
                    "{WATCHDOG_TIMER} on CPU {cpus}: shared {}, partitioned {}",
                    rate(sn, st, shared_ns),
                    rate(pn, pt, part_ns)
                ))
            }
            _ => None,
        };
    }
}

/// The boot parameters the partitioned rounds give a reason for: what still interrupted
/// the work on its CPUs that only a boot parameter removes.
pub fn reboot_options(model: &HostModel, rounds: &[Round], cpus: &CpuList) -> Vec<RebootOption> {
    let (part, run_ns) = seen(rounds, Configuration::Partitioned, cpus);
    if run_ns == 0 {
        return Vec::new();
    }
    let boot = &model.kernel.boot;
    let covered = |list: Option<&CpuList>| list.is_some_and(|l| cpus.is_subset(l));
    let mut out = Vec::new();
    let tick = |s: &SourceTally| {
        s.class == NoiseClass::Tick
            || (s.class == NoiseClass::Timer && s.source == "tick_sched_timer")
    };
    let (n, t) = count(&part, tick);
    if n > 0 && !covered(boot.nohz_full.as_ref()) {
        out.push(RebootOption {
            parameter: format!("nohz_full={cpus}"),
            reason: format!(
                "the scheduler tick still interrupted the work in the partition: {} — with one task on the CPU, nohz_full stops it{}",
                rate(n, t, run_ns),
                match model.kernel.supports_nohz_full() {
                    Some(false) => " (this kernel is built without CONFIG_NO_HZ_FULL: it takes another kernel too)",
                    _ => "",
                }
            ),
        });
    }
    let rcu = |s: &SourceTally| {
        (s.class == NoiseClass::Softirq && s.source.eq_ignore_ascii_case("rcu"))
            || (s.class == NoiseClass::Thread && s.source.starts_with("rcu"))
    };
    let (n, t) = count(&part, rcu);
    let rcu_offloaded = boot.rcu_nocbs.as_ref().is_some_and(|l| match l {
        None => true,
        Some(l) => cpus.is_subset(l),
    });
    if n > 0 && !rcu_offloaded {
        out.push(RebootOption {
            parameter: format!("rcu_nocbs={cpus}"),
            reason: format!(
                "RCU callbacks still ran on the work's CPU: {} — rcu_nocbs moves them to kernel threads on the system CPUs",
                rate(n, t, run_ns)
            ),
        });
    }
    let managed: Vec<String> = model
        .irqs
        .irqs
        .iter()
        .filter(|i| {
            i.managed
                && i.fires_on()
                    .is_some_and(|c| !c.intersection(cpus).is_empty())
        })
        .map(|i| format!("irq {} ", i.number))
        .collect();
    let (n, t) = count(&part, |s| {
        s.class == NoiseClass::Irq && managed.iter().any(|m| s.source.starts_with(m))
    });
    let managed_isolated = boot
        .isolcpus
        .as_ref()
        .is_some_and(|i| i.flags.iter().any(|f| f == "managed_irq") && cpus.is_subset(&i.cpus));
    if n > 0 && !managed_isolated {
        out.push(RebootOption {
            parameter: format!("isolcpus=managed_irq,domain,{cpus}"),
            reason: format!(
                "kernel-managed interrupts still fired on the work's CPU: {} — they cannot move at run time; at boot, managed_irq keeps those that may fire elsewhere off it",
                rate(n, t, run_ns)
            ),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tame_testing::synthetic::SyntheticHost;

    fn model(fixture: &str) -> HostModel {
        HostModel::read(&tame_host::Root::new(tame_testing::committed_fixture(
            fixture,
        )))
    }

    fn choice(count: u32) -> crate::layout::Choice<'static> {
        crate::layout::Choice {
            count,
            ..Default::default()
        }
    }

    #[test]
    fn the_watchdog_is_taken_off_and_the_governor_needs_cpufreq() {
        let m = model("dev-vm");
        let mut l = crate::layout::choose(&m, &choice(1)).unwrap();
        let knobs = strengthen(&m, &mut l, false).unwrap();
        let k = |n: KnobName| knobs.iter().find(|k| k.name == n).unwrap();
        assert!(
            !k(KnobName::Governor).applied,
            "{:?}",
            k(KnobName::Governor)
        );
        assert!(
            k(KnobName::Governor).why.contains("has no cpufreq"),
            "{:?}",
            k(KnobName::Governor)
        );
        assert!(k(KnobName::Watchdog).applied, "{:?}", k(KnobName::Watchdog));
        assert!(l.spec_text.contains("watchdog = false"), "{}", l.spec_text);
        assert!(!l.spec_text.contains("governor"), "{}", l.spec_text);
        // The header stays, the spec text is the typed spec's view.
        assert!(
            l.spec_text.starts_with("# 1 isolated CPU for"),
            "{}",
            l.spec_text
        );
        assert_eq!(
            tame_partition::Spec::parse("t", &l.spec_text).unwrap(),
            l.spec
        );
    }

    #[test]
    fn minimal_keeps_todays_partition_and_says_what_it_left_out() {
        let m = model("dev-vm");
        let mut l = crate::layout::choose(&m, &choice(1)).unwrap();
        let before = l.clone();
        let knobs = strengthen(&m, &mut l, true).unwrap();
        assert_eq!(l, before);
        let w = knobs.iter().find(|k| k.name == KnobName::Watchdog).unwrap();
        assert!(
            !w.applied && w.why.starts_with("--minimal: left out"),
            "{w:?}"
        );
    }

    #[test]
    fn a_host_with_performance_gets_it() {
        let (_dir, m) = SyntheticHost::rt_8cpu().unpartitioned().model();
        let mut l = crate::layout::choose(&m, &choice(2)).unwrap();
        let knobs = strengthen(&m, &mut l, false).unwrap();
        let g = knobs.iter().find(|k| k.name == KnobName::Governor).unwrap();
        assert!(g.applied, "{g:?}");
        assert!(
            l.spec_text.contains("governor = \"performance\""),
            "{}",
            l.spec_text
        );
    }

    #[test]
    fn an_smt_sibling_is_left_idle_unless_the_core_is_shared() {
        let (_dir, m) = SyntheticHost::two_socket_smt().unpartitioned().model();
        let mut l = crate::layout::choose(&m, &choice(1)).unwrap();
        let knobs = strengthen(&m, &mut l, false).unwrap();
        let smt = knobs.iter().find(|k| k.name == KnobName::Smt).unwrap();
        assert!(smt.applied, "{smt:?}");
        assert_eq!(
            smt.setting,
            "SMT sibling(s) 23 of CPU 47 idle in the partition"
        );
        let shared = crate::layout::Choice {
            share_core: true,
            ..choice(1)
        };
        let mut l = crate::layout::choose(&m, &shared).unwrap();
        let knobs = strengthen(&m, &mut l, false).unwrap();
        let smt = knobs.iter().find(|k| k.name == KnobName::Smt).unwrap();
        assert!(!smt.applied && smt.why.contains("not left idle"), "{smt:?}");
    }
}
