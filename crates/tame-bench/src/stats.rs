//! Statistics shared by every bench: an HDR histogram at nanosecond
//! resolution plus exact count/min/max/sum, so the summary's extremes and mean
//! are exact and only the percentiles carry the histogram's 0.1 % quantisation.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// The largest value a histogram tracks (one hour, in ns). Larger values are
/// counted at this ceiling; the exact maximum is still kept.
pub const HISTOGRAM_CEILING: u64 = 3_600 * 1_000_000_000;
/// Three significant digits: every percentile is within 0.1 % of the true value.
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// Collects values without allocating: the histogram is sized for its whole
/// range up front, so `record` is safe inside a measuring loop.
#[derive(Clone, Debug)]
pub struct Recorder {
    hist: Histogram<u64>,
    count: u64,
    min: u64,
    max: u64,
    sum: u128,
    sum_sq: u128,
}

impl Default for Recorder {
    fn default() -> Self {
        Self::new()
    }
}

impl Recorder {
    pub fn new() -> Self {
        let mut hist = Histogram::new_with_bounds(1, HISTOGRAM_CEILING, SIGNIFICANT_DIGITS)
            .expect("constant histogram bounds are valid");
        hist.auto(false);
        Self {
            hist,
            count: 0,
            min: u64::MAX,
            max: 0,
            sum: 0,
            sum_sq: 0,
        }
    }

    #[inline(always)]
    pub fn record(&mut self, value: u64) {
        self.hist.saturating_record(value);
        self.count += 1;
        self.min = self.min.min(value);
        self.max = self.max.max(value);
        self.sum += value as u128;
        self.sum_sq += value as u128 * value as u128;
    }

    pub fn merge(&mut self, other: &Recorder) {
        // Both histograms share bounds, so adding cannot fail or resize.
        self.hist
            .add(&other.hist)
            .expect("recorders share histogram bounds");
        self.count += other.count;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.sum += other.sum;
        self.sum_sq += other.sum_sq;
    }

    /// Empty it again, keeping the histogram's memory (no allocation, pages stay touched).
    pub fn reset(&mut self) {
        self.hist.reset();
        self.count = 0;
        self.min = u64::MAX;
        self.max = 0;
        self.sum = 0;
        self.sum_sq = 0;
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn min(&self) -> Option<u64> {
        (self.count > 0).then_some(self.min)
    }

    pub fn max(&self) -> Option<u64> {
        (self.count > 0).then_some(self.max)
    }

    pub fn histogram(&self) -> &Histogram<u64> {
        &self.hist
    }

    /// The value at quantile `q` (0..=1), clamped to the exact extremes.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        self.hist.value_at_quantile(q).clamp(self.min, self.max)
    }

    pub fn summary(&self) -> Summary {
        if self.count == 0 {
            return Summary::default();
        }
        let n = self.count as f64;
        let mean = self.sum as f64 / n;
        let variance = (self.sum_sq as f64 / n - mean * mean).max(0.0);
        Summary {
            count: self.count,
            min: self.min,
            mean: mean.round() as u64,
            stddev: variance.sqrt().round() as u64,
            p50: self.quantile(0.50),
            p90: self.quantile(0.90),
            p99: self.quantile(0.99),
            p99_9: self.quantile(0.999),
            p99_99: self.quantile(0.9999),
            p99_999: self.quantile(0.99999),
            max: self.max,
        }
    }
}

/// A percentile is only a figure where at least this many samples lie beyond it:
/// with fewer, "p99.999" of 15 600 samples is just the maximum under another name.
pub const MIN_SAMPLES_BEYOND: u64 = 10;

/// How many samples the percentile `q` (0 < q < 1) needs: `MIN_SAMPLES_BEYOND / (1 − q)`,
/// so p50 needs 20, p99 1 000 and p99.999 1 000 000.
pub fn samples_needed(q: f64) -> u64 {
    if !(q > 0.0 && q < 1.0) {
        return u64::MAX;
    }
    // Rounded first: 1 − 0.999 is not exactly 0.001 in binary.
    let exact = MIN_SAMPLES_BEYOND as f64 / (1.0 - q);
    let rounded = exact.round();
    if (exact - rounded).abs() < 1e-6 * rounded.max(1.0) {
        rounded as u64
    } else {
        exact.ceil() as u64
    }
}

/// Whether `count` samples support the percentile `q`.
pub fn supports(count: u64, q: f64) -> bool {
    count >= samples_needed(q)
}

/// A percentile for people: the value formatted, or "n/a (needs ≥ N samples)".
pub fn percentile_text(count: u64, q: f64, value: u64, format: impl Fn(u64) -> String) -> String {
    if supports(count, q) {
        format(value)
    } else {
        unsupported_text(q)
    }
}

/// What a table shows instead of a percentile its samples cannot support.
pub fn unsupported_text(q: f64) -> String {
    needs_text(samples_needed(q))
}

/// "n/a (needs ≥ N samples)", N grouped in thousands.
pub fn needs_text(samples: u64) -> String {
    format!("n/a (needs ≥ {} samples)", group_thousands(samples))
}

fn group_thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

/// A wide table's percentile cells: "n/a" where the samples cannot support the percentile,
/// and one footnote under the table that says what each left-out column needs.
#[derive(Debug, Default)]
pub struct PercentileCells {
    /// The quantiles left out, in the order first met.
    left_out: Vec<f64>,
}

impl PercentileCells {
    /// The cell for percentile `q` of `count` samples: the value formatted, or "n/a".
    pub fn cell(
        &mut self,
        count: u64,
        q: f64,
        value: u64,
        format: impl Fn(u64) -> String,
    ) -> String {
        if supports(count, q) {
            return format(value);
        }
        if !self.left_out.contains(&q) {
            self.left_out.push(q);
        }
        "n/a".to_string()
    }

    /// "n/a: needs ≥ 10 samples beyond its percentile — p99 ≥ 1 000 samples, …"; `None`
    /// when every cell had its samples.
    pub fn footnote(&self) -> Option<String> {
        let mut left_out = self.left_out.clone();
        left_out.sort_by(f64::total_cmp);
        let needs: Vec<String> = left_out
            .iter()
            .map(|&q| {
                let label = PERCENTILES
                    .iter()
                    .find(|p| p.2 == q)
                    .map_or_else(|| format!("q{q}"), |p| p.0.to_string());
                format!(
                    "{label} needs ≥ {} samples",
                    group_thousands(samples_needed(q))
                )
            })
            .collect();
        (!needs.is_empty()).then(|| {
            format!(
                "n/a: too few samples for the percentile (at least {MIN_SAMPLES_BEYOND} must lie beyond it): {}",
                needs.join(", ")
            )
        })
    }
}

/// The percentiles a summary holds: label (as tables print it), JSON field name, quantile.
pub const PERCENTILES: [(&str, &str, f64); 6] = [
    ("p50", "p50", 0.50),
    ("p90", "p90", 0.90),
    ("p99", "p99", 0.99),
    ("p99.9", "p99_9", 0.999),
    ("p99.99", "p99_99", 0.9999),
    ("p99.999", "p99_999", 0.99999),
];

/// The quantile a percentile's JSON field name (`p99_9`) stands for.
pub fn quantile_of_field(field: &str) -> Option<f64> {
    PERCENTILES
        .iter()
        .find(|(_, name, _)| *name == field)
        .map(|(_, _, q)| *q)
}

/// The distribution of one metric, in the metric's unit (nanoseconds unless the
/// metric says otherwise). Percentiles are upper bounds of their histogram
/// bucket (within 0.1 %); count, min, mean and max are exact.
///
/// In JSON every percentile keeps its value; `unsupported` lists the ones the count
/// cannot support (fewer than [`MIN_SAMPLES_BEYOND`] samples beyond them). It is
/// derived from `count`, so files written before it existed read the same.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "SummaryJson", from = "SummaryJson")]
pub struct Summary {
    pub count: u64,
    pub min: u64,
    pub mean: u64,
    pub stddev: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p99_9: u64,
    pub p99_99: u64,
    pub p99_999: u64,
    pub max: u64,
}

impl Summary {
    /// The percentile columns with their labels, in table order.
    pub fn percentiles(&self) -> [(&'static str, u64); 6] {
        let values = self.percentile_values();
        std::array::from_fn(|i| (PERCENTILES[i].0, values[i]))
    }

    /// Each percentile with its quantile, in table order.
    pub fn quantiles(&self) -> [(f64, u64); 6] {
        let values = self.percentile_values();
        std::array::from_fn(|i| (PERCENTILES[i].2, values[i]))
    }

    fn percentile_values(&self) -> [u64; 6] {
        [
            self.p50,
            self.p90,
            self.p99,
            self.p99_9,
            self.p99_99,
            self.p99_999,
        ]
    }

    /// Whether this summary's count supports the percentile `q`.
    pub fn supports(&self, q: f64) -> bool {
        supports(self.count, q)
    }

    /// The percentile `q` formatted by `format`, or "n/a (needs ≥ N samples)".
    pub fn percentile_text(&self, q: f64, value: u64, format: impl Fn(u64) -> String) -> String {
        percentile_text(self.count, q, value, format)
    }

    /// The JSON names of the percentiles the count cannot support.
    pub fn unsupported(&self) -> Vec<&'static str> {
        PERCENTILES
            .iter()
            .filter(|(_, _, q)| !self.supports(*q))
            .map(|(_, name, _)| *name)
            .collect()
    }
}

/// `Summary` as written: its fields plus the derived `unsupported` flag list.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct SummaryJson {
    count: u64,
    min: u64,
    mean: u64,
    stddev: u64,
    p50: u64,
    p90: u64,
    p99: u64,
    p99_9: u64,
    p99_99: u64,
    p99_999: u64,
    max: u64,
    /// Read back but not trusted: recomputed from `count`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    unsupported: Vec<String>,
}

impl From<Summary> for SummaryJson {
    fn from(s: Summary) -> Self {
        Self {
            count: s.count,
            min: s.min,
            mean: s.mean,
            stddev: s.stddev,
            p50: s.p50,
            p90: s.p90,
            p99: s.p99,
            p99_9: s.p99_9,
            p99_99: s.p99_99,
            p99_999: s.p99_999,
            max: s.max,
            unsupported: s.unsupported().into_iter().map(str::to_string).collect(),
        }
    }
}

impl From<SummaryJson> for Summary {
    fn from(j: SummaryJson) -> Self {
        Self {
            count: j.count,
            min: j.min,
            mean: j.mean,
            stddev: j.stddev,
            p50: j.p50,
            p90: j.p90,
            p99: j.p99,
            p99_9: j.p99_9,
            p99_99: j.p99_99,
            p99_999: j.p99_999,
            max: j.max,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn within_tenth_percent(got: u64, want: u64) -> bool {
        got.abs_diff(want) as f64 <= want as f64 * 0.001 + 1.0
    }

    #[test]
    fn uniform_distribution_percentiles() {
        let mut r = Recorder::new();
        for v in 1..=100_000u64 {
            r.record(v);
        }
        let s = r.summary();
        assert_eq!(
            (s.count, s.min, s.max, s.mean),
            (100_000, 1, 100_000, 50_001)
        );
        assert!(within_tenth_percent(s.p50, 50_000), "{s:?}");
        assert!(within_tenth_percent(s.p90, 90_000), "{s:?}");
        assert!(within_tenth_percent(s.p99, 99_000), "{s:?}");
        assert!(within_tenth_percent(s.p99_9, 99_900), "{s:?}");
        assert!(within_tenth_percent(s.p99_999, 99_999), "{s:?}");
        // stddev of U(1, n) is n/sqrt(12).
        assert!(
            (s.stddev as f64 - 100_000.0 / 12f64.sqrt()).abs() < 2.0,
            "{s:?}"
        );
    }

    #[test]
    fn constant_distribution_has_zero_spread() {
        let mut r = Recorder::new();
        for _ in 0..1000 {
            r.record(15_000);
        }
        let s = r.summary();
        assert_eq!(
            (s.min, s.p50, s.p99_999, s.max, s.stddev),
            (15_000, 15_000, 15_000, 15_000, 0)
        );
    }

    #[test]
    fn a_reset_recorder_is_empty_and_records_afresh() {
        let mut r = Recorder::new();
        r.record(5_000_000);
        r.record(7);
        r.reset();
        assert_eq!((r.count(), r.summary()), (0, Summary::default()));
        r.record(20);
        r.record(40);
        let s = r.summary();
        assert_eq!((s.count, s.min, s.max, s.mean), (2, 20, 40, 30));
        assert_eq!(r.histogram().len(), 2);
    }

    #[test]
    fn bimodal_tail_shows_in_high_percentiles_only() {
        // 99.9 % at 10 µs, 0.1 % at 5 ms: p99 stays at 10 µs, p99.99 sees the outliers.
        let mut r = Recorder::new();
        for i in 0..100_000 {
            r.record(if i % 1000 == 0 { 5_000_000 } else { 10_000 });
        }
        let s = r.summary();
        assert!(within_tenth_percent(s.p99, 10_000), "{s:?}");
        assert!(within_tenth_percent(s.p99_99, 5_000_000), "{s:?}");
        assert_eq!(s.max, 5_000_000);
    }

    #[test]
    fn values_beyond_the_ceiling_keep_their_exact_max() {
        let mut r = Recorder::new();
        r.record(HISTOGRAM_CEILING * 2);
        r.record(0);
        let s = r.summary();
        assert_eq!((s.min, s.max, s.count), (0, HISTOGRAM_CEILING * 2, 2));
    }

    #[test]
    fn empty_recorder_summarises_to_zeroes() {
        assert_eq!(Recorder::new().summary(), Summary::default());
    }

    proptest! {
        #[test]
        fn merge_equals_recording_everything_in_one(a in proptest::collection::vec(0u64..10_000_000_000, 1..200),
                                                   b in proptest::collection::vec(0u64..10_000_000_000, 1..200)) {
            let (mut ra, mut rb, mut all) = (Recorder::new(), Recorder::new(), Recorder::new());
            a.iter().for_each(|&v| { ra.record(v); all.record(v); });
            b.iter().for_each(|&v| { rb.record(v); all.record(v); });
            ra.merge(&rb);
            prop_assert_eq!(ra.summary(), all.summary());
        }

        #[test]
        fn summary_is_ordered(values in proptest::collection::vec(0u64..1_000_000_000_000, 1..500)) {
            let mut r = Recorder::new();
            values.iter().for_each(|&v| r.record(v));
            let s = r.summary();
            let order = [s.min, s.p50, s.p90, s.p99, s.p99_9, s.p99_99, s.p99_999, s.max];
            prop_assert!(order.windows(2).all(|w| w[0] <= w[1]), "{:?}", s);
            prop_assert_eq!(s.min, *values.iter().min().unwrap());
            prop_assert_eq!(s.max, *values.iter().max().unwrap());
        }
    }

    #[test]
    fn percentiles_need_ten_samples_beyond_them() {
        let needed: Vec<u64> = PERCENTILES.iter().map(|p| samples_needed(p.2)).collect();
        assert_eq!(needed, [20, 100, 1_000, 10_000, 100_000, 1_000_000]);
        assert!(supports(1_000, 0.99) && !supports(999, 0.99));
        assert_eq!(
            percentile_text(15_600, 0.9999, 7, |v| v.to_string()),
            "n/a (needs ≥ 100 000 samples)"
        );
        assert_eq!(percentile_text(100_000, 0.9999, 7, |v| v.to_string()), "7");
        assert_eq!(samples_needed(1.0), u64::MAX);
    }

    #[test]
    fn json_flags_unsupported_percentiles_and_reads_old_files() {
        let mut r = Recorder::new();
        (1..=15_600u64).for_each(|v| r.record(v));
        let s = r.summary();
        let json = serde_json::to_value(s).unwrap();
        assert_eq!(
            json["unsupported"],
            serde_json::json!(["p99_99", "p99_999"])
        );
        assert_eq!(json["p99_999"], s.p99_999, "the value is kept");
        let back: Summary = serde_json::from_value(json).unwrap();
        assert_eq!(back, s);
        let mut old = serde_json::to_value(s).unwrap();
        old.as_object_mut().unwrap().remove("unsupported");
        assert_eq!(serde_json::from_value::<Summary>(old).unwrap(), s);
        let full = Summary {
            count: 1_000_000,
            ..s
        };
        assert!(serde_json::to_value(full)
            .unwrap()
            .get("unsupported")
            .is_none());
    }
}
