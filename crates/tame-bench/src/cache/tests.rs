use super::*;
use crate::result::Metric;
use crate::session::{self, Conditions};
use tame_host::Root;

fn no_ways() -> CacheWays {
    ways::from_model(None, false, None, None)
}

fn settings(competitor: Option<CompetitorSettings>) -> Result<CacheSettings> {
    CacheSettings::new(
        1,
        competitor,
        64,
        20,
        2,
        no_ways(),
        ThreadSettings::unprivileged(),
    )
}

#[test]
fn the_competitor_must_run_on_another_cpu_and_sizes_are_bounded() {
    let e = settings(Some(CompetitorSettings::new(1, Some(1024)))).unwrap_err();
    assert!(
        e.is_bad_input()
            && e.to_string()
                .contains("--competitor-cpu 1 is the measured CPU"),
        "{e}"
    );
    for (matrix, iterations, rounds, needle) in [
        (4, 20, 2, "--matrix 4"),
        (64, 5, 2, "--iterations 5"),
        (64, 20, 0, "--rounds 0"),
    ] {
        let e = CacheSettings::new(
            1,
            None,
            matrix,
            iterations,
            rounds,
            no_ways(),
            ThreadSettings::unprivileged(),
        )
        .unwrap_err();
        assert!(e.is_bad_input() && e.to_string().contains(needle), "{e}");
    }
    let s = settings(Some(CompetitorSettings::new(0, Some(32 * 1024)))).unwrap();
    assert_eq!(
        s.competitor.unwrap().buffer_bytes,
        64 << 20,
        "twice a 32 MiB LLC"
    );
    assert_eq!(
        CompetitorSettings::new(0, Some(1024)).buffer_bytes,
        8 << 20,
        "at least 8 MiB"
    );
    assert_eq!(s.labels(), vec![ALONE, WITH_COMPETITOR]);
    assert_eq!(s.working_set_bytes, 96 * 1024);
    assert_eq!(settings(None).unwrap().labels(), vec![ALONE]);
}

#[test]
fn slowdowns_divide_the_competitors_figures_by_alone() {
    let alone = Summary {
        count: 10_000,
        p50: 100_000,
        p99_9: 120_000,
        max: 200_000,
        ..Summary::default()
    };
    let with = Summary {
        count: 10_000,
        p50: 150_000,
        p99_9: 300_000,
        max: 1_000_000,
        ..Summary::default()
    };
    assert_eq!(
        slowdowns(&alone, &with),
        vec![
            ("slowdown_p50", 1.5),
            ("slowdown_p99_9", 2.5),
            ("slowdown_max", 5.0)
        ]
    );
    let group = |label: &str, summary| GroupResult {
        label: label.into(),
        metrics: vec![Metric {
            name: "iteration".into(),
            unit: "ns".into(),
            summary,
            distribution: None,
        }],
        ..GroupResult::default()
    };
    let merged = slowdown_group(&[group(ALONE, alone), group(WITH_COMPETITOR, with)]).unwrap();
    assert_eq!(merged.label, "slowdown");
    assert_eq!(merged.derived["slowdown_max"], 5.0);
    assert!(slowdown_group(&[group(ALONE, alone)]).is_none());
    // A zero figure alone gives no ratio.
    assert_eq!(slowdowns(&Summary::default(), &with), vec![]);
}

#[test]
fn a_duration_is_turned_into_iterations_by_timing_the_multiply() {
    // 10 s of 50 µs multiplies over 5 rounds × 2 configurations: 20 000 each.
    assert_eq!(iterations_from(10_000_000_000, 50_000, 5, 2), 20_000);
    // At least 10, at most --iterations' top.
    assert_eq!(iterations_from(1, 50_000, 5, 2), 10);
    assert_eq!(iterations_from(u64::MAX, 1, 1, 1), 10_000_000);
    // Timed for real: a second is at least the minimum and below the top.
    let n = iterations_for(1_000_000_000, 16, 1, 1);
    assert!((10..10_000_000).contains(&n), "{n}");
}

#[test]
fn each_rounds_median_widens_the_spread() {
    // Two rounds of three iterations (raw = ns on the monotonic clock).
    let raw = [100, 300, 200, 1_000, 900, 5_000];
    let out = summarise(&Clock::monotonic(), WITH_COMPETITOR, 2, &raw, 3, 77);
    assert_eq!(
        out.round_p50,
        Some(Spread {
            min: 200.0,
            max: 1_000.0
        })
    );
    let s = out.iteration.summary();
    assert_eq!((s.count, s.min, s.max), (6, 100, 5_000));
    assert_eq!(out.counters(), vec![("competitor_lines", 77)]);
}

#[test]
fn a_real_short_run_times_both_configurations_interleaved() {
    let online = Root::system().cpus_online().unwrap();
    let cpus: Vec<u32> = online.iter().collect();
    // A second CPU is the machine's lack, not the platform's: skipped, failing under CI.
    if !tame_testing::require::require(cpus.len() >= 2, "a second online CPU (for the competitor)")
    {
        return;
    }
    let (measured, other) = (cpus[cpus.len() - 1], cpus[0]);
    let s = CacheSettings::new(
        measured,
        Some(CompetitorSettings::new(other, Some(4 * 1024))),
        32,
        30,
        2,
        no_ways(),
        ThreadSettings::unprivileged(),
    )
    .unwrap();
    let done = session::run(
        &Root::system(),
        s,
        Conditions::default(),
        &RunControl::new(),
        0,
        |_| {},
        vec!["test".into()],
    )
    .unwrap();
    let r = &done.result;
    let labels: Vec<&str> = r.groups.iter().map(|g| g.label.as_str()).collect();
    assert_eq!(labels, vec![ALONE, WITH_COMPETITOR]);
    for g in &r.groups {
        assert_eq!(
            g.metric("iteration").unwrap().summary.count,
            60,
            "{}",
            g.label
        );
        assert!(g.spread.contains_key("iteration p50"));
    }
    // The competitor wrote only while it was meant to.
    assert_eq!(r.groups[0].counters["competitor_lines"], 0);
    assert!(r.groups[1].counters["competitor_lines"] > 0);
    assert_eq!(r.merged.label, "slowdown");
    assert!(r.merged.derived["slowdown_p50"] > 0.0);
    let view = CacheSettings::view(r);
    assert!(
        view.contains("resctrl: cache ways cannot be split here"),
        "{view}"
    );
    assert!(view.contains("slowdown: slowdown_max"), "{view}");
}
