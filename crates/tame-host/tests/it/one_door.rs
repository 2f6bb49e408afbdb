//! One door to the host: no crate but tame-host spells a `/proc` or `/sys` path in
//! its non-test code. Every other crate reads and writes the host through tame-host's
//! typed accessors (`root.process(pid)`, `root.cpus_online()`, `root.kernel_cmdline()`,
//! `root.accounts()`, `root.interrupts()`, `root.rt_bandwidth()`, …) and its journal.
//!
//! The scan covers `crates/*/src/**/*.rs` outside tame-host, ignoring comments and
//! `#[cfg(test)]` items, and looks for string literals starting `/proc` or `/sys`.
use tame_testing::source::{code_of, crates_dir, Door};

/// Crates that may spell host paths, and why.
const EXEMPT_CRATES: &[(&str, &str)] = &[
    ("tame-host", "the host layer: the one place that knows where things are"),
    ("tame-ipc", "independent of every other tame crate (its C ABI ships alone): it finds /proc and /dev/shm itself"),
    ("tame-testing", "test tooling (a dev-dependency): writes fixture trees"),
];

/// Files that still spell host paths: (path below `crates/`, how many spellings, why).
/// The count must match exactly, so the list can only shrink: when a file is
/// migrated, this test says to remove its entry.
const ALLOWED: &[(&str, usize, &str)] = &[
    // Not host access: the path names the child's own memfd to its dynamic
    // loader (LD_PRELOAD), is never read by tame and must not move with --root.
    (
        "tame-launch/src/preload.rs",
        1,
        "process-local /proc/self/fd of the child",
    ),
];

/// `(line, text)` of every string literal in non-test code that starts with a host path.
fn host_path_literals(src: &str) -> Vec<(usize, String)> {
    let (code, in_lit) = code_of(src);
    let needles: Vec<Vec<char>> = ["/proc", "/sys"]
        .iter()
        .map(|n| n.chars().collect())
        .collect();
    let mut found = Vec::new();
    let mut line = 1;
    for i in 0..code.len() {
        if code[i] == '\n' {
            line += 1;
        }
        let opens = code[i] == '"' && !in_lit[i] && in_lit.get(i + 1) == Some(&true);
        if opens && needles.iter().any(|n| code[i + 1..].starts_with(n)) {
            let text: String = code[i..]
                .iter()
                .take_while(|c| **c != '\n')
                .take(48)
                .collect();
            found.push((line, text));
        }
    }
    found
}

#[test]
fn the_scanner_sees_code_and_ignores_comments_and_tests() {
    let src = r##"
// "/proc/in/a/comment"
/* "/sys/in/a/block" /* nested "/sys" */ */
fn live() -> &'static str { "/proc/cmdline" }
const RAW: &str = r#"/sys/raw "quoted""#;
const ESCAPED: &str = "a \"/proc/not-a-literal-start";
const CH: char = '"';
fn after_char() -> &'static str { "/sys/after" }
#[cfg(test)]
mod tests {
    fn t() { let _ = "/proc/test"; let _ = '}'; }
}
#[cfg(test)]
use std::path::Path;
fn after_tests() { let _ = "/proc/after"; }
"##;
    let lines: Vec<usize> = host_path_literals(src).iter().map(|(l, _)| *l).collect();
    assert_eq!(lines, vec![4, 5, 8, 15], "{:?}", host_path_literals(src));
}

#[test]
fn no_crate_but_tame_host_spells_proc_or_sys() {
    let door = Door {
        exempt_crates: EXEMPT_CRATES,
        door: &[],
        allowed: ALLOWED,
        none_left: "spells no host path any more",
        unit: "spellings",
        fix: "use a tame-host accessor (root.process(pid), root.cpus_online(), …) or add one there",
    };
    let problems = door.problems(&crates_dir(env!("CARGO_MANIFEST_DIR")), |src| {
        host_path_literals(src)
            .into_iter()
            .map(|(line, text)| (line, format!("{text}…")))
            .collect()
    });
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}
