//! The cgroup backend: CPU bandwidth control (cgroup v2 `cpu.max`, v1 `cpu.cfs_quota_us` /
//! `cpu.cfs_period_us`). This is a cap, not a guarantee: the group may use at most its share
//! per period, but nothing makes the rest of the system leave it that much.
//!
//! Every write goes through the host journal (one journal per reservation, under
//! STATE_DIR/reserve/cgroup-PID), so release — or `tame revert`-style recovery after a crash —
//! moves the tasks back and removes the `tame-reserve-PID` group byte for byte.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tame_host::cgroup::{CgroupModel, CgroupVersion, ControllerHome};
use tame_host::journal::{self, Journal};
use tame_host::reader::Reader;
use tame_host::Root;

use crate::error::{failed, invalid, Result};
use crate::spec::{percent, Request};

/// Every group tame makes starts with this.
pub const GROUP_PREFIX: &str = "tame-reserve-";
const NOTE: &str = "reservation";
/// The kernel's bounds on cfs_period_us / cpu.max period, and the smallest quota.
const MAX_PERIOD_US: u64 = 1_000_000;
const MIN_QUOTA_US: u64 = 1_000;

/// What a reservation made, kept as a note in its journal (for --list and release).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupReservation {
    pub pid: u32,
    pub group: String,
    pub version: CgroupVersion,
    pub quota_us: u64,
    pub period_us: u64,
    pub share_ppm: u64,
    /// The affinity the threads had before `--cpu` pinned them (restored on release).
    pub previous_affinity: Option<Vec<(u32, Vec<u32>)>>,
}

/// Where the CPU controller is usable.
pub fn controller(root: &Root) -> Result<ControllerHome> {
    let model = CgroupModel::read(&mut Reader::new(root));
    model.controller_home("cpu").ok_or_else(|| {
        invalid(
            "no cgroup CPU controller is mounted (neither cgroup v2 with cpu enabled nor a v1 cpu hierarchy) — mount one, or use --backend server or deadline",
        )
    })
}

pub fn journal_dir(state_dir: &Path, pid: u32) -> PathBuf {
    state_dir.join("reserve").join(format!("cgroup-{pid}"))
}

/// The task's group path (relative to the hierarchy's mount) from /proc/PID/cgroup.
pub fn current_group(proc_cgroup: &str, version: CgroupVersion) -> Option<String> {
    proc_cgroup.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let hit = match version {
            CgroupVersion::V2 => id == "0" && controllers.is_empty(),
            CgroupVersion::V1 => controllers.split(',').any(|c| c == "cpu"),
        };
        hit.then(|| path.to_string())
    })
}

/// Quota and period in µs for a request, validated against the kernel's bounds.
pub fn quota_period_us(req: &Request) -> Result<(u64, u64)> {
    let period_us = req.period_ns / 1_000;
    if period_us > MAX_PERIOD_US {
        return Err(invalid(format!(
            "period {} ms is above the cgroup limit of 1 s — choose --period 1s or less, or another backend",
            req.period_ns / 1_000_000
        )));
    }
    let quota_us = req.runtime_ns() / 1_000;
    if quota_us < MIN_QUOTA_US {
        return Err(invalid(format!(
            "{} of {period_us} µs is a quota of {quota_us} µs; the kernel's minimum is 1000 µs — raise the share or the period",
            percent(req.share_ppm)
        )));
    }
    Ok((quota_us, period_us))
}

/// Put `pid` (all its threads) under a new bandwidth-capped group.
pub fn reserve_pid(
    root: &Root,
    state_dir: &Path,
    pid: u32,
    req: &Request,
) -> Result<CgroupReservation> {
    let home = controller(root)?;
    let (quota_us, period_us) = quota_period_us(req)?;
    let info = tame_host::process::inspect(root, pid).map_err(|e| invalid(e.to_string()))?;
    let jdir = journal_dir(state_dir, pid);
    if journal::journal_path(&jdir).exists() {
        return Err(invalid(format!(
            "process {pid} already has a cgroup reservation — release it first (tame reserve --release {pid})"
        )));
    }
    let proc_cgroup = root.read(format!("/proc/{pid}/cgroup")).map_err(|e| {
        invalid(format!(
            "cannot read process {pid}'s cgroups: {e} — it may have exited"
        ))
    })?;
    let from_rel = current_group(&proc_cgroup, home.version).ok_or_else(|| {
        failed(format!(
            "process {pid} is in no cpu cgroup according to /proc/{pid}/cgroup"
        ))
    })?;
    let parent = format!("{}{}", home.mount, from_rel.trim_end_matches('/'));
    let group = format!("{}/{GROUP_PREFIX}{pid}", home.mount);
    if root.exists(&group) {
        return Err(invalid(format!(
            "{group} exists already (left over from an earlier run?) — release it (tame reserve --release {pid}) or remove it"
        )));
    }
    let (members, parent_members) = match home.version {
        CgroupVersion::V1 => (format!("{group}/tasks"), format!("{parent}/tasks")),
        CgroupVersion::V2 => {
            let control = root
                .read_trimmed(format!("{parent}/cgroup.subtree_control"))
                .unwrap_or_default();
            if !control.split_whitespace().any(|c| c == "cpu") {
                return Err(invalid(format!(
                    "the cpu controller is not enabled below {parent} (cgroup.subtree_control: {control:?}) — enable it (echo +cpu > {parent}/cgroup.subtree_control) or use another backend"
                )));
            }
            (
                format!("{group}/cgroup.procs"),
                format!("{parent}/cgroup.procs"),
            )
        }
    };
    let previous_affinity = req.cpu.map(|_| {
        info.tids
            .iter()
            .filter_map(|&t| root.affinity(t).ok().map(|a| (t, a.iter().collect())))
            .collect()
    });
    let reservation = CgroupReservation {
        pid,
        group: group.clone(),
        version: home.version,
        quota_us,
        period_us,
        share_ppm: req.share_ppm,
        previous_affinity,
    };
    // Everything is checked; from here on every change is journaled first.
    let result = apply(
        root,
        &jdir,
        &reservation,
        &members,
        &parent_members,
        &info.tids,
        req.cpu,
    );
    if let Err(e) = result {
        let _ = release_dir(root, &jdir, None);
        return Err(e);
    }
    Ok(reservation)
}

fn apply(
    root: &Root,
    jdir: &Path,
    r: &CgroupReservation,
    members: &str,
    parent_members: &str,
    tids: &[u32],
    cpu: Option<u32>,
) -> Result<()> {
    let jerr = |e: journal::JournalError| failed(e.to_string());
    let mut j = Journal::open(root, jdir).map_err(jerr)?;
    let note = serde_json::to_vec(r).map_err(|e| failed(e.to_string()))?;
    j.note(NOTE, &note).map_err(jerr)?;
    j.create_dir(&r.group, Some((members, parent_members)))
        .map_err(jerr)?
        .map_err(|e| failed(format!("cannot create {}: {e}", r.group)))?;
    let writes: Vec<(String, String)> = match r.version {
        CgroupVersion::V1 => vec![
            (
                format!("{}/cpu.cfs_period_us", r.group),
                r.period_us.to_string(),
            ),
            (
                format!("{}/cpu.cfs_quota_us", r.group),
                r.quota_us.to_string(),
            ),
        ],
        CgroupVersion::V2 => vec![(
            format!("{}/cpu.max", r.group),
            format!("{} {}", r.quota_us, r.period_us),
        )],
    };
    for (path, value) in writes {
        j.write(&path, value.as_bytes(), None)
            .map_err(jerr)?
            .map_err(|e| failed(format!("cannot write {value} to {path}: {e}")))?;
    }
    let ids: Vec<u32> = match r.version {
        CgroupVersion::V1 => tids.to_vec(),
        CgroupVersion::V2 => vec![r.pid],
    };
    for (id, res) in ids
        .iter()
        .zip(j.move_tasks(&ids, parent_members, members).map_err(jerr)?)
    {
        // A thread that ended meanwhile is no failure.
        if let Err(e) = res {
            if e.raw_os_error() != Some(libc::ESRCH) {
                return Err(failed(format!(
                    "cannot move task {id} into {}: {e}",
                    r.group
                )));
            }
        }
    }
    if let Some(cpu) = cpu {
        for &t in tids {
            let _ = root.set_affinity(t, &tame_host::CpuList::from_cpus([cpu]));
        }
    }
    Ok(())
}

/// Undo a reservation: tasks back, group removed, affinity restored, journal gone.
fn release_dir(root: &Root, jdir: &Path, r: Option<&CgroupReservation>) -> Result<()> {
    let report = journal::revert(root, jdir).map_err(|e| failed(e.to_string()))?;
    if let Some(prev) = r.and_then(|r| r.previous_affinity.as_ref()) {
        for (tid, cpus) in prev {
            let _ = tame_rt::sched::set_affinity(*tid as libc::pid_t, cpus.iter().copied());
        }
    }
    if !report.not_restored.is_empty() {
        let what: Vec<String> = report
            .not_restored
            .iter()
            .map(|n| format!("{}: {}", n.what, n.reason))
            .collect();
        return Err(failed(format!(
            "could not undo everything (journal kept in {}): {}",
            jdir.display(),
            what.join("; ")
        )));
    }
    let _ = std::fs::remove_dir(jdir);
    Ok(())
}

/// Release `pid`'s cgroup reservation. Ok(false): it had none.
pub fn release_pid(root: &Root, state_dir: &Path, pid: u32) -> Result<bool> {
    let jdir = journal_dir(state_dir, pid);
    let Some(r) = load(&jdir) else {
        return Ok(false);
    };
    release_dir(root, &jdir, Some(&r))?;
    Ok(true)
}

fn load(jdir: &Path) -> Option<CgroupReservation> {
    let rec = journal::load(jdir).ok()??;
    serde_json::from_slice(rec.note(NOTE)?).ok()
}

/// Every cgroup reservation with a journal under `state_dir`.
pub fn list(state_dir: &Path) -> Vec<CgroupReservation> {
    let Ok(entries) = std::fs::read_dir(state_dir.join("reserve")) else {
        return Vec::new();
    };
    let mut found: Vec<CgroupReservation> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("cgroup-"))
        .filter_map(|e| load(&e.path()))
        .collect();
    found.sort_by_key(|r| r.pid);
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Backend;

    fn req(share_ppm: u64, period_ns: u64) -> Request {
        Request {
            share_ppm,
            period_ns,
            cpu: None,
            backend: Backend::Cgroup,
        }
    }

    #[test]
    fn finds_the_cpu_group_of_a_task() {
        let text = "12:cpuset:/\n5:cpu:/user.slice\n4:cpuacct:/\n0::/init.scope\n";
        assert_eq!(
            current_group(text, CgroupVersion::V1).as_deref(),
            Some("/user.slice")
        );
        assert_eq!(
            current_group(text, CgroupVersion::V2).as_deref(),
            Some("/init.scope")
        );
        assert_eq!(
            current_group("3:cpu,cpuacct:/a\n", CgroupVersion::V1).as_deref(),
            Some("/a")
        );
    }

    #[test]
    fn quota_bounds() {
        assert_eq!(
            quota_period_us(&req(250_000, 40_000_000)).unwrap(),
            (10_000, 40_000)
        );
        assert!(quota_period_us(&req(250_000, 2_000_000_000))
            .unwrap_err()
            .to_string()
            .contains("1 s"));
        assert!(quota_period_us(&req(100_000, 5_000_000))
            .unwrap_err()
            .to_string()
            .contains("1000 µs"));
    }

    /// On a fixture tree: the group is made, capped, the task moved; release puts all back.
    #[test]
    fn reserve_and_release_on_a_fixture_tree() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("root");
        let put = |p: &str, t: &str| {
            let f = base.join(p.trim_start_matches('/'));
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, t).unwrap();
        };
        put(
            "/proc/mounts",
            "cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\n",
        );
        put("/sys/fs/cgroup/cpu/tasks", "1\n42\n");
        put("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n");
        put("/proc/42/stat", "42 (worker) R 1 42 42 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 777 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n");
        put("/proc/42/status", "Uid:\t0\t0\t0\t0\n");
        put("/proc/42/task/42/stat", "");
        put("/proc/42/cgroup", "5:cpu:/\n");
        let root = tame_testing::fixture_root(&base);
        let state = dir.path().join("state");
        let r = reserve_pid(&root, &state, 42, &req(250_000, 40_000_000)).unwrap();
        assert_eq!(r.group, "/sys/fs/cgroup/cpu/tame-reserve-42");
        let read = |p: &str| std::fs::read_to_string(base.join(p.trim_start_matches('/'))).unwrap();
        assert_eq!(
            read("/sys/fs/cgroup/cpu/tame-reserve-42/cpu.cfs_quota_us"),
            "10000"
        );
        assert_eq!(
            read("/sys/fs/cgroup/cpu/tame-reserve-42/cpu.cfs_period_us"),
            "40000"
        );
        assert_eq!(read("/sys/fs/cgroup/cpu/tame-reserve-42/tasks"), "42\n");
        assert_eq!(list(&state), vec![r.clone()]);
        // A second reservation of the same process is refused, nothing changed.
        assert!(reserve_pid(&root, &state, 42, &req(250_000, 40_000_000)).is_err());
        assert!(release_pid(&root, &state, 42).unwrap());
        assert!(!base.join("sys/fs/cgroup/cpu/tame-reserve-42").exists());
        assert_eq!(read("/sys/fs/cgroup/cpu/tasks"), "1\n42\n");
        assert!(list(&state).is_empty());
        assert!(!release_pid(&root, &state, 42).unwrap());
    }
}
