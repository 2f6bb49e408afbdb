//! Reports of real results: every expected figure present with its caption and labelled
//! axes, summary numbers equal to the JSON's, nothing fetched; older results render with
//! a note of what they lack; bad input is refused with the reason.

use crate::common::*;

use std::path::PathBuf;
use std::time::Instant;
use tame_host::error::LayerError as _;

use serde_json::{json, Value};
use tame_bench::timeline::TimelineRecorder;
use tame_report::bench::{NO_DISTRIBUTION, NO_TIMELINE};

#[test]
fn every_fixture_renders_alone_and_overlaid() {
    let pages = render_every_file(&fixtures());
    // 6 files alone, cycle and sleep overlaid.
    assert!(pages >= 8, "{pages}");
    // Recorded results (the lead's, below recorded/) when there are any.
    let recorded = fixtures().join("recorded");
    if recorded.is_dir() {
        assert!(
            render_every_file(&recorded) > 0,
            "recorded/ holds no JSON result"
        );
    }
}

#[test]
fn two_cycle_results_are_overlaid_with_their_warnings_and_ratios() {
    let files = [
        fixtures().join("cycle-fifo.json"),
        fixtures().join("cycle-other.json"),
    ];
    let (inputs, r) = render(&files);
    check_expected(&inputs, &[json(&files[0]), json(&files[1])], &r);
    let html = &r.html;
    // Labelled by what differs: neither ran in a partition nor under load, so their names.
    let hist = r.figures().find(|f| f.id == "cycle-histogram").unwrap();
    assert!(
        hist.svg.contains("cycle-fifo (n = 2000)") && hist.svg.contains("cycle-other (n = 2000)")
    );
    for v in files.iter().map(|f| json(f)) {
        let missed = v["merged"]["counters"]["missed_periods"].as_u64().unwrap();
        let label = v["command_line"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w == "other");
        let name = if label { "cycle-other" } else { "cycle-fifo" };
        if missed > 0 {
            assert!(html.contains(&format!(
                "{name} ({}): {missed} missed periods",
                files[usize::from(label)].display()
            )));
        }
        if let Some(h) = v["environment"]["hypervisor"].as_str() {
            assert!(html.contains(&format!("ran under the hypervisor {h}")));
        }
    }
    // Ratios to the first: p99 of the second over the first's, three digits.
    let p99 = |v: &Value| {
        v["merged"]["metrics"][0]["summary"]["p99"]
            .as_u64()
            .unwrap() as f64
    };
    let ratio = tame_report::page::ratio(p99(&json(&files[1])), p99(&json(&files[0])));
    assert_cell(html, "cycle-other / cycle-fifo", "p99", &ratio);
    // Every mark of the histogram is named in its SVG.
    let svg = &r.figures().find(|f| f.id == "cycle-histogram").unwrap().svg;
    for mark in ["p50", "p99"] {
        assert!(svg.contains(&format!(">\n{mark}")), "mark {mark}");
    }
    // These two were written before time lines were recorded: the page says so.
    assert!(html.contains(NO_TIMELINE));
}

#[test]
fn rt_throttling_is_a_warning_only_where_it_capped_real_time_threads() {
    let dir = tempfile::tempdir().unwrap();
    let mut v = json(&fixtures().join("fwq.json"));
    let warning = "RT throttling was on (sched_rt_runtime_us 950000 of sched_rt_period_us 1000000)";
    for (runtime, warned) in [(950_000i64, true), (-1, false), (1_000_000, false)] {
        v["environment"]["rt_bandwidth"] = json!({"runtime_us": runtime, "period_us": 1_000_000});
        let f = write_json(dir.path(), "fwq-throttled.json", &v);
        let (_, r) = render(std::slice::from_ref(&f));
        assert_eq!(
            r.html.contains("RT throttling was on"),
            warned,
            "runtime {runtime}"
        );
        if warned {
            assert!(r.html.contains(warning), "the warning names both values");
        }
    }
}

/// A result as written before distributions and time lines existed.
fn strip(mut v: Value) -> Value {
    let strip_group = |g: &mut Value| {
        g.as_object_mut().unwrap().remove("timeline");
        for m in g["metrics"].as_array_mut().unwrap() {
            m.as_object_mut().unwrap().remove("distribution");
        }
    };
    for g in v["groups"].as_array_mut().unwrap() {
        strip_group(g);
    }
    strip_group(&mut v["merged"]);
    v
}

#[test]
fn an_old_result_renders_from_its_percentiles_and_says_what_it_lacks() {
    let dir = tempfile::tempdir().unwrap();
    let old = write_json(
        dir.path(),
        "old-cycle.json",
        &strip(json(&fixtures().join("cycle-fifo.json"))),
    );
    let (inputs, r) = render(std::slice::from_ref(&old));
    check_expected(&inputs, &[json(&old)], &r);
    assert!(!has_figure(&r, "cycle-histogram"));
    assert!(has_figure(&r, "cycle-tail"));
    let tail = r.figures().find(|f| f.id == "cycle-tail").unwrap();
    assert!(
        tail.svg.contains("from the summary"),
        "the legend says where the curve comes from"
    );
    assert!(r.html.contains(NO_DISTRIBUTION));
    assert!(r.html.contains(&format!(
        "{}: no histogram of latency — {NO_DISTRIBUTION}",
        "shared, no load (".to_string() + &old.display().to_string() + ")"
    )));
    // Overlaid with a new one: the new one's histogram is drawn, the old one is named as missing.
    let new = fixtures().join("cycle-other.json");
    let (_, r) = render(&[old.clone(), new]);
    let hist = r
        .figures()
        .find(|f| f.id == "cycle-histogram")
        .expect("the new result's histogram");
    assert!(
        hist.caption.contains("Not drawn: old-cycle"),
        "{}",
        hist.caption
    );
}

#[test]
fn a_time_line_is_drawn_with_its_peaks_and_missed_periods() {
    let mut v = json(&fixtures().join("cycle-fifo.json"));
    let mut rec = TimelineRecorder::new(0, 2_000_000_000);
    for k in 0..2_000u64 {
        rec.record(
            k * 1_000_000,
            if k == 1_234 { 7_654_321 } else { 40_000 + k },
        );
    }
    rec.missed(500_000_000, 3);
    let t = rec.timeline("latency", "ns");
    let peak_window = t.windows.iter().max_by_key(|w| w.max).unwrap().max;
    assert_eq!(peak_window, 7_654_321);
    v["groups"][0]["timeline"] = serde_json::to_value(&t).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let f = write_json(dir.path(), "with-timeline.json", &v);
    let (inputs, r) = render(std::slice::from_ref(&f));
    check_expected(&inputs, std::slice::from_ref(&v), &r);
    let fig = r
        .figures()
        .find(|f| f.id == "cycle-timeline")
        .expect("the time line");
    assert_eq!(fig.kind, "timeline");
    assert!(
        fig.svg
            .contains("shared, no load: missed periods (3 in all)"),
        "missed periods in the legend"
    );
    assert!(fig
        .caption
        .contains(&format!("{} windows of", t.windows.len())));
    assert!(!r.html.contains(NO_TIMELINE));
}

#[test]
fn sleep_jitter_is_drawn_against_the_number_of_tasks() {
    let files = [
        fixtures().join("sleep-1task.json"),
        fixtures().join("sleep-4tasks.json"),
    ];
    let (_, r) = render(&files);
    let f = r
        .figures()
        .find(|f| f.id == "sleep-tasks")
        .expect("jitter against tasks");
    assert_eq!(f.x_label, "sleeping tasks running at once");
    // Labelled by what differs between them: the number of tasks.
    assert_value(
        &r.html,
        "1 tasks",
        "p99",
        &json(&files[0])["merged"]["metrics"][0]["summary"]["p99"].to_string(),
    );
    assert_value(
        &r.html,
        "4 tasks",
        "max",
        &json(&files[1])["merged"]["metrics"][0]["summary"]["max"].to_string(),
    );
}

#[test]
fn a_sweep_is_read_as_its_steps_and_drawn_against_the_number_of_tasks() {
    let file = fixtures().join("recorded/sleep-sweep.json");
    let (inputs, r) = render(std::slice::from_ref(&file));
    let sweep = json(&file);
    assert_eq!(inputs.len(), sweep["values"].as_array().unwrap().len());
    assert!(
        inputs[1].file.ends_with("sleep-sweep.json [tasks=2]"),
        "{}",
        inputs[1].file
    );
    let f = r
        .figures()
        .find(|f| f.id == "sleep-tasks")
        .expect("jitter against tasks from one sweep file");
    assert_eq!(f.x_label, "sleeping tasks running at once");
    for (i, tasks) in [1, 2, 4].iter().enumerate() {
        assert_value(
            &r.html,
            &format!("{tasks} tasks"),
            "p99",
            &sweep["results"][i]["merged"]["metrics"][0]["summary"]["p99"].to_string(),
        );
    }
    // A shared and a partitioned sweep: one pair of lines each, not one line through both.
    let dir = tempfile::tempdir().unwrap();
    let mut partitioned = sweep.clone();
    for r in partitioned["results"].as_array_mut().unwrap() {
        r["partition"] = json!("rt");
    }
    let both = [
        file.clone(),
        write_json(dir.path(), "partitioned.json", &partitioned),
    ];
    let (_, r) = render(&both);
    let f = r.figures().find(|f| f.id == "sleep-tasks").unwrap();
    for name in [
        "shared: p99",
        "shared: max",
        "partition rt: p99",
        "partition rt: max",
    ] {
        assert!(f.svg.contains(&svg_text(name)), "{name}");
    }
    // A sweep of an unknown version, or without a step, is refused with the reason.
    let mut newer = sweep.clone();
    newer["schema"] = json!("tame.sweep/9");
    let e = refused(&[write_json(dir.path(), "newer.json", &newer)]);
    assert!(
        e.contains(
            "a sweep of schema tame.sweep/9, which this tame does not read (it reads tame.sweep/1)"
        ),
        "{e}"
    );
    let mut empty = sweep;
    empty["results"] = json!([]);
    let e = refused(&[write_json(dir.path(), "empty.json", &empty)]);
    assert!(e.contains("a sweep without a single measured step"), "{e}");
}

#[test]
fn noise_results_show_attribution_per_source_and_what_they_lack() {
    let files = [
        crate_file("tame-bench/testdata/compare/a-noise.json"),
        crate_file("tame-bench/testdata/compare/b-noise.json"),
    ];
    let raw: Vec<Value> = files.iter().map(|f| json(f)).collect();
    let (inputs, r) = render(&files);
    check_expected(&inputs, &raw, &r);
    let f = r.figures().find(|f| f.id == "noise-attribution").unwrap();
    // The largest source of the first result is named in the legend.
    let top = &raw[0]["noise"]["cpus"][0]["sources"][0];
    assert!(
        f.svg.contains(top["source"].as_str().unwrap()),
        "{}",
        top["source"]
    );
    assert!(f.svg.contains("not attributed"));
    assert!(r.html.contains(
        "noise not attributed to its sources — attribution was not asked for (--no-trace)"
    ));
    // Old noise results: no distributions.
    assert!(r.html.contains(NO_DISTRIBUTION));
    let share = raw[0]["noise"]["cpus"][0]["noise_share_percent"]
        .as_f64()
        .unwrap();
    assert_value(
        &r.html,
        "a-noise cpu0",
        "noise_share_percent",
        &format!("{share}"),
    );
    assert_cell(
        &r.html,
        "a-noise cpu0",
        "noise_share_percent",
        &tame_report::page::percent_text(share),
    );
}

#[test]
fn a_comparison_is_a_table_and_bars_of_its_ratios() {
    for name in ["noise.json", "sleep.json"] {
        let f = crate_file(&format!("tame-bench/testdata/compare/{name}"));
        let (inputs, r) = render(std::slice::from_ref(&f));
        check_expected(&inputs, &[json(&f)], &r);
        assert!(r.html.contains("id=\"compare-rows\""));
    }
}

/// The assess fixture with each phase's cycle result embedded, as assess writes it now.
fn assess_with_results() -> Value {
    let mut v = json(&crate_file("tame-assess/tests/fixtures/dev-vm-1ms.json"));
    let mut part = json(&fixtures().join("cycle-other.json"));
    part["partition"] = json!("rt");
    let noise = |name: &str| json(&crate_file(&format!("tame-bench/testdata/compare/{name}")));
    v["shared"]["results"] = json!({ "cycle": json(&fixtures().join("cycle-fifo.json")), "noise": noise("a-noise.json") });
    v["partitioned"]["results"] = json!({ "cycle": part, "noise": noise("b-noise.json") });
    v
}

#[test]
fn an_assess_report_puts_its_verdict_first_and_overlays_its_phases() {
    // Written before assess embedded its results: drawn from the phases' histograms.
    let old = crate_file("tame-assess/tests/fixtures/dev-vm-1ms.json");
    let (inputs, r) = render(std::slice::from_ref(&old));
    check_expected(&inputs, &[json(&old)], &r);
    let html = &r.html;
    let verdict = html.find("id=\"verdict\"").expect("verdict");
    let first_figure = html.find("<figure").expect("figures");
    assert!(verdict < first_figure, "the verdict comes first");
    assert!(
        has_figure(&r, "assess-cycle-histogram"),
        "from the phase's own histogram"
    );
    assert!(html.contains("RT throttling on: 50 ms of every 1000 ms reserved for non-RT tasks"));
    assert!(html.contains("no full results (written before assess embedded them)"));
    // With the results embedded: shared vs partitioned from them.
    let dir = tempfile::tempdir().unwrap();
    let v = assess_with_results();
    let f = write_json(dir.path(), "assess.json", &v);
    let (inputs, r) = render(std::slice::from_ref(&f));
    check_expected(&inputs, std::slice::from_ref(&v), &r);
    assert!(!r.html.contains("no full results"));
    let tail = r.figures().find(|f| f.id == "assess-cycle-tail").unwrap();
    assert!(tail.svg.contains("shared (n = 2000)") && tail.svg.contains("partitioned (n = 2000)"));
    assert!(tail.contexts[1]
        .environment
        .contains("measured in partition rt"));
    // The busy loop of both phases: attribution per CPU, labelled by phase.
    let attribution = r
        .figures()
        .find(|f| f.id == "assess-noise-attribution")
        .expect("noise attribution");
    assert!(
        attribution.svg.contains("shared cpu0") && attribution.svg.contains("partitioned cpu1")
    );
    assert_summary(
        &r.html,
        "shared",
        &v["shared"]["results"]["noise"]["merged"]["metrics"][0]["summary"],
        "ns",
    );
}

#[test]
fn an_assess_report_of_rounds_shows_the_bound_and_the_spread_of_its_rounds() {
    // tame.assess/2, as recorded (each round's raw results left out of the fixture).
    let f = crate_file("tame-assess/tests/fixtures/dev-vm-v2.json");
    let (_, r) = render(std::slice::from_ref(&f));
    let html = &r.html;
    assert!(html.contains("data-outcome=\"not_met\""));
    assert!(
        html.contains("it rests on: 7800 activations"),
        "the verdict says what it rests on"
    );
    assert!(
        html.contains("&lt; 0.269% (95% conf.)"),
        "the partitioned miss-rate bound"
    );
    assert!(
        html.contains("id=\"assess-rounds\""),
        "each round's figures"
    );
    assert!(html.contains("within the spread"));
    // The work's responses over every round, shared and partitioned overlaid.
    let tail = r.figures().find(|f| f.id == "assess-cycle-tail").unwrap();
    assert!(tail.svg.contains("shared (n = 3900)") && tail.svg.contains("partitioned (n = 3900)"));
}

#[test]
fn a_reserve_study_is_its_tables_and_says_it_has_no_windows() {
    // Written by the kit before `tame bench reserve`: the study's tables alone, no windows.
    let mut v = json(&fixtures().join("recorded/reserve.json"));
    v["skipped"] = json!(["deadline: SCHED_DEADLINE refused"]);
    let dir = tempfile::tempdir().unwrap();
    let f = write_json(dir.path(), "reserve.json", &v);
    let (inputs, r) = render(std::slice::from_ref(&f));
    check_expected(&inputs, &[json(&f)], &r);
    assert!(has_figure(&r, "reserve-load-steps"));
    assert!(!has_figure(&r, "reserve-shares-over-time"));
    for id in [
        "reserve-overhead-server",
        "reserve-stability",
        "reserve-periodic",
    ] {
        assert!(r.html.contains(&format!("<table id=\"{id}\"")), "{id}");
    }
    let cv = v["stability"][0]["cv"].as_f64().unwrap();
    assert_cell(
        &r.html,
        v["stability"][0]["backend"].as_str().unwrap(),
        "cv",
        &format!("{cv:.4}"),
    );
    assert!(r
        .html
        .contains("not measured: deadline: SCHED_DEADLINE refused"));
}

#[test]
fn a_reserve_bench_result_draws_each_windows_share() {
    let f = fixtures().join("recorded/reserve-bench.json");
    let (inputs, r) = render(std::slice::from_ref(&f));
    check_expected(&inputs, &[json(&f)], &r);
    let v = json(&f);
    let fig = r
        .figures()
        .find(|f| f.id == "reserve-shares-over-time")
        .expect("the share in each window");
    assert_eq!(fig.y_label, "client CPU share of G (%)");
    // One series per stability row, named by backend and load.
    for row in v["reserve"]["stability"].as_array().unwrap() {
        let name = format!(
            "{} {} load",
            row["backend"].as_str().unwrap(),
            row["load"].as_str().unwrap()
        );
        assert!(fig.svg.contains(&svg_text(&name)), "{name}");
    }
    assert!(!r
        .html
        .contains(&tame_report::html::escape(tame_report::reserve::NO_WINDOWS)));
    // An interrupted study says so.
    let mut cut = v.clone();
    cut["reserve"]["interrupted"] = json!(true);
    let dir = tempfile::tempdir().unwrap();
    let (_, r) = render(&[write_json(dir.path(), "cut.json", &cut)]);
    assert!(r
        .html
        .contains("interrupted (Ctrl-C): the tables hold what was measured before"));
}

#[test]
fn an_ipc_result_of_schema_version_1_renders_like_version_2() {
    // Version 1: `merged` labelled `goals`, each goal a ratio (derived) and a verdict (counter).
    let mut v = json(&fixtures().join("ipc.json"));
    v["schema_version"] = json!(1);
    v["merged"]["label"] = json!("goals");
    v["merged"]["counters"] = json!({ "goal_latency_met": 1 });
    v["merged"]["derived"] = json!({ "goal_latency_ratio": 1.25 });
    let dir = tempfile::tempdir().unwrap();
    let f = write_json(dir.path(), "ipc-v1.json", &v);
    let (inputs, r) = render(std::slice::from_ref(&f));
    check_expected(&inputs, std::slice::from_ref(&v), &r);
    assert_cell(&r.html, "goal_latency_ratio", "goal_latency_ratio", "1.25");
}

fn refused(paths: &[PathBuf]) -> String {
    match tame_report::read(paths) {
        Ok(_) => panic!("{paths:?} should be refused"),
        Err(e) => {
            assert!(e.is_bad_input(), "{e}");
            e.to_string()
        }
    }
}

#[test]
fn bad_input_is_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let not_json = d.join("notes.txt");
    std::fs::write(&not_json, "latency was fine\n").unwrap();
    assert!(refused(&[not_json]).contains("is not JSON"));
    let other = write_json(
        d,
        "package.json",
        &json!({ "name": "left-pad", "version": "1.3.0" }),
    );
    assert!(refused(&[other]).contains("is not a tame result"));
    let mut future = json(&fixtures().join("cycle-fifo.json"));
    future["schema_version"] = json!(99);
    let future = write_json(d, "future.json", &future);
    let m = refused(&[future]);
    assert!(
        m.contains("schema_version 99") && m.contains("it reads 1"),
        "{m}"
    );
    let m = refused(&[
        fixtures().join("cycle-fifo.json"),
        fixtures().join("ipc.json"),
    ]);
    assert!(
        m.contains("a cycle result") && m.contains("an ipc result") && m.contains("same bench"),
        "{m}"
    );
    let m = refused(&[
        crate_file("tame-assess/tests/fixtures/dev-vm-1ms.json"),
        fixtures().join("cycle-fifo.json"),
    ]);
    assert!(
        m.contains("an assess report, which is drawn by itself"),
        "{m}"
    );
    let m = refused(&[d.join("missing.json")]);
    assert!(m.contains("cannot read"), "{m}");
    let mut assess = json(&crate_file("tame-assess/tests/fixtures/dev-vm-1ms.json"));
    assess["schema"] = json!("tame.assess/9");
    let assess = write_json(d, "assess9.json", &assess);
    assert!(refused(&[assess]).contains("schema tame.assess/9"));
    let mut comparison = json(&fixtures().join("recorded/compare-cycle.json"));
    assert_eq!(comparison["schema"], tame_bench::compare::COMPARE_SCHEMA);
    comparison["schema"] = json!("tame.compare/9");
    let comparison = write_json(d, "compare9.json", &comparison);
    let m = refused(&[comparison]);
    assert!(m.contains("a comparison of schema tame.compare/9"), "{m}");
    let mut broken = json(&fixtures().join("cycle-fifo.json"));
    broken.as_object_mut().unwrap().remove("merged");
    let broken = write_json(d, "broken.json", &broken);
    assert!(refused(&[broken]).contains("does not read as one"));
    assert!(refused(&[]).contains("no input"));
}

#[test]
fn ten_million_samples_render_in_well_under_a_second_per_figure() {
    // A cycle result of 10 M samples over 10 s, made the way the bench makes it.
    let mut rec = tame_bench::Recorder::new();
    let mut tl = TimelineRecorder::new(0, 10_000_000_000);
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for k in 0..10_000_000u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let v = 20_000
            + x % 5_000
            + if x.is_multiple_of(100_003) {
                x % 3_000_000
            } else {
                0
            };
        rec.record(v);
        tl.record(k * 1_000, v);
    }
    let mut v = json(&fixtures().join("cycle-fifo.json"));
    let summary = serde_json::to_value(rec.summary()).unwrap();
    let dist = serde_json::to_value(tame_bench::distribution::Distribution::of(&rec)).unwrap();
    for g in ["groups", "merged"] {
        let g = if g == "groups" {
            &mut v["groups"][0]
        } else {
            &mut v["merged"]
        };
        g["metrics"][0]["summary"] = summary.clone();
        g["metrics"][0]["distribution"] = dist.clone();
    }
    v["groups"][0]["timeline"] = serde_json::to_value(tl.timeline("latency", "ns")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let f = write_json(dir.path(), "ten-million.json", &v);
    let start = Instant::now();
    let inputs = read(std::slice::from_ref(&f));
    let r = tame_report::render(&inputs).unwrap();
    let written = tame_report::write(&r, &dir.path().join("out")).unwrap();
    let took = start.elapsed();
    eprintln!(
        "10 M samples: read, rendered and written in {took:?}; page {} bytes",
        r.html.len()
    );
    check_expected(&inputs, &[v], &r);
    assert_eq!(written.len(), 1 + r.figures().count());
    assert!(took.as_secs() < 10, "{took:?}");
    // Small as well as fast: the time line is at most 1024 windows.
    assert!(r.html.len() < 2_000_000, "{}", r.html.len());
}

#[test]
fn a_cost_result_shows_each_workload_shared_and_partitioned_with_the_ratio() {
    // A real short shared-only run, and the same with partitioned rounds made up by hand
    // (no partition can be applied where it was recorded: the file name says so).
    let shared = fixtures().join("recorded/cost-shared.json");
    let both = fixtures().join("recorded/cost-partitioned-HANDMADE.json");
    let (inputs, r) = render(std::slice::from_ref(&shared));
    check_expected(&inputs, &[json(&shared)], &r);
    assert!(!has_figure(&r, "cost-ratios"));
    assert!(has_figure(&r, "cost-spread"), "the rounds' spread is drawn");
    assert!(r.html.contains("no result measured both configurations"));
    let (inputs, r) = render(std::slice::from_ref(&both));
    let v = json(&both);
    check_expected(&inputs, std::slice::from_ref(&v), &r);
    let f = r.figures().find(|f| f.id == "cost-ratios").unwrap();
    assert_eq!(f.x_label, "partitioned ÷ shared (log scale)");
    for w in ["cpu", "syscall", "switch", "pipe", "memcpy", "hdd", "build"] {
        assert!(f.svg.contains(&format!(">\n{w}\n<")), "{w} has a bar");
    }
    let g = v["merged"]["derived"]["cost_percent_geomean"]
        .as_f64()
        .unwrap();
    assert!(r
        .html
        .contains(&format!("partitioning costs {g:.1} % of the throughput")));
    assert_cell(
        &r.html,
        "partitioned/build",
        "ratio_to_shared",
        &format!(
            "{}",
            v["groups"][13]["derived"]["ratio_to_shared"]
                .as_f64()
                .unwrap()
        ),
    );
    // Both files on one page: every group labelled by its file.
    let (inputs, r) = render(&[shared.clone(), both.clone()]);
    check_expected(&inputs, &[json(&shared), v], &r);
}

#[test]
fn a_mem_result_draws_access_time_against_size_on_log_axes() {
    let file = fixtures().join("recorded/mem.json");
    let (inputs, r) = render(std::slice::from_ref(&file));
    let v = json(&file);
    check_expected(&inputs, std::slice::from_ref(&v), &r);
    let sweep = r.figures().find(|f| f.id == "mem-sweep").unwrap();
    assert_eq!(sweep.x_label, "buffer size (log scale)");
    assert_eq!(sweep.y_label, "ns per access (log scale)");
    for line in ["chase p50", "stream p50"] {
        assert!(sweep.svg.contains(line), "{line} in the legend");
    }
    // 300 batches per size support p50, not p99.9 (10 000 samples): no p99.9 line is drawn.
    assert_eq!(v["groups"][0]["metrics"][0]["summary"]["count"], 300);
    assert!(
        !sweep.svg.contains("p99.9"),
        "a p99.9 line from 300 samples"
    );
    // The x ticks name sizes, not logarithms.
    assert!(sweep.svg.contains("1MiB"), "a size tick");
    // The histogram of the chase overlays every size, in ns (the result holds ps).
    let hist = r.figures().find(|f| f.id == "mem-chase-histogram").unwrap();
    assert!(hist.x_label.starts_with("access (ns"), "{}", hist.x_label);
    for g in v["groups"].as_array().unwrap() {
        let (pattern, size) = g["label"].as_str().unwrap().split_once(' ').unwrap();
        if pattern == "chase" {
            assert!(hist.svg.contains(&format!("{size} (n = ")), "{size} drawn");
        }
    }
    assert!(r.html.contains("default sweep from the caches"));
}

#[test]
fn a_cache_result_overlays_alone_and_with_the_competitor() {
    let file = fixtures().join("recorded/cache.json");
    let (inputs, r) = render(std::slice::from_ref(&file));
    let v = json(&file);
    check_expected(&inputs, std::slice::from_ref(&v), &r);
    let tail = r.figures().find(|f| f.id == "cache-tail").unwrap();
    assert!(tail.svg.contains("alone") && tail.svg.contains("with competitor"));
    // The ratios to `alone` are the result's slowdowns, three digits.
    let p50 = |i: usize| {
        v["groups"][i]["metrics"][0]["summary"]["p50"]
            .as_u64()
            .unwrap() as f64
    };
    let ratio = tame_report::page::ratio(p50(1), p50(0));
    assert_cell(&r.html, "with competitor / alone", "p50", &ratio);
    // What the run had of the L3 is on the page.
    let note = v["settings"]["cache_ways"]["note"].as_str().unwrap();
    assert!(r.html.contains(&tame_report::html::escape(note)), "{note}");
}

/// Each `<li>` of the page's warnings.
fn warning_lines(html: &str) -> Vec<&str> {
    let Some(start) = html.find("<ul class=\"warnings\"") else {
        return Vec::new();
    };
    let list = &html[start..start + html[start..].find("</ul>").unwrap()];
    list.split("<li>")
        .skip(1)
        .map(|l| l.split("</li>").next().unwrap())
        .collect()
}

/// An assessment draws a result per configuration and per round, all on one KVM guest with
/// RT throttling on: the hypervisor is one warning, said once for every result, and RT
/// throttling once (the check's finding), not once per result — and not for busy loops
/// that ran at SCHED_OTHER, which it cannot stop.
#[test]
fn each_warning_is_said_once_and_only_where_it_applies() {
    let file = fixtures().join("recorded/assess.json");
    let (_, r) = render(std::slice::from_ref(&file));
    let lines = warning_lines(&r.html);
    let mut unique = lines.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), lines.len(), "a warning twice: {lines:#?}");
    let about = |needle: &str| lines.iter().filter(|l| l.contains(needle)).count();
    assert_eq!(about("hypervisor KVM"), 1, "{lines:#?}");
    assert_eq!(about("RT throttling"), 1, "{lines:#?}");
    // It holds for every result drawn: nobody named.
    let kvm = lines.iter().find(|l| l.contains("hypervisor KVM")).unwrap();
    assert!(kvm.starts_with("ran under the hypervisor KVM"), "{kvm}");
    // A busy loop at SCHED_OTHER is not warned of RT throttling; at SCHED_FIFO it is.
    let dir = tempfile::tempdir().unwrap();
    let mut v = json(&fixtures().join("recorded/noise-shared.json"));
    assert_eq!(v["settings"]["threads"]["policy"], "other");
    let other = write_json(dir.path(), "noise-other.json", &v);
    v["settings"]["threads"]["policy"] = json!("fifo");
    let fifo = write_json(dir.path(), "noise-fifo.json", &v);
    let throttled = |f: &PathBuf| {
        render(std::slice::from_ref(f))
            .1
            .html
            .contains("RT throttling")
    };
    assert!(!throttled(&other));
    assert!(throttled(&fifo));
}

/// The key figure comes first: after the verdict's headline, before any table (the first
/// screen once held only tables); in its section a link points up to it.
#[test]
fn the_key_figure_is_drawn_before_the_tables() {
    let file = fixtures().join("recorded/assess.json");
    let (_, r) = render(std::slice::from_ref(&file));
    let html = &r.html;
    let at = |needle: &str| html.find(needle).unwrap_or_else(|| panic!("{needle}"));
    let lead = at("<figure id=\"fig-assess-cycle-tail\"");
    assert!(at("id=\"verdict\"") < lead);
    assert!(lead < at("<table"));
    assert!(lead < at("id=\"verdict-details\""));
    assert_eq!(
        html.matches("<svg data-figure=\"assess-cycle-tail\"")
            .count(),
        1
    );
    assert!(html.contains("<a href=\"#fig-assess-cycle-tail\">"));
    // A noise result leads with where the time went; a mem result with its sweep.
    for (fixture, id) in [("noise-shared", "noise-attribution"), ("mem", "mem-sweep")] {
        let (_, r) = render(&[fixtures().join(format!("recorded/{fixture}.json"))]);
        assert!(
            r.html.find(&format!("<figure id=\"fig-{id}\"")).unwrap()
                < r.html.find("<table").unwrap(),
            "{fixture}"
        );
    }
}

/// Durations read as the terminal prints them, with the JSON's value kept beside: the
/// verdict's response and margin, the key figures, the noise table's share and time, and
/// the mem page's picoseconds as ns.
#[test]
fn times_and_shares_read_in_units_with_the_raw_value_kept() {
    let file = fixtures().join("recorded/assess.json");
    let v = json(&file);
    let (_, r) = render(std::slice::from_ref(&file));
    let h = &v["verdict"]["shared"];
    let response = h["response_ns"].as_u64().unwrap();
    assert_cell(
        &r.html,
        "shared",
        "response_ns",
        &tame_report::page::time_text("ns", response),
    );
    assert!(tame_report::page::time_text("ns", response).ends_with("ms"));
    assert_value(&r.html, "shared", "response_ns", &response.to_string());
    let margin = h["margin_ns"].as_i64().unwrap();
    assert!(margin < 0);
    let shown = tame_report::page::time_text("ns", margin.unsigned_abs());
    assert_cell(&r.html, "shared", "margin_ns", &format!("-{shown}"));
    let (_, noise) = render(&[fixtures().join("recorded/noise-shared.json")]);
    assert_cell(&noise.html, "cpu0", "noise_share_percent", "89.5 %");
    assert_cell(&noise.html, "cpu0", "noise_ns", "3.781s");
    let (_, mem) = render(&[fixtures().join("recorded/mem.json")]);
    assert_cell(&mem.html, "16KiB", "p50", "1.33ns");
    assert_value(&mem.html, "16KiB", "p50", "1330");
    assert_cell(&mem.html, "16MiB", "p50", "171.13ns");
}

/// An interrupted ipc run (schema 3): the transports and sizes it never reached are rows
/// that say not measured, never figures of zero.
#[test]
fn an_interrupted_ipc_result_shows_what_was_not_measured() {
    let mut v = json(&fixtures().join("recorded/ipc.json"));
    v["schema_version"] = json!(3);
    v["interrupted"] = json!(true);
    for g in v["groups"].as_array_mut().unwrap() {
        let label = g["label"].as_str().unwrap().to_string();
        if label.ends_with("/64B") {
            *g = json!({"label": label, "cpu": 0, "metrics": [], "counters": {}, "derived": {},
                        "not_measured": tame_bench::ipc::NOT_MEASURED});
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let f = write_json(dir.path(), "ipc-interrupted.json", &v);
    let (_, r) = render(std::slice::from_ref(&f));
    let table = &r.html[r
        .html
        .find("<table id=\"ipc-64b-key-figures\"")
        .expect("the 64B table")..];
    let table = &table[..table.find("</table>").unwrap()];
    assert!(
        table.contains("<td data-row=\"pipe\" data-stat=\"count\">not measured</td>"),
        "{table}"
    );
    assert!(!table.contains("data-value=\"0\""), "{table}");
    // The 8-byte figures are there as measured.
    assert!(r.html.contains("<table id=\"ipc-8b-key-figures\""));
    assert!(r.html.contains("interrupted (Ctrl-C)"));
}

/// A verdict drawn from too few activations for its claim says so on the page, as on the
/// terminal (issue 35, item 3), right after what it rests on.
#[test]
fn a_verdict_from_too_few_activations_warns_on_the_page() {
    let mut v = json(&fixtures().join("recorded/assess.json"));
    v["verdict"]["too_few"] =
        "too few activations for a hard deadline: 129 per configuration".into();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("assess.json");
    std::fs::write(&file, v.to_string()).unwrap();
    let (_, r) = render(&[file]);
    assert!(
        r.html
            .contains("WARNING: too few activations for a hard deadline: 129 per configuration"),
        "the warning is missing"
    );
}
