//! One door to the host: no crate but tame-host spells a `/proc` or `/sys` path in
//! its non-test code. Every other crate reads and writes the host through tame-host's
//! typed accessors (`root.process(pid)`, `root.cpus_online()`, `root.kernel_cmdline()`,
//! `root.accounts()`, `root.interrupts()`, `root.rt_bandwidth()`, …) and its journal.
//!
//! The scan covers `crates/*/src/**/*.rs` outside tame-host, ignoring comments and
//! `#[cfg(test)]` items, and looks for string literals starting `/proc` or `/sys`.

use std::path::{Path, PathBuf};

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

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let p = entry.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The source with comments blanked (newlines kept), and which characters are
/// inside string or char literals.
fn strip_comments(src: &str) -> (Vec<char>, Vec<bool>) {
    let c: Vec<char> = src.chars().collect();
    let mut code = c.clone();
    let mut in_lit = vec![false; c.len()];
    let blank = |code: &mut Vec<char>, i: usize| {
        if code[i] != '\n' {
            code[i] = ' ';
        }
    };
    let mut i = 0;
    while i < c.len() {
        match c[i] {
            '/' if c.get(i + 1) == Some(&'/') => {
                while i < c.len() && c[i] != '\n' {
                    blank(&mut code, i);
                    i += 1;
                }
            }
            '/' if c.get(i + 1) == Some(&'*') => {
                let mut depth = 0;
                while i < c.len() {
                    if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                        depth += 1;
                        blank(&mut code, i);
                        blank(&mut code, i + 1);
                        i += 2;
                    } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                        depth -= 1;
                        blank(&mut code, i);
                        blank(&mut code, i + 1);
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        blank(&mut code, i);
                        i += 1;
                    }
                }
            }
            'r' if matches!(c.get(i + 1), Some('"') | Some('#'))
                && (i == 0 || !(c[i - 1].is_alphanumeric() || c[i - 1] == '_')) =>
            {
                let mut j = i + 1;
                let mut hashes = 0;
                while c.get(j) == Some(&'#') {
                    hashes += 1;
                    j += 1;
                }
                if c.get(j) != Some(&'"') {
                    i += 1;
                    continue;
                }
                j += 1;
                let start = j;
                loop {
                    if j >= c.len() {
                        break;
                    }
                    if c[j] == '"' && (0..hashes).all(|h| c.get(j + 1 + h) == Some(&'#')) {
                        break;
                    }
                    j += 1;
                }
                in_lit[start..j.min(c.len())].fill(true);
                i = j + 1 + hashes;
            }
            '"' => {
                let mut j = i + 1;
                while j < c.len() && c[j] != '"' {
                    if c[j] == '\\' {
                        j += 1;
                    }
                    j += 1;
                }
                in_lit[i + 1..j.min(c.len())].fill(true);
                i = j + 1;
            }
            '\'' => {
                // A char literal ('x', '\n', '\''), or a lifetime ('a).
                if c.get(i + 1) == Some(&'\\') {
                    let mut j = i + 2;
                    while j < c.len() && c[j] != '\'' {
                        j += 1;
                    }
                    in_lit[i + 1..j.min(c.len())].fill(true);
                    i = j + 1;
                } else if c.get(i + 2) == Some(&'\'') {
                    in_lit[i + 1] = true;
                    i += 3;
                } else {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    (code, in_lit)
}

/// Blank every item marked `#[cfg(test)]` (a module, a function, a `use`).
fn strip_test_items(code: &mut [char], in_lit: &[bool]) {
    let marker: Vec<char> = "#[cfg(test)]".chars().collect();
    let starts: Vec<usize> = (0..code.len())
        .filter(|&i| code[i..].starts_with(&marker) && !in_lit[i])
        .collect();
    for start in starts.into_iter().rev() {
        let mut i = start + marker.len();
        let mut depth = 0usize;
        let mut end = code.len();
        while i < code.len() {
            if !in_lit[i] {
                match code[i] {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = i + 1;
                            break;
                        }
                    }
                    ';' if depth == 0 => {
                        end = i + 1;
                        break;
                    }
                    _ => {}
                }
            }
            i += 1;
        }
        for ch in &mut code[start..end] {
            if *ch != '\n' {
                *ch = ' ';
            }
        }
    }
}

/// `(line, text)` of every string literal in non-test code that starts with a host path.
fn host_path_literals(src: &str) -> Vec<(usize, String)> {
    let (mut code, in_lit) = strip_comments(src);
    strip_test_items(&mut code, &in_lit);
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
    let crates = crates_dir();
    let mut problems = Vec::new();
    let mut crate_dirs: Vec<PathBuf> = std::fs::read_dir(&crates)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    crate_dirs.sort();
    assert!(crate_dirs.len() >= 10, "found the crates: {crate_dirs:?}");
    for dir in crate_dirs {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        if EXEMPT_CRATES.iter().any(|(c, _)| *c == name) {
            continue;
        }
        let mut files = Vec::new();
        rust_files(&dir.join("src"), &mut files);
        files.sort();
        for file in files {
            let rel = file
                .strip_prefix(&crates)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let src = std::fs::read_to_string(&file).unwrap();
            let found = host_path_literals(&src);
            let allowed = ALLOWED.iter().find(|(p, _, _)| *p == rel);
            match allowed {
                Some((_, n, _)) if *n == found.len() => {}
                Some((_, n, why)) if found.is_empty() => problems.push(format!(
                    "{rel} spells no host path any more: remove its entry ({n}, {why}) from ALLOWED"
                )),
                _ => {
                    for (line, text) in &found {
                        problems.push(format!(
                            "crates/{rel}:{line}: {text}… — use a tame-host accessor (root.process(pid), root.cpus_online(), …) or add one there"
                        ));
                    }
                    if let Some((_, n, _)) = allowed {
                        problems.push(format!(
                            "crates/{rel}: {} spellings, {n} allowed",
                            found.len()
                        ));
                    }
                }
            }
        }
    }
    for (path, _, _) in ALLOWED {
        if !crates.join(path).is_file() {
            problems.push(format!("ALLOWED names {path}, which does not exist"));
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}
