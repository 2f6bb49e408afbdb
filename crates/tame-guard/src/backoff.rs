//! Never fight another writer: a thing repaired `limit` times within `window` is left
//! alone for a while, twice as long each time it happens again (capped), and the guard
//! says so. Time is the caller's (nanoseconds on any monotonic clock), so this is pure.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

/// When to back off and for how long.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rules {
    /// Repairs of one thing within `window_ns` that make the next one a backoff.
    pub limit: u32,
    pub window_ns: u64,
    /// The first pause; each further one doubles, up to `cap_ns`.
    pub base_ns: u64,
    pub cap_ns: u64,
}

impl Default for Rules {
    /// 3 repairs within 60 s: pause 10 s, then 20, 40 … at most 10 min.
    fn default() -> Self {
        Rules {
            limit: 3,
            window_ns: 60_000_000_000,
            base_ns: 10_000_000_000,
            cap_ns: 600_000_000_000,
        }
    }
}

/// What to do about a thing that needs repair now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Repair,
    /// It came back too often: pause repairs until `until_ns` (this call started the pause).
    StartBackoff {
        until_ns: u64,
        pause_ns: u64,
    },
    /// A pause started earlier still runs.
    BackingOff {
        until_ns: u64,
    },
}

#[derive(Clone, Debug, Default)]
struct State {
    repairs: VecDeque<u64>,
    until_ns: u64,
    level: u32,
}

/// Repairs per thing (any ordered key).
#[derive(Clone, Debug, Default)]
pub struct Backoff<K: Ord> {
    pub rules: Rules,
    state: BTreeMap<K, State>,
}

impl<K: Ord + Clone> Backoff<K> {
    pub fn new(rules: Rules) -> Self {
        Backoff {
            rules,
            state: BTreeMap::new(),
        }
    }

    /// Whether to repair `key` at `now_ns`; a `Repair` is counted as made.
    pub fn decide(&mut self, key: &K, now_ns: u64) -> Verdict {
        let r = self.rules;
        let st = self.state.entry(key.clone()).or_default();
        if now_ns < st.until_ns {
            return Verdict::BackingOff {
                until_ns: st.until_ns,
            };
        }
        // Quiet for a whole window after the last pause: forgive it.
        if st.level > 0 && st.repairs.is_empty() && now_ns.saturating_sub(st.until_ns) > r.window_ns
        {
            st.level = 0;
        }
        while st
            .repairs
            .front()
            .is_some_and(|&t| now_ns.saturating_sub(t) >= r.window_ns)
        {
            st.repairs.pop_front();
        }
        if st.repairs.len() >= r.limit as usize {
            let pause_ns = r
                .base_ns
                .saturating_mul(1u64 << st.level.min(32))
                .min(r.cap_ns);
            st.level += 1;
            st.until_ns = now_ns.saturating_add(pause_ns);
            st.repairs.clear();
            return Verdict::StartBackoff {
                until_ns: st.until_ns,
                pause_ns,
            };
        }
        st.repairs.push_back(now_ns);
        Verdict::Repair
    }

    /// Forget things not in `keep` whose pause is over (they are gone; bounded memory).
    pub fn retain(&mut self, now_ns: u64, keep: impl Fn(&K) -> bool) {
        let window = self.rules.window_ns;
        self.state.retain(|k, st| {
            keep(k)
                || now_ns < st.until_ns.saturating_add(window)
                || st
                    .repairs
                    .back()
                    .is_some_and(|&t| now_ns.saturating_sub(t) < window)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn the_fourth_repair_within_the_window_backs_off_and_pauses_double() {
        let mut b = Backoff::new(Rules::default());
        let k = "irq 41";
        for t in [0, 1, 2] {
            assert_eq!(b.decide(&k, t * S), Verdict::Repair);
        }
        assert_eq!(
            b.decide(&k, 3 * S),
            Verdict::StartBackoff {
                until_ns: 13 * S,
                pause_ns: 10 * S
            }
        );
        assert_eq!(
            b.decide(&k, 5 * S),
            Verdict::BackingOff { until_ns: 13 * S }
        );
        // The other writer keeps on: three more repairs, then twice the pause.
        for t in [13, 14, 15] {
            assert_eq!(b.decide(&k, t * S), Verdict::Repair);
        }
        assert_eq!(
            b.decide(&k, 16 * S),
            Verdict::StartBackoff {
                until_ns: 36 * S,
                pause_ns: 20 * S
            }
        );
        // Another thing is not held back.
        assert_eq!(b.decide(&"irq 42", 17 * S), Verdict::Repair);
    }

    #[test]
    fn repairs_spread_wider_than_the_window_never_back_off() {
        let mut b = Backoff::new(Rules::default());
        for t in 0..20 {
            assert_eq!(b.decide(&1u32, t * 30 * S), Verdict::Repair, "at {t}");
        }
    }

    #[test]
    fn the_pause_is_capped_and_forgiven_after_a_quiet_window() {
        let rules = Rules {
            limit: 1,
            window_ns: 10 * S,
            base_ns: 4 * S,
            cap_ns: 10 * S,
        };
        let mut b = Backoff::new(rules);
        let mut now = 0;
        let mut pauses = Vec::new();
        for _ in 0..4 {
            assert_eq!(b.decide(&0u8, now), Verdict::Repair);
            match b.decide(&0u8, now + 1) {
                Verdict::StartBackoff { until_ns, pause_ns } => {
                    pauses.push(pause_ns / S);
                    now = until_ns;
                }
                v => panic!("{v:?}"),
            }
        }
        assert_eq!(pauses, [4, 8, 10, 10]);
        // Quiet for longer than a window after the pause: back to the first pause.
        now += 11 * S;
        assert_eq!(b.decide(&0u8, now), Verdict::Repair);
        assert_eq!(
            b.decide(&0u8, now + 1),
            Verdict::StartBackoff {
                until_ns: now + 1 + 4 * S,
                pause_ns: 4 * S
            }
        );
    }

    #[test]
    fn gone_things_are_forgotten_once_their_window_is_over() {
        let mut b = Backoff::new(Rules::default());
        b.decide(&1u32, 0);
        b.retain(30 * S, |_| false);
        assert_eq!(b.state.len(), 1);
        b.retain(61 * S, |_| false);
        assert!(b.state.is_empty());
    }
}
