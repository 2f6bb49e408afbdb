//! docs/reproductions.md and the scripts that fill it: every experiment bench/reproduce.sh
//! runs has its block in the document and its renderer in bench/reproductions.py, and the
//! renderer writes the results' own numbers into the blocks, leaving the hand-written text
//! as it was.

use crate::common::{have_program, require};

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The experiment ids bench/reproduce.sh names in its header.
fn experiments() -> Vec<String> {
    let script = read("bench/reproduce.sh");
    let start = script
        .find("# Experiments:")
        .expect("the script lists its experiments");
    script[start..]
        .lines()
        .take_while(|l| l.starts_with('#') && !l.trim_end().eq("#"))
        .flat_map(|l| {
            l.trim_start_matches("# Experiments:")
                .trim_start_matches('#')
                .split_whitespace()
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn every_experiment_has_its_block_its_run_and_its_renderer() {
    let ids = experiments();
    assert!(ids.len() >= 10, "{ids:?}");
    let doc = read("docs/reproductions.md");
    let script = read("bench/reproduce.sh");
    let renderer = read("bench/reproductions.py");
    for id in &ids {
        assert!(
            doc.contains(&format!("<!-- tame:{id} -->")),
            "docs/reproductions.md has no block for {id}"
        );
        assert!(
            doc.contains(&format!("<a id=\"{id}\"></a>")),
            "docs/reproductions.md has no anchor for {id}"
        );
        assert!(
            script.contains(&format!("wanted {id};")),
            "bench/reproduce.sh does not run {id}"
        );
        assert!(
            renderer.contains(&format!("\"{id}\":")),
            "bench/reproductions.py cannot fill {id}"
        );
    }
    // And no block the script would never fill.
    for block in doc.match_indices("<!-- tame:").map(|(i, _)| &doc[i + 10..]) {
        let id = &block[..block.find(" -->").unwrap()];
        assert!(
            id == "summary" || ids.iter().any(|i| i == id),
            "block {id} is not an experiment of bench/reproduce.sh"
        );
    }
}

fn fixture(name: &str) -> PathBuf {
    repo("crates/tame-report/tests/fixtures/recorded").join(name)
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The block of `id` in `doc`.
fn block<'a>(doc: &'a str, id: &str) -> &'a str {
    let start = doc.find(&format!("<!-- tame:{id} -->")).unwrap();
    let end = doc.find(&format!("<!-- /tame:{id} -->")).unwrap();
    &doc[start..end]
}

/// ns the way the renderer writes them.
fn us(ns: u64) -> String {
    if ns >= 1_000_000 {
        format!("{:.2} ms", ns as f64 / 1e6)
    } else if ns >= 10_000 {
        format!("{:.1} µs", ns as f64 / 1e3)
    } else {
        format!("{:.2} µs", ns as f64 / 1e3)
    }
}

#[test]
fn the_renderer_writes_the_results_numbers_and_keeps_the_rest() {
    if !require(have_program("python3"), "python3 (bench/reproductions.py)") {
        return;
    }
    let out = tempfile::tempdir().unwrap();
    // As bench/reproduce.sh runs it: temporary paths in the command line.
    let mut shared = json(&fixture("cycle-shared.json"));
    shared["command_line"] = serde_json::json!([
        "target/release/tame",
        "bench",
        "cycle",
        "--cpus",
        "0",
        "--json",
        "/tmp/rp/drops-cycle-shared.json"
    ]);
    std::fs::write(
        out.path().join("drops-cycle-shared.json"),
        shared.to_string(),
    )
    .unwrap();
    for (from, to) in [
        ("cycle-partitioned.json", "drops-cycle-partitioned.json"),
        ("sleep-sweep.json", "rtrf-tasks-shared.json"),
        ("reserve-bench.json", "sonic-reserve.json"),
        ("cost-partitioned-HANDMADE.json", "drops-cost.json"),
        ("mem.json", "baremetal-mem-shared.json"),
        ("mem-load.json", "baremetal-mem-partitioned.json"),
        ("cache.json", "drops-cache-shared.json"),
    ] {
        std::fs::copy(fixture(from), out.path().join(to)).unwrap();
    }
    // A figure of the experiment's report page is copied next to the document and linked.
    std::fs::create_dir(out.path().join("drops-cycle-report")).unwrap();
    std::fs::write(
        out.path().join("drops-cycle-report/cycle-tail.svg"),
        "<svg>tail</svg>",
    )
    .unwrap();
    let doc = out.path().join("reproductions.md");
    let before = read("docs/reproductions.md");
    std::fs::write(&doc, &before).unwrap();
    let run = Command::new("python3")
        .arg(repo("bench/reproductions.py"))
        .arg(out.path())
        .arg(&doc)
        .arg("quick")
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let after = std::fs::read_to_string(&doc).unwrap();

    let cycle = block(&after, "drops-cycle");
    assert!(cycle.contains("*This machine (quick run):*"), "{cycle}");
    for (file, row) in [
        ("cycle-shared.json", "| shared, under load |"),
        ("cycle-partitioned.json", "| partitioned, load outside |"),
    ] {
        let s = &json(&fixture(file))["merged"]["metrics"][0]["summary"];
        let line = cycle
            .lines()
            .find(|l| l.starts_with(row))
            .unwrap_or_else(|| panic!("{row} in {cycle}"));
        assert!(
            line.contains(&format!("| {} |", us(s["p99"].as_u64().unwrap()))),
            "{line}"
        );
        assert!(line.contains(&format!("| {} |", s["count"])), "{line}");
    }
    assert!(cycle.contains("| partitioned / shared |"));
    assert!(
        cycle.contains("![drops-cycle: cycle-tail](reproductions/drops-cycle.svg)"),
        "{cycle}"
    );
    assert_eq!(
        std::fs::read_to_string(out.path().join("reproductions/drops-cycle.svg")).unwrap(),
        "<svg>tail</svg>"
    );
    // Temporary paths become placeholders in the commands.
    assert!(
        cycle.contains("\n    tame bench cycle --cpus 0 --json FILE\n"),
        "{cycle}"
    );

    // The summary leads with each experiment's headline, linked to its section.
    let summary = block(&after, "summary");
    let missed = |f: &str| json(&fixture(f))["merged"]["counters"]["missed_periods"].clone();
    assert!(
        summary.contains(&format!(
            "missed periods {} → {}",
            missed("cycle-shared.json"),
            missed("cycle-partitioned.json")
        )),
        "{summary}"
    );
    assert!(
        summary.contains("[100 µs periodic task](#drops-cycle)"),
        "{summary}"
    );
    assert!(
        summary.contains("| (not measured) |"),
        "experiments without results say so"
    );

    let tasks = block(&after, "rtrf-tasks");
    let sweep = json(&fixture("sleep-sweep.json"));
    for r in sweep["results"].as_array().unwrap() {
        let n = r["settings"]["tasks"].as_u64().unwrap();
        let p99 = r["merged"]["metrics"][0]["summary"]["p99"]
            .as_u64()
            .unwrap();
        assert!(
            tasks.contains(&format!("| {n} | {} |", us(p99))),
            "{n}: {tasks}"
        );
    }

    let reserve = block(&after, "sonic-reserve");
    let study = &json(&fixture("reserve-bench.json"))["reserve"];
    assert!(
        reserve.contains(&format!("S = {:.4}", study["floor_cv"].as_f64().unwrap())),
        "{reserve}"
    );

    let cost = block(&after, "drops-cost");
    let derived = &json(&fixture("cost-partitioned-HANDMADE.json"))["merged"]["derived"];
    let total = derived["cost_percent_cpu"].as_f64().unwrap();
    let per_cpu = derived["cost_per_cpu_percent_cpu"].as_f64().unwrap();
    assert!(
        cost.contains(&format!("| {total:.1} % | {per_cpu:+.1} % |")),
        "{cost}"
    );

    let mem = block(&after, "baremetal-mem");
    let chase = &json(&fixture("mem.json"))["groups"][0];
    assert!(chase["label"].as_str().unwrap().starts_with("chase "));
    let p50 = chase["metrics"][0]["summary"]["p50"].as_u64().unwrap();
    let size = chase["label"]
        .as_str()
        .unwrap()
        .trim_start_matches("chase ");
    assert!(
        mem.contains(&format!("| {size} | {:.2} ns |", p50 as f64 / 1000.0)),
        "{mem}"
    );
    let cache = block(&after, "drops-cache");
    let slowdown = json(&fixture("cache.json"))["merged"]["derived"]["slowdown_p50"]
        .as_f64()
        .unwrap();
    assert!(cache.contains(&format!("| {slowdown:.3} |")), "{cache}");
    assert!(
        cache.contains("Cache ways: cache ways cannot be split here"),
        "{cache}"
    );

    // Experiments without results keep their block; the text around the blocks is unchanged.
    assert_eq!(block(&after, "detach-fwq"), block(&before, "detach-fwq"));
    let outside = |d: &str| -> String {
        let mut text = String::new();
        let mut rest = d;
        while let Some(i) = rest.find("<!-- tame:") {
            text.push_str(&rest[..i]);
            let j = rest[i..].find("<!-- /tame:").unwrap() + i;
            rest = &rest[j..];
        }
        text + rest
    };
    assert_eq!(outside(&after), outside(&before));
}
