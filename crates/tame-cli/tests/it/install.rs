//! `make install-files` / `make uninstall` into a scratch DESTDIR, with the `tame` binary and
//! tame-ipc libraries this test build made (the release build of `make install` would take
//! minutes): every file lands where docs/install.md says, the unit runs the installed binary,
//! each man page parses, each completion script parses and really completes, and uninstall
//! takes back exactly what install put there.

use crate::common::{have_program, require, tame};

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `make TARGET VARS…` in the workspace root.
fn make(target: &str, vars: &[String]) -> Output {
    Command::new("make")
        .arg("--no-print-directory")
        .arg("-C")
        .arg(workspace())
        .arg(target)
        .args(vars)
        .output()
        .expect("make runs")
}

fn ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Where this build left the tame-ipc cdylib and staticlib: a dependency's `cdylib` and
/// `staticlib` are built beside its rlib, under the names `make install` takes from
/// target/release.
fn ipc_libs_dir() -> PathBuf {
    let deps = Path::new(env!("CARGO_BIN_EXE_tame"))
        .parent()
        .unwrap()
        .join("deps");
    for lib in ["libtame_ipc.so", "libtame_ipc.a"] {
        assert!(
            deps.join(lib).is_file(),
            "{lib} not in {} — did tame-ipc's crate-type change? The Makefile installs these names",
            deps.display()
        );
    }
    deps
}

fn vars(destdir: &Path, bin: &str) -> Vec<String> {
    vec![
        format!("DESTDIR={}", destdir.display()),
        "PREFIX=/usr".into(),
        format!("INSTALL_BIN={bin}"),
        format!("INSTALL_LIBS={}", ipc_libs_dir().display()),
    ]
}

/// Every regular file below `dir`, relative to it.
fn files_below(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                found.push(p.strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    found.sort();
    found
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// The man pages `tame man` writes, by name.
fn expected_man_pages() -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let out = tame(&["man", "--out", dir.path().to_str().unwrap()]);
    ok(&out, "tame man");
    let mut pages: Vec<String> = files_below(dir.path())
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    pages.sort();
    pages
}

#[test]
fn install_puts_everything_in_prefix_and_uninstall_takes_it_back() {
    if !require(have_program("make"), "make") {
        return;
    }
    let dest = tempfile::tempdir().unwrap();
    let d = dest.path();
    // Someone else's files in the same directories must survive uninstall.
    let others = [
        "usr/bin/other",
        "usr/share/man/man1/other.1",
        "usr/lib/libother.so",
    ];
    for f in others {
        std::fs::create_dir_all(d.join(f).parent().unwrap()).unwrap();
        std::fs::write(d.join(f), "not tame's").unwrap();
    }

    ok(
        &make("install-files", &vars(d, env!("CARGO_BIN_EXE_tame"))),
        "make install-files",
    );

    let usr = d.join("usr");
    let mut expected: Vec<String> = [
        "bin/tame",
        "lib/libtame_ipc.so",
        "lib/libtame_ipc.a",
        "include/tame_ipc.h",
        "lib/systemd/system/tame-serve.service",
        "lib/systemd/system/tame-partition.service",
        "lib/systemd/system/tame-guard.service",
        "share/bash-completion/completions/tame",
        "share/zsh/site-functions/_tame",
        "share/fish/vendor_completions.d/tame.fish",
        "share/doc/tame/reserve.md",
        "share/doc/tame/install.md",
        "share/doc/tame/serve.toml",
    ]
    .map(String::from)
    .to_vec();
    let pages = expected_man_pages();
    for must in [
        "tame.1",
        "tame-bench.1",
        "tame-bench-cycle.1",
        "tame-ipc-ls.1",
    ] {
        assert!(
            pages.contains(&must.to_string()),
            "{must} not among {pages:?}"
        );
    }
    expected.extend(pages.iter().map(|p| format!("share/man/man1/{p}")));
    for f in &expected {
        assert!(usr.join(f).is_file(), "{f} not installed");
    }
    assert_eq!(mode(&usr.join("bin/tame")), 0o755);
    assert_eq!(mode(&usr.join("share/man/man1/tame.1")), 0o644);
    assert_eq!(
        mode(&usr.join("share/bash-completion/completions/tame")),
        0o644
    );
    // Every doc is there, not only the ones named above.
    for doc in std::fs::read_dir(workspace().join("docs")).unwrap() {
        let name = doc.unwrap().file_name();
        if name.to_string_lossy().ends_with(".md") {
            assert!(usr.join("share/doc/tame").join(&name).is_file(), "{name:?}");
        }
    }

    // The installed binary runs and is the one built.
    let v = Command::new(usr.join("bin/tame"))
        .arg("--version")
        .output()
        .unwrap();
    ok(&v, "installed tame --version");

    for (unit, execs, doc) in [
        ("tame-serve.service", 2, "reserve.md"),
        ("tame-partition.service", 2, "partitions.md"),
        ("tame-guard.service", 1, "guard.md"),
    ] {
        unit_runs_the_installed_binary(&usr.join("lib/systemd/system").join(unit), execs, doc);
    }
    man_pages_parse(&usr.join("share/man/man1"), &pages);
    completions_parse_and_complete(&usr.join("share"));

    ok(&make("uninstall", &vars(d, "unused")), "make uninstall");
    let mut left: Vec<String> = files_below(d)
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    left.sort();
    let mut others: Vec<String> = others.map(String::from).to_vec();
    others.sort();
    assert_eq!(
        left, others,
        "uninstall leaves exactly the files tame did not install"
    );
}

/// The unit's `Exec*=` lines (at least `execs`) run the installed binary, and its
/// documentation is the installed `doc` page.
fn unit_runs_the_installed_binary(unit: &Path, execs: usize, doc: &str) {
    let text = std::fs::read_to_string(unit).unwrap();
    let exec: Vec<&str> = text.lines().filter(|l| l.starts_with("Exec")).collect();
    assert!(exec.len() >= execs, "{execs} Exec lines: {exec:?}");
    for line in exec {
        let program = line.split_once('=').unwrap().1.split(' ').next().unwrap();
        assert_eq!(program, "/usr/bin/tame", "{line}");
    }
    assert!(
        !text.contains("/usr/local"),
        "a path outside PREFIX is left:\n{text}"
    );
    assert!(
        text.contains(&format!("Documentation=file:///usr/share/doc/tame/{doc}")),
        "{text}"
    );
}

fn man_pages_parse(dir: &Path, pages: &[String]) {
    if !require(
        have_program("groff"),
        "groff (Debian groff-base, with man-db)",
    ) || !require(have_program("man"), "man (Debian man-db)")
    {
        return;
    }
    for page in pages {
        let path = dir.join(page);
        // -k: the pages are UTF-8 (µ, —); -ww: every warning, which must be none.
        let g = Command::new("groff")
            .args(["-k", "-man", "-Tutf8", "-ww", "-z"])
            .arg(&path)
            .output()
            .unwrap();
        ok(&g, &format!("groff {page}"));
        assert!(
            g.stderr.is_empty(),
            "groff warns on {page}: {}",
            String::from_utf8_lossy(&g.stderr)
        );
        let m = Command::new("man")
            .arg("-l")
            .arg(&path)
            .env("MANWIDTH", "80")
            .output()
            .unwrap();
        ok(&m, &format!("man -l {page}"));
        let text = String::from_utf8_lossy(&m.stdout);
        let name = page.trim_end_matches(".1");
        assert!(
            text.contains("NAME") && text.contains("SYNOPSIS") && text.contains(name),
            "man -l {page} renders no NAME/SYNOPSIS for {name}:\n{text}"
        );
    }
}

/// Run `shell -c script`; its stdout.
fn shell(shell: &str, script: &str) -> String {
    let out = Command::new(shell).arg("-c").arg(script).output().unwrap();
    ok(&out, &format!("{shell} -c {script}"));
    String::from_utf8(out.stdout).unwrap()
}

fn completions_parse_and_complete(share: &Path) {
    let bash = share.join("bash-completion/completions/tame");
    let zsh = share.join("zsh/site-functions/_tame");
    let fish = share.join("fish/vendor_completions.d/tame.fish");
    assert!(Command::new("bash")
        .arg("-n")
        .arg(&bash)
        .status()
        .unwrap()
        .success());

    // bash: what <TAB> offers after `tame be`, `tame bench cy` and `tame bench cycle --inter`.
    let complete = |words: &str| {
        let script = format!(
            "source {}; COMP_WORDS=({words}); COMP_CWORD=$(( ${{#COMP_WORDS[@]}} - 1 )); \
             _tame tame \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; \
             printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            bash.display()
        );
        shell("bash", &script)
    };
    assert_eq!(complete("tame be").trim(), "bench");
    assert_eq!(complete("tame bench cy").trim(), "cycle");
    assert_eq!(complete("tame bench cycle --inter").trim(), "--interval");
    let shells = complete("tame completions ''");
    for shell in ["bash", "zsh", "fish"] {
        assert!(
            shells.lines().any(|l| l == shell),
            "{shell} not offered: {shells}"
        );
    }

    if require(have_program("zsh"), "zsh (Debian zsh)") {
        assert!(Command::new("zsh")
            .arg("-n")
            .arg(&zsh)
            .status()
            .unwrap()
            .success());
        assert!(std::fs::read_to_string(&zsh)
            .unwrap()
            .starts_with("#compdef tame"));
    }
    if require(have_program("fish"), "fish (Debian fish)") {
        assert!(Command::new("fish")
            .arg("-n")
            .arg(&fish)
            .status()
            .unwrap()
            .success());
        // fish completes a command line itself: `complete -C`.
        let script = format!("source {}; complete -C 'tame be'", fish.display());
        let offered = shell("fish", &script);
        assert!(
            offered
                .lines()
                .any(|l| l.split('\t').next() == Some("bench")),
            "fish offers no `bench` for `tame be`: {offered}"
        );
    }
}

#[test]
fn install_files_without_a_built_binary_is_refused_before_anything_is_installed() {
    if !require(have_program("make"), "make") {
        return;
    }
    let dest = tempfile::tempdir().unwrap();
    let out = make("install-files", &vars(dest.path(), "/nonexistent/tame"));
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("/nonexistent/tame is missing: run 'make install'"),
        "{stderr}"
    );
    assert!(
        files_below(dest.path()).is_empty(),
        "nothing may be installed"
    );
}
