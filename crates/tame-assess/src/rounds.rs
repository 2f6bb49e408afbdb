//! Shared and partitioned measured as interleaved rounds (S P S P …), so that a drift of
//! the host between them shows up as round-to-round spread instead of as an effect: each
//! round's figures are kept, each configuration's rounds are merged for the verdict, and a
//! difference between the configurations is called an effect only where their rounds do
//! not overlap.

use serde::{Deserialize, Serialize};
use tame_bench::job::JobSettings;
use tame_bench::load::{LoadDescription, Throughput};
use tame_bench::noise::NoiseResult;
use tame_bench::result::BenchResult;
use tame_rt::duration::{format_ns_as, NsStyle};

use crate::figures::{JobFigures, NoiseFigures};

/// The two configurations compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Configuration {
    /// The machine as it is, the load on every CPU.
    Shared,
    /// Inside the applied partition, the load on the system partition.
    Partitioned,
}

impl Configuration {
    pub fn name(self) -> &'static str {
        match self {
            Configuration::Shared => "shared",
            Configuration::Partitioned => "partitioned",
        }
    }
}

/// One configuration measured once: the work, then the busy loop, under the same load.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Round {
    /// 1-based; shared round i runs before partitioned round i.
    pub index: u32,
    pub configuration: Configuration,
    /// Wall-clock start and end (Unix ns): the order the rounds ran in.
    pub started_unix_ns: u64,
    pub ended_unix_ns: u64,
    /// Why it was not measured, when it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_measured: Option<String>,
    pub job: Option<JobFigures>,
    pub noise: Option<NoiseFigures>,
    /// The load during the work, with its throughput.
    pub load: Option<LoadDescription>,
    /// The benches' own results in the common schema (docs/results.md).
    #[serde(default)]
    pub results: RoundResults,
}

/// The benches' own results of one round.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RoundResults {
    pub job: Option<BenchResult<JobSettings>>,
    pub noise: Option<NoiseResult>,
    /// `tame assess -- CMD`: the program watched as the work (in place of `job`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch: Option<Box<tame_bench::watch::WatchResult>>,
}

impl Round {
    pub fn new(index: u32, configuration: Configuration) -> Self {
        Round {
            index,
            configuration,
            started_unix_ns: tame_bench::result::unix_now_ns(),
            ended_unix_ns: 0,
            not_measured: None,
            job: None,
            noise: None,
            load: None,
            results: RoundResults::default(),
        }
    }

    pub fn skipped(index: u32, configuration: Configuration, why: impl Into<String>) -> Self {
        let mut r = Round::new(index, configuration);
        r.ended_unix_ns = r.started_unix_ns;
        r.not_measured = Some(why.into());
        r
    }

    /// The share of activations that missed, 0 without any.
    pub fn miss_fraction(&self) -> f64 {
        self.job
            .as_ref()
            .filter(|j| j.activations > 0)
            .map_or(0.0, |j| j.misses as f64 / j.activations as f64)
    }
}

/// The round of `configuration` that did worst: the most misses for its activations,
/// then the longest response.
pub fn worst(rounds: &[Round], configuration: Configuration) -> Option<&Round> {
    rounds
        .iter()
        .filter(|r| r.configuration == configuration && r.job.is_some())
        .max_by(|a, b| {
            a.miss_fraction()
                .total_cmp(&b.miss_fraction())
                .then_with(|| response_max(a).cmp(&response_max(b)))
        })
}

fn response_max(r: &Round) -> u64 {
    r.job.as_ref().map_or(0, |j| j.response.max)
}

/// The load's throughput over the rounds: each stressor's mean.
pub fn merged_load(rounds: &[&Round]) -> Option<LoadDescription> {
    let loads: Vec<&LoadDescription> = rounds.iter().filter_map(|r| r.load.as_ref()).collect();
    let mut merged = (*loads.first()?).clone();
    merged.throughput = merged
        .throughput
        .iter()
        .map(|t| {
            let values: Vec<f64> = loads
                .iter()
                .filter_map(|l| l.throughput.iter().find(|x| x.stressor == t.stressor))
                .map(|x| x.bogo_ops_per_s)
                .collect();
            Throughput {
                stressor: t.stressor.clone(),
                bogo_ops_per_s: values.iter().sum::<f64>() / values.len().max(1) as f64,
            }
        })
        .collect();
    Some(merged)
}

/// What a figure counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    Ns,
    /// Parts per million of the activations.
    Ppm,
}

/// One figure's value in each round of both configurations, and whether the difference
/// between them is an effect.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Effect {
    /// `response p99`, `work run time p50`, `miss rate`.
    pub figure: String,
    pub unit: Unit,
    /// Per round, in round order.
    pub shared: Vec<u64>,
    pub partitioned: Vec<u64>,
    /// Shared median over partitioned median (above 1: partitioned is lower).
    pub ratio: Option<f64>,
    /// The configurations' rounds do not overlap: every round of one is below every round
    /// of the other. Otherwise the difference is within the round-to-round spread.
    pub effect: bool,
}

/// The figures compared round by round, where both configurations have rounds with work.
pub fn effects(rounds: &[Round]) -> Vec<Effect> {
    let jobs = |c: Configuration| -> Vec<&JobFigures> {
        rounds
            .iter()
            .filter(|r| r.configuration == c)
            .filter_map(|r| r.job.as_ref())
            .filter(|j| j.activations > 0)
            .collect()
    };
    let (shared, partitioned) = (
        jobs(Configuration::Shared),
        jobs(Configuration::Partitioned),
    );
    if shared.is_empty() || partitioned.is_empty() {
        return Vec::new();
    }
    type Pick = fn(&JobFigures) -> Option<u64>;
    // A percentile of a round only where its activations support it.
    let figures: [(&str, Unit, Pick); 6] = [
        ("response p50", Unit::Ns, |j| {
            j.response.supports(0.5).then_some(j.response.p50)
        }),
        ("response p99", Unit::Ns, |j| {
            j.response.supports(0.99).then_some(j.response.p99)
        }),
        ("response max", Unit::Ns, |j| Some(j.response.max)),
        ("miss rate", Unit::Ppm, |j| {
            Some(j.misses.saturating_mul(1_000_000) / j.activations.max(1))
        }),
        ("work run time p50", Unit::Ns, |j| {
            j.run_time.supports(0.5).then_some(j.run_time.p50)
        }),
        ("work run time p99", Unit::Ns, |j| {
            j.run_time.supports(0.99).then_some(j.run_time.p99)
        }),
    ];
    figures
        .iter()
        .filter_map(|(name, unit, pick)| {
            let s: Option<Vec<u64>> = shared.iter().map(|j| pick(j)).collect();
            let p: Option<Vec<u64>> = partitioned.iter().map(|j| pick(j)).collect();
            Some(Effect::new(name, *unit, s?, p?))
        })
        .collect()
}

impl Effect {
    /// Each round's value of one configuration for people, joined by `separator`.
    pub fn values_text(&self, values: &[u64], separator: &str) -> String {
        values
            .iter()
            .map(|&x| match self.unit {
                Unit::Ns => format_ns_as(x, NsStyle::Fixed),
                Unit::Ppm => crate::requirement::rate(x as f64 / 1e6),
            })
            .collect::<Vec<_>>()
            .join(separator)
    }

    pub fn new(figure: &str, unit: Unit, shared: Vec<u64>, partitioned: Vec<u64>) -> Self {
        let (s_med, p_med) = (median(&shared), median(&partitioned));
        let ratio = (p_med > 0).then(|| s_med as f64 / p_med as f64);
        let (s_lo, s_hi) = range(&shared);
        let (p_lo, p_hi) = range(&partitioned);
        Effect {
            figure: figure.to_string(),
            unit,
            effect: s_hi < p_lo || p_hi < s_lo,
            ratio,
            shared,
            partitioned,
        }
    }
}

fn range(values: &[u64]) -> (u64, u64) {
    (
        values.iter().copied().min().unwrap_or(0),
        values.iter().copied().max().unwrap_or(0),
    )
}

/// The middle value (the lower of the two middle ones for an even count).
pub fn median(values: &[u64]) -> u64 {
    let mut v = values.to_vec();
    v.sort_unstable();
    v.get(v.len().saturating_sub(1) / 2).copied().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_difference_is_an_effect_only_beyond_the_spread_of_the_rounds() {
        let e = Effect::new(
            "response p99",
            Unit::Ns,
            vec![900, 1000, 1100],
            vec![400, 500, 450],
        );
        assert!(e.effect);
        assert_eq!(e.ratio, Some(1000.0 / 450.0));
        // One partitioned round as slow as a shared one: within the spread.
        let e = Effect::new(
            "response p99",
            Unit::Ns,
            vec![900, 1000, 1100],
            vec![400, 950, 450],
        );
        assert!(!e.effect);
        // Partitioned worse in every round is an effect too (ratio below 1).
        let e = Effect::new("response max", Unit::Ns, vec![10, 12], vec![20, 30]);
        assert!(e.effect && e.ratio.unwrap() < 1.0);
    }

    #[test]
    fn the_worst_round_has_the_most_misses_then_the_longest_response() {
        let round = |index, misses, max| {
            let mut r = Round::new(index, Configuration::Partitioned);
            r.job = Some(JobFigures {
                activations: 1000,
                misses,
                response: tame_bench::Summary {
                    max,
                    ..Default::default()
                },
                ..JobFigures::default()
            });
            r
        };
        let rounds = vec![round(1, 2, 50), round(2, 5, 10), round(3, 5, 40)];
        assert_eq!(worst(&rounds, Configuration::Partitioned).unwrap().index, 3);
        assert!(worst(&rounds, Configuration::Shared).is_none());
    }
}
