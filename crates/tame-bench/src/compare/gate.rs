//! `tame compare --gate BASELINE… NEW`: a regression gate. Each figure that matters
//! (latency percentiles, missed periods, noise share, ipc one-way latency and throughput) is
//! judged against the baseline's run-to-run spread: NEW fails when it is worse than the
//! baseline's worst run by more than that spread and by more than a ratio.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::{
    aligned, figure, fmt_value, labelled, merged_repeats_only_group, supported, Compared, Side,
};
use crate::error::{invalid, Result};
use crate::result::Spread;

/// Version of a gate's verdict as JSON, its `schema` (docs/results.md).
impl tame_host::Document for Gate {
    const SCHEMA: tame_host::Schema = tame_host::schema!(Tagged "tame.gate", 1);
}

/// How far past the baseline's worst run (by default) a figure may go before it fails,
/// also when the spread is narrower: 5 %. Two runs on the same quiet machine rarely agree
/// closer on a percentile, and an identical spread (width 0) would otherwise fail on 1 ns.
pub const DEFAULT_RATIO: f64 = 1.05;

/// Which way a figure gets better.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    /// Times, counts of misses, shares of the CPU taken.
    Lower,
    /// Rates: messages or work per second.
    Higher,
}

/// The counters and derived figures judged, with their direction; metrics (times) are
/// judged by [`METRIC_FIGURES`].
const NAMED: &[(&str, Better)] = &[
    ("missed_periods", Better::Lower),
    ("noise_share_percent", Better::Lower),
    ("median_over_floor", Better::Lower),
    // cache: how much slower the task ran beside the competitor.
    ("slowdown_p50", Better::Lower),
    ("slowdown_p99_9", Better::Lower),
    // reserve: the client's share varying from window to window (stability).
    ("cv", Better::Lower),
    ("throughput_msgs_per_s", Better::Higher),
    ("throughput", Better::Higher),
    ("throughput_per_cpu", Better::Higher),
];

/// The percentiles of a time metric that are judged; `max` joins them with `with_max`
/// (one outlier decides it, so it is opt-in). p99.999 is left out: a short run holds too
/// few samples for it to be more than the maximum again.
const METRIC_FIGURES: &[&str] = &["p50", "p99", "p99_9"];

/// Units of metrics judged (lower is better for each): times (mem's accesses in ps).
const TIME_UNITS: &[&str] = &["ns", "ps", "cycles"];

/// What the gate is told: the default ratio, per-figure ratios, whether `max` counts.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Rule {
    pub default_ratio: f64,
    /// Keyed by a figure (`latency p99_9`, `missed_periods`), a metric (`latency`) or a
    /// percentile (`p99_9`); the first that matches, in that order, wins.
    pub thresholds: BTreeMap<String, f64>,
    pub with_max: bool,
}

impl Default for Rule {
    fn default() -> Self {
        Rule {
            default_ratio: DEFAULT_RATIO,
            thresholds: BTreeMap::new(),
            with_max: false,
        }
    }
}

impl Rule {
    /// Add `KEY=RATIO` (from `--threshold`); a ratio below 1 or not a number is refused.
    pub fn threshold(&mut self, arg: &str) -> Result<()> {
        let bad = |why: &str| {
            invalid(format!(
                "--threshold {arg}: {why} — give FIGURE=RATIO, e.g. `latency p99_9=1.2`, `p99=1.1`, `missed_periods=2` or `*=1.1` (RATIO ≥ 1: how much worse than the baseline's worst run a figure may get)"
            ))
        };
        let (key, ratio) = arg.rsplit_once('=').ok_or_else(|| bad("no `=`"))?;
        let key = key.trim();
        let ratio: f64 = ratio
            .trim()
            .parse()
            .map_err(|_| bad("the ratio is not a number"))?;
        if key.is_empty() {
            return Err(bad("no figure before `=`"));
        }
        if !ratio.is_finite() || ratio < 1.0 {
            return Err(bad("the ratio is below 1"));
        }
        if key == "*" {
            self.default_ratio = ratio;
        } else {
            self.thresholds.insert(key.to_string(), ratio);
        }
        Ok(())
    }

    /// The keys a threshold for `name` may have, most specific first: the figure, its
    /// metric, its percentile.
    fn keys_of(name: &str) -> [&str; 3] {
        let (metric, fig) = name.split_once(' ').unwrap_or((name, name));
        [name, metric, fig]
    }

    /// The ratio for `name` (`metric figure` or a counter/derived name).
    fn ratio_for(&self, name: &str) -> f64 {
        Self::keys_of(name)
            .iter()
            .find_map(|k| self.thresholds.get(*k))
            .copied()
            .unwrap_or(self.default_ratio)
    }
}

/// Where a baseline's spread came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SpreadFrom {
    /// The figure over two or more baseline results.
    Runs,
    /// The one baseline's own spread (an ipc result's rounds, `all` over its threads).
    Result,
}

/// The outcome for one figure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Past the limit: the gate fails.
    Worse,
    /// Between the baseline's best run and the limit.
    Within,
    /// Better than the baseline's best run.
    Better,
    /// One baseline result without a spread of its own: nothing to weigh against.
    NoSpread,
    /// The baseline has the figure, the new result does not.
    MissingInNew,
    /// The new result has the figure, no baseline does.
    MissingInBaseline,
}

impl Verdict {
    fn word(self) -> &'static str {
        match self {
            Verdict::Worse => "WORSE",
            Verdict::Within => "within",
            Verdict::Better => "better",
            Verdict::NoSpread => "not judged: no spread",
            Verdict::MissingInNew => "not judged: missing in new",
            Verdict::MissingInBaseline => "not judged: missing in baseline",
        }
    }

    fn judged(self) -> bool {
        matches!(self, Verdict::Worse | Verdict::Within | Verdict::Better)
    }
}

/// One figure judged.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Judged {
    pub group: String,
    /// As `tame compare` names it: `latency p99_9`, `missed_periods`.
    pub name: String,
    /// "ns" for times, "" otherwise.
    pub unit: String,
    pub better: Better,
    /// The baseline's range (its runs', or the one result's own spread); with one value
    /// when there is no spread.
    pub baseline: Option<Spread>,
    pub spread_from: Option<SpreadFrom>,
    /// How many baseline results have the figure.
    pub baseline_runs: usize,
    pub new: Option<f64>,
    /// The ratio the figure was allowed past the baseline's worst run.
    pub ratio: f64,
    /// Worse than this fails: past the worst run by the spread's width and by `ratio`.
    pub limit: Option<f64>,
    pub verdict: Verdict,
}

/// Counts of the verdicts.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Tally {
    pub judged: usize,
    pub worse: usize,
    pub within: usize,
    pub better: usize,
    pub not_judged: usize,
}

/// The gate's verdict on a new result.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Gate {
    pub bench: String,
    pub baseline: Vec<String>,
    pub new: String,
    pub rule: Rule,
    pub figures: Vec<Judged>,
    pub tally: Tally,
    /// False when any figure is worse.
    pub passed: bool,
    pub notes: Vec<String>,
}

/// One figure of one result: its value, the spread the result itself carries, unit, direction.
struct Point {
    value: f64,
    carried: Option<Spread>,
    unit: String,
    better: Better,
}

/// The figures of `c` the gate judges, by (group, name). A merged group that repeats the
/// one group is left out (it would be judged twice).
fn points(c: &Compared, with_max: bool) -> BTreeMap<(String, String), Point> {
    let r = &c.result;
    let skip_merged = merged_repeats_only_group(r).is_some();
    let mut out = BTreeMap::new();
    for g in labelled(r) {
        if g.merged && skip_merged {
            continue;
        }
        let side = Side::of(r, &g);
        let grp = g.group;
        let max = with_max.then_some("max");
        for m in &grp.metrics {
            if !TIME_UNITS.contains(&m.unit.as_str()) {
                continue;
            }
            for f in METRIC_FIGURES.iter().copied().chain(max) {
                // A percentile its samples cannot support is no figure to judge by.
                if !supported(&m.summary, f) {
                    continue;
                }
                let point = Point {
                    value: figure(&m.summary, f) as f64,
                    carried: side.figure_spread(&m.name, f),
                    unit: m.unit.clone(),
                    better: Better::Lower,
                };
                out.insert((g.label.clone(), format!("{} {f}", m.name)), point);
            }
        }
        for (name, better) in NAMED {
            let value = grp
                .counters
                .get(*name)
                .map(|v| *v as f64)
                .or_else(|| grp.derived.get(*name).copied());
            if let Some(value) = value {
                let point = Point {
                    value,
                    carried: grp.spread.get(*name).copied(),
                    unit: String::new(),
                    better: *better,
                };
                out.insert((g.label.clone(), name.to_string()), point);
            }
        }
    }
    out
}

/// The limit past which `new` fails, for a baseline range and ratio: the worst run moved
/// further by the range's width, and by the ratio, whichever is further.
fn limit(range: Spread, better: Better, ratio: f64) -> f64 {
    let width = range.max - range.min;
    match better {
        Better::Lower => (range.max + width).max(range.max * ratio),
        Better::Higher => (range.min - width).min(range.min / ratio),
    }
}

fn verdict(range: Spread, better: Better, limit: f64, new: f64) -> Verdict {
    match better {
        Better::Lower if new > limit => Verdict::Worse,
        Better::Lower if new < range.min => Verdict::Better,
        Better::Higher if new < limit => Verdict::Worse,
        Better::Higher if new > range.max => Verdict::Better,
        _ => Verdict::Within,
    }
}

impl Gate {
    /// Judge `new` against `baseline` (one or more results of the same bench). Refused
    /// (bad input) for results of different benches and when no figure can be judged.
    pub fn new(
        baseline: &[(String, Compared)],
        new_name: &str,
        new: &Compared,
        rule: Rule,
    ) -> Result<Self> {
        if baseline.is_empty() {
            return Err(invalid(
                "no baseline result — give BASELINE… NEW: one or more baseline results (or a directory of them), then the new one",
            ));
        }
        let bench = &new.result.bench;
        for (name, b) in baseline {
            if &b.result.bench != bench {
                return Err(invalid(format!(
                    "{name} is a `{}` result and {new_name} a `{bench}` result — gate a result against baselines of the same bench",
                    b.result.bench
                )));
            }
        }
        let runs: Vec<_> = baseline
            .iter()
            .map(|(_, b)| points(b, rule.with_max))
            .collect();
        let now = points(new, rule.with_max);
        let mut keys: Vec<&(String, String)> = runs.iter().flat_map(|r| r.keys()).collect();
        keys.extend(now.keys());
        keys.sort();
        keys.dedup();
        let figures: Vec<Judged> = keys
            .into_iter()
            .map(|k| judge(k, &runs, now.get(k), &rule))
            .collect();
        let mut tally = Tally::default();
        for f in &figures {
            match f.verdict {
                Verdict::Worse => tally.worse += 1,
                Verdict::Within => tally.within += 1,
                Verdict::Better => tally.better += 1,
                _ => tally.not_judged += 1,
            }
        }
        tally.judged = figures.iter().filter(|f| f.verdict.judged()).count();
        if tally.judged == 0 {
            let why = if figures.is_empty() {
                "neither side has a figure the gate judges (time percentiles, missed periods, noise share, throughput: docs/bench.md, `compare --gate`, lists them)".to_string()
            } else if baseline.len() < 2 {
                "one baseline result without a run-to-run spread of its own — give two or more baseline results (repeated runs), or an ipc result of two or more --rounds".to_string()
            } else {
                "the baseline and the new result have no figure in common".to_string()
            };
            return Err(invalid(format!("nothing to judge {new_name} by: {why}")));
        }
        let mut notes = vec![format!(
            "a figure fails when it is worse than the baseline's worst run by more than the baseline's spread (its width) and by more than its ratio ({} unless --threshold says otherwise)",
            rule.default_ratio
        )];
        if tally.not_judged > 0 {
            notes.push(format!(
                "{} not judged (listed as such): they do not fail the gate, nor pass it",
                tame_rt::plural::count(tally.not_judged as u64, "figure", "figures")
            ));
        }
        // A threshold that names no figure here is a typo or meant for another bench: said,
        // not refused (bench/run-all.sh passes the same thresholds to every bench's gate).
        for key in rule.thresholds.keys() {
            if !figures
                .iter()
                .any(|f| Rule::keys_of(&f.name).contains(&key.as_str()))
            {
                notes.push(format!(
                    "--threshold {key}=…: no figure of this result is named so (figures are named as in the table: `latency p99`, a metric `latency`, a percentile `p99`)"
                ));
            }
        }
        Ok(Gate {
            bench: bench.clone(),
            baseline: baseline.iter().map(|(n, _)| n.clone()).collect(),
            new: new_name.to_string(),
            passed: tally.worse == 0,
            rule,
            figures,
            tally,
            notes,
        })
    }
}

/// One figure: the baseline's range over the runs that have it (or the one run's own
/// spread), the limit, the verdict.
fn judge(
    key: &(String, String),
    runs: &[BTreeMap<(String, String), Point>],
    new: Option<&Point>,
    rule: &Rule,
) -> Judged {
    let have: Vec<&Point> = runs.iter().filter_map(|r| r.get(key)).collect();
    let ratio = rule.ratio_for(&key.1);
    let any = have
        .first()
        .copied()
        .or(new)
        .expect("a key comes from a side");
    let (range, from) = match have.as_slice() {
        [] => (None, None),
        [one] => match one.carried {
            // The result's own spread, widened to its value (a p50 over all rounds can
            // fall outside the rounds' p50s).
            Some(mut s) => {
                s.include(one.value);
                (Some(s), Some(SpreadFrom::Result))
            }
            None => (Some(Spread::of(one.value)), None),
        },
        [first, rest @ ..] => {
            let mut s = Spread::of(first.value);
            rest.iter().for_each(|p| s.include(p.value));
            (Some(s), Some(SpreadFrom::Runs))
        }
    };
    let limit = from.and(range).map(|r| limit(r, any.better, ratio));
    let verdict = match (range, new, limit) {
        (None, _, _) => Verdict::MissingInBaseline,
        (Some(_), None, _) => Verdict::MissingInNew,
        (Some(_), Some(_), None) => Verdict::NoSpread,
        (Some(r), Some(n), Some(l)) => verdict(r, any.better, l, n.value),
    };
    Judged {
        group: key.0.clone(),
        name: key.1.clone(),
        unit: any.unit.clone(),
        better: any.better,
        baseline: range,
        spread_from: from,
        baseline_runs: have.len(),
        new: new.map(|p| p.value),
        ratio,
        limit,
        verdict,
    }
}

/// The human view: one line per figure (baseline range, spread width and where it came
/// from, limit, new, verdict), then the outcome and the notes.
pub fn table(g: &Gate) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "tame compare --gate ({}): baseline {} ({}), new {}",
        g.bench,
        g.baseline.join(", "),
        tame_rt::plural::count(g.baseline.len() as u64, "result", "results"),
        g.new
    );
    let mut lines = vec![[
        "group", "figure", "better", "baseline", "spread", "limit", "new", "verdict",
    ]
    .map(String::from)
    .to_vec()];
    for f in &g.figures {
        let v = |x| fmt_value(x, &f.unit);
        let baseline = match f.baseline {
            Some(s) if s.min == s.max => v(Some(s.min)),
            Some(s) => format!("{}..{}", v(Some(s.min)), v(Some(s.max))),
            None => "-".into(),
        };
        let spread = match (f.baseline, f.spread_from) {
            (Some(s), Some(from)) => format!(
                "{} ({})",
                v(Some(s.max - s.min)),
                match from {
                    SpreadFrom::Runs => format!("{} runs", f.baseline_runs),
                    SpreadFrom::Result => "in result".into(),
                }
            ),
            _ => "-".into(),
        };
        lines.push(vec![
            f.group.clone(),
            f.name.clone(),
            match f.better {
                Better::Lower => "lower".into(),
                Better::Higher => "higher".into(),
            },
            baseline,
            spread,
            v(f.limit),
            v(f.new),
            f.verdict.word().into(),
        ]);
    }
    out.push_str(&aligned(&lines, &[0, 1, 2, 7]));
    let t = &g.tally;
    let _ = writeln!(
        out,
        "{}: {} judged — {} worse, {} within, {} better; {} not judged",
        if g.passed { "PASSED" } else { "FAILED" },
        t.judged,
        t.worse,
        t.within,
        t.better,
        t.not_judged
    );
    for note in &g.notes {
        let _ = writeln!(out, "{note}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::{GroupResult, Metric};
    use crate::stats::Summary;
    use crate::BenchResult;

    fn summary(p50: u64, p99: u64) -> Summary {
        Summary {
            // Enough samples for every percentile the gate judges (p99.9 needs 10 000).
            count: 1_000_000,
            min: 1,
            mean: p50,
            p50,
            p99,
            p99_9: p99 * 2,
            p99_999: p99 * 3,
            max: p99 * 4,
            ..Summary::default()
        }
    }

    /// A cycle result on cpu1: latency p50/p99 and missed periods.
    fn cycle(p50: u64, p99: u64, missed: u64) -> Compared {
        let g = GroupResult {
            label: "cpu1".into(),
            cpu: Some(1),
            metrics: vec![Metric {
                name: "latency".into(),
                unit: "ns".into(),
                summary: summary(p50, p99),
                distribution: None,
            }],
            counters: [("missed_periods".to_string(), missed)].into(),
            ..GroupResult::default()
        };
        let merged = GroupResult {
            label: "all".into(),
            cpu: None,
            ..g.clone()
        };
        Compared {
            result: BenchResult {
                bench: "cycle".into(),
                groups: vec![g],
                merged,
                ..serde_json::from_str(include_str!("../../testdata/compare/a-sleep.json")).unwrap()
            },
            noise: None,
            watch: None,
        }
    }

    /// An ipc result of one group with one-way p50 and throughput, each with its rounds' spread.
    fn ipc(p50: u64, p50_rounds: (f64, f64), rate: f64, rate_rounds: (f64, f64)) -> Compared {
        let mut c = cycle(p50, p50 * 2, 0);
        c.result.bench = "ipc".into();
        let g = &mut c.result.groups[0];
        g.label = "tame-ring/8B".into();
        g.metrics[0].name = "one_way_latency".into();
        g.counters.clear();
        g.derived.insert("throughput_msgs_per_s".into(), rate);
        let (lo, hi) = p50_rounds;
        g.spread
            .insert("one_way_latency p50".into(), Spread { min: lo, max: hi });
        let (lo, hi) = rate_rounds;
        g.spread
            .insert("throughput_msgs_per_s".into(), Spread { min: lo, max: hi });
        c.result.merged = GroupResult {
            label: "ratios".into(),
            ..GroupResult::default()
        };
        c
    }

    fn named(runs: Vec<Compared>) -> Vec<(String, Compared)> {
        runs.into_iter()
            .enumerate()
            .map(|(i, c)| (format!("base{i}.json"), c))
            .collect()
    }

    fn find<'a>(g: &'a Gate, group: &str, name: &str) -> &'a Judged {
        g.figures
            .iter()
            .find(|f| f.group == group && f.name == name)
            .unwrap_or_else(|| panic!("no {group} {name}"))
    }

    #[test]
    fn a_regression_past_the_spread_fails_and_within_passes() {
        // Baseline p99 over three runs: 100..120 µs → width 20, limit max(140, 126) = 140.
        let base = named(vec![
            cycle(10_000, 100_000, 0),
            cycle(11_000, 120_000, 0),
            cycle(10_500, 110_000, 0),
        ]);
        let g = Gate::new(&base, "new", &cycle(10_800, 139_000, 0), Rule::default()).unwrap();
        let p99 = find(&g, "cpu1", "latency p99");
        assert_eq!(
            p99.baseline,
            Some(Spread {
                min: 100_000.0,
                max: 120_000.0
            })
        );
        assert_eq!(p99.limit, Some(140_000.0));
        assert_eq!(p99.verdict, Verdict::Within);
        assert_eq!(p99.spread_from, Some(SpreadFrom::Runs));
        assert!(g.passed, "{}", table(&g));
        // `all` repeats cpu1: judged once.
        assert!(g.figures.iter().all(|f| f.group == "cpu1"));
        // max is opt-in.
        assert!(g.figures.iter().all(|f| !f.name.ends_with(" max")));

        let g = Gate::new(&base, "new", &cycle(10_800, 141_000, 0), Rule::default()).unwrap();
        assert_eq!(find(&g, "cpu1", "latency p99").verdict, Verdict::Worse);
        assert!(!g.passed);
        assert_eq!(g.tally.worse, 2, "p99 and p99.9 (twice p99)");
        let text = table(&g);
        assert!(
            text.contains("FAILED: 4 judged — 2 worse, 2 within, 0 better; 0 not judged"),
            "{text}"
        );
        let line = text.lines().find(|l| l.contains("latency p99 ")).unwrap();
        assert!(line.ends_with("WORSE"), "{line}");
        assert!(line.contains("100.00µs..120.00µs"), "{line}");
    }

    #[test]
    fn the_ratio_gives_slack_where_the_spread_is_narrow_and_a_threshold_overrides_it() {
        // Identical runs: width 0, so the default 5 % decides.
        let base = named(vec![cycle(1_000, 10_000, 0), cycle(1_000, 10_000, 0)]);
        let g = Gate::new(&base, "new", &cycle(1_040, 10_000, 0), Rule::default()).unwrap();
        assert_eq!(find(&g, "cpu1", "latency p50").verdict, Verdict::Within);
        let g = Gate::new(&base, "new", &cycle(1_060, 10_000, 0), Rule::default()).unwrap();
        assert_eq!(find(&g, "cpu1", "latency p50").verdict, Verdict::Worse);
        // `p50=1.1` lets it through; a metric's key (`latency`) is more specific than a
        // percentile's, and the whole figure's more than either.
        let mut rule = Rule::default();
        rule.threshold("p50=1.1").unwrap();
        let judged = |rule: &Rule| {
            let g = Gate::new(&base, "new", &cycle(1_060, 10_000, 0), rule.clone()).unwrap();
            let f = find(&g, "cpu1", "latency p50");
            (f.verdict, f.ratio)
        };
        assert_eq!(judged(&rule), (Verdict::Within, 1.1));
        rule.threshold("latency=1.01").unwrap();
        assert_eq!(judged(&rule), (Verdict::Worse, 1.01));
        rule.threshold("latency p50=1.2").unwrap();
        assert_eq!(judged(&rule), (Verdict::Within, 1.2));
        // Missed periods of 0 in every run: any miss fails (no ratio of zero gives slack).
        let g = Gate::new(&base, "new", &cycle(1_000, 10_000, 1), Rule::default()).unwrap();
        assert_eq!(find(&g, "cpu1", "missed_periods").verdict, Verdict::Worse);
        for bad in ["p50", "p50=abc", "=2", "p99=0.9", "p99=NaN"] {
            let e = Rule::default().threshold(bad).unwrap_err();
            assert!(e.is_bad_input() && e.to_string().contains(bad), "{e}");
        }
        // A key that names no figure is said.
        let mut typo = Rule::default();
        typo.threshold("latncy=2").unwrap();
        let g = Gate::new(&base, "new", &cycle(1_000, 10_000, 0), typo).unwrap();
        assert!(
            g.notes
                .iter()
                .any(|n| n.starts_with("--threshold latncy=…: no figure")),
            "{:?}",
            g.notes
        );
        let g = Gate::new(&base, "new", &cycle(1_000, 10_000, 0), rule).unwrap();
        assert!(
            g.notes.iter().all(|n| !n.contains("no figure")),
            "{:?}",
            g.notes
        );
        let mut all = Rule::default();
        all.threshold("*=1.5").unwrap();
        assert_eq!(all.default_ratio, 1.5);
    }

    #[test]
    fn better_passes_and_throughput_gets_better_upwards() {
        let base = named(vec![cycle(10_000, 100_000, 3), cycle(11_000, 120_000, 5)]);
        let g = Gate::new(&base, "new", &cycle(5_000, 50_000, 0), Rule::default()).unwrap();
        assert!(g.passed);
        assert_eq!(find(&g, "cpu1", "latency p99").verdict, Verdict::Better);
        assert_eq!(find(&g, "cpu1", "missed_periods").verdict, Verdict::Better);

        // One ipc result of several rounds carries its spread: p50 rounds 40..50 ns,
        // throughput rounds 9..10 M/s (limit min(9 − 1, 9 / 1.05) = 8 M/s).
        let base = named(vec![ipc(45, (40.0, 50.0), 9.5e6, (9e6, 10e6))]);
        let rate = |g: &Gate| find(g, "tame-ring/8B", "throughput_msgs_per_s").clone();
        let gate = |new: Compared| Gate::new(&base, "new", &new, Rule::default()).unwrap();
        let more = gate(ipc(45, (44.0, 46.0), 12e6, (11e6, 13e6)));
        assert_eq!(rate(&more).better, Better::Higher);
        assert_eq!(rate(&more).verdict, Verdict::Better);
        assert_eq!(rate(&more).limit, Some(8e6));
        assert_eq!(rate(&more).spread_from, Some(SpreadFrom::Result));
        // The rounds carry no p99.9: listed, not judged.
        let tail = find(&more, "tame-ring/8B", "one_way_latency p99_9");
        assert_eq!(tail.verdict, Verdict::NoSpread);
        assert_eq!(tail.limit, None);
        let less = gate(ipc(45, (44.0, 46.0), 7.9e6, (7e6, 8e6)));
        assert_eq!(rate(&less).verdict, Verdict::Worse);
        assert!(!less.passed);
        // 61 ns > limit max(50 + 10, 50 × 1.05) = 60 ns: worse.
        let slow = gate(ipc(61, (58.0, 62.0), 9.5e6, (9e6, 10e6)));
        assert_eq!(
            find(&slow, "tame-ring/8B", "one_way_latency p50").verdict,
            Verdict::Worse
        );
        assert_eq!(rate(&slow).verdict, Verdict::Within);
    }

    #[test]
    fn what_cannot_be_judged_is_said_and_nothing_to_judge_is_refused() {
        // One cycle result carries no spread: nothing judged → refused.
        let one = named(vec![cycle(1_000, 10_000, 0)]);
        let e = Gate::new(&one, "new.json", &cycle(1_000, 10_000, 0), Rule::default()).unwrap_err();
        assert!(e.is_bad_input());
        assert!(
            e.to_string().contains("two or more baseline results"),
            "{e}"
        );
        // Another bench: refused.
        let mut other = cycle(1_000, 10_000, 0);
        other.result.bench = "sleep".into();
        let two = named(vec![cycle(1_000, 10_000, 0), cycle(1_000, 10_000, 0)]);
        let e = Gate::new(&two, "new.json", &other, Rule::default()).unwrap_err();
        assert!(
            e.to_string()
                .contains("a `cycle` result and new.json a `sleep`"),
            "{e}"
        );
        assert!(Gate::new(&[], "n", &other, Rule::default())
            .unwrap_err()
            .is_bad_input());
        // A figure missing on one side is listed, not judged, and does not decide.
        let mut fewer = cycle(1_000, 10_000, 0);
        fewer.result.groups[0].counters.clear();
        fewer.result.merged.counters.clear();
        let g = Gate::new(&two, "new", &fewer, Rule::default()).unwrap();
        assert_eq!(
            find(&g, "cpu1", "missed_periods").verdict,
            Verdict::MissingInNew
        );
        assert_eq!(g.tally.not_judged, 1);
        assert!(g.passed);
        assert!(table(&g).contains("not judged: missing in new"));
        let g = Gate::new(
            &named(vec![fewer.clone(), fewer]),
            "new",
            &cycle(1_000, 10_000, 0),
            Rule::default(),
        )
        .unwrap();
        assert_eq!(
            find(&g, "cpu1", "missed_periods").verdict,
            Verdict::MissingInBaseline
        );
        // With --max the maximum is judged too.
        let rule = Rule {
            with_max: true,
            ..Rule::default()
        };
        let g = Gate::new(&two, "new", &cycle(1_000, 20_000, 0), rule).unwrap();
        assert_eq!(find(&g, "cpu1", "latency max").verdict, Verdict::Worse);
    }
}
