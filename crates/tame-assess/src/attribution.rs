//! What took the work's time, and which fixes remove any of it: the verdict's next step
//! follows from this, so it never advises a reboot against stalls the hypervisor makes,
//! nor a fix that removes nothing the measurement saw (kernel lockdown removes no latency
//! at all: it only stops tame from changing some knobs).

use serde::{Deserialize, Deserializer, Serialize};
use tame_check::{CheckReport, Severity};
use tame_trace::attribute::NoiseClass;

use crate::figures::{NoiseFigures, Source};

/// A fix the check found that needs a reboot, with the finding it answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RebootFix {
    /// The check finding's id (`kernel.nohz_full`); empty in reports before it was kept.
    pub finding: String,
    pub fix: String,
}

impl<'de> Deserialize<'de> for RebootFix {
    /// Reports before the finding was kept hold the fix text alone.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Stored {
            Text(String),
            Fix { finding: String, fix: String },
        }
        Ok(match Stored::deserialize(d)? {
            Stored::Text(fix) => RebootFix {
                finding: String::new(),
                fix,
            },
            Stored::Fix { finding, fix } => RebootFix { finding, fix },
        })
    }
}

impl RebootFix {
    /// The fixes needing a reboot among the check's warnings and failures, worst first,
    /// leaving out those that remove no latency.
    pub fn from_check(check: &CheckReport) -> Vec<RebootFix> {
        let mut serious: Vec<_> = check
            .findings
            .iter()
            .filter(|f| f.severity >= Severity::Warn && f.needs_reboot)
            .filter(|f| bears_on_latency(&f.id))
            .collect();
        serious.sort_by_key(|f| std::cmp::Reverse(f.severity));
        serious
            .iter()
            .filter_map(|f| {
                f.fix.clone().map(|fix| RebootFix {
                    finding: f.id.clone(),
                    fix,
                })
            })
            .collect()
    }
}

/// What a reboot fix removes from the work's CPU, by the check finding it answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Removes {
    /// The scheduler tick (a kernel with NO_HZ_FULL, `nohz_full=`).
    Tick,
    /// RCU callbacks in softirq (`rcu_nocbs=`).
    RcuCallbacks,
    /// Interrupt handlers, softirqs and kernel sections that run with preemption off
    /// (PREEMPT_RT makes them preemptible threads).
    KernelSections,
    /// Other tasks the scheduler moves there (`isolcpus=domain`).
    Tasks,
    /// Kernel-managed device interrupts (`isolcpus=managed_irq`).
    ManagedIrqs,
    /// No latency at all (lockdown only stops tame from writing debugfs knobs).
    Nothing,
    /// A finding this list does not know (a malformed boot parameter, the clocksource, an
    /// old report): whatever the guest does.
    GuestWork,
}

fn removes(finding: &str) -> Removes {
    match finding {
        "kernel.nohz_full" | "cpus.nohz_full" => Removes::Tick,
        "cpus.rcu_nocbs" => Removes::RcuCallbacks,
        "kernel.preempt_rt" => Removes::KernelSections,
        "cpus.isolcpus" => Removes::Tasks,
        "irqs.managed" => Removes::ManagedIrqs,
        "kernel.lockdown" => Removes::Nothing,
        _ => Removes::GuestWork,
    }
}

/// Whether the check finding `id` can have anything to do with the work's latency:
/// every one but lockdown, which limits what tame may set, not what interrupts the work.
pub fn bears_on_latency(id: &str) -> bool {
    removes(id) != Removes::Nothing
}

impl Removes {
    /// Whether the busy loop saw `s`, a source this removes.
    fn seen_in(self, s: &Source) -> bool {
        use NoiseClass as C;
        match self {
            Removes::Tick => {
                s.class == C::Tick || (s.class == C::Timer && s.source.contains("tick"))
            }
            Removes::RcuCallbacks => s.class == C::Softirq && s.source == "RCU",
            Removes::KernelSections => matches!(
                s.class,
                C::Irq | C::Ipi | C::Softirq | C::Workqueue | C::Thread
            ),
            Removes::Tasks => matches!(s.class, C::Thread | C::Workqueue),
            Removes::ManagedIrqs => s.class == C::Irq,
            Removes::Nothing => false,
            Removes::GuestWork => s.class != C::Unexplained,
        }
    }
}

/// What took the busy loop's time on the work's CPUs, split into what the guest's own
/// events explain and what none does (the hypervisor, SMIs, hardware).
#[derive(Clone, Debug)]
pub struct Attribution<'a> {
    /// Share of the run every guest source took together, percent.
    pub guest_share: f64,
    /// Share no guest event explains, percent, and its longest gap.
    pub beyond_share: f64,
    pub beyond_max_ns: u64,
    guest: Vec<&'a Source>,
}

impl<'a> Attribution<'a> {
    /// `None` when the gaps were not attributed (no tracefs): then nothing is known of
    /// what took the time.
    pub fn of(noise: Option<&'a NoiseFigures>) -> Option<Self> {
        let n = noise.filter(|n| n.attributed)?;
        let guest: Vec<&Source> = n
            .sources
            .iter()
            .filter(|s| s.class != NoiseClass::Unexplained && s.count > 0)
            .collect();
        Some(Attribution {
            guest_share: guest.iter().map(|s| s.share_percent).sum(),
            beyond_share: n.unexplained_share_percent.unwrap_or(0.0),
            beyond_max_ns: n.unexplained_max_ns.unwrap_or(0),
            guest,
        })
    }

    /// Whatever no guest event explains took at least as much as every guest source
    /// together: no guest setting, boot parameter or kernel gives much margin back.
    pub fn beyond_the_guest(&self) -> bool {
        self.beyond_share > 0.0 && self.beyond_share >= self.guest_share
    }

    /// The fixes among `fixes` that remove a source the busy loop saw.
    pub fn fixes_for<'f>(&self, fixes: &'f [RebootFix]) -> Vec<&'f str> {
        fixes
            .iter()
            .filter(|f| {
                let removes = removes(&f.finding);
                self.guest.iter().any(|s| removes.seen_in(s))
            })
            .map(|f| f.fix.as_str())
            .collect()
    }
}

/// Without attribution: every fix that removes any latency.
pub fn latency_fixes(fixes: &[RebootFix]) -> Vec<&str> {
    fixes
        .iter()
        .filter(|f| bears_on_latency(&f.finding))
        .map(|f| f.fix.as_str())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(class: NoiseClass, name: &str, share: f64) -> Source {
        Source {
            class,
            source: name.into(),
            count: 10,
            total_ns: 1,
            max_ns: 1,
            share_percent: share,
        }
    }

    fn noise(sources: Vec<Source>) -> NoiseFigures {
        NoiseFigures {
            share_percent: 1.0,
            max_gap_ns: 1,
            attributed: true,
            attribution_note: None,
            unexplained_share_percent: Some(0.0),
            unexplained_max_ns: Some(0),
            sources,
            interrupted: false,
            stretch: None,
            run_ns: 1,
        }
    }

    fn fix(finding: &str) -> RebootFix {
        RebootFix {
            finding: finding.into(),
            fix: format!("fix {finding}"),
        }
    }

    #[test]
    fn a_fix_is_advised_only_for_a_source_the_busy_loop_saw() {
        let fixes = [
            fix("kernel.preempt_rt"),
            fix("kernel.nohz_full"),
            fix("kernel.lockdown"),
            fix("cpus.rcu_nocbs"),
        ];
        let tick_only = noise(vec![source(NoiseClass::Tick, "local_timer", 0.1)]);
        let a = Attribution::of(Some(&tick_only)).unwrap();
        assert_eq!(a.fixes_for(&fixes), vec!["fix kernel.nohz_full"]);
        let rcu = noise(vec![source(NoiseClass::Softirq, "RCU", 0.1)]);
        assert_eq!(
            Attribution::of(Some(&rcu)).unwrap().fixes_for(&fixes),
            vec!["fix kernel.preempt_rt", "fix cpus.rcu_nocbs"]
        );
        // Lockdown removes nothing, attributed or not.
        assert!(!latency_fixes(&fixes).contains(&"fix kernel.lockdown"));
        assert!(!bears_on_latency("kernel.lockdown") && bears_on_latency("virt.hypervisor"));
    }

    #[test]
    fn old_reports_hold_the_fix_text_alone() {
        let f: Vec<RebootFix> =
            serde_json::from_str(r#"["boot with rcu_nocbs=0", {"finding": "x", "fix": "y"}]"#)
                .unwrap();
        assert_eq!(f[0].finding, "");
        assert_eq!(f[0].fix, "boot with rcu_nocbs=0");
        assert_eq!(
            f[1],
            RebootFix {
                finding: "x".into(),
                fix: "y".into()
            }
        );
    }
}
