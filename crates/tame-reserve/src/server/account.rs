//! What a client has used of its share in the current period: its own CPU time and the
//! server's work for it (raising and lowering its threads, watching them), which is
//! charged to it. Server work beyond a period's budget carries over as debt, so over time
//! the server spends on a client no more than the client's share, however many threads it
//! has. The client's own CPU time never carries over: at its waiting priority an idle CPU
//! may give it more than its share, and that must not cost it later slices.

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Account {
    /// The release the current period began with.
    release_ns: u64,
    /// The client's CPU time when the period began.
    exec_base_ns: u64,
    /// The server's work for the client in this period.
    server_ns: u64,
    /// Server work of earlier periods not yet paid for.
    debt_ns: u64,
}

impl Account {
    /// Budget used in the period whose release is `release_ns`, the client's CPU time being
    /// `exec_ns` now and its budget per period `runtime_ns`. Another release than the last
    /// one begins a new period: what the server spent beyond the last budget becomes debt.
    pub fn used(&mut self, release_ns: u64, exec_ns: u64, runtime_ns: u64) -> u64 {
        if release_ns != self.release_ns {
            let own = exec_ns.saturating_sub(self.exec_base_ns);
            let charged = self.server_ns.saturating_add(self.debt_ns);
            let over = own.saturating_add(charged).saturating_sub(runtime_ns);
            *self = Self {
                release_ns,
                exec_base_ns: exec_ns,
                server_ns: 0,
                debt_ns: over.min(charged),
            };
        }
        exec_ns
            .saturating_sub(self.exec_base_ns)
            .saturating_add(self.server_ns)
            .saturating_add(self.debt_ns)
    }

    /// The server spent `ns` of its CPU time on the client.
    pub fn charge(&mut self, ns: u64) {
        self.server_ns = self.server_ns.saturating_add(ns);
    }

    /// Server work of earlier periods not yet paid for.
    pub fn debt_ns(&self) -> u64 {
        self.debt_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUNTIME: u64 = 400_000;
    const PERIOD: u64 = 40_000_000;

    #[test]
    fn server_work_beyond_the_budget_is_paid_in_later_periods() {
        let mut a = Account::default();
        assert_eq!(a.used(PERIOD, 0, RUNTIME), 0);
        // Raising and lowering 1024 threads cost the server 3 ms: budget gone.
        a.charge(3_000_000);
        assert!(a.used(PERIOD, 100_000, RUNTIME) >= RUNTIME);
        // The next periods carry what the server spent beyond the budget, until paid.
        let mut periods_without_budget = 0;
        let mut release = PERIOD;
        loop {
            release += PERIOD;
            if a.used(release, 100_000, RUNTIME) < RUNTIME {
                break;
            }
            periods_without_budget += 1;
        }
        // 2.7 ms of debt at 0.4 ms a period: 6 periods, then budget again.
        assert_eq!(periods_without_budget, 6);
        assert!(a.debt_ns() < RUNTIME);
    }

    #[test]
    fn the_clients_own_time_never_carries_over() {
        let mut a = Account::default();
        a.used(PERIOD, 0, RUNTIME);
        // An idle CPU gave the waiting client 30 ms in one period.
        assert_eq!(a.used(PERIOD, 30_000_000, RUNTIME), 30_000_000);
        assert_eq!(a.used(2 * PERIOD, 30_000_000, RUNTIME), 0);
        assert_eq!(a.debt_ns(), 0);
        // Server work within the budget is no debt either.
        a.charge(100_000);
        assert_eq!(a.used(2 * PERIOD, 30_200_000, RUNTIME), 300_000);
        assert_eq!(a.used(3 * PERIOD, 30_200_000, RUNTIME), 0);
        // Over budget by the client's own 500 µs and the server's 100 µs: only the
        // server's part carries.
        a.charge(100_000);
        assert_eq!(a.used(3 * PERIOD, 30_700_000, RUNTIME), 600_000);
        assert_eq!(a.used(4 * PERIOD, 30_700_000, RUNTIME), 100_000);
        assert_eq!(a.debt_ns(), 100_000);
    }
}
