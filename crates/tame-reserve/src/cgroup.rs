//! The cgroup backend: CPU bandwidth control (cgroup v2 `cpu.max`, v1 `cpu.cfs_quota_us` /
//! `cpu.cfs_period_us`). This is a cap, not a guarantee: the group may use at most its share
//! per period, but nothing makes the rest of the system leave it that much.
//!
//! Every write goes through the host journal (one journal per reservation, under
//! STATE_DIR/reserve/cgroup-PID), so release — or `tame revert`-style recovery after a crash —
//! moves the tasks back and removes the `tame-reserve-PID` group byte for byte.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tame_host::cgroup::proc::proc_cgroup_path;
use tame_host::cgroup::{write_all, CgroupModel, CgroupVersion, Cgroups, ControllerHome, Group};
use tame_host::journal::{self, Journal, ThreadPlacement};
use tame_host::reader::Reader;
use tame_host::{CpuList, Root};
use tame_rt::duration::format_ns;

use crate::error::{failed, failed_by, invalid, io_failed, Result};
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
    /// The affinity the threads had before `--cpu` pinned them (for the record:
    /// release restores it from the journal's placement records).
    pub previous_affinity: Option<Vec<(u32, Vec<u32>)>>,
    /// `STATE_DIR/reserve` did not exist before tame's cgroup reservations: made for this
    /// one, or for one held when this one was made (which passes it on). Release removes
    /// it once empty; a directory tame did not make stays. Absent in older notes: false.
    #[serde(default)]
    pub made_reserve_dir: bool,
}

/// The CPU controller where it is usable.
fn cpu_cgroups(root: &Root) -> Result<Cgroups> {
    Cgroups::for_controller(&CgroupModel::read(&mut Reader::new(root)), "cpu").ok_or_else(|| {
        invalid(
            "no cgroup CPU controller is mounted (neither cgroup v2 with cpu enabled nor a v1 cpu hierarchy) — mount one, or use --backend server or deadline",
        )
    })
}

/// Where the CPU controller is usable.
pub fn controller(root: &Root) -> Result<ControllerHome> {
    let cpu = cpu_cgroups(root)?;
    Ok(ControllerHome {
        version: cpu.version(),
        mount: cpu.mount().to_string(),
    })
}

/// Where every cgroup reservation's journal directory lives.
fn reserve_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("reserve")
}

pub fn journal_dir(state_dir: &Path, pid: u32) -> PathBuf {
    reserve_dir(state_dir).join(format!("cgroup-{pid}"))
}

/// Whether `STATE_DIR/reserve` is tame's to remove once empty: absent now (the journal
/// about to be opened makes it), or made by a reservation still held, whose note says so.
fn reserve_dir_is_ours(state_dir: &Path) -> bool {
    std::fs::symlink_metadata(reserve_dir(state_dir)).is_err()
        || list(state_dir).iter().any(|r| r.made_reserve_dir)
}

/// Quota and period in µs for a request, validated against the kernel's bounds.
pub fn quota_period_us(req: &Request) -> Result<(u64, u64)> {
    let period_us = req.period_ns / 1_000;
    if period_us > MAX_PERIOD_US {
        return Err(invalid(format!(
            "period {} is above the cgroup limit of 1 s — choose --period 1s or less, or another backend",
            format_ns(req.period_ns)
        )));
    }
    let quota_us = req.runtime_ns() / 1_000;
    if quota_us < MIN_QUOTA_US {
        return Err(invalid(format!(
            "{} of {} is a quota of {}; the kernel's minimum is 1 ms — raise the share or the period",
            percent(req.share_ppm),
            format_ns(req.period_ns),
            format_ns(req.runtime_ns())
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
    let cpu = cpu_cgroups(root)?;
    let (quota_us, period_us) = quota_period_us(req)?;
    let info = tame_host::process::inspect(root, pid).map_err(|e| invalid(e.to_string()))?;
    let jdir = journal_dir(state_dir, pid);
    if journal::journal_path(&jdir).exists() {
        return Err(invalid(format!(
            "process {pid} already has a cgroup reservation — release it first (tame reserve --release {pid})"
        )));
    }
    let from = cpu
        .group_of_process(root, pid)
        .map_err(|e| {
            invalid(format!(
                "cannot read process {pid}'s cgroups: {e} — it may have exited"
            ))
        })?
        .ok_or_else(|| {
            failed(format!(
                "process {pid} is in no cpu cgroup according to {}",
                proc_cgroup_path(pid)
            ))
        })?;
    // Beside the other top-level groups, wherever the process is now.
    let parent = cpu.root();
    let group = parent.child(&format!("{GROUP_PREFIX}{pid}"));
    if root.exists(group.path()) {
        return Err(invalid(format!(
            "{} exists already (left over from an earlier run?) — release it (tame reserve --release {pid}) or remove it",
            group.path()
        )));
    }
    if !parent.children_may_use(root, "cpu") {
        let control = parent.subtree_control_file().unwrap_or_default();
        let now = root.read_trimmed(&control).unwrap_or_default();
        return Err(invalid(format!(
            "the cpu controller is not enabled below {} ({control}: {now:?}) — enable it (echo +cpu > {control}) or use another backend",
            parent.path()
        )));
    }
    let previous_affinity = req.cpu.map(|_| {
        info.tids
            .iter()
            .filter_map(|&t| root.affinity(t).ok().map(|a| (t, a.iter().collect())))
            .collect()
    });
    let reservation = CgroupReservation {
        pid,
        group: group.path(),
        version: cpu.version(),
        quota_us,
        period_us,
        share_ppm: req.share_ppm,
        previous_affinity,
        made_reserve_dir: reserve_dir_is_ours(state_dir),
    };
    // Everything is checked; from here on every change is journaled first.
    let made = Made {
        group: &group,
        from: &from,
        tids: &info.tids,
    };
    if let Err(e) = apply(root, &jdir, &reservation, &made, req.cpu) {
        let _ = release_dir(root, &jdir, reservation.made_reserve_dir);
        return Err(e);
    }
    Ok(reservation)
}

/// The group to make, where the process is now, and its threads.
struct Made<'a> {
    group: &'a Group,
    from: &'a Group,
    tids: &'a [u32],
}

fn apply(
    root: &Root,
    jdir: &Path,
    r: &CgroupReservation,
    made: &Made,
    cpu: Option<u32>,
) -> Result<()> {
    let jerr = |e: journal::JournalError| failed_by(e);
    let mut j = Journal::open(root, jdir).map_err(jerr)?;
    let note = serde_json::to_vec(r).map_err(failed_by)?;
    j.note(NOTE, &note).map_err(jerr)?;
    // Revert hands the tasks back to the group they came from, then removes it.
    made.group
        .create(made.from)
        .run(&mut j)
        .map_err(jerr)?
        .map_err(|e| io_failed(format!("cannot create {}", r.group), e))?;
    // One at a time: the kernel checks a v1 quota against the period written before it.
    for w in made.group.cpu_bandwidth(r.quota_us, r.period_us) {
        for res in write_all(&mut j, std::slice::from_ref(&w)).map_err(jerr)? {
            res.map_err(|e| io_failed(format!("cannot write {} to {}", w.value, w.path), e))?;
        }
    }
    let attach = made.group.attach_process(made.from, r.pid, made.tids);
    for (id, res) in attach.tids.iter().zip(attach.run(&mut j).map_err(jerr)?) {
        // A thread that ended meanwhile is no failure.
        if let Err(e) = res {
            if e.raw_os_error() != Some(libc::ESRCH) {
                return Err(io_failed(
                    format!("cannot move task {id} into {}", r.group),
                    e,
                ));
            }
        }
    }
    if let Some(cpu) = cpu {
        // Journaled too, so release (or recovery) gives each thread its affinity back.
        let pin = ThreadPlacement {
            affinity: Some(CpuList::from_cpus([cpu])),
            ..ThreadPlacement::default()
        };
        for &t in made.tids {
            // A thread that ended or refuses keeps running capped, as before.
            let _ = j.place(r.pid, t, &pin, None).map_err(jerr)?;
        }
    }
    Ok(())
}

/// Undo a reservation: affinity restored, tasks back, group removed, journal gone, and
/// with `made_reserve_dir` the directory of reservations too once nothing else is in it.
fn release_dir(root: &Root, jdir: &Path, made_reserve_dir: bool) -> Result<()> {
    let report = journal::revert(root, jdir).map_err(failed_by)?;
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
    if made_reserve_dir {
        // remove_dir refuses a directory that is not empty: other reservations' stay.
        if let Some(parent) = jdir.parent() {
            let _ = std::fs::remove_dir(parent);
        }
    }
    Ok(())
}

/// Release `pid`'s cgroup reservation. Ok(false): it had none.
pub fn release_pid(root: &Root, state_dir: &Path, pid: u32) -> Result<bool> {
    let jdir = journal_dir(state_dir, pid);
    let Some(held) = load(&jdir) else {
        return Ok(false);
    };
    release_dir(root, &jdir, held.made_reserve_dir)?;
    Ok(true)
}

fn load(jdir: &Path) -> Option<CgroupReservation> {
    let rec = journal::load(jdir).ok()??;
    serde_json::from_slice(rec.note(NOTE)?).ok()
}

/// Every cgroup reservation with a journal under `state_dir`.
pub fn list(state_dir: &Path) -> Vec<CgroupReservation> {
    let Ok(entries) = std::fs::read_dir(reserve_dir(state_dir)) else {
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
    use std::sync::Arc;

    use super::*;

    /// `tame revert` without a journal takes tame's cpuset groups for an applied
    /// partition, except those listed as not partitions: ours must be among them.
    #[test]
    fn reservation_groups_are_not_taken_for_partitions() {
        assert!(tame_partition::apply::NOT_PARTITION_GROUPS.contains(&GROUP_PREFIX));
    }
    use crate::spec::Backend;
    use tame_testing::{snapshot_tree, FixtureBackend};

    fn req(share_ppm: u64, period_ns: u64) -> Request {
        Request {
            share_ppm,
            period_ns,
            cpu: None,
            backend: Backend::Cgroup,
        }
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
            .starts_with("10 % of 5 ms is a quota of 500 µs; the kernel's minimum is 1 ms"));
    }

    /// A fixture host with process 42 (threads 42 and 43) and `files`; the state dir beside it.
    struct Host {
        dir: tempfile::TempDir,
        backend: Arc<FixtureBackend>,
        root: Root,
    }

    impl Host {
        fn new(files: &[(&str, &str)]) -> Self {
            let dir = tempfile::tempdir().unwrap();
            let backend = Arc::new(FixtureBackend::new());
            let root = backend.root(dir.path().join("root"));
            let stat = |tid: u32| {
                format!("{tid} (worker) R 1 42 42 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 2 0 777 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n")
            };
            let mut all = vec![
                ("/proc/42/stat".to_string(), stat(42)),
                ("/proc/42/status".into(), "Uid:\t0\t0\t0\t0\n".into()),
                ("/proc/42/task/42/stat".into(), stat(42)),
                ("/proc/42/task/43/stat".into(), stat(43)),
            ];
            all.extend(files.iter().map(|(p, t)| (p.to_string(), t.to_string())));
            for (p, text) in all {
                let f = root.path(&p);
                std::fs::create_dir_all(f.parent().unwrap()).unwrap();
                std::fs::write(f, text).unwrap();
            }
            Host { dir, backend, root }
        }

        fn state(&self) -> PathBuf {
            self.dir.path().join("state")
        }

        fn read(&self, p: &str) -> String {
            self.root.read(p).unwrap()
        }

        fn snapshot(&self) -> tame_testing::TreeSnapshot {
            snapshot_tree(self.root.base())
        }

        /// Reserve 25 % of 40 ms for 42, check `expect`, release: the tree is as before.
        fn reserve_and_release(&self, req: &Request, expect: &[(&str, &str)]) -> CgroupReservation {
            let before = self.snapshot();
            let r = reserve_pid(&self.root, &self.state(), 42, req).unwrap();
            for (path, want) in expect {
                assert_eq!(self.read(path), *want, "{path}");
            }
            assert_eq!(list(&self.state()), vec![r.clone()]);
            // A second reservation of the same process is refused, nothing changed.
            let during = self.snapshot();
            let again = reserve_pid(&self.root, &self.state(), 42, req).unwrap_err();
            assert!(again.to_string().contains("already has"), "{again}");
            assert_eq!(self.snapshot(), during);
            assert!(release_pid(&self.root, &self.state(), 42).unwrap());
            assert_eq!(self.snapshot(), before, "released byte for byte");
            assert!(list(&self.state()).is_empty());
            assert!(!journal_dir(&self.state(), 42).exists());
            assert!(r.made_reserve_dir);
            assert!(
                !self.state().join("reserve").exists(),
                "the directory of reservations tame made goes with the last one"
            );
            assert!(!release_pid(&self.root, &self.state(), 42).unwrap());
            r
        }
    }

    const V1_CPU: &str = "cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu,cpuacct 0 0\n";
    const V2: &str = "cgroup2 /sys/fs/cgroup cgroup2 rw,relatime 0 0\n";

    /// v1: every thread of the process moves to the capped group's `tasks`, back on release.
    #[test]
    fn v1_caps_a_group_of_every_thread_and_release_restores_the_tree() {
        let host = Host::new(&[
            ("/proc/mounts", V1_CPU),
            ("/sys/fs/cgroup/cpu/tasks", "1\n"),
            ("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n"),
            ("/sys/fs/cgroup/cpu/user.slice/tasks", "42\n43\n"),
            ("/proc/42/cgroup", "5:cpu,cpuacct:/user.slice\n0::/\n"),
        ]);
        let r = host.reserve_and_release(
            &req(250_000, 40_000_000),
            &[
                (
                    "/sys/fs/cgroup/cpu/tame-reserve-42/cpu.cfs_quota_us",
                    "10000",
                ),
                (
                    "/sys/fs/cgroup/cpu/tame-reserve-42/cpu.cfs_period_us",
                    "40000",
                ),
                ("/sys/fs/cgroup/cpu/tame-reserve-42/tasks", "42\n43\n"),
                ("/sys/fs/cgroup/cpu/user.slice/tasks", ""),
            ],
        );
        assert_eq!(r.group, "/sys/fs/cgroup/cpu/tame-reserve-42");
        assert_eq!(r.version, CgroupVersion::V1);
    }

    /// v2: the process moves to the capped group's `cgroup.procs` and back to the
    /// exact `0::` group it came from.
    #[test]
    fn v2_caps_the_process_and_release_puts_it_back_where_it_was() {
        let host = Host::new(&[
            ("/proc/mounts", V2),
            ("/sys/fs/cgroup/cgroup.controllers", "cpuset cpu\n"),
            ("/sys/fs/cgroup/cgroup.subtree_control", "cpu\n"),
            ("/sys/fs/cgroup/cgroup.procs", "1\n"),
            ("/sys/fs/cgroup/user.slice/cgroup.procs", "7\n"),
            ("/sys/fs/cgroup/user.slice/s.scope/cgroup.procs", "42\n"),
            ("/proc/42/cgroup", "0::/user.slice/s.scope\n"),
        ]);
        let r = host.reserve_and_release(
            &req(250_000, 40_000_000),
            &[
                ("/sys/fs/cgroup/tame-reserve-42/cpu.max", "10000 40000"),
                ("/sys/fs/cgroup/tame-reserve-42/cgroup.procs", "42\n"),
                ("/sys/fs/cgroup/user.slice/s.scope/cgroup.procs", ""),
                ("/sys/fs/cgroup/user.slice/cgroup.procs", "7\n"),
            ],
        );
        assert_eq!(r.group, "/sys/fs/cgroup/tame-reserve-42");
        assert_eq!(r.version, CgroupVersion::V2);
    }

    /// Two reservations at once: the directory of reservations goes with the last one,
    /// whichever made it; one tame did not make stays.
    #[test]
    fn the_reserve_directory_goes_only_when_tame_made_it_and_it_is_empty() {
        let proc44 = "44 (other) S 1 44 44 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 778 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
        let host = Host::new(&[
            ("/proc/mounts", V2),
            ("/sys/fs/cgroup/cgroup.controllers", "cpu\n"),
            ("/sys/fs/cgroup/cgroup.subtree_control", "cpu\n"),
            ("/sys/fs/cgroup/cgroup.procs", "1\n42\n44\n"),
            ("/proc/42/cgroup", "0::/\n"),
            ("/proc/44/stat", proc44),
            ("/proc/44/status", "Uid:\t0\t0\t0\t0\n"),
            ("/proc/44/task/44/stat", proc44),
            ("/proc/44/cgroup", "0::/\n"),
        ]);
        let reserve = host.state().join("reserve");
        let req = req(250_000, 40_000_000);
        let first = reserve_pid(&host.root, &host.state(), 42, &req).unwrap();
        let second = reserve_pid(&host.root, &host.state(), 44, &req).unwrap();
        assert!(first.made_reserve_dir && second.made_reserve_dir);
        // The first one made it, but the second one's journal is in it: it stays.
        assert!(release_pid(&host.root, &host.state(), 42).unwrap());
        assert!(reserve.is_dir());
        assert!(release_pid(&host.root, &host.state(), 44).unwrap());
        assert!(!reserve.exists());

        // Made by someone else before tame: kept, empty.
        std::fs::create_dir_all(&reserve).unwrap();
        let r = reserve_pid(&host.root, &host.state(), 42, &req).unwrap();
        assert!(!r.made_reserve_dir);
        assert!(release_pid(&host.root, &host.state(), 42).unwrap());
        assert!(reserve.is_dir());
        assert_eq!(std::fs::read_dir(&reserve).unwrap().count(), 0);
    }

    /// `--cpu`: the pin is journaled with the affinity it replaced; release gives it back.
    #[test]
    fn a_pinned_reservation_gets_its_affinity_back() {
        let host = Host::new(&[
            ("/proc/mounts", V2),
            ("/sys/fs/cgroup/cgroup.controllers", "cpu\n"),
            ("/sys/fs/cgroup/cgroup.subtree_control", "cpu\n"),
            ("/sys/fs/cgroup/cgroup.procs", "1\n42\n"),
            ("/proc/42/cgroup", "0::/\n"),
        ]);
        host.backend.add_thread(42, CpuList::parse("0-3").unwrap());
        host.backend.add_thread(43, CpuList::parse("1").unwrap());
        let pinned = Request {
            cpu: Some(2),
            ..req(250_000, 40_000_000)
        };
        let before = host.snapshot();
        let r = reserve_pid(&host.root, &host.state(), 42, &pinned).unwrap();
        assert_eq!(
            r.previous_affinity,
            Some(vec![(42, vec![0, 1, 2, 3]), (43, vec![1])])
        );
        for t in [42, 43] {
            assert_eq!(host.backend.thread(t).unwrap().affinity.to_string(), "2");
        }
        assert!(release_pid(&host.root, &host.state(), 42).unwrap());
        assert_eq!(host.backend.thread(42).unwrap().affinity.to_string(), "0-3");
        assert_eq!(host.backend.thread(43).unwrap().affinity.to_string(), "1");
        assert_eq!(host.snapshot(), before);
    }

    /// v2 without `cpu` in the new group's parent's subtree_control: refused, nothing written.
    #[test]
    fn v2_without_the_cpu_controller_below_the_root_is_refused() {
        let host = Host::new(&[
            ("/proc/mounts", V2),
            ("/sys/fs/cgroup/cgroup.controllers", "cpuset cpu\n"),
            ("/sys/fs/cgroup/cgroup.subtree_control", "cpuset\n"),
            ("/sys/fs/cgroup/cgroup.procs", "1\n42\n"),
            ("/proc/42/cgroup", "0::/\n"),
        ]);
        let before = host.snapshot();
        let e = reserve_pid(&host.root, &host.state(), 42, &req(250_000, 40_000_000)).unwrap_err();
        assert!(e.is_bad_input(), "{e}");
        assert!(
            e.to_string().contains(
                "the cpu controller is not enabled below /sys/fs/cgroup (/sys/fs/cgroup/cgroup.subtree_control: \"cpuset\")"
            ),
            "{e}"
        );
        assert_eq!(host.snapshot(), before);
        assert!(!journal_dir(&host.state(), 42).exists());
    }

    /// A process whose /proc names no group of the cpu hierarchy: said so, nothing written.
    #[test]
    fn a_process_in_no_cpu_group_is_refused() {
        let host = Host::new(&[
            ("/proc/mounts", V1_CPU),
            ("/sys/fs/cgroup/cpu/tasks", "1\n42\n43\n"),
            ("/proc/42/cgroup", "3:cpuset:/\n"),
        ]);
        let before = host.snapshot();
        let e = reserve_pid(&host.root, &host.state(), 42, &req(250_000, 40_000_000)).unwrap_err();
        assert!(
            e.to_string()
                .contains("process 42 is in no cpu cgroup according to /proc/42/cgroup"),
            "{e}"
        );
        assert_eq!(host.snapshot(), before);
    }
}
