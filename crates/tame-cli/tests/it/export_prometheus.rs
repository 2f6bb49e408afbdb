//! `tame export prometheus` as a user runs it: to stdout, or atomically to `-o FILE`
//! (readable by all, no temporary file left); inputs it does not export refused with exit
//! 2; and the proof the issue asks for: a real node_exporter (Debian
//! prometheus-node-exporter) with the textfile collector on a loopback port, scraped over
//! HTTP, serves tame's series with their values. The node_exporter is killed however the
//! test ends (a guard).

use crate::common::{expect_bad_input, have_program, require, tame, Killed};

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn recorded(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tame-report/tests/fixtures/recorded")
        .join(name)
        .display()
        .to_string()
}

fn own(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tame-prometheus/tests/fixtures")
        .join(name)
        .display()
        .to_string()
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

/// The value of the first sample of `name` whose labels include all of `with`.
fn sample(text: &str, name: &str, with: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .find(|l| with.iter().all(|w| l.contains(w)))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse().unwrap())
}

#[test]
fn prints_the_exposition_to_stdout() {
    let out = tame(&["export", "prometheus", &recorded("cycle-shared.json")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("# HELP tame_"), "{text}");
    assert_eq!(
        sample(&text, "tame_cycle_latency_max_seconds", &["cpu=\"0\""]),
        Some(0.006772416)
    );
}

#[test]
fn writes_the_file_atomically_and_readable_by_the_collector() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tame.prom");
    let f = file.display().to_string();
    for _ in 0..2 {
        // The second run replaces the first file.
        let out = tame(&[
            "export",
            "prometheus",
            &recorded("noise-shared.json"),
            &own("check.json"),
            "-o",
            &f,
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.stdout.is_empty());
    }
    assert_eq!(
        entries(dir.path()),
        vec![file.clone()],
        "a temporary file was left"
    );
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("tame_noise_share_ratio{"), "{text}");
    assert!(text.contains("tame_check_findings{"), "{text}");
}

#[test]
fn what_it_does_not_export_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.json");
    std::fs::write(&junk, "{\"hello\": 1}").unwrap();
    expect_bad_input(
        &["export", "prometheus", &junk.display().to_string()],
        "is not a tame result",
    );
    expect_bad_input(
        &["export", "prometheus", &recorded("compare-cycle.json")],
        "is a comparison",
    );
    expect_bad_input(
        &["export", "prometheus", "/nonexistent/x.json"],
        "cannot read /nonexistent/x.json",
    );
    expect_bad_input(
        &[
            "export",
            "prometheus",
            &recorded("sleep-tasks2.json"),
            &recorded("sleep-tasks4.json"),
        ],
        "--config NAME",
    );
    let d = dir.path().display().to_string();
    expect_bad_input(
        &[
            "export",
            "prometheus",
            &recorded("cycle-shared.json"),
            "-o",
            &d,
        ],
        "is a directory",
    );
    expect_bad_input(
        &[
            "export",
            "prometheus",
            &recorded("cycle-shared.json"),
            "-o",
            "/nonexistent/dir/tame.prom",
        ],
        "cannot write /nonexistent/dir/tame.prom",
    );
    // Nothing written by a refused export.
    assert_eq!(entries(dir.path()), vec![junk]);
}

/// A port free now on loopback (the kernel's pick; free again once dropped).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// GET http://127.0.0.1:port/metrics: the body of a 200 answer, or None.
fn scrape(port: u16) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let (head, body) = out.split_once("\r\n\r\n")?;
    // An HTTP/1.0 request gets a whole body, never chunked; the status line may say 1.0.
    let status = head.split(' ').nth(1)?;
    (head.starts_with("HTTP/1.") && status == "200").then(|| body.to_string())
}

#[test]
fn node_exporter_serves_the_exported_series() {
    if !require(
        have_program("prometheus-node-exporter"),
        "prometheus-node-exporter (apt-get install prometheus-node-exporter)",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tame.prom");
    let out = tame(&[
        "export",
        "prometheus",
        &recorded("cycle-partitioned.json"),
        &recorded("noise-shared.json"),
        &own("check.json"),
        &own("status.json"),
        "-o",
        &file.display().to_string(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let port = free_port();
    let exporter = Killed(
        Command::new("prometheus-node-exporter")
            .args([
                "--collector.disable-defaults",
                "--collector.textfile",
                &format!("--collector.textfile.directory={}", dir.path().display()),
                &format!("--web.listen-address=127.0.0.1:{port}"),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus-node-exporter starts"),
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    let body = loop {
        if let Some(b) = scrape(port) {
            break b;
        }
        assert!(
            Instant::now() < deadline,
            "node_exporter did not answer on 127.0.0.1:{port} within 15 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    // The collector read the file without error …
    assert_eq!(
        sample(&body, "node_textfile_scrape_error", &[]),
        Some(0.0),
        "{body}"
    );
    // … and serves tame's series with the values of the documents.
    let result: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(recorded("cycle-partitioned.json")).unwrap())
            .unwrap();
    let summary = &result["groups"][0]["metrics"][0]["summary"];
    let want_p99 = summary["p99"].as_u64().unwrap() as f64 / 1e9;
    assert_eq!(
        sample(
            &body,
            "tame_cycle_latency_seconds",
            &["cpu=\"0\"", "quantile=\"0.99\""]
        ),
        Some(want_p99),
        "{body}"
    );
    assert_eq!(
        sample(&body, "tame_cycle_latency_max_seconds", &["cpu=\"0\""]),
        Some(summary["max"].as_u64().unwrap() as f64 / 1e9)
    );
    let share = sample(&body, "tame_noise_share_ratio", &["cpu=\"0\""]).unwrap();
    assert!((share - 0.8947716464818933).abs() < 1e-9, "{share}");
    assert_eq!(sample(&body, "tame_partition_applied", &[]), Some(0.0));
    assert!(
        sample(&body, "tame_check_findings", &["severity=\"warn\""]).is_some(),
        "{body}"
    );
    drop(exporter);
    // The guard killed it: nothing answers on the port any more.
    assert!(
        scrape(port).is_none(),
        "node_exporter still answers on {port}"
    );
}
