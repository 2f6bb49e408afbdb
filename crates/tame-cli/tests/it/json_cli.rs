//! Every command that reports prints, with `--json`, one JSON document whose `schema` and
//! top-level fields are those docs/results.md's table ("`--json` of every other command")
//! gives — on a committed fixture host, so nothing on this machine is read or changed. The
//! table is parsed here, so the docs cannot drift from the output.

use crate::common::tame;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture() -> String {
    tame_testing::tree::committed_fixture("rt-8cpu")
        .display()
        .to_string()
}

/// One row of the table: the `schema` value and the top-level fields, each with the fields
/// of its elements when the table names them ("`failed` (`tid`, `reason` each)").
struct Documented {
    schema: Value,
    fields: BTreeMap<String, BTreeSet<String>>,
}

/// The names in backquotes in `text`.
fn quoted(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(String::from)
        .collect()
}

/// "`a`, `b` (`x`, `y` each), `c`" → a: {}, b: {x, y}, c: {}.
fn fields(cell: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    let mut last: Option<String> = None;
    let mut rest = cell;
    while !rest.is_empty() {
        if let Some(inner) = rest.strip_prefix('(') {
            let end = inner.find(')').expect("parentheses close");
            if let Some(name) = &last {
                let nested: &mut BTreeSet<String> = out.get_mut(name).unwrap();
                nested.extend(quoted(&inner[..end]));
            }
            rest = &inner[end + 1..];
        } else if let Some(inner) = rest.strip_prefix('`') {
            let end = inner.find('`').expect("backquotes close");
            let name = inner[..end].to_string();
            out.insert(name.clone(), BTreeSet::new());
            last = Some(name);
            rest = &inner[end + 1..];
        } else {
            let mut chars = rest.chars();
            chars.next();
            rest = chars.as_str();
        }
    }
    out
}

/// The table's row for `command` (its first cell, without backquotes).
fn documented(command: &str) -> Documented {
    let text = std::fs::read_to_string(workspace().join("docs/results.md")).unwrap();
    let section = text
        .split("## `--json` of every other command")
        .nth(1)
        .expect("docs/results.md has the section on every command's --json");
    for line in section.lines().filter(|l| l.starts_with("| `tame ")) {
        let cells: Vec<&str> = line.split(" | ").collect();
        if cells[0].trim_start_matches("| ").trim_matches('`') == command {
            let schema: Value = serde_json::from_str(cells[1].trim_matches('`'))
                .unwrap_or_else(|e| panic!("schema of {command} is not JSON: {e}"));
            return Documented {
                schema,
                fields: fields(cells[2]),
            };
        }
    }
    panic!("docs/results.md has no row for `{command}`");
}

/// Run `tame args…`, expecting `code`; stdout as JSON.
fn json_of(args: &[&str], code: i32) -> Value {
    let out = tame(args);
    assert_eq!(
        out.status.code(),
        Some(code),
        "tame {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "tame {args:?} prints no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// The document `args` prints has the schema and fields the table gives for `command`.
fn matches_docs(command: &str, args: &[&str]) -> Value {
    matches_docs_with_code(command, args, 0)
}

fn matches_docs_with_code(command: &str, args: &[&str], code: i32) -> Value {
    let doc = documented(command);
    let v = json_of(args, code);
    let obj = v
        .as_object()
        .unwrap_or_else(|| panic!("{command}: not an object: {v}"));
    assert_eq!(obj.get("schema"), Some(&doc.schema), "{command}: schema");
    let keys: BTreeSet<&String> = obj.keys().collect();
    let listed: BTreeSet<&String> = doc.fields.keys().collect();
    assert_eq!(
        keys, listed,
        "{command}: top-level fields differ from docs/results.md"
    );
    for (name, nested) in &doc.fields {
        let Some(items) = obj[name].as_array().filter(|_| !nested.is_empty()) else {
            continue;
        };
        for item in items {
            for key in item.as_object().unwrap().keys() {
                assert!(
                    nested.contains(key),
                    "{command}: {name}[].{key} is not in docs/results.md ({nested:?})"
                );
            }
        }
    }
    v
}

#[test]
fn check_and_topology() {
    let f = fixture();
    let v = matches_docs("tame check --json", &["--root", &f, "check", "--json"]);
    assert!(!v["findings"].as_array().unwrap().is_empty());
    let v = matches_docs(
        "tame topology --json",
        &["--root", &f, "topology", "--json"],
    );
    assert!(v["cpus"].is_object());
}

#[test]
fn host_capture() {
    let dir = tempfile::tempdir().unwrap();
    let into = dir.path().join("cap");
    let into_s = into.to_str().unwrap();
    let v = matches_docs(
        "tame host capture DIR --json",
        &["--root", &fixture(), "host", "capture", into_s, "--json"],
    );
    assert_eq!(v["dir"], into_s);
    assert!(v["files"].as_u64().unwrap() > 0);
    assert!(into.join("proc").is_dir(), "the tree was written");
}

#[test]
fn plan_and_status() {
    let f = fixture();
    let spec = workspace().join("examples/minimal.toml");
    matches_docs(
        "tame plan SPEC --json",
        &["--root", &f, "plan", spec.to_str().unwrap(), "--json"],
    );
    // A node config with one of the fields: exit 1 (it does not realise the spec).
    let dir = tempfile::tempdir().unwrap();
    let kubelet = dir.path().join("config.yaml");
    std::fs::write(
        &kubelet,
        "cpuManagerPolicy: static\nreservedSystemCPUs: \"x\"\n",
    )
    .unwrap();
    let v = matches_docs_with_code(
        "tame plan SPEC --from-kubelet FILE --json",
        &[
            "--root",
            &f,
            "plan",
            spec.to_str().unwrap(),
            "--from-kubelet",
            kubelet.to_str().unwrap(),
            "--json",
        ],
        1,
    );
    let note = v["checks"][1]["note"].as_str().unwrap_or_default();
    assert!(
        note.starts_with("the kubelet cannot read this value"),
        "{note}"
    );
    let journal = tempfile::tempdir().unwrap();
    let j = journal.path().to_str().unwrap();
    let v = matches_docs(
        "tame status --json",
        &["--root", &f, "status", "--journal-dir", j, "--json"],
    );
    assert_eq!(v["applied"], false);
}

#[test]
fn ps_on_an_empty_journal() {
    let journal = tempfile::tempdir().unwrap();
    let j = journal.path().to_str().unwrap();
    let v = matches_docs(
        "tame ps --json",
        &["--root", &fixture(), "ps", "--journal-dir", j, "--json"],
    );
    assert_eq!(v["threads"], serde_json::json!([]));
    assert_eq!(v["gone"], serde_json::json!([]));
}

#[test]
fn reserve_list_and_check() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let socket = d.join("none.sock");
    let v = matches_docs(
        "tame reserve --list --json",
        &[
            "--root",
            &fixture(),
            "reserve",
            "--list",
            "--json",
            "--socket",
            socket.to_str().unwrap(),
            "--state-dir",
            d.to_str().unwrap(),
        ],
    );
    // No server at that socket: said in the notes, which the JSON carries too.
    let notes = v["notes"].as_array().unwrap();
    assert!(
        notes
            .iter()
            .any(|n| n.as_str().unwrap().contains(socket.to_str().unwrap())),
        "{notes:?}"
    );

    let set = d.join("set.toml");
    std::fs::write(
        &set,
        "[[task]]\nname = \"a\"\nruntime = \"10ms\"\nperiod = \"40ms\"\n",
    )
    .unwrap();
    let v = matches_docs(
        "tame reserve --check SET.toml --json",
        &["reserve", "--check", set.to_str().unwrap(), "--json"],
    );
    assert_eq!(v["utilisation_ppm"], 250_000);
    assert_eq!(v["edf_schedulable"], true);
    // Not admissible: exit 3, and still the documented JSON.
    std::fs::write(
        &set,
        "[[task]]\nname = \"a\"\nruntime = \"30ms\"\nperiod = \"40ms\"\n\
         [[task]]\nname = \"b\"\nruntime = \"30ms\"\nperiod = \"40ms\"\n",
    )
    .unwrap();
    let v = matches_docs_with_code(
        "tame reserve --check SET.toml --json",
        &["reserve", "--check", set.to_str().unwrap(), "--json"],
        3,
    );
    assert_eq!(v["edf_schedulable"], false);
}

#[test]
fn ipc_ls_lists_a_segment_with_its_documented_fields() {
    // A root of its own with one (invalid) segment: ls reads below --root only.
    let root = tempfile::tempdir().unwrap();
    let shm = root.path().join("dev/shm");
    std::fs::create_dir_all(&shm).unwrap();
    std::fs::write(shm.join("tame.junk"), b"not a segment").unwrap();
    let v = matches_docs(
        "tame ipc ls --json",
        &[
            "--root",
            root.path().to_str().unwrap(),
            "ipc",
            "ls",
            "--json",
        ],
    );
    let segments = v["segments"].as_array().unwrap();
    assert_eq!(segments.len(), 1, "{v}");
    assert_eq!(segments[0]["name"], "junk");
    assert_eq!(segments[0]["state"], "invalid");
}

#[test]
fn compare_of_two_recorded_results() {
    let data = workspace().join("crates/tame-bench/testdata/compare");
    let v = matches_docs(
        "tame compare A B --json -",
        &[
            "compare",
            data.join("a-sleep.json").to_str().unwrap(),
            data.join("b-sleep.json").to_str().unwrap(),
            "--json",
            "-",
        ],
    );
    assert_eq!(v["bench"], "sleep");
    assert!(!v["rows"].as_array().unwrap().is_empty());
}

#[test]
fn compare_gate_of_recorded_results() {
    let data = workspace().join("crates/tame-cli/tests/fixtures/gate");
    // The recorded loaded run fails the gate: exit 1, the verdict still printed.
    let v = matches_docs_with_code(
        "tame compare --gate BASELINE… NEW --json -",
        &[
            "compare",
            "--gate",
            data.join("baseline").to_str().unwrap(),
            data.join("loaded.json").to_str().unwrap(),
            "--json",
            "-",
        ],
        1,
    );
    assert_eq!(v["passed"], false);
}

#[test]
fn every_command_with_a_json_flag_has_a_row() {
    // The commands whose man page (generated from the clap definitions) offers --json.
    let dir = tempfile::tempdir().unwrap();
    let out = tame(&["man", "--out", dir.path().to_str().unwrap()]);
    assert!(out.status.success());
    let text = std::fs::read_to_string(workspace().join("docs/results.md")).unwrap();
    let table = text
        .split("## `--json` of every other command")
        .nth(1)
        .unwrap();
    let mut with_json = Vec::new();
    for page in std::fs::read_dir(dir.path()).unwrap() {
        let page = page.unwrap().path();
        let roff = std::fs::read_to_string(&page).unwrap();
        // An option of its own, not `--json` named in another option's help text.
        if !roff.lines().any(|l| l.starts_with("\\fB\\-\\-json\\fR")) {
            continue;
        }
        let words = page
            .file_stem()
            .unwrap()
            .to_string_lossy()
            .replace('-', " ");
        // `tame bench` lists its subcommands only; each bench has its own row under `tame bench …`.
        let words = if words.starts_with("tame bench ") {
            "tame bench".to_string()
        } else {
            words
        };
        // The page's name spells a dashed subcommand (`performance-profile`) with a space.
        assert!(
            table.replace('-', " ").contains(&format!("| `{words}")),
            "{words} takes --json but docs/results.md's table has no row for it"
        );
        with_json.push(words);
    }
    assert!(with_json.len() >= 12, "{with_json:?}");
}

#[test]
fn enable_dry_run() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let copied = std::process::Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", fixture()))
        .arg(&root)
        .status()
        .unwrap();
    assert!(copied.success());
    std::fs::create_dir_all(root.join("etc/systemd/system")).unwrap();
    let spec = workspace().join("examples/isolate-cpu0.toml");
    let v = matches_docs(
        "tame enable SPEC --json",
        &[
            "--root",
            root.to_str().unwrap(),
            "enable",
            spec.to_str().unwrap(),
            "--boot",
            "none",
            "--dry-run",
            "--json",
        ],
    );
    assert_eq!(v["dry_run"], true);
    assert_eq!(v["boot"]["loader"], "none");
}
