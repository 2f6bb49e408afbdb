//! `tame enable` / `tame disable` on fixture host trees (`--root`): the files enable
//! writes are the golden ones, disable leaves the tree byte-identical, and what is in the
//! way is refused before anything is written. systemd-analyze verifies the units. The
//! boot itself is not tested: PID 1 of the development VM is not systemd (docs/testing.md).

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::{have_program, require, tame};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A fixture host copied where enable may write, with a systemd configuration directory
/// (and GRUB's defaults where `grub`).
struct Host {
    dir: tempfile::TempDir,
}

impl Host {
    fn new(fixture: &str, grub: bool) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let src = workspace().join("fixtures/hosts").join(fixture);
        let ok = Command::new("cp")
            .arg("-a")
            .arg(format!("{}/.", src.display()))
            .arg(dir.path().join("root"))
            .status()
            .unwrap()
            .success();
        assert!(ok, "copy {fixture}");
        let etc = dir.path().join("root/etc");
        std::fs::create_dir_all(etc.join("systemd/system")).unwrap();
        std::fs::create_dir_all(etc.join("kernel")).unwrap();
        if grub {
            std::fs::create_dir_all(etc.join("default")).unwrap();
            std::fs::write(etc.join("default/grub"), "GRUB_DEFAULT=0\n").unwrap();
        }
        Host { dir }
    }

    fn root(&self) -> String {
        self.dir.path().join("root").display().to_string()
    }

    fn journal(&self) -> String {
        self.dir.path().join("journal").display().to_string()
    }

    fn run(&self, args: &[&str]) -> Output {
        let root = self.root();
        let journal = self.journal();
        let mut all = vec!["--root", &root];
        all.extend_from_slice(args);
        if args[0] != "status" || !args.contains(&"--journal-dir") {
            all.extend_from_slice(&["--journal-dir", &journal]);
        }
        tame(&all)
    }

    /// Every entry of the tree: type, mode, owner and content (or link target).
    fn snapshot(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        walk(Path::new(&self.root()), Path::new(""), &mut out);
        out
    }
}

fn walk(base: &Path, rel: &Path, out: &mut BTreeMap<String, String>) {
    let path = base.join(rel);
    let m = std::fs::symlink_metadata(&path).unwrap();
    let head = format!("{:o} {}:{}", m.mode(), m.uid(), m.gid());
    let what = if m.file_type().is_symlink() {
        format!("link {}", std::fs::read_link(&path).unwrap().display())
    } else if m.is_dir() {
        for e in std::fs::read_dir(&path).unwrap() {
            walk(base, &rel.join(e.unwrap().file_name()), out);
        }
        "dir".to_string()
    } else {
        format!("{:?}", std::fs::read(&path).unwrap())
    };
    out.insert(rel.display().to_string(), format!("{head} {what}"));
}

/// The output with this run's paths replaced, so a golden file holds for every checkout.
fn normalized(out: &str, host: &Host) -> String {
    let binary = std::fs::canonicalize(env!("CARGO_BIN_EXE_tame")).unwrap();
    out.replace(&binary.display().to_string(), "@TAME@")
        .replace(&host.journal(), "@JOURNAL@")
        .replace(&host.root(), "@ROOT@")
}

fn golden(name: &str, got: &str) {
    let path = workspace()
        .join("crates/tame-cli/tests/fixtures/enable")
        .join(name);
    if std::env::var_os("TAME_ENABLE_BLESS").is_some() {
        std::fs::write(&path, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        got == want,
        "{name} differs from {} — if intended, regenerate with TAME_ENABLE_BLESS=1 cargo test -p tame-cli --test it enable_cli\n--- got:\n{got}",
        path.display()
    );
}

/// Dry run, enable, status, enable again, disable: for a cgroup v2 host with GRUB and a
/// cgroup v1 host writing /etc/kernel/cmdline.
#[test]
fn enable_writes_the_golden_files_and_disable_restores_the_tree_byte_for_byte() {
    let cases = [
        (
            "rt-8cpu",
            "crates/tame-cli/tests/fixtures/kubernetes/rt-8cpu.toml",
            true,
            None,
        ),
        (
            "dev-vm",
            "examples/isolate-cpu0.toml",
            false,
            Some("kernel-cmdline"),
        ),
    ];
    for (fixture, spec, grub, boot) in cases {
        let host = Host::new(fixture, grub);
        let spec = workspace().join(spec).display().to_string();
        let mut args = vec!["enable", spec.as_str()];
        if let Some(b) = boot {
            args.extend_from_slice(&["--boot", b]);
        }
        let before = host.snapshot();

        let dry = host.run(&[args.as_slice(), &["--dry-run"]].concat());
        assert_eq!(dry.status.code(), Some(0), "{}", text(&dry.stderr));
        let shown =
            normalized(&text(&dry.stdout), &host).replace(&spec, &format!("@SPEC@ ({fixture})"));
        golden(&format!("{fixture}.dry-run.txt"), &shown);
        assert_eq!(host.snapshot(), before, "{fixture}: the dry run wrote");

        let json = host.run(&[args.as_slice(), &["--dry-run", "--json"]].concat());
        let report: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
        let planned: BTreeMap<String, String> = report["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                (
                    f["path"]
                        .as_str()
                        .unwrap()
                        .trim_start_matches('/')
                        .to_string(),
                    f["content"].as_str().unwrap().to_string(),
                )
            })
            .collect();

        let out = host.run(&args);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let after = host.snapshot();
        // Exactly the planned files (with the dry run's content), their link and new
        // directories appeared; nothing else changed.
        for (path, entry) in &before {
            assert_eq!(after.get(path), Some(entry), "{fixture}: {path} changed");
        }
        let new: Vec<&String> = after.keys().filter(|k| !before.contains_key(*k)).collect();
        for (path, content) in &planned {
            let entry = &after[path];
            assert!(entry.starts_with("100644 "), "{path}: {entry}");
            let bytes = std::fs::read(Path::new(&host.root()).join(path)).unwrap();
            assert_eq!(text(&bytes), *content, "{path}");
        }
        let link = "etc/systemd/system/sysinit.target.wants/tame-partition.service";
        assert!(
            after[link].ends_with("link /etc/systemd/system/tame-partition.service"),
            "{}",
            after[link]
        );
        for path in new {
            let planned_here = planned.contains_key(path) || path == link;
            assert!(
                planned_here || after[path].contains(" dir"),
                "{fixture}: {path} was not planned"
            );
        }

        let status = host.run(&["status", "--journal-dir", &host.journal()]);
        let status = text(&status.stdout);
        assert!(
            status.contains("Enabled at boot: /etc/tame/partition.toml"),
            "{status}"
        );
        assert!(status.contains("active after a reboot"), "{status}");

        let again = host.run(&args);
        assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
        assert!(
            text(&again.stdout).starts_with("Already enabled"),
            "{}",
            text(&again.stdout)
        );
        let other = workspace()
            .join("examples/minimal.toml")
            .display()
            .to_string();
        let refused = host.run(&["enable", &other, "--boot", "none"]);
        assert_eq!(refused.status.code(), Some(2), "{}", text(&refused.stderr));
        assert!(text(&refused.stderr).contains("run `tame disable` first"));
        assert_eq!(host.snapshot(), after);

        let off = host.run(&["disable"]);
        assert_eq!(off.status.code(), Some(0), "{}", text(&off.stderr));
        assert_eq!(
            host.snapshot(),
            before,
            "{fixture}: disable left the tree changed"
        );
        let none = host.run(&["disable"]);
        assert!(text(&none.stdout).starts_with("Nothing enabled"));
    }
}

/// A file tame did not write is never edited nor replaced: refused with exit 2 before
/// anything is written; a file changed after enable is left in place by disable.
#[test]
fn enable_refuses_files_in_the_way_and_disable_keeps_a_changed_file() {
    let spec = workspace()
        .join("examples/isolate-cpu0.toml")
        .display()
        .to_string();
    let host = Host::new("dev-vm", false);
    let kernel = Path::new(&host.root()).join("etc/kernel");
    std::fs::remove_dir(&kernel).unwrap();
    let out = host.run(&["enable", &spec, "--boot", "kernel-cmdline"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("/etc/kernel is missing"),
        "{}",
        text(&out.stderr)
    );
    let cmdline = kernel.join("cmdline");
    std::fs::create_dir_all(&kernel).unwrap();
    std::fs::write(&cmdline, "root=/dev/vda quiet\n").unwrap();
    let before = host.snapshot();
    let out = host.run(&["enable", &spec, "--boot", "kernel-cmdline"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("/etc/kernel/cmdline exists and tame did not write it"),
        "{err}"
    );
    assert!(err.contains("isolcpus=managed_irq,domain,0"), "{err}");
    assert_eq!(host.snapshot(), before);
    assert!(
        !Path::new(&host.journal()).exists(),
        "a refused enable made a journal"
    );

    let theirs = Path::new(&host.root()).join("etc/tame/partition.toml");
    std::fs::create_dir_all(theirs.parent().unwrap()).unwrap();
    std::fs::write(&theirs, "# mine\n").unwrap();
    let before = host.snapshot();
    let out = host.run(&["enable", &spec, "--boot", "none"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("/etc/tame/partition.toml exists and tame did not write it"));
    assert_eq!(host.snapshot(), before);
    std::fs::remove_dir_all(theirs.parent().unwrap()).unwrap();

    let out = host.run(&["enable", &spec, "--boot", "none"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("not written: add them to your boot loader"));
    let dropin = Path::new(&host.root()).join("etc/systemd/system.conf.d/tame.conf");
    std::fs::write(&dropin, "[Manager]\nCPUAffinity=0-1\n").unwrap();
    let off = host.run(&["disable"]);
    assert_eq!(off.status.code(), Some(1), "{}", text(&off.stdout));
    let said = text(&off.stdout);
    assert!(
        said.contains("changed since tame wrote it: left in place"),
        "{said}"
    );
    assert!(dropin.exists());
    assert!(!theirs.exists(), "the unchanged files are removed");
    // Once the user removes their change, disable finishes.
    std::fs::remove_file(&dropin).unwrap();
    let off = host.run(&["disable"]);
    assert_eq!(off.status.code(), Some(0), "{}", text(&off.stdout));
    assert!(!Path::new(&host.root()).join("etc/tame").exists());
}

/// The units tame ships and installs pass systemd-analyze verify, and so do the slice
/// drop-ins enable writes (init.scope has no unit file to verify; CPUAffinity= is read
/// from system.conf.d by PID 1 alone).
#[test]
fn systemd_analyze_verifies_the_units() {
    if !require(have_program("systemd-analyze"), "systemd-analyze") {
        return;
    }
    let binary = std::fs::canonicalize(env!("CARGO_BIN_EXE_tame")).unwrap();
    let units = tempfile::tempdir().unwrap();
    let mut names = Vec::new();
    for e in std::fs::read_dir(workspace().join("contrib/systemd")).unwrap() {
        let path = e.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.ends_with(".service") {
            continue;
        }
        let unit = std::fs::read_to_string(&path)
            .unwrap()
            .replace("/usr/local/bin/tame", &binary.display().to_string());
        std::fs::write(units.path().join(&name), unit).unwrap();
        names.push(name);
    }
    assert!(
        names.contains(&"tame-partition.service".to_string()),
        "{names:?}"
    );
    let verify = |dir: &Path, units: &[&str]| {
        let out = Command::new("systemd-analyze")
            .arg("verify")
            .args(units)
            .env("SYSTEMD_UNIT_PATH", format!("{}:", dir.display()))
            .output()
            .unwrap();
        // verify exits 0 on unknown keys and says so on stderr: both must be clean.
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "{units:?}: {}",
            text(&out.stderr)
        );
    };
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    verify(units.path(), &refs);

    let host = Host::new("rt-8cpu", true);
    let spec = workspace()
        .join("crates/tame-cli/tests/fixtures/kubernetes/rt-8cpu.toml")
        .display()
        .to_string();
    let out = host.run(&["enable", &spec]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let written = Path::new(&host.root()).join("etc/systemd/system");
    verify(
        &written,
        &["tame-partition.service", "system.slice", "user.slice"],
    );
    let scope = std::fs::read_to_string(written.join("init.scope.d/tame.conf")).unwrap();
    assert!(scope.contains("[Scope]\nAllowedCPUs=0-1\n"), "{scope}");
    // A drop-in with a key systemd does not know is caught (the check can fail).
    std::fs::write(
        written.join("user.slice.d/tame.conf"),
        "[Slice]\nAllowedCPUz=0\n",
    )
    .unwrap();
    let out = Command::new("systemd-analyze")
        .args(["verify", "user.slice"])
        .env("SYSTEMD_UNIT_PATH", format!("{}:", written.display()))
        .output()
        .unwrap();
    assert!(
        text(&out.stderr).contains("Unknown key"),
        "{}",
        text(&out.stderr)
    );
}

/// `tame check` says what enable wrote and that it waits for a reboot.
#[test]
fn check_says_the_boot_parameters_are_pending() {
    let host = Host::new("rt-8cpu", true);
    let root = host.root();
    let spec = workspace()
        .join("crates/tame-cli/tests/fixtures/kubernetes/rt-8cpu.toml")
        .display()
        .to_string();
    let out = tame(&["--root", &root, "enable", &spec]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let check = tame(&["--root", &root, "check"]);
    let said = text(&check.stdout);
    assert!(
        said.contains("\nEnabled at boot (/etc/tame/partition.toml, tame enable): isolcpus=managed_irq,domain,2-5 nohz_full=2-5 rcu_nocbs=2-5 irqaffinity=0-1,6-7 written to /etc/default/grub.d/tame.cfg: active after a reboot\n"),
        "{said}"
    );
    let json = tame(&["--root", &root, "check", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(
        doc["enabled"]["pending"].as_array().unwrap().len(),
        4,
        "{doc}"
    );
    let off = tame(&["--root", &root, "disable"]);
    assert_eq!(off.status.code(), Some(0), "{}", text(&off.stderr));
    let check = tame(&["--root", &root, "check", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&check.stdout).unwrap();
    assert!(doc.get("enabled").is_none(), "{doc}");
}
