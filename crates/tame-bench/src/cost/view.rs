//! The table of a cost result: per workload both configurations side by side, per CPU,
//! their ratio and the cost.

use std::fmt::Write as _;

use crate::result::BenchResult;

use super::figures::{find, Figures};
use super::{ConfigKind, CostSettings};

/// `2431`, `1.21e6` style: four significant figures at most, no exponent below a million.
fn number(v: f64) -> String {
    if !v.is_finite() {
        return "—".into();
    }
    let a = v.abs();
    if a >= 1e6 {
        format!("{v:.3e}")
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn cell(f: Option<&Figures>) -> (String, String) {
    match f {
        None => ("—".into(), "—".into()),
        Some(f) => {
            let range = f
                .spread
                .map(|s| format!(" [{}–{}]", number(s.min), number(s.max)))
                .unwrap_or_default();
            (
                format!("{}{range}", number(f.throughput)),
                number(f.per_cpu),
            )
        }
    }
}

fn cpus_of(settings: &CostSettings, kind: ConfigKind) -> Option<String> {
    let c = settings.configurations.iter().find(|c| c.kind == kind)?;
    let n = c.cpus.len();
    Some(format!(
        "CPU{} {} ({n})",
        if n == 1 { "" } else { "s" },
        c.cpus
    ))
}

pub fn table(result: &BenchResult<CostSettings>) -> String {
    let s = &result.settings;
    let mut out = format!(
        "tame bench cost — throughput of ordinary work: {} × {} s per workload and configuration\n",
        tame_rt::plural::count(u64::from(s.rounds), "round", "rounds"),
        s.duration_ns / 1_000_000_000
    );
    if let Some(c) = cpus_of(s, ConfigKind::Shared) {
        let _ = writeln!(out, "shared: the machine as it is, {c}");
    }
    if let Some(c) = cpus_of(s, ConfigKind::Partitioned) {
        let _ = write!(out, "partitioned: the system partition, {c}");
        if let Some(p) = &s.partition {
            let _ = write!(
                out,
                ", while partition {} holds CPUs {}",
                p.isolated, p.isolated_cpus
            );
            match &p.applied_per_round {
                Some(spec) => {
                    let _ = write!(
                        out,
                        " (applied from {spec} for each partitioned round, reverted after)"
                    );
                }
                None => {
                    let _ = write!(
                        out,
                        " (applied before the run: only this configuration was measured)"
                    );
                }
            }
            if let Some(rt) = &p.rt_load {
                let _ = write!(out, "; real-time load in it: {rt}");
            }
        }
        out.push('\n');
    }
    let kinds: Vec<ConfigKind> = s.configurations.iter().map(|c| c.kind).collect();
    let both = kinds.len() > 1;
    let _ = write!(out, "{:<9} {:<11}", "workload", "unit");
    for k in &kinds {
        let _ = write!(
            out,
            " {:>26} {:>10}",
            format!("{} [min–max]", k.name()),
            "per CPU"
        );
    }
    if both {
        let _ = write!(out, " {:>7} {:>8} {:>12}", "ratio", "cost", "cost per CPU");
    }
    out.push('\n');
    for w in &s.workloads {
        let _ = write!(out, "{:<9} {:<11}", w.name(), w.unit());
        for k in &kinds {
            let (t, p) = cell(
                find(&result.groups, *k, w.name())
                    .and_then(Figures::of)
                    .as_ref(),
            );
            let _ = write!(out, " {t:>26} {p:>10}");
        }
        if both {
            let part = find(&result.groups, ConfigKind::Partitioned, w.name());
            let d = |k: &str| part.and_then(|g| g.derived.get(k)).copied();
            let pct = |v: Option<f64>| v.map_or("—".into(), |v| format!("{v:.1}%"));
            let _ = write!(
                out,
                " {:>7} {:>8} {:>12}",
                d("ratio_to_shared").map_or("—".into(), |r| format!("{r:.3}")),
                pct(d("cost_percent")),
                pct(d("cost_per_cpu_percent"))
            );
        }
        out.push('\n');
    }
    if let Some(g) = result.merged.derived.get(super::figures::GEOMEAN) {
        let _ = writeln!(
            out,
            "over all workloads (geometric mean of the ratios): partitioning costs {g:.1}% of the throughput"
        );
    }
    if result.interrupted {
        out.push_str("interrupted: the figures cover the rounds measured\n");
    }
    let env = &result.environment;
    let _ = write!(
        out,
        "kernel {} ({})",
        env.kernel_release, env.preemption_model
    );
    if let Some(h) = &env.hypervisor {
        let _ = write!(out, "; virtualised ({h})");
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::{figures, Configuration, Sample, Workload};
    use tame_host::environment::RunEnvironment;
    use tame_host::CpuList;

    fn result(samples: &[Sample], configs: Vec<Configuration>) -> BenchResult<CostSettings> {
        let workloads = vec![Workload::Cpu, Workload::Build];
        let (groups, merged) = figures::groups(&workloads, samples);
        BenchResult {
            schema_version: 1,
            bench: "cost".into(),
            tool_version: "0".into(),
            command_line: vec![],
            started_unix_ns: 0,
            elapsed_ns: 0,
            interrupted: false,
            environment: RunEnvironment {
                kernel_release: "6.18".into(),
                preemption_model: "dynamic".into(),
                ..RunEnvironment::default()
            },
            calibration: Default::default(),
            load: None,
            partition: None,
            settings: CostSettings {
                workloads,
                duration_ns: 2_000_000_000,
                rounds: 1,
                configurations: configs,
                partition: None,
            },
            groups,
            merged,
        }
    }

    fn config(kind: ConfigKind, cpus: &str) -> Configuration {
        Configuration {
            kind,
            cpus: CpuList::parse(cpus).unwrap(),
        }
    }

    fn sample(config: ConfigKind, workload: Workload, cpus: usize, t: f64) -> Sample {
        Sample {
            config,
            workload,
            round: 0,
            cpus,
            throughput: t,
        }
    }

    #[test]
    fn both_configurations_side_by_side_with_ratio_and_cost() {
        use ConfigKind::*;
        let samples = [
            sample(Shared, Workload::Cpu, 2, 992.0),
            sample(Partitioned, Workload::Cpu, 1, 481.0),
            sample(Shared, Workload::Build, 2, 1.62),
        ];
        let t = table(&result(
            &samples,
            vec![config(Shared, "0-1"), config(Partitioned, "1")],
        ));
        assert!(
            t.contains("shared: the machine as it is, CPUs 0-1 (2)"),
            "{t}"
        );
        assert!(
            t.contains("partitioned: the system partition, CPU 1 (1)"),
            "{t}"
        );
        let cpu = t.lines().find(|l| l.starts_with("cpu ")).unwrap();
        let cols: Vec<&str> = cpu.split_whitespace().collect();
        assert_eq!(
            cols,
            [
                "cpu",
                "bogo-ops/s",
                "992",
                "496",
                "481",
                "481",
                "0.485",
                "51.5%",
                "3.0%"
            ]
        );
        // Build measured shared only: dashes, no cost.
        let build = t.lines().find(|l| l.starts_with("build")).unwrap();
        assert!(
            build.contains("1.62") && build.matches('—').count() == 5,
            "{build}"
        );
        assert!(
            t.contains("partitioning costs 51.5% of the throughput"),
            "{t}"
        );
        // Shared only: no partitioned, ratio or cost columns at all.
        let t = table(&result(&samples[..1], vec![config(Shared, "0-1")]));
        assert!(
            !t.contains("partitioned [") && !t.contains("cost per CPU"),
            "{t}"
        );
    }
}
