//! How much longer the work's computation takes than its budget: the busy loop's gaps,
//! less what a SCHED_FIFO task would not lose. Other tasks (class `thread`, and workqueue
//! items, which run in SCHED_OTHER kworkers) cannot preempt a real-time task, so their
//! time is left out when the gaps were attributed; interrupts, softirqs, timers, IPIs,
//! NMIs and what the guest cannot see (the hypervisor) stay in.

use serde::{Deserialize, Serialize};
use tame_trace::attribute::{AttributedGap, NoiseClass};

/// The interruptions one computation of `budget_ns` suffered, measured by the busy loop.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stretch {
    /// The computation length it was measured for (the requirement's budget).
    pub budget_ns: u64,
    /// The most time lost within one computation of `budget_ns`, on the worst CPU.
    pub worst_ns: u64,
    /// Share of the run time those interruptions took (the worst CPU's).
    pub mean_share_percent: f64,
    /// Other tasks' time was left out; false when the gaps were not attributed (every
    /// gap then counts, which over-states a shared CPU's interruptions).
    pub tasks_excluded: bool,
    /// The detector dropped gaps it had no room for: the figures are a lower bound.
    pub incomplete: bool,
}

impl Stretch {
    /// From each measured CPU's run time and gaps (`gaps_dropped` > 0 on any CPU:
    /// incomplete).
    pub fn measure(
        budget_ns: u64,
        cpus: &[(u64, &[AttributedGap])],
        attributed: bool,
        gaps_dropped: u64,
    ) -> Self {
        let mut s = Stretch {
            budget_ns,
            tasks_excluded: attributed,
            incomplete: gaps_dropped > 0,
            ..Stretch::default()
        };
        for &(run_ns, gaps) in cpus {
            let lost: Vec<(u64, u64)> = gaps
                .iter()
                .map(|g| (g.start_ns, lost_ns(g, attributed)))
                .filter(|&(_, l)| l > 0)
                .collect();
            s.worst_ns = s.worst_ns.max(worst_within(&lost, budget_ns));
            let total: u64 = lost.iter().map(|&(_, l)| l).sum();
            let share = total as f64 * 100.0 / run_ns.max(1) as f64;
            s.mean_share_percent = s.mean_share_percent.max(share);
        }
        s
    }

    /// What a computation of `budget_ns` is expected to lose: the worst seen when no
    /// miss is tolerated (for a longer budget, the worst of each budget-long piece —
    /// an upper bound), else the average share.
    pub fn for_budget(&self, budget_ns: u64, hard: bool) -> u64 {
        if hard && self.budget_ns > 0 {
            let pieces = budget_ns.div_ceil(self.budget_ns).max(1);
            self.worst_ns.saturating_mul(pieces)
        } else {
            (budget_ns as f64 * self.mean_share_percent / 100.0).round() as u64
        }
    }
}

/// The part of a gap a SCHED_FIFO task would lose too.
fn lost_ns(gap: &AttributedGap, attributed: bool) -> u64 {
    if !attributed {
        return gap.duration_ns;
    }
    let by_tasks: u64 = gap
        .shares
        .iter()
        .filter(|s| matches!(s.class, NoiseClass::Thread | NoiseClass::Workqueue))
        .map(|s| s.net_ns)
        .sum();
    gap.duration_ns.saturating_sub(by_tasks)
}

/// The most time lost by a computation needing `budget_ns` of CPU, started anywhere:
/// the worst start is just before a gap, and the computation takes in every later gap
/// that begins before it has had its budget. `lost` is (start, lost ns), ascending.
fn worst_within(lost: &[(u64, u64)], budget_ns: u64) -> u64 {
    let (mut worst, mut end, mut sum) = (0, 0, 0u64);
    for i in 0..lost.len() {
        if end < i {
            (end, sum) = (i, 0);
        }
        // Gaps i..end are taken in; the CPU time had before gap `end` starts decides.
        while end < lost.len() {
            let wall = lost[end].0.saturating_sub(lost[i].0);
            if end > i && wall.saturating_sub(sum) >= budget_ns {
                break;
            }
            sum += lost[end].1;
            end += 1;
        }
        worst = worst.max(sum);
        sum -= lost[i].1;
    }
    worst
}

#[cfg(test)]
mod tests {
    use super::*;
    use tame_trace::attribute::Share;

    fn gap(start_ns: u64, duration_ns: u64) -> AttributedGap {
        AttributedGap {
            start_ns,
            duration_ns,
            shares: Vec::new(),
            unexplained_ns: duration_ns,
        }
    }

    #[test]
    fn a_computation_takes_in_every_gap_that_starts_before_its_budget_is_had() {
        // Budget 100: from the gap at 0 (lost 30), CPU time before the gap at 120 is 90,
        // so it is taken in too (lost 40): 70. The gap at 300 comes after 100 of CPU.
        let lost = [(0, 30), (120, 40), (300, 50)];
        assert_eq!(worst_within(&lost, 100), 70);
        // A short budget takes one gap at a time.
        assert_eq!(worst_within(&lost, 10), 50);
        // A long one takes them all.
        assert_eq!(worst_within(&lost, 1_000), 120);
        assert_eq!(worst_within(&[], 100), 0);
    }

    #[test]
    fn other_tasks_time_is_not_lost_by_a_real_time_task() {
        let mut g = gap(0, 1_000);
        g.shares = vec![
            Share {
                class: NoiseClass::Thread,
                source: "stress-ng-cpu".into(),
                net_ns: 900,
            },
            Share {
                class: NoiseClass::Irq,
                source: "virtio0".into(),
                net_ns: 60,
            },
        ];
        g.unexplained_ns = 40;
        assert_eq!(lost_ns(&g, true), 100);
        // Unattributed, the whole gap counts.
        assert_eq!(lost_ns(&g, false), 1_000);
        let s = Stretch::measure(500, &[(10_000, std::slice::from_ref(&g))], true, 0);
        assert_eq!(s.worst_ns, 100);
        assert!((s.mean_share_percent - 1.0).abs() < 1e-9);
        assert!(s.tasks_excluded && !s.incomplete);
    }

    #[test]
    fn hard_requirements_take_the_worst_soft_ones_the_average() {
        let s = Stretch {
            budget_ns: 100_000,
            worst_ns: 20_000,
            mean_share_percent: 2.0,
            ..Stretch::default()
        };
        assert_eq!(s.for_budget(100_000, true), 20_000);
        assert_eq!(s.for_budget(50_000, true), 20_000);
        // Three budget-long pieces, each at worst.
        assert_eq!(s.for_budget(250_000, true), 60_000);
        assert_eq!(s.for_budget(100_000, false), 2_000);
    }
}
