//! One door for processes: no crate but the spawner (`tame_launch::spawn`: the [`Spawn`]
//! builder and its fork-and-run door `spawn::fork`) forks, execs or starts a process in
//! its non-test code. Every child tame starts is resolved by one rule, placed before it
//! runs, and every call made in the child is checked — there, once.
//!
//! The scan covers `crates/*/src/**/*.rs`, ignoring comments, string literals and
//! `#[cfg(test)]` items, and looks for `Command::new(` (std's process builder; clap's
//! `clap::Command::new` is not a process), `CommandExt`, and calls (`name(`) of `fork`,
//! `vfork`, `posix_spawn`, `posix_spawnp`, the `exec*` family, `SYS_clone` and `SYS_clone3`.
//!
//! [`Spawn`]: tame_launch::spawn::Spawn

use tame_testing::source::{code_of, crates_dir, Door};

/// Crates that may start processes themselves, and why.
const EXEMPT_CRATES: &[(&str, &str)] = &[
    (
        "tame-ipc",
        "independent of every other tame crate (its C ABI ships alone); its spawns are test code",
    ),
    (
        "tame-testing",
        "test tooling (a dev-dependency): runs test binaries, chromium, promtool",
    ),
];

/// The spawner itself: the one door (a path ending in `/` is a directory).
const DOOR: &[(&str, &str)] = &[
    ("tame-launch/src/spawn.rs", "the Spawn builder"),
    (
        "tame-launch/src/spawn/",
        "the child's checked steps and the fork-and-run door",
    ),
    (
        "tame-launch/src/preload.rs",
        "the spawner's preload library: hands its memfd to the spawner's Command",
    ),
];

/// Files that still start processes themselves: (path below `crates/`, how many sites,
/// why). The count must match exactly, so the list can only shrink.
const ALLOWED: &[(&str, usize, &str)] = &[(
    "tame-reserve/src/bin/kit.rs",
    2,
    "the test helper's spawn-at: clone3 with set_tid makes a process with a chosen pid (pid-reuse tests), then execvp; no spawner can choose a pid",
)];

const CALLS: &[&str] = &[
    "fork",
    "vfork",
    "posix_spawn",
    "posix_spawnp",
    "execv",
    "execve",
    "execvp",
    "execvpe",
    "execl",
    "execle",
    "execlp",
    "fexecve",
    "SYS_clone",
    "SYS_clone3",
];

fn ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// `(line, what)` of every process start in the non-test code of `src`.
fn process_starts(src: &str) -> Vec<(usize, String)> {
    let (code, in_lit) = code_of(src);
    let chars = |s: &str| s.chars().collect::<Vec<char>>();
    // (pattern, name, whether an identifier character may not follow)
    let mut patterns: Vec<(Vec<char>, &str, bool)> = vec![
        (chars("Command::new("), "Command::new", false),
        (chars("CommandExt"), "CommandExt", true),
    ];
    for c in CALLS {
        if c.starts_with("SYS_") {
            patterns.push((chars(c), c, true));
        } else {
            patterns.push((chars(&format!("{c}(")), c, false));
        }
    }
    let clap = chars("clap::");
    let mut found = Vec::new();
    let mut line = 1;
    for i in 0..code.len() {
        if code[i] == '\n' {
            line += 1;
            continue;
        }
        if in_lit[i] || (i > 0 && ident(code[i - 1])) {
            continue;
        }
        for (pattern, name, whole) in &patterns {
            if !code[i..].starts_with(pattern) {
                continue;
            }
            if *whole && code.get(i + pattern.len()).is_some_and(|c| ident(*c)) {
                continue;
            }
            if *name == "Command::new" && code[..i].ends_with(&clap) {
                continue;
            }
            found.push((line, name.to_string()));
            break;
        }
    }
    found
}

#[test]
fn the_scanner_sees_process_starts_and_ignores_comments_tests_and_clap() {
    let src = r##"
// Command::new("in a comment"); libc::fork()
/* execvp(x) */
fn live() { let _ = std::process::Command::new("sh"); }
fn f() { unsafe { libc::fork() }; }
fn g() { let _ = clap::Command::new("tame"); }
fn h() { let _ = "Command::new(\"in a string\")"; let _ = my_fork(1); let _ = Fork::new("x"); }
fn c() { libc::syscall(libc::SYS_clone3, 0); nix::unistd::execve(a, b, c); }
use std::os::unix::process::CommandExt;
#[cfg(test)]
mod tests {
    fn t() { std::process::Command::new("sleep").spawn(); unsafe { libc::fork() }; }
}
fn after_tests() { let _ = Command::new("true"); }
"##;
    let found = process_starts(src);
    let found: Vec<(usize, &str)> = found.iter().map(|(l, w)| (*l, w.as_str())).collect();
    assert_eq!(
        found,
        vec![
            (4, "Command::new"),
            (5, "fork"),
            (8, "SYS_clone3"),
            (8, "execve"),
            (9, "CommandExt"),
            (14, "Command::new"),
        ],
    );
}

#[test]
fn no_crate_but_the_spawner_starts_a_process() {
    let door = Door {
        exempt_crates: EXEMPT_CRATES,
        door: &DOOR.iter().map(|(d, _)| *d).collect::<Vec<_>>(),
        allowed: ALLOWED,
        none_left: "starts no process any more",
        unit: "sites",
        fix: "start it through tame_launch::spawn::Spawn (or spawn::fork::Fork for a function)",
    };
    let problems = door.problems(&crates_dir(env!("CARGO_MANIFEST_DIR")), process_starts);
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}
