//! Ratios between the transports of one run, for each size:
//! - each tame channel's median and p99.9 one-way latency over the floor's (how far above the
//!   hardware, in the middle and in the tail);
//! - the pipe's, Unix socket's and mq's median over each tame channel's (how much lower tame is);
//! - the tame ring's throughput over rtrb's and iceoryx2's, and its median over iceoryx2's.
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
    /// The tail: p99.9 of `one_way_latency`.
    #[serde(rename = "p99_9_latency")]
    P99_9Latency,
    /// Messages per second over the whole throughput measurement.
    Throughput,
}

impl Quantity {
    pub fn describe(self) -> &'static str {
        match self {
            Quantity::MedianLatency => "median latency",
            Quantity::P99_9Latency => "p99.9 latency",
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

/// The group's one-way latency figure `quantity` (not throughput), when there is one.
fn latency(group: &GroupResult, quantity: Quantity) -> Option<u64> {
    let summary = group.metric("one_way_latency")?.summary;
    let (value, q) = match quantity {
        Quantity::MedianLatency => (summary.p50, 0.50),
        Quantity::P99_9Latency => (summary.p99_9, 0.999),
        Quantity::Throughput => return None,
    };
    // No ratio of a percentile the samples cannot support.
    (value > 0 && summary.supports(q)).then_some(value)
}

fn median(group: &GroupResult) -> Option<u64> {
    latency(group, Quantity::MedianLatency)
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
        let floor = find(groups, Transport::Floor, size);
        for tame in [Transport::TameRing, Transport::TameRegister] {
            let Some(tame_group) = find(groups, tame, size) else {
                continue;
            };
            let Some(tame_p50) = median(tame_group) else {
                continue;
            };
            let tame_label = label(tame, size).replace('/', "_");
            // The goals' two figures: the middle and the tail, each over the floor's.
            for (quantity, prefix) in [
                (Quantity::MedianLatency, "latency"),
                (Quantity::P99_9Latency, "p99_9"),
            ] {
                let figure = |g| latency(g, quantity);
                if let (Some(over), Some(under)) = (figure(tame_group), floor.and_then(figure)) {
                    push(
                        format!("{prefix}_{tame_label}_over_floor"),
                        (tame, Transport::Floor, size),
                        quantity,
                        over as f64 / under as f64,
                    );
                }
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
        let ring = find(groups, Transport::TameRing, size);
        // The well-known shared-memory transport a user might pick instead: medians.
        let iceoryx2 = find(groups, Transport::Iceoryx2, size);
        if let (Some(ring), Some(other)) = (ring.and_then(median), iceoryx2.and_then(median)) {
            push(
                format!("latency_tame-ring_{size}B_over_iceoryx2"),
                (Transport::TameRing, Transport::Iceoryx2, size),
                Quantity::MedianLatency,
                ring as f64 / other as f64,
            );
        }
        for other in [Transport::Rtrb, Transport::Iceoryx2] {
            let rates = (
                ring.and_then(rate),
                find(groups, other, size).and_then(rate),
            );
            if let (Some(ring), Some(other_rate)) = rates {
                push(
                    format!("throughput_tame-ring_{size}B_over_{}", other.name()),
                    (Transport::TameRing, other, size),
                    Quantity::Throughput,
                    ring / other_rate,
                );
            }
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

    /// A group whose p99.9 is twice its median.
    fn group(transport: Transport, size: usize, p50: u64, rate: Option<f64>) -> GroupResult {
        GroupResult {
            label: label(transport, size),
            metrics: vec![Metric {
                name: "one_way_latency".into(),
                unit: "ns".into(),
                summary: Summary {
                    count: 10_000,
                    p50,
                    p99_9: 2 * p50,
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
        let mut tail = group(Transport::TameRing, 8, 140, Some(9e6));
        tail.metrics[0].summary.p99_9 = 600;
        let groups = vec![
            group(Transport::Floor, 8, 100, None),
            tail,
            group(Transport::TameRegister, 8, 200, None),
            group(Transport::Pipe, 8, 5000, Some(1e5)),
            group(Transport::Rtrb, 8, 130, Some(10e6)),
            group(Transport::Iceoryx2, 8, 280, Some(4.5e6)),
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
        // The tail: the ring's p99.9 600 ns over the floor's 200 ns.
        let tail = get("p99_9_tame-ring_8B_over_floor");
        assert!((tail.value - 3.0).abs() < 1e-9);
        assert_eq!(tail.quantity, Quantity::P99_9Latency);
        assert_eq!(tail.denominator, "floor/8B");
        assert!((get("p99_9_tame-register_8B_over_floor").value - 2.0).abs() < 1e-9);
        // iceoryx2: the ring's median and msgs/s over its.
        let iceoryx2 = get("latency_tame-ring_8B_over_iceoryx2");
        assert!((iceoryx2.value - 0.5).abs() < 1e-9);
        assert_eq!(iceoryx2.denominator, "iceoryx2/8B");
        assert!((get("throughput_tame-ring_8B_over_iceoryx2").value - 2.0).abs() < 1e-9);
        // Median and p99.9 over the floor + pipe for each of the two tame channels, the
        // ring over iceoryx2 (median) and the throughputs over rtrb and iceoryx2.
        assert_eq!(all.len(), 2 * 3 + 1 + 2);
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
