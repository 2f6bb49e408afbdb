//! What the figures draw, independent of where it came from: a configuration (one result,
//! labelled), the context printed beside each figure, and a series (one metric of one
//! configuration: summary, distribution, time line).

use std::path::Path;

use tame_bench::distribution::Distribution;
use tame_bench::noise::NoiseFindings;
use tame_bench::timeline::{Timeline, Window};
use tame_bench::watch::WatchFindings;
use tame_bench::{BenchResult, Summary};
use tame_host::environment::RunEnvironment;

/// One result drawn as one configuration of an overlay.
#[derive(Clone, Debug)]
pub struct Config {
    pub label: String,
    pub file: String,
    pub result: BenchResult,
    pub noise: Option<NoiseFindings>,
    pub watch: Option<WatchFindings>,
}

/// What is printed beside a figure for each configuration it draws.
#[derive(Clone, Debug, PartialEq)]
pub struct Context {
    pub label: String,
    pub file: String,
    /// Kernel, preemption model, CPUs, hypervisor, load, partition.
    pub environment: String,
    /// The exact command line, shell-quoted.
    pub command: String,
}

/// One metric of one configuration.
#[derive(Clone, Debug)]
pub struct Series {
    pub label: String,
    /// The metric's name and unit (`latency`, `ns`).
    pub metric: String,
    pub unit: String,
    pub summary: Summary,
    pub distribution: Option<Distribution>,
    /// Over the run: every thread's windows merged (see [`envelope`]).
    pub timeline: Option<Timeline>,
    /// Periods the run missed (cycle), over all threads.
    pub missed: u64,
}

impl Series {
    /// A metric of a group as a series labelled `label` (no time line, nothing missed).
    pub fn of_metric(label: String, m: &tame_bench::Metric) -> Series {
        Series {
            label,
            metric: m.name.clone(),
            unit: m.unit.clone(),
            summary: m.summary,
            distribution: m.distribution.clone(),
            timeline: None,
            missed: 0,
        }
    }
}

impl Config {
    /// The metric every figure of this bench draws: the merged group's first (cycle
    /// `latency`, sleep `jitter`, fwq `excess`, noise `gap`).
    pub fn primary_metric(&self) -> Option<&tame_bench::Metric> {
        self.result.merged.metrics.first()
    }

    /// The primary metric as a series, with the threads' time lines merged.
    pub fn primary_series(&self) -> Option<Series> {
        let m = self.primary_metric()?;
        let timelines: Vec<&Timeline> = self
            .result
            .groups
            .iter()
            .filter_map(|g| g.timeline.as_ref())
            .collect();
        Some(Series {
            label: self.label.clone(),
            metric: m.name.clone(),
            unit: m.unit.clone(),
            summary: m.summary,
            distribution: m.distribution.clone(),
            timeline: envelope(&timelines),
            missed: self.counter("missed_periods"),
        })
    }

    /// A counter of the merged group (0 when absent).
    pub fn counter(&self, name: &str) -> u64 {
        self.result.merged.counters.get(name).copied().unwrap_or(0)
    }

    pub fn context(&self) -> Context {
        let r = &self.result;
        let mut env = environment(&r.environment);
        match &r.load {
            Some(l) => {
                let kinds: Vec<&str> = l.kinds.iter().map(|k| k.name()).collect();
                env.push_str(&format!("; load {} on CPUs {}", kinds.join(","), l.cpus));
            }
            None => env.push_str("; no load"),
        }
        if let Some(p) = &r.partition {
            env.push_str(&format!("; measured in partition {p}"));
        }
        Context {
            label: self.label.clone(),
            file: self.file.clone(),
            environment: env,
            command: shell_words(&r.command_line),
        }
    }
}

/// The machine in one line: kernel, preemption model, CPUs, hypervisor.
pub fn environment(e: &RunEnvironment) -> String {
    let hv = match &e.hypervisor {
        Some(h) => format!("under the hypervisor {h}"),
        None => "no hypervisor reported".into(),
    };
    format!(
        "kernel {} ({}), preemption {}, {} CPUs online ({}), {hv}",
        e.kernel_release,
        e.kernel_version,
        e.preemption_model,
        e.online_cpus.len(),
        e.online_cpus
    )
}

/// argv as one would type it: words with spaces or quotes single-quoted.
pub fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|w| {
            if !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c))
            {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Every thread's time line merged into one: windows of the longest thread's window length
/// (all are powers of two ns, so each shorter window lies in exactly one longer one), each
/// keeping the highest max and lowest min of the windows in it, their count-weighted mean
/// and their missed periods — no peak is lost. `None` when no thread kept one.
pub fn envelope(timelines: &[&Timeline]) -> Option<Timeline> {
    let first = timelines.first()?;
    let width = timelines.iter().map(|t| t.window_ns.max(1)).max()?;
    let slot_of = |t: &Timeline, i: usize| {
        ((i as u128 * t.window_ns.max(1) as u128) / width as u128) as usize
    };
    let len = timelines
        .iter()
        .map(|t| {
            if t.windows.is_empty() {
                0
            } else {
                slot_of(t, t.windows.len() - 1) + 1
            }
        })
        .max()
        .unwrap_or(0);
    let mut acc: Vec<(Window, u128)> = vec![(Window::default(), 0); len];
    for t in timelines {
        for (i, w) in t.windows.iter().enumerate() {
            let (slot, sum) = &mut acc[slot_of(t, i)];
            if w.count > 0 {
                slot.min = if slot.count == 0 {
                    w.min
                } else {
                    slot.min.min(w.min)
                };
                slot.max = slot.max.max(w.max);
                slot.count += w.count;
                *sum += w.mean as u128 * w.count as u128;
            }
            slot.missed += w.missed;
        }
    }
    Some(Timeline {
        metric: first.metric.clone(),
        unit: first.unit.clone(),
        window_ns: width,
        windows: acc
            .into_iter()
            .map(|(mut w, sum)| {
                if w.count > 0 {
                    w.mean = (sum / w.count as u128) as u64;
                }
                w
            })
            .collect(),
    })
}

/// Labels that tell the results apart: what differs between them among the partition they
/// ran in (or `shared`), their load and (sleep) their number of tasks; the file names when
/// none of these differ. A single result is labelled by its partition and load.
pub fn labels(results: &[(&str, &BenchResult)]) -> Vec<String> {
    let part = |r: &BenchResult| match &r.partition {
        Some(p) => format!("partition {p}"),
        None => "shared".to_string(),
    };
    let load = |r: &BenchResult| match &r.load {
        Some(l) => format!(
            "load {}",
            l.kinds
                .iter()
                .map(|k| k.name())
                .collect::<Vec<_>>()
                .join(",")
        ),
        None => "no load".to_string(),
    };
    let tasks = |r: &BenchResult| match r.settings.get("tasks").and_then(|t| t.as_u64()) {
        Some(n) => format!("{n} tasks"),
        None => String::new(),
    };
    let aspects: [&dyn Fn(&BenchResult) -> String; 3] = [&part, &load, &tasks];
    let differing: Vec<&&dyn Fn(&BenchResult) -> String> = if results.len() == 1 {
        aspects[..2].iter().collect()
    } else {
        aspects
            .iter()
            .filter(|f| results.iter().any(|(_, r)| f(r) != f(results[0].1)))
            .collect()
    };
    let described: Vec<String> = results
        .iter()
        .map(|(_, r)| {
            differing
                .iter()
                .map(|f| f(r))
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(", ")
        })
        .collect();
    if !differing.is_empty() && unique(&described) {
        return described;
    }
    let stems: Vec<String> = results
        .iter()
        .map(|(file, _)| {
            Path::new(file)
                .file_stem()
                .map_or(file.to_string(), |s| s.to_string_lossy().into_owned())
        })
        .collect();
    if unique(&stems) {
        return stems;
    }
    results.iter().map(|(file, _)| file.to_string()).collect()
}

fn unique(labels: &[String]) -> bool {
    let mut sorted: Vec<&String> = labels.iter().collect();
    sorted.sort();
    sorted.dedup();
    sorted.len() == labels.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeline(window_ns: u64, windows: &[(u64, u64, u64, u64)]) -> Timeline {
        Timeline {
            metric: "latency".into(),
            unit: "ns".into(),
            window_ns,
            windows: windows
                .iter()
                .map(|&(count, max, mean, missed)| Window {
                    count,
                    min: if count > 0 { 1 } else { 0 },
                    max,
                    mean,
                    missed,
                })
                .collect(),
        }
    }

    #[test]
    fn the_envelope_keeps_every_peak_and_missed_period() {
        let a = timeline(
            1024,
            &[(2, 10, 5, 0), (1, 900, 900, 1), (0, 0, 0, 2), (3, 7, 4, 0)],
        );
        let b = timeline(2048, &[(4, 20, 10, 0), (1, 30, 30, 0), (1, 5000, 5000, 0)]);
        let e = envelope(&[&a, &b]).unwrap();
        assert_eq!(e.window_ns, 2048);
        assert_eq!(e.windows.len(), 3);
        assert_eq!(e.windows[0].max, 900);
        assert_eq!(e.windows[0].count, 7);
        // (2×5 + 1×900 + 4×10) / 7
        assert_eq!(e.windows[0].mean, 950 / 7);
        assert_eq!(e.windows[0].missed, 1);
        assert_eq!((e.windows[1].max, e.windows[1].missed), (30, 2));
        assert_eq!(e.windows[2].max, 5000);
        assert!(envelope(&[]).is_none());
    }

    #[test]
    fn shell_words_quote_what_a_shell_would_split() {
        let argv: Vec<String> = ["tame", "bench", "cycle", "--note", "a b", "it's"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            shell_words(&argv),
            r"tame bench cycle --note 'a b' 'it'\''s'"
        );
    }
}
