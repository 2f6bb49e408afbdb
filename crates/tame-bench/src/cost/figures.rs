//! The samples in the common schema, and the arithmetic of the cost. Pure: recorded
//! samples give the same figures as a live run.
//!
//! Per configuration × workload a group (`shared/cpu`, `partitioned/build`): the metric
//! `throughput` holds one value per round (in thousandths of the workload's unit, as the
//! schema's metrics are integers); derived `throughput` (mean over the rounds, in the unit)
//! and `throughput_per_cpu`; the spread of both over the rounds. A partitioned group also
//! gets its cost against the shared group of the same workload: `ratio_to_shared`
//! (partitioned ÷ shared), `cost_percent` = (1 − ratio) × 100 and `cost_per_cpu_percent`,
//! the same per CPU the workload had — what the partition costs beyond the CPUs it takes.

use std::collections::BTreeMap;

use crate::distribution::Distribution;
use crate::result::{GroupResult, Metric, Spread};
use crate::stats::Recorder;

use super::{ConfigKind, Sample, Workload};

/// The merged group's cost over all workloads (from the geometric mean of the ratios).
pub const GEOMEAN: &str = "cost_percent_geomean";

/// `1 − partitioned / shared`, in percent: the share of the throughput partitioning costs.
pub fn cost_percent(shared: f64, partitioned: f64) -> Option<f64> {
    (shared > 0.0 && partitioned.is_finite()).then(|| (1.0 - partitioned / shared) * 100.0)
}

/// Throughput per CPU the workload had.
pub fn per_cpu(throughput: f64, cpus: usize) -> Option<f64> {
    (cpus > 0).then(|| throughput / cpus as f64)
}

/// The cost per remaining CPU: `1 − (partitioned / its CPUs) / (shared / its CPUs)`, percent.
pub fn cost_per_cpu_percent(
    shared: f64,
    shared_cpus: usize,
    partitioned: f64,
    partitioned_cpus: usize,
) -> Option<f64> {
    cost_percent(
        per_cpu(shared, shared_cpus)?,
        per_cpu(partitioned, partitioned_cpus)?,
    )
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len().max(1) as f64
}

fn spread(values: &[f64]) -> Option<Spread> {
    let (first, rest) = values.split_first()?;
    let mut s = Spread::of(*first);
    rest.iter().for_each(|v| s.include(*v));
    Some(s)
}

/// One configuration's rounds of one workload.
struct Rounds {
    cpus: usize,
    /// (round, throughput), in round order.
    values: Vec<(u32, f64)>,
}

impl Rounds {
    fn of(samples: &[Sample], config: ConfigKind, workload: Workload) -> Option<Self> {
        let mut values: Vec<(u32, f64)> = samples
            .iter()
            .filter(|s| s.config == config && s.workload == workload)
            .map(|s| (s.round, s.throughput))
            .collect();
        values.sort_by_key(|v| v.0);
        let cpus = samples
            .iter()
            .find(|s| s.config == config && s.workload == workload)?
            .cpus;
        Some(Rounds { cpus, values })
    }

    fn throughputs(&self) -> Vec<f64> {
        self.values.iter().map(|v| v.1).collect()
    }

    fn mean(&self) -> f64 {
        mean(&self.throughputs())
    }
}

/// The groups (shared first, then partitioned; workloads in `workloads`' order) and the
/// merged group `cost`: per workload `cost_percent_W`, `cost_per_cpu_percent_W`, and over
/// all workloads measured in both configurations `cost_percent_geomean` (from the geometric
/// mean of the ratios).
pub fn groups(workloads: &[Workload], samples: &[Sample]) -> (Vec<GroupResult>, GroupResult) {
    let mut groups = Vec::new();
    let mut merged = GroupResult {
        label: "cost".into(),
        ..GroupResult::default()
    };
    let mut log_ratios = Vec::new();
    for config in [ConfigKind::Shared, ConfigKind::Partitioned] {
        for &w in workloads {
            let Some(rounds) = Rounds::of(samples, config, w) else {
                continue;
            };
            let mut g = group(config, w, &rounds);
            if config == ConfigKind::Partitioned {
                if let Some(shared) = Rounds::of(samples, ConfigKind::Shared, w) {
                    cost(&mut g, &shared, &rounds);
                    for key in ["cost_percent", "cost_per_cpu_percent"] {
                        if let Some(v) = g.derived.get(key) {
                            merged.derived.insert(format!("{key}_{}", w.name()), *v);
                        }
                    }
                    if let Some(r) = g.derived.get("ratio_to_shared").filter(|r| **r > 0.0) {
                        log_ratios.push(r.ln());
                    }
                }
            }
            groups.push(g);
        }
    }
    if !log_ratios.is_empty() {
        let ratio = mean(&log_ratios).exp();
        merged.derived.insert(GEOMEAN.into(), (1.0 - ratio) * 100.0);
    }
    (groups, merged)
}

fn group(config: ConfigKind, w: Workload, rounds: &Rounds) -> GroupResult {
    let values = rounds.throughputs();
    let mut recorder = Recorder::new();
    for v in &values {
        // Thousandths of the unit: the schema's metrics hold integers.
        recorder.record((v * 1000.0).round().max(0.0) as u64);
    }
    let mut g = GroupResult {
        label: format!("{}/{}", config.name(), w.name()),
        cpu: None,
        metrics: vec![Metric {
            name: "throughput".into(),
            unit: format!("milli-{}", w.unit()),
            summary: recorder.summary(),
            distribution: Some(Distribution::of(&recorder)),
        }],
        ..GroupResult::default()
    };
    g.counters.insert("rounds".into(), values.len() as u64);
    g.counters.insert("cpus".into(), rounds.cpus as u64);
    let per: Vec<f64> = values
        .iter()
        .filter_map(|v| per_cpu(*v, rounds.cpus))
        .collect();
    g.derived.insert("throughput".into(), mean(&values));
    g.derived.insert("throughput_per_cpu".into(), mean(&per));
    if values.len() >= 2 {
        for (key, v) in [("throughput", &values), ("throughput_per_cpu", &per)] {
            if let Some(s) = spread(v) {
                g.spread.insert(key.into(), s);
            }
        }
    }
    g
}

/// The partitioned group's cost against the shared rounds: from the means, with the spread
/// of the per-round cost where both configurations measured the same rounds.
fn cost(g: &mut GroupResult, shared: &Rounds, partitioned: &Rounds) {
    let (s, p) = (shared.mean(), partitioned.mean());
    if s > 0.0 {
        g.derived.insert("ratio_to_shared".into(), p / s);
    }
    if let Some(c) = cost_percent(s, p) {
        g.derived.insert("cost_percent".into(), c);
    }
    if let Some(c) = cost_per_cpu_percent(s, shared.cpus, p, partitioned.cpus) {
        g.derived.insert("cost_per_cpu_percent".into(), c);
    }
    let paired: Vec<(f64, f64)> = partitioned
        .values
        .iter()
        .filter_map(|(round, pv)| {
            let sv = shared.values.iter().find(|(r, _)| r == round)?.1;
            Some((sv, *pv))
        })
        .collect();
    if paired.len() >= 2 {
        let total: Vec<f64> = paired
            .iter()
            .filter_map(|(s, p)| cost_percent(*s, *p))
            .collect();
        let per: Vec<f64> = paired
            .iter()
            .filter_map(|(s, p)| cost_per_cpu_percent(*s, shared.cpus, *p, partitioned.cpus))
            .collect();
        for (key, v) in [("cost_percent", &total), ("cost_per_cpu_percent", &per)] {
            if let Some(sp) = spread(v) {
                g.spread.insert(key.into(), sp);
            }
        }
    }
}

/// A workload's figures in one configuration, read back from a result's group (for views
/// and for `tame assess`).
#[derive(Clone, Debug, PartialEq)]
pub struct Figures {
    pub throughput: f64,
    pub per_cpu: f64,
    pub cpus: u64,
    pub spread: Option<Spread>,
}

impl Figures {
    pub fn of(group: &GroupResult) -> Option<Self> {
        Some(Figures {
            throughput: *group.derived.get("throughput")?,
            per_cpu: *group.derived.get("throughput_per_cpu")?,
            cpus: *group.counters.get("cpus")?,
            spread: group.spread.get("throughput").copied(),
        })
    }
}

/// The group of `config` and `workload` in `groups`.
pub fn find<'a>(
    groups: &'a [GroupResult],
    config: ConfigKind,
    workload: &str,
) -> Option<&'a GroupResult> {
    let label = format!("{}/{workload}", config.name());
    groups.iter().find(|g| g.label == label)
}

/// Derived figures of a merged group by workload: `cost_percent_W` → (W, value).
pub fn by_workload<'a>(
    derived: &'a BTreeMap<String, f64>,
    prefix: &'a str,
) -> impl Iterator<Item = (&'a str, f64)> + 'a {
    derived
        .iter()
        .filter_map(move |(k, v)| Some((k.strip_prefix(prefix)?.strip_prefix('_')?, *v)))
        .filter(|(w, _)| *w != "geomean")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(config: ConfigKind, workload: Workload, round: u32, cpus: usize, t: f64) -> Sample {
        Sample {
            config,
            workload,
            round,
            cpus,
            throughput: t,
        }
    }

    /// Figures as measured on this project's 2-vCPU VM (stress-ng cpu, 1 instance per CPU)
    /// with one CPU isolated: the partition halves the throughput and costs nothing per CPU.
    fn recorded() -> Vec<Sample> {
        use ConfigKind::*;
        use Workload::*;
        vec![
            sample(Shared, Cpu, 0, 2, 2431.0),
            sample(Partitioned, Cpu, 0, 1, 1214.0),
            sample(Shared, Cpu, 1, 2, 2400.0),
            sample(Partitioned, Cpu, 1, 1, 1230.0),
            sample(Shared, Build, 0, 2, 10.0),
            sample(Partitioned, Build, 0, 1, 5.0),
            sample(Shared, Build, 1, 2, 12.0),
            sample(Partitioned, Build, 1, 1, 6.0),
        ]
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn relative_cost_in_total_and_per_remaining_cpu() {
        assert!(close(cost_percent(100.0, 52.0).unwrap(), 48.0));
        assert!(close(cost_percent(100.0, 110.0).unwrap(), -10.0));
        assert_eq!(cost_percent(0.0, 5.0), None);
        assert_eq!(per_cpu(10.0, 0), None);
        assert!(close(per_cpu(10.0, 4).unwrap(), 2.5));
        // Half the CPUs, half the throughput: nothing lost per CPU.
        assert!(close(cost_per_cpu_percent(100.0, 2, 50.0, 1).unwrap(), 0.0));
        // Three of four CPUs left, 60 % of the throughput: 20 % less per CPU.
        assert!(close(
            cost_per_cpu_percent(100.0, 4, 60.0, 3).unwrap(),
            20.0
        ));
    }

    #[test]
    fn groups_hold_each_round_and_the_cost() {
        let (groups, merged) = groups(&[Workload::Cpu, Workload::Build], &recorded());
        let labels: Vec<&str> = groups.iter().map(|g| g.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "shared/cpu",
                "shared/build",
                "partitioned/cpu",
                "partitioned/build"
            ]
        );
        let s = &groups[0];
        assert_eq!(s.counters["rounds"], 2);
        assert_eq!(s.counters["cpus"], 2);
        let m = s.metric("throughput").unwrap();
        assert_eq!(m.unit, "milli-bogo-ops/s");
        assert_eq!((m.summary.min, m.summary.max), (2_400_000, 2_431_000));
        assert!(close(s.derived["throughput"], 2415.5));
        assert!(close(s.derived["throughput_per_cpu"], 1207.75));
        assert_eq!(
            s.spread["throughput"],
            Spread {
                min: 2400.0,
                max: 2431.0
            }
        );
        let p = &groups[2];
        assert!(close(p.derived["throughput"], 1222.0));
        assert!(close(p.derived["ratio_to_shared"], 1222.0 / 2415.5));
        assert!(close(
            p.derived["cost_percent"],
            (1.0 - 1222.0 / 2415.5) * 100.0
        ));
        assert!(close(
            p.derived["cost_per_cpu_percent"],
            (1.0 - 1222.0 / 1207.75) * 100.0
        ));
        // Per round: 1 − 1214/2431 and 1 − 1230/2400.
        let c = p.spread["cost_percent"];
        assert!(close(c.min, (1.0 - 1230.0 / 2400.0) * 100.0), "{c:?}");
        assert!(close(c.max, (1.0 - 1214.0 / 2431.0) * 100.0), "{c:?}");
        let b = &groups[3];
        assert_eq!(b.metric("throughput").unwrap().unit, "milli-files/s");
        assert!(close(b.derived["cost_percent"], 50.0));
        assert!(close(b.derived["cost_per_cpu_percent"], 0.0));
        // Geometric mean of the two ratios.
        let geo = ((1222.0 / 2415.5f64).ln() + 0.5f64.ln()) / 2.0;
        assert!(close(
            merged.derived["cost_percent_geomean"],
            (1.0 - geo.exp()) * 100.0
        ));
        assert!(close(merged.derived["cost_percent_build"], 50.0));
        let costs: Vec<(&str, f64)> = by_workload(&merged.derived, "cost_percent").collect();
        assert_eq!(costs.len(), 2);
        assert_eq!(Figures::of(b).unwrap().cpus, 1);
    }

    #[test]
    fn a_shared_only_run_has_no_cost_and_one_round_no_spread() {
        let samples = vec![sample(ConfigKind::Shared, Workload::Pipe, 0, 2, 5e5)];
        let (groups, merged) = groups(&[Workload::Pipe, Workload::Cpu], &samples);
        assert_eq!(groups.len(), 1);
        assert!(groups[0].spread.is_empty());
        assert!(!groups[0].derived.contains_key("cost_percent"));
        assert!(merged.derived.is_empty());
        assert!(find(&groups, ConfigKind::Shared, "pipe").is_some());
        assert!(find(&groups, ConfigKind::Partitioned, "pipe").is_none());
    }
}
