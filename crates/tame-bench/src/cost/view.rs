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
        "tame bench cost — throughput of ordinary work: {} round(s) × {} s per workload and configuration\n",
        s.rounds,
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
