//! Ratios between the transports of one run, for each size:
//! - each tame channel's median one-way latency over the floor's (how far above the hardware);
//! - the pipe's, Unix socket's and mq's median over each tame channel's (how much lower tame is);
//! - the tame ring's throughput over rtrb's.
//!
//! Only ratios: what counts as good enough is the reader's to decide.

use serde::{Deserialize, Serialize};

use crate::result::GroupResult;

use super::Transport;

/// Which figure of the two groups a ratio divides.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Quantity {
    /// Median one-way latency (p50 of `one_way_latency`).
    MedianLatency,
    /// Messages per second over the whole throughput measurement.
    Throughput,
}

impl Quantity {
    pub fn describe(self) -> &'static str {
        match self {
            Quantity::MedianLatency => "median latency",
            Quantity::Throughput => "msgs/s",
        }
    }
}

/// One ratio: `numerator`'s figure divided by `denominator`'s.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ratio {
    /// Machine name, e.g. `latency_tame-ring_8B_over_floor`; the key in the result's
    /// `ratios` group.
    pub name: String,
    /// Group labels, e.g. `tame-ring/8B` and `floor/8B`.
    pub numerator: String,
    pub denominator: String,
    pub quantity: Quantity,
    pub value: f64,
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

fn rate(group: &GroupResult) -> Option<f64> {
    group
        .derived
        .get("throughput_msgs_per_s")
        .copied()
        .filter(|r| *r > 0.0)
}

/// Every ratio the measured transports allow.
pub fn ratios(groups: &[GroupResult], sizes: &[usize]) -> Vec<Ratio> {
    let mut out = Vec::new();
    let mut push = |name: String, over: (Transport, Transport, usize), quantity, value| {
        let (numerator, denominator, size) = over;
        out.push(Ratio {
            name,
            numerator: label(numerator, size),
            denominator: label(denominator, size),
            quantity,
            value,
        });
    };
    for &size in sizes {
        let floor = find(groups, Transport::Floor, size).and_then(median);
        for tame in [Transport::TameRing, Transport::TameRegister] {
            let Some(tame_p50) = find(groups, tame, size).and_then(median) else {
                continue;
            };
            let tame_label = label(tame, size).replace('/', "_");
            if let Some(floor) = floor {
                push(
                    format!("latency_{tame_label}_over_floor"),
                    (tame, Transport::Floor, size),
                    Quantity::MedianLatency,
                    tame_p50 as f64 / floor as f64,
                );
            }
            for kernel in [Transport::Pipe, Transport::UnixSocket, Transport::Mq] {
                if let Some(kernel_p50) = find(groups, kernel, size).and_then(median) {
                    push(
                        format!("speedup_{tame_label}_vs_{}", kernel.name()),
                        (kernel, tame, size),
                        Quantity::MedianLatency,
                        kernel_p50 as f64 / tame_p50 as f64,
                    );
                }
            }
        }
        let ring = find(groups, Transport::TameRing, size).and_then(rate);
        let rtrb = find(groups, Transport::Rtrb, size).and_then(rate);
        if let (Some(ring), Some(rtrb)) = (ring, rtrb) {
            push(
                format!("throughput_tame-ring_{size}B_over_rtrb"),
                (Transport::TameRing, Transport::Rtrb, size),
                Quantity::Throughput,
                ring / rtrb,
            );
        }
    }
    out
}

/// The merged group of an IPC result, labelled `ratios`: each ratio as a derived figure.
pub fn ratios_group(ratios: &[Ratio]) -> GroupResult {
    GroupResult {
        label: "ratios".into(),
        derived: ratios.iter().map(|r| (r.name.clone(), r.value)).collect(),
        ..GroupResult::default()
    }
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
                distribution: None,
            }],
            derived: rate
                .map(|r| ("throughput_msgs_per_s".to_string(), r))
                .into_iter()
                .collect(),
            ..GroupResult::default()
        }
    }

    #[test]
    fn ratios_of_medians_and_throughputs() {
        let groups = vec![
            group(Transport::Floor, 8, 100, None),
            group(Transport::TameRing, 8, 140, Some(9e6)),
            group(Transport::TameRegister, 8, 200, None),
            group(Transport::Pipe, 8, 5000, Some(1e5)),
            group(Transport::Rtrb, 8, 130, Some(10e6)),
        ];
        let all = ratios(&groups, &[8]);
        let get = |n: &str| {
            all.iter()
                .find(|c| c.name == n)
                .unwrap_or_else(|| panic!("{n} missing"))
        };
        let ring = get("latency_tame-ring_8B_over_floor");
        assert!((ring.value - 1.4).abs() < 1e-9);
        assert_eq!(
            (ring.numerator.as_str(), ring.denominator.as_str()),
            ("tame-ring/8B", "floor/8B")
        );
        assert_eq!(ring.quantity, Quantity::MedianLatency);
        assert!((get("latency_tame-register_8B_over_floor").value - 2.0).abs() < 1e-9);
        let speedup = get("speedup_tame-ring_8B_vs_pipe");
        assert!((speedup.value - 5000.0 / 140.0).abs() < 1e-9);
        assert_eq!(
            (speedup.numerator.as_str(), speedup.denominator.as_str()),
            ("pipe/8B", "tame-ring/8B")
        );
        let throughput = get("throughput_tame-ring_8B_over_rtrb");
        assert!((throughput.value - 0.9).abs() < 1e-9);
        assert_eq!(throughput.quantity, Quantity::Throughput);
        // floor + pipe for each of the two tame channels, and the throughput.
        assert_eq!(all.len(), 5);
        // Transports not measured give no ratio.
        assert!(all
            .iter()
            .all(|c| !c.name.contains("unix-socket") && !c.name.contains("64B")));
    }

    #[test]
    fn a_zero_median_gives_no_ratio() {
        let groups = vec![
            group(Transport::Floor, 8, 0, None),
            group(Transport::TameRing, 8, 140, None),
        ];
        assert!(ratios(&groups, &[8]).is_empty());
    }

    #[test]
    fn the_ratios_group_holds_each_ratio_and_no_verdict() {
        let all = ratios(
            &[
                group(Transport::Floor, 8, 100, None),
                group(Transport::TameRing, 8, 150, None),
            ],
            &[8],
        );
        let merged = ratios_group(&all);
        assert_eq!(merged.label, "ratios");
        assert_eq!(merged.derived["latency_tame-ring_8B_over_floor"], 1.5);
        assert!(merged.counters.is_empty() && merged.metrics.is_empty() && merged.cpu.is_none());
    }
}
