//! `tame report` as a user runs it: the page and one SVG per figure written to `-o DIR`
//! (or `./tame-report`), and inputs that are not tame results of one bench refused with
//! exit 2, the reason, and nothing written.

use crate::common::tame;

use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tame-report/tests/fixtures")
        .join(name)
        .display()
        .to_string()
}

fn svgs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "svg"))
        .collect();
    v.sort();
    v
}

#[test]
fn writes_the_page_and_each_figure_to_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = out.display().to_string();
    let run = tame(&[
        "report",
        &fixture("cycle-fifo.json"),
        &fixture("cycle-other.json"),
        "-o",
        &o,
    ]);
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    let files = svgs(&out);
    let names: Vec<String> = files
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["cycle-histogram.svg", "cycle-tail.svg"]);
    for f in &files {
        let svg = std::fs::read_to_string(f).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
            "{}",
            f.display()
        );
        let id = f.file_stem().unwrap().to_string_lossy();
        assert!(
            html.contains(&format!("data-figure=\"{id}\"")),
            "{id} on the page"
        );
    }
    assert!(!html.contains("<script") && !html.contains("http://") && !html.contains("https://"));
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        stdout.contains("index.html") && stdout.contains("2 figures"),
        "{stdout}"
    );
}

#[test]
fn the_default_directory_is_tame_report_here() {
    let dir = tempfile::tempdir().unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_tame"))
        .args(["report", &fixture("ipc.json")])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let out = dir.path().join("tame-report");
    assert!(out.join("index.html").is_file());
    assert!(svgs(&out).iter().any(|p| p.ends_with("ipc-8b-tail.svg")));
}

#[test]
fn bad_input_exits_2_with_the_reason_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let not_json = d.join("notes.txt");
    std::fs::write(&not_json, "latency was fine\n").unwrap();
    let other = d.join("package.json");
    std::fs::write(&other, r#"{"name": "left-pad"}"#).unwrap();
    let mut future: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("cycle-fifo.json")).unwrap())
            .unwrap();
    future["schema_version"] = 99.into();
    let future_path = d.join("future.json");
    std::fs::write(&future_path, future.to_string()).unwrap();
    let s = |p: &Path| p.display().to_string();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec![s(&not_json)], "is not JSON"),
        (vec![s(&other)], "is not a tame result"),
        (vec![s(&future_path)], "schema_version 99"),
        (
            vec![fixture("cycle-fifo.json"), fixture("ipc.json")],
            "results are overlaid only when they come from the same bench",
        ),
        (vec![s(&d.join("missing.json"))], "cannot read"),
    ];
    let out = d.join("out");
    for (files, reason) in cases {
        let mut args = vec!["report".to_string()];
        args.extend(files);
        args.extend(["-o".to_string(), s(&out)]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let run = tame(&args);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(reason),
            "{args:?}: expected {reason:?} in {stderr}"
        );
        assert!(!out.exists(), "{args:?}: nothing written");
    }
    // An output directory that cannot be made (below a file): exit 2, another -o to choose.
    let below_a_file = format!("{}/out", s(&not_json));
    let run = tame(&["report", &fixture("ipc.json"), "-o", &below_a_file]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("cannot write") && stderr.contains("-o DIR"),
        "{stderr}"
    );
    // No input at all: the usage error, exit 2 as well.
    assert_eq!(tame(&["report"]).status.code(), Some(2));
}
