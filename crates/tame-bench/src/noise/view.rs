//! Views of a noise result: the human report and the gaps CSV.

use std::fmt::Write as _;
use std::io::Write;

use tame_trace::attribute::{AttributedGap, NoiseClass};

use super::{CpuNoise, NoiseResult};
use crate::output::table;
use tame_rt::duration::{format_ns_as, NsStyle};

/// Rows of the per-source list in the human report.
const TOP_SOURCES: usize = 12;

/// The common table, then per CPU: noise share, overhead, and offenders by class and source.
pub fn report(result: &NoiseResult, title: &str) -> String {
    let mut out = table(&result.result, title);
    let n = &result.noise;
    let _ = writeln!(
        out,
        "gap threshold {}",
        format_ns_as(n.threshold_ns, NsStyle::Fixed)
    );
    match (&n.attribution.available, &n.attribution.reason) {
        (true, _) => {
            let _ = writeln!(
                out,
                "attribution: trace clock {}, {} event types{}",
                n.attribution.trace_clock.map_or("-", |c| c.name()),
                n.attribution.events_enabled.len(),
                if n.attribution.events_missing.is_empty() {
                    String::new()
                } else {
                    format!(
                        " (not in this kernel: {})",
                        n.attribution.events_missing.join(", ")
                    )
                }
            );
        }
        (false, Some(why)) => {
            let _ = writeln!(out, "no attribution: {why}");
        }
        (false, None) => {}
    }
    for p in &n.attribution.restore_problems {
        let _ = writeln!(out, "warning: {p}");
    }
    for r in &n.attribution.recovered {
        let _ = writeln!(out, "note: {r}");
    }
    for cpu in &n.cpus {
        cpu_report(&mut out, cpu);
    }
    out
}

fn cpu_report(out: &mut String, c: &CpuNoise) {
    let _ = writeln!(
        out,
        "\ncpu{}: noise {} in {} ({:.4} %), CPU available {:.4} %; {} gaps{}",
        c.cpu,
        format_ns_as(c.noise_ns, NsStyle::Fixed),
        format_ns_as(c.run_ns, NsStyle::Fixed),
        c.noise_share_percent,
        c.available_percent,
        c.gaps,
        if c.gaps_dropped > 0 {
            format!(" ({} not stored: buffer full)", c.gaps_dropped)
        } else {
            String::new()
        }
    );
    let (a, b) = (&c.without_capture, &c.with_capture);
    let _ = writeln!(
        out,
        "  overhead: loop floor/mean {:.1}/{:.1} ns and noise {:.3} % in {} without capture, {:.1}/{:.1} ns and {:.3} % with; {} events{}",
        a.loop_floor_ps as f64 / 1000.0,
        a.mean_loop_ps as f64 / 1000.0,
        a.noise_share_percent,
        format_ns_as(a.run_ns, NsStyle::Fixed),
        b.loop_floor_ps as f64 / 1000.0,
        b.mean_loop_ps as f64 / 1000.0,
        b.noise_share_percent,
        c.events,
        if c.events_lost > 0 {
            format!(", {} LOST (buffer overflow: attribution is partial)", c.events_lost)
        } else {
            String::new()
        }
    );
    if let (Some(a), Some(u)) = (c.attributed_ns, c.unexplained_ns) {
        let _ = writeln!(
            out,
            "  attributed {} ({:.1} %), unexplained {} ({:.1} %)",
            format_ns_as(a, NsStyle::Fixed),
            a as f64 * 100.0 / c.noise_ns.max(1) as f64,
            format_ns_as(u, NsStyle::Fixed),
            u as f64 * 100.0 / c.noise_ns.max(1) as f64
        );
    }
    if !c.classes.is_empty() {
        let _ = writeln!(
            out,
            "  {:<12} {:>8} {:>12} {:>12}",
            "class", "count", "total", "max"
        );
        for k in &c.classes {
            let _ = writeln!(
                out,
                "  {:<12} {:>8} {:>12} {:>12}",
                k.class.as_str(),
                k.tally.count,
                format_ns_as(k.tally.total_ns, NsStyle::Fixed),
                format_ns_as(k.tally.max_ns, NsStyle::Fixed)
            );
        }
        let _ = writeln!(
            out,
            "  {:<12} {:<34} {:>8} {:>12} {:>12} {:>12}",
            "class", "source", "count", "total", "mean", "max"
        );
        for s in c.sources.iter().take(TOP_SOURCES) {
            let _ = writeln!(
                out,
                "  {:<12} {:<34} {:>8} {:>12} {:>12} {:>12}",
                s.class.as_str(),
                truncate(&s.source, 34),
                s.tally.count,
                format_ns_as(s.tally.total_ns, NsStyle::Fixed),
                format_ns_as(s.tally.total_ns / s.tally.count.max(1), NsStyle::Fixed),
                format_ns_as(s.tally.max_ns, NsStyle::Fixed)
            );
        }
        if c.sources.len() > TOP_SOURCES {
            let _ = writeln!(
                out,
                "  … {} more sources in the JSON result",
                c.sources.len() - TOP_SOURCES
            );
        }
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n - 1).collect();
        t.push('…');
        t
    }
}

/// `cpu,start_ns,duration_ns,class,source`: one row per gap, with its main cause
/// (the share that took most of it; `unattributed` without tracing).
pub fn write_gaps_csv(
    w: &mut impl Write,
    gaps: &[(u32, Vec<AttributedGap>)],
    attributed: bool,
) -> std::io::Result<()> {
    writeln!(w, "cpu,start_ns,duration_ns,class,source")?;
    for (cpu, list) in gaps {
        for g in list {
            let (class, source) = if attributed {
                g.main_cause()
            } else {
                (NoiseClass::Unexplained, "")
            };
            let class = if attributed {
                class.as_str()
            } else {
                "unattributed"
            };
            writeln!(
                w,
                "{cpu},{},{},{class},{}",
                g.start_ns,
                g.duration_ns,
                csv_field(source)
            )?;
        }
    }
    Ok(())
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tame_trace::attribute::Share;

    #[test]
    fn csv_names_the_main_cause_and_quotes_odd_names() {
        let gaps = vec![(
            1,
            vec![
                AttributedGap {
                    start_ns: 100,
                    duration_ns: 60,
                    shares: vec![Share {
                        class: NoiseClass::Thread,
                        source: "odd,name/7".into(),
                        net_ns: 50,
                        prio: Some(120),
                    }],
                    unexplained_ns: 10,
                    unexplained_within: Vec::new(),
                },
                AttributedGap {
                    start_ns: 900,
                    duration_ns: 5,
                    shares: vec![],
                    unexplained_ns: 5,
                    unexplained_within: Vec::new(),
                },
            ],
        )];
        let mut out = Vec::new();
        write_gaps_csv(&mut out, &gaps, true).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "cpu,start_ns,duration_ns,class,source\n1,100,60,thread,\"odd,name/7\"\n1,900,5,unexplained,unexplained\n"
        );
        let mut out = Vec::new();
        write_gaps_csv(&mut out, &gaps, false).unwrap();
        assert!(String::from_utf8(out)
            .unwrap()
            .contains("1,900,5,unattributed,\n"));
    }
}
