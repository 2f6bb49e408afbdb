//! Which client runs now, and until when: EDF over the clients of one CPU, pure logic.
//! Each client has a job per period (its runtime is the budget, the period's end the
//! deadline); the job with the earliest deadline and budget left runs. With Σ shares ≤ 1
//! no job misses (EDF is optimal on one CPU), and slices never overlap: one runs at a time.
//!
//! [`Edf::decide_late`] places the slices as late as every deadline allows (the slack of the
//! EDF schedule from now on), so CPU time a client gets at its waiting priority first
//! counts against its budget: the raised slice only tops the share up.

/// How far ahead slack is checked, in longest periods: with Σ shares ≤ 90 % demand cannot
/// catch up with time beyond this.
const SLACK_HORIZON_PERIODS: u64 = 20;
/// Beyond this many check points slack is taken as zero (plain EDF, as early as possible).
const MAX_CHECK_POINTS: usize = 20_000;

/// One client's state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job {
    pub pid: u32,
    pub runtime_ns: u64,
    pub period_ns: u64,
    /// When the next job is released (and the current one's deadline).
    pub next_release_ns: u64,
    pub budget_ns: u64,
}

/// What to do now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The client to run at the raised priority (None: nobody, all wait).
    pub run: Option<u32>,
    /// When to decide again: the slice's end or the next release, whichever is first.
    pub until_ns: u64,
}

#[derive(Clone, Debug, Default)]
pub struct Edf {
    jobs: Vec<Job>,
}

impl Edf {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn jobs(&self) -> &[Job] {
        &self.jobs
    }

    /// A new client's first job is released now.
    pub fn add(&mut self, pid: u32, runtime_ns: u64, period_ns: u64, now_ns: u64) {
        self.remove(pid);
        self.jobs.push(Job {
            pid,
            runtime_ns,
            period_ns,
            next_release_ns: now_ns + period_ns,
            budget_ns: runtime_ns,
        });
    }

    pub fn remove(&mut self, pid: u32) {
        self.jobs.retain(|j| j.pid != pid);
    }

    /// Release the jobs whose period has begun. Returns the clients whose previous job
    /// ended with budget left (a miss: they got less than their share in that period).
    /// A client more than a period behind (the server was held off) starts afresh:
    /// budget is never accumulated.
    pub fn replenish(&mut self, now_ns: u64, misses: &mut Vec<u32>) {
        for job in &mut self.jobs {
            if now_ns >= job.next_release_ns {
                if job.budget_ns > 0 {
                    misses.push(job.pid);
                }
                let behind = (now_ns - job.next_release_ns) / job.period_ns;
                job.next_release_ns += (behind + 1) * job.period_ns;
                job.budget_ns = job.runtime_ns;
            }
        }
    }

    pub fn decide(&self, now_ns: u64) -> Decision {
        let next_release = self
            .jobs
            .iter()
            .map(|j| j.next_release_ns)
            .min()
            .unwrap_or(u64::MAX);
        let pick = self
            .jobs
            .iter()
            .filter(|j| j.budget_ns > 0)
            .min_by_key(|j| (j.next_release_ns, j.pid));
        match pick {
            Some(j) => Decision {
                run: Some(j.pid),
                until_ns: (now_ns + j.budget_ns).min(next_release),
            },
            None => Decision {
                run: None,
                until_ns: next_release,
            },
        }
    }

    /// How long every client can still wait without any job (current or future) missing its
    /// deadline under EDF: min over deadlines d of d − now − demand(now, d).
    pub fn slack(&self, now_ns: u64) -> u64 {
        let Some(max_period) = self.jobs.iter().map(|j| j.period_ns).max() else {
            return u64::MAX;
        };
        let horizon = now_ns.saturating_add(SLACK_HORIZON_PERIODS * max_period);
        let mut points = Vec::new();
        for j in &self.jobs {
            let mut d = j.next_release_ns;
            while d <= horizon {
                if points.len() >= MAX_CHECK_POINTS {
                    return 0;
                }
                points.push(d);
                d += j.period_ns;
            }
        }
        points
            .into_iter()
            .map(|d| {
                let demand: u64 = self
                    .jobs
                    .iter()
                    .filter(|j| j.next_release_ns <= d)
                    .map(|j| j.budget_ns + (d - j.next_release_ns) / j.period_ns * j.runtime_ns)
                    .sum();
                d.saturating_sub(now_ns).saturating_sub(demand)
            })
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Like [`Edf::decide`], but idle (everyone waits) while there is slack.
    pub fn decide_late(&self, now_ns: u64) -> Decision {
        let slack = self.slack(now_ns);
        if slack == 0 {
            return self.decide(now_ns);
        }
        let next_release = self
            .jobs
            .iter()
            .map(|j| j.next_release_ns)
            .min()
            .unwrap_or(u64::MAX);
        Decision {
            run: None,
            until_ns: now_ns.saturating_add(slack).min(next_release),
        }
    }

    /// `pid` has used `used_ns` of CPU time since its current period began.
    pub fn set_used(&mut self, pid: u32, used_ns: u64) {
        if let Some(j) = self.jobs.iter_mut().find(|j| j.pid == pid) {
            j.budget_ns = j.runtime_ns.saturating_sub(used_ns);
        }
    }

    /// `pid` ran for `ran_ns`.
    pub fn charge(&mut self, pid: u32, ran_ns: u64) {
        if let Some(j) = self.jobs.iter_mut().find(|j| j.pid == pid) {
            j.budget_ns = j.budget_ns.saturating_sub(ran_ns);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Run the schedule in simulated time; returns (misses, CPU time per client).
    fn simulate(clients: &[(u64, u64)], horizon: u64) -> (Vec<u32>, Vec<u64>) {
        simulate_with(clients, horizon, false, 0)
    }

    /// `late`: slices as late as possible; `leak_per_mille`: while nobody is raised, each
    /// client with budget left still gets this much of the time (as at SCHED_IDLE).
    fn simulate_with(
        clients: &[(u64, u64)],
        horizon: u64,
        late: bool,
        leak_per_mille: u64,
    ) -> (Vec<u32>, Vec<u64>) {
        let mut edf = Edf::new();
        for (i, &(c, t)) in clients.iter().enumerate() {
            edf.add(i as u32, c, t, 0);
        }
        let mut got = vec![0u64; clients.len()];
        let mut misses = Vec::new();
        let mut now = 0;
        while now < horizon {
            edf.replenish(now, &mut misses);
            let d = if late {
                edf.decide_late(now)
            } else {
                edf.decide(now)
            };
            assert!(d.until_ns > now, "no progress at {now}");
            // Leaking clients wake the server every unit, as the real one polls.
            let until = if leak_per_mille > 0 && d.run.is_none() {
                now + 1
            } else {
                d.until_ns
            }
            .min(horizon);
            match d.run {
                Some(pid) => {
                    edf.charge(pid, until - now);
                    got[pid as usize] += until - now;
                }
                None if leak_per_mille > 0 && now % 1000 < leak_per_mille => {
                    // One waiting client slips in for this unit.
                    if let Some(j) = edf.jobs().iter().find(|j| j.budget_ns > 0).cloned() {
                        edf.charge(j.pid, until - now);
                        got[j.pid as usize] += until - now;
                    }
                }
                None => {}
            }
            now = until;
        }
        (misses, got)
    }

    #[test]
    fn late_slices_start_at_the_latest_moment() {
        let mut edf = Edf::new();
        edf.add(1, 10, 40, 0);
        assert_eq!(edf.slack(0), 30);
        assert_eq!(
            edf.decide_late(0),
            Decision {
                run: None,
                until_ns: 30
            }
        );
        // 4 units slipped in while waiting: the slice shrinks, the start moves later.
        edf.set_used(1, 4);
        assert_eq!(edf.decide_late(30).run, None);
        assert_eq!(edf.decide_late(34).run, Some(1));
        // A second, shorter-period client takes its future jobs into account too.
        let mut edf = Edf::new();
        edf.add(1, 5, 10, 0);
        edf.add(2, 20, 40, 0);
        // Demand by 40: 4 × 5 + 20 = 40: no slack at all.
        assert_eq!(edf.slack(0), 0);
    }

    #[test]
    fn one_client_runs_at_the_start_of_each_period() {
        let mut edf = Edf::new();
        edf.add(7, 10, 40, 0);
        assert_eq!(
            edf.decide(0),
            Decision {
                run: Some(7),
                until_ns: 10
            }
        );
        // 4 units used (e.g. at the low priority): 6 left.
        edf.set_used(7, 4);
        assert_eq!(edf.decide(4).until_ns, 10);
        edf.charge(7, 6);
        assert_eq!(
            edf.decide(10),
            Decision {
                run: None,
                until_ns: 40
            }
        );
        let mut misses = Vec::new();
        edf.replenish(40, &mut misses);
        assert!(misses.is_empty());
        assert_eq!(edf.decide(40).run, Some(7));
        // Held off for three periods: no accumulated budget, one miss reported.
        edf.replenish(170, &mut misses);
        assert_eq!(misses, vec![7]);
        assert_eq!(edf.jobs()[0].budget_ns, 10);
        assert_eq!(edf.jobs()[0].next_release_ns, 200);
    }

    proptest! {
        /// Σ shares ≤ 1 ⇒ no misses, and each client gets exactly runtime × whole periods.
        #[test]
        fn edf_meets_every_share_within_capacity(
            raw in prop::collection::vec((1u64..50, 10u64..200), 1..5)
        ) {
            let clients: Vec<(u64, u64)> = raw.iter().map(|&(c, t)| (c.min(t), t)).collect();
            let util: f64 = clients.iter().map(|&(c, t)| c as f64 / t as f64).sum();
            prop_assume!(util <= 1.0);
            let horizon = 20_000;
            let (misses, got) = simulate(&clients, horizon);
            prop_assert!(misses.is_empty(), "misses {:?}", misses);
            for (i, &(c, t)) in clients.iter().enumerate() {
                let whole = horizon / t;
                prop_assert!(got[i] >= whole * c && got[i] <= (whole + 1) * c);
            }
        }

        /// Slices placed as late as possible, with or without time slipping to waiting
        /// clients: still no misses, and never more than the share (the leak is counted).
        #[test]
        fn late_slices_meet_every_share_and_count_the_leak(
            raw in prop::collection::vec((1u64..50, 10u64..200), 1..4),
            leak in prop::sample::select(vec![0u64, 100, 300]),
        ) {
            let clients: Vec<(u64, u64)> = raw.iter().map(|&(c, t)| (c.min(t), t)).collect();
            let util: f64 = clients.iter().map(|&(c, t)| c as f64 / t as f64).sum();
            prop_assume!(util <= 0.9);
            let horizon = 5_000;
            let (misses, got) = simulate_with(&clients, horizon, true, leak);
            prop_assert!(misses.is_empty(), "misses {:?}", misses);
            for (i, &(c, t)) in clients.iter().enumerate() {
                let whole = horizon / t;
                prop_assert!(got[i] >= whole * c && got[i] <= (whole + 1) * c, "client {} got {}", i, got[i]);
            }
        }
    }
}
