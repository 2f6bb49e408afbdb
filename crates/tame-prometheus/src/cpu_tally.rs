//! Each client's CPU time as a counter that never goes down. The kernel's schedstat gives
//! a thread's run time since it started; the sum over the live threads falls when one
//! exits, which Prometheus reads as a counter reset (a spike in `rate()`). So each
//! thread's last-seen time is kept, and a thread that is gone (no longer scheduled, or no
//! longer readable) leaves its last-seen time in the client's base.

use std::collections::BTreeMap;

/// What was seen of one client's threads.
#[derive(Debug, Default)]
struct Client {
    /// Run time of the threads that are gone, as last seen.
    base_ns: u64,
    /// Each thread's run time when last read.
    last: BTreeMap<u32, u64>,
    /// Whether any thread was ever read: before that there is no figure to give.
    read_once: bool,
}

/// Per client (pid, cpu): the run time its threads have had, across scrapes.
#[derive(Debug, Default)]
pub struct CpuTally {
    clients: BTreeMap<(u32, u32), Client>,
}

impl CpuTally {
    /// The client's run time in ns after this reading of its threads (`None`: not
    /// readable), or `None` when none of its threads was ever readable — a sample left
    /// out, rather than a 0 a later reading would make look like a reset.
    pub fn total(&mut self, pid: u32, cpu: u32, read: &[(u32, Option<u64>)]) -> Option<u64> {
        let c = self.clients.entry((pid, cpu)).or_default();
        let now: BTreeMap<u32, u64> = read
            .iter()
            .filter_map(|&(tid, ns)| ns.map(|ns| (tid, ns)))
            .collect();
        for (tid, was) in std::mem::take(&mut c.last) {
            match now.get(&tid) {
                // Less than last time: the id went to a new thread; the old one is gone.
                Some(&ns) if ns >= was => {}
                _ => c.base_ns += was,
            }
        }
        c.read_once |= !now.is_empty();
        c.last = now;
        c.read_once
            .then(|| c.base_ns + c.last.values().sum::<u64>())
    }

    /// Forget the clients not in `held` (released: their series end).
    pub fn keep_only(&mut self, held: &[(u32, u32)]) {
        self.clients.retain(|k, _| held.contains(k));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_that_exits_keeps_its_time_in_the_total() {
        let mut t = CpuTally::default();
        // Nothing readable yet: no sample, not 0.
        assert_eq!(t.total(7, 1, &[(70, None)]), None);
        assert_eq!(t.total(7, 1, &[(70, Some(100)), (71, Some(50))]), Some(150));
        assert_eq!(t.total(7, 1, &[(70, Some(130)), (71, Some(60))]), Some(190));
        // 71 exits (unreadable, then no longer scheduled): its 60 stay.
        assert_eq!(t.total(7, 1, &[(70, Some(140)), (71, None)]), Some(200));
        assert_eq!(t.total(7, 1, &[(70, Some(150))]), Some(210));
        // Every thread unreadable: the counter holds, it does not fall to 0.
        assert_eq!(t.total(7, 1, &[(70, None)]), Some(210));
        // A thread id reused by a new thread (less run time than last seen).
        assert_eq!(t.total(7, 1, &[(72, Some(5))]), Some(215));
        assert_eq!(t.total(7, 1, &[(72, Some(2))]), Some(217));
        // Clients are apart; a released one is forgotten and starts afresh.
        assert_eq!(t.total(8, 1, &[(80, Some(9))]), Some(9));
        t.keep_only(&[(8, 1)]);
        assert_eq!(t.total(7, 1, &[(70, None)]), None);
        assert_eq!(t.total(8, 1, &[(80, Some(10))]), Some(10));
    }
}
