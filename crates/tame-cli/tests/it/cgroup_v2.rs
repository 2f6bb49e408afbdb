//! The real `tame` on a live cgroup v2 hierarchy (root only): on a machine that mounts
//! cpuset and cpu as cgroup v1, [`CgroupV2Switch`] moves them to the unified hierarchy
//! for each test and back afterwards. Covered: plan / apply / status / run -p /
//! detach -p + attach / revert of an isolated cpuset partition, `tame assess` (both
//! phases, the periodic thread inside the v2 partition), and the reserve cgroup backend
//! (`cpu.max`).
//!
//! The tests change the whole machine's cgroups, so they hold one lock: they never run
//! beside each other. Each step is a section: a failing section is reported and the
//! later ones still run (they do not depend on it), and the test fails at its end with
//! the list; apply and revert are hard steps everything depends on.

use crate::common::cgroup_v2::{state_path, CgroupV2Switch};
use crate::common::{last_cpu, require, tame, Killed};

use std::collections::BTreeMap;
use std::fs;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Fixed places (not temporary directories), so a run killed midway is undone by the next.
fn partition_journal() -> PathBuf {
    state_path("partition-journal")
}
fn reserve_state() -> PathBuf {
    state_path("reserve-state")
}

/// What a killed run may have left while switched: an applied spec, cgroup reservations.
fn revert_leftovers() {
    let jd = partition_journal();
    if jd.exists() {
        let o = tame(&["revert", "--journal-dir", jd.to_str().unwrap()]);
        eprintln!("left-over partition journal reverted: {}", text(&o));
        let _ = fs::remove_dir_all(&jd);
    }
    let sd = reserve_state();
    for e in fs::read_dir(sd.join("reserve"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(pid) = name.strip_prefix("cgroup-") {
            let o = tame(&[
                "reserve",
                "--release",
                pid,
                "--state-dir",
                sd.to_str().unwrap(),
            ]);
            eprintln!("left-over reservation of {pid} released: {}", text(&o));
        }
    }
    let _ = fs::remove_dir_all(&sd);
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn read(path: impl AsRef<Path>) -> String {
    fs::read_to_string(path.as_ref()).unwrap_or_else(|e| panic!("{}: {e}", path.as_ref().display()))
}

/// The v2 line of /proc/PID/cgroup (`0::/path`), as the path.
fn v2_group(pid: &str) -> String {
    read(format!("/proc/{pid}/cgroup"))
        .lines()
        .find_map(|l| l.strip_prefix("0::").map(str::to_string))
        .unwrap_or_else(|| panic!("/proc/{pid}/cgroup has no v2 line"))
}

fn cpus_allowed(pid: &str) -> String {
    read(format!("/proc/{pid}/status"))
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_string()
}

/// Steps that report their failure and let the next steps run.
#[derive(Default)]
struct Sections {
    failed: Vec<String>,
}

impl Sections {
    fn run(&mut self, name: &str, f: impl FnOnce()) {
        eprintln!("--- section: {name}");
        match catch_unwind(AssertUnwindSafe(f)) {
            Ok(()) => eprintln!("--- section {name}: ok"),
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                eprintln!("--- section {name}: FAILED");
                self.failed.push(format!("[{name}] {msg}"));
            }
        }
    }

    fn finish(self) {
        assert!(
            self.failed.is_empty(),
            "{} section(s) failed:\n{}",
            self.failed.len(),
            self.failed.join("\n\n")
        );
    }
}

/// Reverts the applied spec however the test ends, unless the test reverted it.
struct Applied {
    journal: PathBuf,
    armed: bool,
}

impl Applied {
    fn revert(&mut self) -> Output {
        self.armed = false;
        tame(&["revert", "--journal-dir", self.journal.to_str().unwrap()])
    }
}

impl Drop for Applied {
    fn drop(&mut self) {
        if self.armed {
            let o = self.revert();
            if !o.status.success() {
                eprintln!("revert after a failure failed: {}", text(&o));
            }
        }
    }
}

/// The IRQ affinities, as the files read.
fn irq_affinities() -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for e in fs::read_dir("/proc/irq").unwrap().flatten() {
        let p = e.path().join("smp_affinity_list");
        if let Ok(v) = fs::read_to_string(&p) {
            out.insert(p.display().to_string(), v);
        }
    }
    out.insert(
        "/proc/irq/default_smp_affinity".into(),
        read("/proc/irq/default_smp_affinity"),
    );
    out
}

fn snapshot(paths: &[String]) -> BTreeMap<String, Option<Vec<u8>>> {
    paths
        .iter()
        .map(|p| (p.clone(), fs::read(p).ok()))
        .collect()
}

fn names(dir: &str) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// plan, apply, status, run -p, detach -p / attach and revert of an isolated cpuset
/// partition on the live unified hierarchy.
#[test]
fn isolated_partition_on_live_cgroup_v2() {
    let _machine = tame_testing::serial::module(module_path!());
    let _serial = serial();
    let iso = last_cpu();
    if !require(iso != "0", "two CPUs") {
        return;
    }
    let Some(switch) = CgroupV2Switch::engage_for_test(&["cpuset"], &[], &revert_leftovers) else {
        return;
    };
    let v2 = switch.v2_mount().to_string();
    let system = match iso.parse::<u32>().unwrap() - 1 {
        0 => "0".to_string(),
        below => format!("0-{below}"),
    };
    let jd = partition_journal();
    let jds = jd.to_str().unwrap().to_string();
    let work = tempfile::tempdir().unwrap();
    let spec = work.path().join("v2.toml");
    fs::write(
        &spec,
        format!("[[partition]]\nname = \"system\"\ncpus = \"{system}\"\nrole = \"system\"\n\n[[partition]]\nname = \"v2rt\"\ncpus = \"{iso}\"\nrole = \"isolated\"\n"),
    )
    .unwrap();
    let spec = spec.to_str().unwrap();
    let me = std::process::id().to_string();
    let mut sections = Sections::default();

    // Plan: a v2 plan with +cpuset and an isolated partition; every IRQ left on the
    // isolated CPU is named as kernel-managed.
    let o = tame(&["plan", "--json", spec]);
    assert!(o.status.success(), "plan: {}", text(&o));
    let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let mut touched: Vec<String> = Vec::new();
    sections.run("plan", || {
        assert_eq!(plan["cgroup"], "v2", "{plan:#}");
        let steps = plan["runtime"].as_array().unwrap();
        let writes: BTreeMap<&str, &str> = steps
            .iter()
            .filter(|s| s["kind"] == "write")
            .map(|s| (s["path"].as_str().unwrap(), s["new"].as_str().unwrap_or("")))
            .collect();
        assert_eq!(
            writes.get(format!("{v2}/cgroup.subtree_control").as_str()),
            Some(&"+cpuset"),
            "{plan:#}"
        );
        assert_eq!(
            writes.get(format!("{v2}/tame-v2rt/cpuset.cpus").as_str()),
            Some(&iso.as_str())
        );
        assert_eq!(
            writes.get(format!("{v2}/tame-v2rt/cpuset.cpus.partition").as_str()),
            Some(&"isolated")
        );
        let warnings: Vec<&str> = plan["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_str().unwrap())
            .collect();
        for (path, aff) in irq_affinities() {
            let Some(n) = path
                .strip_prefix("/proc/irq/")
                .and_then(|p| p.strip_suffix("/smp_affinity_list"))
            else {
                continue;
            };
            let on_iso = aff.trim().split(',').any(|r| {
                let (a, b) = r.split_once('-').unwrap_or((r, r));
                let i: u32 = iso.parse().unwrap();
                (a.parse::<u32>().unwrap()..=b.parse::<u32>().unwrap()).contains(&i)
            });
            if !on_iso {
                continue;
            }
            let written = writes.contains_key(path.as_str());
            let warned = warnings
                .iter()
                .any(|w| w.starts_with(&format!("IRQ {n} ")) && w.contains("kernel-managed"));
            assert!(
                written ^ warned,
                "IRQ {n} on CPU {iso}: written {written}, warned kernel-managed {warned}\n{warnings:#?}"
            );
        }
    });
    for s in plan["runtime"].as_array().unwrap() {
        if s["kind"] == "write" && !s["old"].is_null() {
            touched.push(s["path"].as_str().unwrap().to_string());
        }
    }
    touched.extend(irq_affinities().into_keys());
    touched.push(format!("{v2}/cgroup.subtree_control"));
    touched.push(format!("{v2}/cgroup.controllers"));
    touched.sort();
    touched.dedup();
    let before = snapshot(&touched);
    let v2_names_before = names(&v2);
    let my_cpus_before = cpus_allowed(&me);

    // Apply (hard: everything below depends on it).
    let o = tame(&["apply", spec, "--journal-dir", &jds]);
    let mut applied = Applied {
        journal: jd.clone(),
        armed: true,
    };
    assert!(o.status.success(), "apply: {}", text(&o));
    eprintln!("apply: {}", text(&o));

    sections.run("apply made an isolated partition", || {
        let dir = format!("{v2}/tame-v2rt");
        assert_eq!(
            read(format!("{dir}/cpuset.cpus.partition")).trim(),
            "isolated"
        );
        assert_eq!(read(format!("{dir}/cpuset.cpus.effective")).trim(), iso);
        assert_eq!(read(format!("{v2}/cpuset.cpus.effective")).trim(), system);
        if Path::new(&format!("{v2}/cpuset.cpus.isolated")).exists() {
            assert_eq!(read(format!("{v2}/cpuset.cpus.isolated")).trim(), iso);
        }
        // Every task of the root cgroup lost the CPU without being moved: this one too.
        assert_eq!(cpus_allowed(&me), system);
    });

    sections.run(
        "applied spec: empty plan, apply again changes nothing",
        || {
            let o = tame(&["plan", "--json", spec]);
            assert!(o.status.success(), "plan: {}", text(&o));
            let plan: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            assert_eq!(
                plan["runtime"],
                serde_json::json!([]),
                "{:#}",
                plan["runtime"]
            );
            let o = tame(&["apply", "--json", spec, "--journal-dir", &jds]);
            assert!(o.status.success(), "apply again: {}", text(&o));
            let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            assert_eq!(report["unchanged"], true, "{report:#}");
        },
    );

    // The "+cpuset" written to cgroup.subtree_control reads back as "cpuset …": a
    // controller-set write, not drift (it was reported as drift before).
    let status = || -> serde_json::Value {
        let o = tame(&["status", "--json", "--journal-dir", &jds]);
        assert!(o.status.success(), "status: {}", text(&o));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    sections.run("status: applied, no drift", || {
        let st = status();
        assert_eq!(st["applied"], true, "{st:#}");
        assert_eq!(st["interrupted"], 0, "{st:#}");
        assert_eq!(
            st["drift"],
            serde_json::json!([]),
            "drift: {:#}",
            st["drift"]
        );
    });
    sections.run("status: audit of the isolated CPU", || {
        let st = status();
        assert_eq!(st["audit"]["isolated_cpus"], iso.as_str(), "{st:#}");
        for t in st["audit"]["tasks"].as_array().unwrap() {
            assert_eq!(
                t["kernel_thread"], true,
                "a user task may run on CPU {iso}: {t}"
            );
        }
        for i in st["audit"]["irqs"].as_array().unwrap() {
            assert!(
                i["managed"] == true || i["moving"] == true,
                "device IRQ still routed to CPU {iso}: {i}"
            );
        }
    });

    // The partition's group lives where the cpuset controller is (here the v2 hierarchy;
    // it used to be the hard-coded v1 mount).
    sections.run("run -p", || {
        let out = work.path().join("placed");
        let script = format!(
            "cat /proc/self/cgroup > {0}; grep Cpus_allowed_list /proc/self/status >> {0}",
            out.display()
        );
        let o = tame(&[
            "run",
            "-p",
            "v2rt",
            "--journal-dir",
            &jds,
            "--",
            "sh",
            "-c",
            &script,
        ]);
        assert!(o.status.success(), "run -p: {}", text(&o));
        let t = read(&out);
        assert!(t.lines().any(|l| l == "0::/tame-v2rt"), "{t}");
        assert!(
            t.lines().any(|l| l == format!("Cpus_allowed_list:\t{iso}")),
            "{t}"
        );
        assert!(
            !jd.join("placed").exists() || names(jd.join("placed").to_str().unwrap()).is_empty(),
            "run left a placement record"
        );
    });

    // v2 moves the whole process through cgroup.procs and attach puts it back into the
    // exact `0::` group; a write below the bare v1 mount point (which would create a plain
    // file there, as it once did) makes "cgroup v1 back as found" fail.
    sections.run("detach -p / attach", || {
        let sleeper = Killed(Command::new("sleep").arg("30").spawn().unwrap());
        let pid = sleeper.0.id().to_string();
        let (group, cpus) = (v2_group(&pid), cpus_allowed(&pid));
        let o = tame(&["detach", &pid, "-p", "v2rt", "--journal-dir", &jds]);
        assert!(o.status.success(), "detach -p: {}", text(&o));
        assert_eq!(v2_group(&pid), "/tame-v2rt");
        assert_eq!(cpus_allowed(&pid), iso);
        let o = tame(&["attach", &pid, "--journal-dir", &jds]);
        assert!(o.status.success(), "attach: {}", text(&o));
        assert_eq!(v2_group(&pid), group);
        assert_eq!(cpus_allowed(&pid), cpus);
        assert!(!jd.join(format!("placed/{pid}.json")).exists());
    });

    // Revert (hard): every touched file byte for byte, the v2 tree as before.
    let o = applied.revert();
    assert!(o.status.success(), "revert: {}", text(&o));
    sections.run("revert restores byte for byte", || {
        let after = snapshot(&touched);
        let differ: Vec<String> = touched
            .iter()
            .filter(|p| before[*p] != after[*p])
            .map(|p| {
                format!(
                    "{p}: {:?} → {:?}",
                    before[p].as_deref().map(String::from_utf8_lossy),
                    after[p].as_deref().map(String::from_utf8_lossy)
                )
            })
            .collect();
        assert!(
            differ.is_empty(),
            "changed by apply+revert:\n{}",
            differ.join("\n")
        );
        assert_eq!(names(&v2), v2_names_before);
        assert!(
            !tame_host::journal::journal_path(&jd).exists(),
            "journal kept"
        );
        // Revert is asynchronous for nobody: the root cgroup's tasks have the CPU again.
        assert_eq!(cpus_allowed(&me), my_cpus_before);
    });
    drop(applied);
    // Test state gone only when every placement record went with it.
    let left: Vec<String> = fs::read_dir(&jd)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().display().to_string())
        .filter(|p| !p.ends_with("/placed") || !names(p).is_empty())
        .collect();
    let _ = fs::remove_dir_all(&jd);
    let restored = switch.restore();
    sections.run("nothing left in the journal directory", || {
        assert!(left.is_empty(), "left: {left:?}");
    });
    sections.run("cgroup v1 back as found", || restored.unwrap());
    sections.finish();
}

/// `tame assess` on cgroup v2 (one round): both phases measured, the work's thread inside the
/// isolated v2 partition, the second check aimed at it, and the v2 tree as found after.
#[test]
fn assess_on_live_cgroup_v2() {
    let _machine = tame_testing::serial::module(module_path!());
    let _serial = serial();
    if !require(last_cpu() != "0", "two CPUs") {
        return;
    }
    let Some(switch) = CgroupV2Switch::engage_for_test(&["cpuset"], &[], &revert_leftovers) else {
        return;
    };
    let v2 = switch.v2_mount().to_string();
    let names_before = names(&v2);
    let jd = partition_journal();
    let work = tempfile::tempdir().unwrap();
    let mut sections = Sections::default();
    let o = Command::new(env!("CARGO_BIN_EXE_tame"))
        .args([
            "assess",
            "--duration",
            "1500ms",
            "--rounds",
            "1",
            "--load",
            "cpu",
            "--json",
            "-",
        ])
        .arg("--journal-dir")
        .arg(&jd)
        .arg("--out")
        .arg(work.path().join("out"))
        .output()
        .unwrap();
    sections.run("assess measures both phases on v2", || {
        assert!(o.status.success(), "assess: {}", text(&o));
        let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        for phase in ["shared", "partitioned"] {
            assert_eq!(r[phase]["measured"], true, "{phase}: {r:#}");
            assert!(
                r[phase]["job"]["activations"].as_u64().unwrap() > 500,
                "{phase}"
            );
        }
        assert_eq!(r["rounds"][1]["results"]["job"]["partition"], "rt");
        assert_eq!(r["check_partitioned"]["cpus"], r["layout"]["isolated"]);
        assert_eq!(r["partitioned"]["load"]["cpus"], r["layout"]["system"]);
        assert_eq!(r["restoration"]["not_restored"], serde_json::json!([]));
        assert!(r["restoration"]["changes_reverted"].as_u64().unwrap() > 3);
    });
    sections.run("v2 tree and journal as found", || {
        assert_eq!(names(&v2), names_before);
        assert!(!tame_host::journal::journal_path(&jd).exists());
    });
    let _ = fs::remove_dir_all(&jd);
    let restored = switch.restore();
    sections.run("cgroup v1 back as found", || restored.unwrap());
    sections.finish();
}

/// `tame reserve --backend cgroup` on v2: the group gets cpu.max, the busy program is
/// held to about its share, and the group and journal are gone afterwards.
#[test]
fn cgroup_reservation_on_live_cgroup_v2() {
    let _machine = tame_testing::serial::module(module_path!());
    let _serial = serial();
    let Some(switch) = CgroupV2Switch::engage_for_test(&["cpu"], &["cpu"], &revert_leftovers)
    else {
        return;
    };
    let v2 = switch.v2_mount().to_string();
    let sd = reserve_state();
    let sds = sd.to_str().unwrap().to_string();
    let work = tempfile::tempdir().unwrap();
    let names_before = names(&v2);
    let mut sections = Sections::default();

    sections.run("reserve -- busy program", || {
        let out = work.path().join("usage");
        // Busy for 3 s of wall time (uptime in centiseconds, no process forked in the loop),
        // then the group's cpu.max and cpu.stat as seen from inside.
        let script = format!(
            r#"g={v2}$(sed -n 's/^0:://p' /proc/self/cgroup)
echo "group $g" > {o}
cat $g/cpu.max >> {o}
read s _ < /proc/uptime; s=${{s%.*}}${{s#*.}}; end=$((s + 300))
while :; do read n _ < /proc/uptime; n=${{n%.*}}${{n#*.}}; [ "$n" -ge "$end" ] && break; done
cat $g/cpu.stat >> {o}
echo "wall_us $(( (n - s) * 10000 ))" >> {o}
"#,
            o = out.display()
        );
        let o = tame(&[
            "reserve",
            "--backend",
            "cgroup",
            "--share",
            "20%",
            "--period",
            "100ms",
            "--state-dir",
            &sds,
            "--",
            "sh",
            "-c",
            &script,
        ]);
        assert!(o.status.success(), "reserve: {}", text(&o));
        let t = read(&out);
        let val = |k: &str| -> u64 {
            t.lines()
                .find_map(|l| l.strip_prefix(&format!("{k} ")))
                .unwrap_or_else(|| panic!("no {k} in\n{t}"))
                .trim()
                .parse()
                .unwrap()
        };
        assert!(
            t.lines()
                .next()
                .unwrap()
                .starts_with(&format!("group {v2}/tame-reserve-")),
            "{t}"
        );
        assert!(t.lines().any(|l| l == "20000 100000"), "cpu.max: {t}");
        let (usage, wall) = (val("usage_usec"), val("wall_us"));
        let share = wall / 5;
        eprintln!(
            "busy for {wall} µs under a 20 % cap: used {usage} µs, throttled {} times",
            val("nr_throttled")
        );
        // The cap: at most 20 % per period, one period of slack for the edges.
        assert!(
            usage <= share + share / 10 + 100_000,
            "used {usage} µs of {wall} µs, cap 20 %\n{t}"
        );
        assert!(val("nr_throttled") > 0, "never throttled\n{t}");
        // A cap, not a guarantee; on an idle machine it gets all of it, here at least a part.
        assert!(
            usage >= share * 3 / 10,
            "used only {usage} µs of {wall} µs\n{t}"
        );
    });

    sections.run("reserve --pid / --release", || {
        let sleeper = Killed(Command::new("sleep").arg("30").spawn().unwrap());
        let pid = sleeper.0.id().to_string();
        let group = v2_group(&pid);
        let o = tame(&[
            "reserve",
            "--backend",
            "cgroup",
            "--share",
            "10%",
            "--period",
            "100ms",
            "--pid",
            &pid,
            "--state-dir",
            &sds,
        ]);
        assert!(o.status.success(), "reserve --pid: {}", text(&o));
        assert_eq!(v2_group(&pid), format!("/tame-reserve-{pid}"));
        assert_eq!(
            read(format!("{v2}/tame-reserve-{pid}/cpu.max")).trim(),
            "10000 100000"
        );
        let o = tame(&["reserve", "--release", &pid, "--state-dir", &sds]);
        assert!(o.status.success(), "release: {}", text(&o));
        assert_eq!(v2_group(&pid), group);
        // rmdir'ed cgroups may linger as dying ones, never as directories.
        assert!(!Path::new(&format!("{v2}/tame-reserve-{pid}")).exists());
    });

    sections.run("released afterwards", || {
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(names(&v2), names_before);
        let journals: Vec<String> = fs::read_dir(sd.join("reserve"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            journals.is_empty(),
            "reservation journals left: {journals:?}"
        );
    });
    let _ = fs::remove_dir_all(&sd);
    let restored = switch.restore();
    sections.run("cgroup v1 back as found", || restored.unwrap());
    sections.finish();
}
