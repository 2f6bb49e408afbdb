//! How much longer the work's computation takes than its budget: the busy loop's gaps,
//! less what the work would not lose. The detector runs at the lowest real-time priority,
//! so its gaps hold every task above it; the work runs higher (SCHED_FIFO at
//! `MEASURING_PRIORITY`), and a task that cannot preempt it waits instead of taking its
//! time. So, when the gaps were attributed, what cannot preempt a task of the work's
//! kernel priority is left out ([`Share::can_preempt`]): lower- and equal-priority
//! threads and workqueue items (SCHED_OTHER kworkers). Higher-priority and deadline
//! threads, the stop class (`migration/N`), interrupts, softirqs, timers, IPIs, NMIs and
//! what the guest cannot see (the hypervisor, also inside a handler) stay in.

use serde::{Deserialize, Serialize};
use tame_rt::Policy;
use tame_trace::attribute::AttributedGap;
#[cfg(doc)]
use tame_trace::attribute::Share;

/// The interruptions one computation of `budget_ns` suffered, measured by the busy loop.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stretch {
    /// The computation length it was measured for (the requirement's budget).
    pub budget_ns: u64,
    /// The most time lost within one computation of `budget_ns`, on the worst CPU.
    pub worst_ns: u64,
    /// Share of the run time those interruptions took (the worst CPU's).
    pub mean_share_percent: f64,
    /// Tasks that cannot preempt the work had their time left out; false when the gaps
    /// were not attributed (every gap then counts, which over-states a shared CPU's
    /// interruptions).
    pub tasks_excluded: bool,
    /// The detector dropped gaps it had no room for: the figures are a lower bound.
    pub incomplete: bool,
}

impl Stretch {
    /// From each measured CPU's run time and gaps (`gaps_dropped` > 0 on any CPU:
    /// incomplete), for work of kernel priority `work_prio` ([`kernel_priority`]).
    pub fn measure(
        budget_ns: u64,
        work_prio: i32,
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
                .map(|g| (g.start_ns, lost_ns(g, work_prio, attributed)))
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

/// The kernel's priority number of a task with this policy and static priority, which
/// [`Share::can_preempt`] compares (lower preempts): -1 for deadline, 99 − priority for
/// fifo and rr, 120 (nice 0) for the others.
pub fn kernel_priority(policy: Policy, priority: i32) -> i32 {
    match policy {
        Policy::Deadline => -1,
        Policy::Fifo | Policy::Rr => 99 - priority.clamp(1, 99),
        Policy::Other => 120,
    }
}

/// The part of a gap a task of kernel priority `work_prio` would lose too.
fn lost_ns(gap: &AttributedGap, work_prio: i32, attributed: bool) -> u64 {
    if !attributed {
        return gap.duration_ns;
    }
    let waits: u64 = gap
        .shares
        .iter()
        .filter(|s| !s.can_preempt(work_prio))
        .map(|s| s.net_ns)
        .sum();
    gap.duration_ns.saturating_sub(waits)
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
    use tame_bench::engine::MEASURING_PRIORITY;
    use tame_trace::attribute::{NoiseClass, Share, Timeline};
    use tame_trace::event::{parse_text, Timestamp};

    /// The work's kernel priority: SCHED_FIFO at `MEASURING_PRIORITY` (95).
    const WORK: i32 = 4;

    #[test]
    fn the_work_runs_at_kernel_priority_four() {
        assert_eq!(kernel_priority(Policy::Fifo, MEASURING_PRIORITY), WORK);
        assert_eq!(kernel_priority(Policy::Rr, 1), 98);
        assert_eq!(kernel_priority(Policy::Deadline, 0), -1);
        assert_eq!(kernel_priority(Policy::Other, 0), 120);
    }

    /// The detector (FIFO 1, kernel 98) on CPU 2 of a recorded run, preempted in one gap
    /// by a FIFO 99 watchdog, a threaded IRQ at FIFO 50, the stop class and a normal
    /// stress task, with the tick and a work item.
    const PREEMPTED: &str = "\
      tame-noise-4242    [002] d..2.   812.000100: sched_switch: prev_comm=tame-noise prev_pid=4242 prev_prio=98 prev_state=R+ ==> next_comm=watchdog-rt next_pid=500 next_prio=0
     watchdog-rt-500     [002] d..2.   812.000200: sched_switch: prev_comm=watchdog-rt prev_pid=500 prev_prio=0 prev_state=S ==> next_comm=irq/36-virtio1 next_pid=311 next_prio=49
  irq/36-virtio1-311     [002] d.h1.   812.000300: local_timer_entry: vector=236
  irq/36-virtio1-311     [002] d.h1.   812.000305: local_timer_exit: vector=236
  irq/36-virtio1-311     [002] d..2.   812.000500: sched_switch: prev_comm=irq/36-virtio1 prev_pid=311 prev_prio=49 prev_state=S ==> next_comm=migration/2 next_pid=27 next_prio=0
     migration/2-27      [002] d..2.   812.000550: sched_switch: prev_comm=migration/2 prev_pid=27 prev_prio=0 prev_state=S ==> next_comm=kworker/2:1 next_pid=61 next_prio=120
     kworker/2:1-61      [002] .....   812.000560: workqueue_execute_start: work struct 00000000b1a3a0c4: function vmstat_update
     kworker/2:1-61      [002] .....   812.000600: workqueue_execute_end: work struct 00000000b1a3a0c4: function vmstat_update
     kworker/2:1-61      [002] d..2.   812.000610: sched_switch: prev_comm=kworker/2:1 prev_pid=61 prev_prio=120 prev_state=I ==> next_comm=stress-ng-cpu next_pid=900 next_prio=120
   stress-ng-cpu-900     [002] d..2.   812.000800: sched_switch: prev_comm=stress-ng-cpu prev_pid=900 prev_prio=120 prev_state=R ==> next_comm=tame-noise next_pid=4242 next_prio=98
";

    #[test]
    fn only_what_can_preempt_the_work_is_lost() {
        let mut events = Vec::new();
        parse_text(PREEMPTED, Timestamp::SecsUsecs, &mut events);
        let gaps = Timeline::build(&events, 4242).attribute(&[tame_trace::Gap {
            start_ns: 812_000_100_000,
            duration_ns: 700_000,
        }]);
        let net = |source: &str| {
            gaps[0]
                .shares
                .iter()
                .find(|s| s.source == source)
                .map(|s| s.net_ns)
        };
        // The recorded shares, so the sum below is checked against real numbers.
        assert_eq!(net("watchdog-rt/500"), Some(100_000));
        assert_eq!(net("irq/36-virtio1/311"), Some(295_000));
        assert_eq!(net("local_timer"), Some(5_000));
        assert_eq!(net("migration/2/27"), Some(50_000));
        assert_eq!(net("kworker/2:1/61"), Some(20_000));
        assert_eq!(net("vmstat_update"), Some(40_000));
        assert_eq!(net("stress-ng-cpu/900"), Some(190_000));
        // The FIFO 99 watchdog, the tick and the migration thread count; the FIFO 50
        // IRQ thread, the kworker, its work item and the stress task wait.
        let s = Stretch::measure(1_000_000, WORK, &[(10_000_000, &gaps[..])], true, 0);
        assert_eq!(s.worst_ns, 100_000 + 5_000 + 50_000);
        // A work below the IRQ thread (FIFO 40, kernel 59) loses its time too.
        let lower = Stretch::measure(1_000_000, 59, &[(10_000_000, &gaps[..])], true, 0);
        assert_eq!(lower.worst_ns, 155_000 + 295_000);
    }

    /// The hypervisor stall inside a tick (the tick is far beyond its median) is lost by
    /// anyone; the tick's usual time too.
    #[test]
    fn a_stall_within_a_handler_is_lost() {
        let mut text = String::new();
        for k in 0..12u64 {
            let at = k * 4_000;
            let end = at + if k == 5 { 3_000 } else { 5 };
            text += &format!(
                "      tame-noise-4242    [002] d.h1.   812.{at:06}: local_timer_entry: vector=236\n      \
                 tame-noise-4242    [002] d.h1.   812.{end:06}: local_timer_exit: vector=236\n"
            );
        }
        let mut events = Vec::new();
        parse_text(&text, Timestamp::SecsUsecs, &mut events);
        let gaps = Timeline::build(&events, 4242).attribute(&[tame_trace::Gap {
            start_ns: 812_020_000_000,
            duration_ns: 3_000_000,
        }]);
        assert_eq!(gaps[0].unexplained_ns, 2_995_000);
        let s = Stretch::measure(1_000_000, WORK, &[(48_000_000, &gaps[..])], true, 0);
        assert_eq!(s.worst_ns, 3_000_000);
    }

    fn gap(start_ns: u64, duration_ns: u64) -> AttributedGap {
        AttributedGap {
            start_ns,
            duration_ns,
            shares: Vec::new(),
            unexplained_ns: duration_ns,
            unexplained_within: Vec::new(),
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
                source: "stress-ng-cpu/900".into(),
                net_ns: 900,
                prio: Some(120),
            },
            Share {
                class: NoiseClass::Irq,
                source: "virtio0".into(),
                net_ns: 60,
                prio: None,
            },
        ];
        g.unexplained_ns = 40;
        assert_eq!(lost_ns(&g, WORK, true), 100);
        // Unattributed, the whole gap counts.
        assert_eq!(lost_ns(&g, WORK, false), 1_000);
        let s = Stretch::measure(500, WORK, &[(10_000, std::slice::from_ref(&g))], true, 0);
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
