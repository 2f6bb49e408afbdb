//! `tame plan | apply | status` on fixture trees (`--root`; nothing on this machine
//! changes): the messages a new user meets first.

use crate::common::{have_program, is_root, require, tame};

use std::path::Path;

use tame_host::{CpuList, Root};
use tame_testing::synthetic::{CgroupLayout, SyntheticHost};

fn text(o: &std::process::Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), dest).unwrap();
        }
    }
}

fn put(base: &Path, path: &str, text: &str) {
    let p = base.join(path.trim_start_matches('/'));
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// List every task of the tree in the root cpuset, as a live v1 root shows them.
fn list_tasks_in_root_cpuset(base: &Path) {
    let mut tids: Vec<u32> = std::fs::read_dir(base.join("proc"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    let list: String = tids.iter().map(|t| format!("{t}\n")).collect();
    put(base, "/sys/fs/cgroup/cpuset/tasks", &list);
}

const MINIMAL: &str = "examples/minimal.toml";

fn example(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(name)
        .display()
        .to_string()
}

#[test]
fn plan_on_the_dev_vm_without_a_cpuidle_driver_says_what_works_and_recommends_one_layout() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("root");
    copy_tree(&tame_testing::committed_fixture("dev-vm"), &base);
    put(
        &base,
        "/sys/devices/system/cpu/cpuidle/current_driver",
        "none\n",
    );
    list_tasks_in_root_cpuset(&base);
    let root = base.to_str().unwrap();
    let out = text(&tame(&["--root", root, "plan", &example(MINIMAL)]));
    for want in [
        // 2: the idle write is marked, and the warning says what works instead.
        "pm_qos_resume_latency_us: 0 → n/a    # limit idle exit latency — no effect here: no cpuidle driver (see warnings)",
        "idle = \"poll\" changes nothing on this machine: it has no cpuidle driver",
        "boot with idle=poll",
        "`tame bench cycle --busy-wait`",
        // 1: isolating CPU 1 warns (IRQ 36), so would CPU 0: one layout, with why.
        "Recommended layout — every choice of 1 isolated CPU warns on this machine; this is the least bad:\n  partition \"system\": cpus = \"1\"    (the spec has \"0\")\n  partition \"rt\": cpus = \"0\"    (the spec has \"1\")\n",
        "CPU 1 → system: kernel-managed IRQ 36 (virtio1-req.0)",
        // 3: threads, of how many processes; the kept ones counted, not named.
        "listed now: /sys/fs/cgroup/cpuset/tasks → /sys/fs/cgroup/cpuset/tame-system/tasks",
        "where the kernel keeps them: ",
        "; --verbose names them\n",
    ] {
        assert!(out.contains(want), "{want:?} missing from:\n{out}");
    }
    assert!(
        !out.contains("ksoftirqd/1"),
        "named without --verbose:\n{out}"
    );
    let verbose = text(&tame(&[
        "--root",
        root,
        "plan",
        "--verbose",
        &example(MINIMAL),
    ]));
    assert!(verbose.contains("ksoftirqd/1 ("), "{verbose}");

    // The example that follows the recommendation: keep it, it is the least bad.
    let out = text(&tame(&[
        "--root",
        root,
        "plan",
        &example("examples/isolate-cpu0.toml"),
    ]));
    assert!(
        out.contains("Recommended layout: keep this one — every choice of 1 isolated CPU warns on this machine, and this is the least bad:"),
        "{out}"
    );
}

/// An 8-CPU cgroup v1 host as the partition fixtures make it.
fn v1_tree(base: &Path) -> Root {
    let mut h = SyntheticHost::rt_8cpu();
    h.cgroups = CgroupLayout::V1;
    h.isolated = CpuList::new();
    h.nohz_full = None;
    h.irq_cpus = None;
    h.managed_avoid = None;
    h.irqbalance = None;
    h.cmdline = "root=/dev/vda quiet".into();
    h.timer_migration = true;
    h.write(base).unwrap();
    list_tasks_in_root_cpuset(base);
    put(
        base,
        "/sys/fs/cgroup/cpuset/cpuset.sched_load_balance",
        "1\n",
    );
    put(base, "/sys/devices/virtual/workqueue/cpumask", "ff\n");
    tame_testing::fixture_root(base)
}

#[test]
fn status_names_the_drift_and_the_command_that_repairs_it_and_that_command_does() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("root");
    let root = v1_tree(&base);
    let journal = dir.path().join("journal");
    let spec_file = dir.path().join("rt.toml");
    let spec_text = "[[partition]]\nname = \"system\"\ncpus = \"0-1\"\nrole = \"system\"\n\
                     [[partition]]\nname = \"rt\"\ncpus = \"2-7\"\nrole = \"isolated\"\n";
    std::fs::write(&spec_file, spec_text).unwrap();
    // Applied through the library on the fixture backend (it creates cgroup files as the
    // kernel does); the CLI then reads the plain files.
    let spec = tame_partition::Spec::parse("rt.toml", spec_text).unwrap();
    tame_partition::apply_file(&root, &spec, spec_text, Some(&spec_file), &journal, None).unwrap();
    put(&base, "/proc/sys/kernel/timer_migration", "1\n");

    let (b, j) = (base.to_str().unwrap(), journal.to_str().unwrap());
    let out = text(&tame(&["--root", b, "status", "--journal-dir", j]));
    let command = format!(
        "tame --root {b} apply {} --journal-dir {j}",
        spec_file.display()
    );
    let want = format!(
        "Drift (changed by someone else since apply):\n  /proc/sys/kernel/timer_migration: applied 0 → now 1 — timers are not pulled onto busy isolated CPUs\nRe-applying the spec repairs this (it writes the 1 drifted value back, and anything else the plan now finds): {command}\n"
    );
    assert!(out.contains(&want), "{want:?} missing from:\n{out}");

    // The command it names repairs the drift (it writes that one value).
    let args: Vec<&str> = command.split_whitespace().skip(1).collect();
    let repaired = text(&tame(&args));
    assert!(repaired.starts_with("Applied "), "{repaired}");
    assert!(
        repaired.contains(": 1 writes, 0 directories, 0 threads moved."),
        "{repaired}"
    );
    let out = text(&tame(&["--root", b, "status", "--journal-dir", j]));
    assert!(
        out.contains("Drift (changed by someone else since apply):\n  none\n"),
        "{out}"
    );
    // A re-apply that changes nothing counts the kept threads; --verbose names them.
    let again = text(&tame(&args));
    assert!(again.starts_with("Nothing changed: "), "{again}");
    assert!(again.contains("; --verbose names them\n"), "{again}");
    assert!(!again.contains("ksoftirqd/3"), "{again}");
    let mut verbose = args.clone();
    verbose.push("--verbose");
    assert!(text(&tame(&verbose)).contains("ksoftirqd/3 ("));
    tame_partition::revert(&root, &journal).unwrap();
}

/// `tame status` by a user who may not read root's journal shows the spec apply published
/// (and says what it leaves out); a status with nothing applied succeeds; neither suggests
/// making the journal directory writable. `tame revert` by that user names revert.
#[test]
fn status_and_revert_by_another_user() {
    use std::os::unix::fs::PermissionsExt;
    if !require(is_root(), "root, to run tame as another user")
        || !require(have_program("setpriv"), "setpriv to run as another user")
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let base = dir.path().join("root");
    let root = v1_tree(&base);
    let journal = dir.path().join("journal");
    let spec_text = "[[partition]]\nname = \"system\"\ncpus = \"0-1\"\nrole = \"system\"\n\
                     [[partition]]\nname = \"rt\"\ncpus = \"2-7\"\nrole = \"isolated\"\n";
    let spec = tame_partition::Spec::parse("rt.toml", spec_text).unwrap();
    let (b, j) = (base.to_str().unwrap(), journal.to_str().unwrap());
    let as_nobody = |args: &[&str]| {
        std::process::Command::new("setpriv")
            .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_tame"))
            .args(args)
            .output()
            .unwrap()
    };
    // Nothing applied: the journal directory exists, root's alone (0711, as apply makes it).
    std::fs::create_dir(&journal).unwrap();
    std::fs::set_permissions(&journal, std::fs::Permissions::from_mode(0o711)).unwrap();
    let out = text(&as_nobody(&["--root", b, "status", "--journal-dir", j]));
    assert!(
        out.starts_with("No partitions applied (read without root"),
        "{out}"
    );

    tame_partition::apply_file(&root, &spec, spec_text, None, &journal, None).unwrap();
    let out = text(&as_nobody(&["--root", b, "status", "--journal-dir", j]));
    assert!(out.starts_with("Applied (read without root"), "{out}");
    assert!(out.contains("  | name = \"rt\"\n"), "{out}");
    assert!(!out.contains("writable"), "{out}");
    let o = as_nobody(&["--root", b, "status", "--journal-dir", j, "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["applied"], true);
    assert!(doc["partial"].as_str().unwrap().contains("root's alone"));

    let o = as_nobody(&["revert", "--journal-dir", j]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("revert changes the live system and needs root"),
        "{err}"
    );
    tame_partition::revert(&root, &journal).unwrap();
}
