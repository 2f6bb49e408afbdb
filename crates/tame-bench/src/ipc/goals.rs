//! The goals, checked against a run's groups:
//! - tame's median one-way latency within 1.5× the measured floor;
//! - at least 10× lower than pipe, Unix socket and POSIX mq;
//! - ring throughput no lower than rtrb's.

use serde::{Deserialize, Serialize};

use crate::result::GroupResult;

use super::Transport;

pub const MAX_OVER_FLOOR: f64 = 1.5;
pub const MIN_SPEEDUP_OVER_KERNEL: f64 = 10.0;
pub const MIN_THROUGHPUT_OVER_RTRB: f64 = 1.0;

/// One goal on one size: the measured ratio, the threshold and the verdict.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GoalCheck {
    /// Machine name, e.g. `latency_tame-ring_8B_over_floor`.
    pub name: String,
    pub value: f64,
    pub threshold: f64,
    pub met: bool,
}

pub fn label(transport: Transport, size: usize) -> String {
    format!("{}/{size}B", transport.name())
}

fn find(groups: &[GroupResult], transport: Transport, size: usize) -> Option<&GroupResult> {
    let label = label(transport, size);
    groups.iter().find(|g| g.label == label)
}

fn median(group: &GroupResult) -> Option<u64> {
    group
        .metric("one_way_latency")
        .map(|m| m.summary.p50)
        .filter(|&p50| p50 > 0)
}

/// Every goal that the measured transports allow to check.
pub fn evaluate(groups: &[GroupResult], sizes: &[usize]) -> Vec<GoalCheck> {
    let mut checks = Vec::new();
    for &size in sizes {
        let floor = find(groups, Transport::Floor, size).and_then(median);
        for tame in [Transport::TameRing, Transport::TameRegister] {
            let Some(tame_p50) = find(groups, tame, size).and_then(median) else {
                continue;
            };
            if let Some(floor) = floor {
                let value = tame_p50 as f64 / floor as f64;
                checks.push(GoalCheck {
                    name: format!("latency_{}_over_floor", label(tame, size).replace('/', "_")),
                    value,
                    threshold: MAX_OVER_FLOOR,
                    met: value <= MAX_OVER_FLOOR,
                });
            }
            for kernel in [Transport::Pipe, Transport::UnixSocket, Transport::Mq] {
                if let Some(kernel_p50) = find(groups, kernel, size).and_then(median) {
                    let value = kernel_p50 as f64 / tame_p50 as f64;
                    checks.push(GoalCheck {
                        name: format!(
                            "speedup_{}_vs_{}",
                            label(tame, size).replace('/', "_"),
                            kernel.name()
                        ),
                        value,
                        threshold: MIN_SPEEDUP_OVER_KERNEL,
                        met: value >= MIN_SPEEDUP_OVER_KERNEL,
                    });
                }
            }
        }
        let rate = |t| {
            find(groups, t, size)
                .and_then(|g| g.derived.get("throughput_msgs_per_s").copied())
                .filter(|r| *r > 0.0)
        };
        if let (Some(ring), Some(rtrb)) = (rate(Transport::TameRing), rate(Transport::Rtrb)) {
            let value = ring / rtrb;
            checks.push(GoalCheck {
                name: format!("throughput_tame-ring_{size}B_over_rtrb"),
                value,
                threshold: MIN_THROUGHPUT_OVER_RTRB,
                met: value >= MIN_THROUGHPUT_OVER_RTRB,
            });
        }
    }
    checks
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::Metric;
    use crate::stats::Summary;

    fn group(transport: Transport, size: usize, p50: u64, rate: Option<f64>) -> GroupResult {
        GroupResult {
            label: label(transport, size),
            metrics: vec![Metric {
                name: "one_way_latency".into(),
                unit: "ns".into(),
                summary: Summary {
                    count: 10,
                    p50,
                    ..Summary::default()
                },
            }],
            derived: rate
                .map(|r| ("throughput_msgs_per_s".to_string(), r))
                .into_iter()
                .collect(),
            ..GroupResult::default()
        }
    }

    #[test]
    fn ratios_and_verdicts() {
        let groups = vec![
            group(Transport::Floor, 8, 100, None),
            group(Transport::TameRing, 8, 140, Some(9e6)),
            group(Transport::TameRegister, 8, 200, None),
            group(Transport::Pipe, 8, 5000, Some(1e5)),
            group(Transport::Rtrb, 8, 130, Some(10e6)),
        ];
        let checks = evaluate(&groups, &[8]);
        let get = |n: &str| {
            checks
                .iter()
                .find(|c| c.name == n)
                .unwrap_or_else(|| panic!("{n} missing"))
        };
        let ring = get("latency_tame-ring_8B_over_floor");
        assert!((ring.value - 1.4).abs() < 1e-9 && ring.met);
        let register = get("latency_tame-register_8B_over_floor");
        assert!((register.value - 2.0).abs() < 1e-9 && !register.met);
        let speedup = get("speedup_tame-ring_8B_vs_pipe");
        assert!((speedup.value - 5000.0 / 140.0).abs() < 1e-9 && speedup.met);
        let throughput = get("throughput_tame-ring_8B_over_rtrb");
        assert!((throughput.value - 0.9).abs() < 1e-9 && !throughput.met);
        // Transports not measured produce no check.
        assert!(checks
            .iter()
            .all(|c| !c.name.contains("unix-socket") && !c.name.contains("64B")));
    }
}
