//! Every recorded result of tame-report's fixtures (and its watch result, written from the
//! types), and a check and a status recorded on a real machine (`tame check --json`,
//! `tame status --json`, no partition applied), exported
//! and read back: by `promtool check metrics` (Debian package prometheus; lint included,
//! so no warning either), and by a small parser here that finds the values the documents
//! hold.

use std::path::{Path, PathBuf};

use tame_prometheus::{export, Error, Options};
use tame_testing::require::{have_program, require};

fn recorded() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tame-report/tests/fixtures/recorded")
}

/// tame-report's fixtures beside the recorded ones (watch results, written from the types).
fn report_fixture(name: &str) -> PathBuf {
    recorded().join("..").join(name)
}

fn own(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Every document export takes: the recorded fixtures but the comparison, and ours.
fn documents() -> Vec<PathBuf> {
    let mut all: Vec<PathBuf> = std::fs::read_dir(recorded())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter(|p| {
            !p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("compare")
        })
        .collect();
    all.sort();
    all.push(report_fixture("watch.json"));
    all.push(own("check.json"));
    all.push(own("status.json"));
    assert!(all.len() >= 20, "{all:?}");
    all
}

fn one(path: &Path) -> String {
    export(&[path.to_path_buf()], &Options::default())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The value of the sample `series` (name with its labels as written), if any.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let (s, v) = l.rsplit_once(' ')?;
        (s == series).then(|| v.parse().unwrap())
    })
}

#[test]
fn every_export_passes_promtool() {
    if !require(
        have_program("promtool"),
        "promtool (apt-get install prometheus)",
    ) {
        return;
    }
    for path in documents() {
        let text = one(&path);
        assert!(!text.is_empty(), "{}: nothing exported", path.display());
        if let Err(said) = tame_testing::promtool::check_metrics(&text).unwrap() {
            panic!("the export of {}: {said}", path.display());
        }
    }
}

#[test]
fn every_family_has_help_and_type_once() {
    for path in documents() {
        let text = one(&path);
        let mut helps = std::collections::BTreeSet::new();
        let mut types = std::collections::BTreeSet::new();
        for l in text.lines() {
            if let Some(rest) = l.strip_prefix("# HELP ") {
                let name = rest.split(' ').next().unwrap();
                assert!(helps.insert(name.to_string()), "{name} HELP twice");
                assert!(name.starts_with("tame_"), "{name}");
            } else if let Some(rest) = l.strip_prefix("# TYPE ") {
                let name = rest.split(' ').next().unwrap();
                assert!(types.insert(name.to_string()), "{name} TYPE twice");
            }
        }
        assert_eq!(helps, types, "{}", path.display());
    }
}

#[test]
fn a_watch_result_gives_each_threads_figures_and_misses() {
    let path = report_fixture("watch.json");
    let text = one(&path);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for g in json["groups"].as_array().unwrap() {
        let labels = format!(
            "config=\"shared\",load=\"none\",group=\"{}\",cpu=\"\"",
            g["label"].as_str().unwrap()
        );
        for m in g["metrics"].as_array().unwrap() {
            let name = m["name"].as_str().unwrap();
            let p50 = m["summary"]["p50"].as_u64().unwrap() as f64 / 1e9;
            let series = format!("tame_watch_{name}_seconds{{{labels},quantile=\"0.5\"}}");
            assert_eq!(value(&text, &series), Some(p50), "{series} in\n{text}");
        }
        for counter in ["misses", "missed_periods"] {
            let want = g["counters"][counter].as_u64().unwrap() as f64;
            let series = format!("tame_watch_{counter}{{{labels}}}");
            assert_eq!(value(&text, &series), Some(want), "{series} in\n{text}");
        }
    }
}

#[test]
fn a_cycle_result_gives_its_quantiles_max_and_misses_in_seconds() {
    let text = one(&recorded().join("cycle-partitioned.json"));
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(recorded().join("cycle-partitioned.json")).unwrap(),
    )
    .unwrap();
    let g = &json["groups"][0];
    let m = &g["metrics"][0];
    assert_eq!(m["name"], "latency");
    let load = json["load"]["kinds"]
        .as_array()
        .map(|k| {
            k.iter()
                .map(|x| x.as_str().unwrap())
                .collect::<Vec<_>>()
                .join("+")
        })
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "none".into());
    let labels = format!(
        "config=\"{}\",load=\"{load}\",group=\"cpu0\",cpu=\"0\"",
        json["partition"].as_str().unwrap()
    );
    // A quantile is exported only where at least ten samples lie beyond it.
    let count = m["summary"]["count"].as_u64().unwrap();
    let mut exported = 0;
    for (q, key, needs) in [
        ("0.5", "p50", 20),
        ("0.99", "p99", 1_000),
        ("0.99999", "p99_999", 1_000_000),
    ] {
        let got = value(
            &text,
            &format!("tame_cycle_latency_seconds{{{labels},quantile=\"{q}\"}}"),
        );
        if count < needs {
            assert_eq!(got, None, "quantile {q} of {count} samples exported");
            continue;
        }
        let want = m["summary"][key].as_u64().unwrap() as f64 / 1e9;
        let got = got.unwrap_or_else(|| panic!("no quantile {q} in\n{text}"));
        assert_eq!(got, want, "quantile {q}");
        exported += 1;
    }
    assert!(
        exported >= 2,
        "{count} samples support p50 and p99:\n{text}"
    );
    assert_eq!(
        value(
            &text,
            &format!("tame_cycle_latency_max_seconds{{{labels}}}")
        )
        .unwrap(),
        m["summary"]["max"].as_u64().unwrap() as f64 / 1e9
    );
    assert_eq!(
        value(
            &text,
            &format!("tame_cycle_latency_seconds_count{{{labels}}}")
        )
        .unwrap(),
        m["summary"]["count"].as_u64().unwrap() as f64
    );
    assert_eq!(
        value(&text, &format!("tame_cycle_missed_periods{{{labels}}}")).unwrap(),
        g["counters"]["missed_periods"].as_u64().unwrap() as f64
    );
    // A count of one run, replaced by the next export: a gauge, or rate() would see resets.
    assert!(
        text.contains("# TYPE tame_cycle_missed_periods gauge\n"),
        "{text}"
    );
    assert!(!text.contains("_total"), "{text}");
}

#[test]
fn a_noise_result_gives_its_share_and_top_sources_without_thread_ids() {
    let text = one(&recorded().join("noise-shared.json"));
    let share = text
        .lines()
        .find(|l| l.starts_with("tame_noise_share_ratio{"))
        .unwrap();
    let v: f64 = share.rsplit_once(' ').unwrap().1.parse().unwrap();
    assert!((v - 0.8947716464818933).abs() < 1e-12, "{share}");
    let sources: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("tame_noise_source_seconds{"))
        .collect();
    assert!(!sources.is_empty() && sources.len() <= 5, "{sources:?}");
    assert!(
        sources.iter().all(|l| !l.contains("/18")),
        "thread ids left in: {sources:?}"
    );
    assert!(
        text.contains("tame_noise_class_seconds{bench=\"noise\",config=\"shared\""),
        "{text}"
    );
}

#[test]
fn check_and_status_give_findings_and_drift() {
    let check: tame_check::CheckReport =
        serde_json::from_str(&std::fs::read_to_string(own("check.json")).unwrap()).unwrap();
    let text = one(&own("check.json"));
    let warn = check
        .findings
        .iter()
        .filter(|f| f.severity == tame_check::Severity::Warn)
        .count();
    assert_eq!(
        value(
            &text,
            "tame_check_findings{scope=\"as_found\",severity=\"warn\"}"
        ),
        Some(warn as f64)
    );
    let status = one(&own("status.json"));
    assert_eq!(value(&status, "tame_partition_applied"), Some(0.0));
    assert_eq!(value(&status, "tame_partition_drift"), Some(0.0));
}

#[test]
fn a_reserve_study_gives_granted_and_received_shares() {
    let text = one(&recorded().join("reserve.json"));
    let granted: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("tame_reserve_granted_ratio{"))
        .collect();
    let received: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("tame_reserve_received_ratio{"))
        .collect();
    assert!(!granted.is_empty(), "{text}");
    assert_eq!(granted.len(), received.len());
    for l in received {
        let v: f64 = l.rsplit_once(' ').unwrap().1.parse().unwrap();
        assert!((0.0..=1.5).contains(&v), "{l}");
    }
}

#[test]
fn results_that_would_share_series_are_refused_unless_told_apart() {
    let a = recorded().join("sleep-tasks2.json");
    let b = recorded().join("sleep-tasks4.json");
    match export(&[a.clone(), b.clone()], &Options::default()) {
        Err(Error::Input(m)) => assert!(m.contains("--config NAME"), "{m}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    // Told apart one at a time, each file is whole.
    let text = export(
        &[a],
        &Options {
            config: Some("two".into()),
        },
    )
    .unwrap();
    assert!(text.contains("config=\"two\""), "{text}");
    // Results of different configurations go together.
    export(
        &[
            recorded().join("cycle-shared.json"),
            recorded().join("cycle-partitioned.json"),
            own("check.json"),
            own("status.json"),
        ],
        &Options::default(),
    )
    .unwrap();
}

/// A recorded result changed as a crafted file could be, written to `dir`.
fn crafted(dir: &Path, name: &str, change: impl FnOnce(&mut serde_json::Value)) -> PathBuf {
    let mut v: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(recorded().join("cycle-shared.json")).unwrap(),
    )
    .unwrap();
    change(&mut v);
    let path = dir.join(name);
    std::fs::write(&path, v.to_string()).unwrap();
    path
}

#[test]
fn colliding_series_of_a_crafted_file_are_bad_input_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    // A group given twice: the same series twice within the one file.
    let twice = crafted(dir.path(), "twice.json", |v| {
        let g = v["groups"][0].clone();
        v["groups"].as_array_mut().unwrap().push(g);
    });
    match export(std::slice::from_ref(&twice), &Options::default()) {
        Err(Error::Input(m)) => assert!(
            m.starts_with(&format!("{} gives the series", twice.display())) && m.contains("twice"),
            "{m}"
        ),
        other => panic!("expected bad input, got {other:?}"),
    }
    // A metric named after another family's gauge (`latency` gives the gauge
    // tame_cycle_latency_max_seconds; a metric `latency_max` would be a summary of it).
    let clash = crafted(dir.path(), "clash.json", |v| {
        let mut m = v["groups"][0]["metrics"][0].clone();
        m["name"] = "latency_max".into();
        v["groups"][0]["metrics"].as_array_mut().unwrap().push(m);
    });
    match export(std::slice::from_ref(&clash), &Options::default()) {
        Err(Error::Input(m)) => assert!(
            m.starts_with(&format!(
                "{}: its names give tame_cycle_latency_max_seconds",
                clash.display()
            )),
            "{m}"
        ),
        other => panic!("expected bad input, got {other:?}"),
    }
}

#[test]
fn live_figures_of_a_server_pass_promtool_and_read_the_clients_cpu_time() {
    use tame_reserve::server::live::{Live, Snapshot, Turned};
    use tame_reserve::server::protocol::{ClientInfo, Status};
    let live = Live::new(tame_host::Root::new("/"));
    let mut tally = tame_prometheus::cpu_tally::CpuTally::default();
    let before = tame_prometheus::live::render(&live, &mut tally).unwrap();
    // Before the first publication: the counters, no client series, and no watchdog or
    // thread figure (nothing is known of them yet: not 0).
    assert_eq!(value(&before, "tame_serve_requests_total"), Some(0.0));
    assert!(!before.contains("tame_serve_reservations"), "{before}");
    assert!(!before.contains("tame_serve_watchdog_up"), "{before}");
    assert!(!before.contains("tame_serve_scheduler_threads"), "{before}");
    // This test process as the client: its main thread, and a second one that runs for
    // 20 ms and then exits.
    let pid = std::process::id();
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let worker = std::thread::spawn(move || {
        let link = std::fs::read_link("/proc/thread-self").unwrap();
        let tid: u32 = link.file_name().unwrap().to_str().unwrap().parse().unwrap();
        // Run 20 ms of CPU (by the kernel's count: the machine may be shared).
        let root = tame_host::Root::new("/");
        let process = root.process(std::process::id());
        let me = process.task(tid);
        while me.schedstat().unwrap().run_ns < 20_000_000 {
            std::hint::spin_loop();
        }
        tid_tx.send(tid).unwrap();
        go_rx.recv().unwrap();
    });
    let tid = tid_rx.recv().unwrap();
    let publish = |tids: Vec<u32>| {
        live.publish(Snapshot {
            status: Some(Status {
                version: 1,
                server_pid: pid,
                watchdog_pid: pid,
                cap_ppm: 900_000,
                clients: vec![ClientInfo {
                    pid,
                    cpu: 0,
                    share_ppm: 250_000,
                    period_ns: 40_000_000,
                    tids,
                }],
                notes: vec![],
            }),
            scheduler_cpus: vec![0, 2],
            watchdog_alive: true,
        })
    };
    let client = format!("{{pid=\"{pid}\",cpu=\"0\"}}");
    let ran = |text: &str| {
        value(
            text,
            &format!("tame_serve_client_cpu_seconds_total{client}"),
        )
        .unwrap_or_else(|| panic!("no CPU time in {text}"))
    };
    publish(vec![pid, tid]);
    let both = ran(&tame_prometheus::live::render(&live, &mut tally).unwrap());
    assert!(both >= 0.02, "{both}");
    go_tx.send(()).unwrap();
    worker.join().unwrap();
    // The worker is gone: unreadable while still listed, then no longer listed. Its time
    // stays in the counter, which never goes down (a fall reads as a reset).
    let gone = ran(&tame_prometheus::live::render(&live, &mut tally).unwrap());
    assert!(gone >= both, "{gone} after {both}");
    publish(vec![pid]);
    let dropped = ran(&tame_prometheus::live::render(&live, &mut tally).unwrap());
    assert!(dropped >= gone, "{dropped} after {gone}");
    live.count_turned(Turned::Refused);
    publish(vec![pid]);
    let text = tame_prometheus::live::render(&live, &mut tally).unwrap();
    assert_eq!(value(&text, "tame_serve_reservations"), Some(1.0));
    assert_eq!(value(&text, "tame_serve_watchdog_up"), Some(1.0));
    assert_eq!(
        value(&text, "tame_serve_reserved_ratio{cpu=\"0\"}"),
        Some(0.25)
    );
    // A CPU whose scheduler thread has no client now: 0, not a vanished series.
    assert_eq!(
        value(&text, "tame_serve_reserved_ratio{cpu=\"2\"}"),
        Some(0.0)
    );
    assert_eq!(
        value(&text, &format!("tame_serve_client_period_seconds{client}")),
        Some(0.04)
    );
    assert_eq!(
        value(&text, "tame_serve_refusals_total{reason=\"refused\"}"),
        Some(1.0)
    );
    assert!(ran(&text) >= dropped, "{text}");
    if require(
        have_program("promtool"),
        "promtool (apt-get install prometheus)",
    ) {
        if let Err(said) = tame_testing::promtool::check_metrics(&text).unwrap() {
            panic!("{said}\n{text}");
        }
    }
}
