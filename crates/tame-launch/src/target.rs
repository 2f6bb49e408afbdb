//! Where a program goes and how it is scheduled (`tame run` and `tame detach`):
//! the CPUs (a list, or an applied partition with its cgroup), whether they are
//! isolated, who may use a partition, and the scheduling policy — all checked
//! here, before anything is started or moved.

use std::path::{Path, PathBuf};

use tame_host::accounts::Accounts;
use tame_host::cpulist::UnusableCpus;
use tame_host::kernel::BootIsolation;
use tame_host::{CpuList, Root};
pub use tame_partition::PartitionCgroup;
use tame_partition::{Applied, AppliedPartition};
use tame_rt::sched::{self, SchedSpec};
use tame_rt::Policy;

use crate::detach::{DetachRequest, ThreadSelection};
use crate::error::{failed, invalid, LaunchError};

/// The priority fifo and rr get when none is given.
pub const DEFAULT_RT_PRIORITY: i32 = 80;

/// What the caller asked for, as given on the command line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TargetRequest {
    /// A partition applied with `tame apply`.
    pub partition: Option<String>,
    /// A CPU list (text, parsed here).
    pub cpus: Option<String>,
    /// One CPU.
    pub cpu: Option<u32>,
    pub policy: Option<Policy>,
    pub priority: Option<i32>,
    /// Place it even though the CPUs are not isolated.
    pub shared_ok: bool,
    /// Where `tame apply` keeps its journal.
    pub journal_dir: PathBuf,
}

/// Who asks: what the partition access rule looks at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    /// Real user id.
    pub uid: u32,
    /// Real, effective and supplementary group ids.
    pub gids: Vec<u32>,
}

impl Caller {
    /// This process.
    pub fn current() -> Self {
        use nix::unistd::{getegid, getgid, getgroups, getuid};
        let mut gids = vec![getgid().as_raw(), getegid().as_raw()];
        // Failing to read the supplementary groups only narrows what the caller may use.
        gids.extend(getgroups().unwrap_or_default().iter().map(|g| g.as_raw()));
        Self {
            uid: getuid().as_raw(),
            gids,
        }
    }

    pub fn is_root(&self) -> bool {
        self.uid == 0
    }

    pub fn in_group(&self, gid: u32) -> bool {
        self.gids.contains(&gid)
    }
}

/// An applied partition as a target: one the caller may use, whose cgroup exists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionTarget {
    pub name: String,
    pub cpus: CpuList,
    pub cgroup: PartitionCgroup,
    /// Not the system partition: no other work runs on its CPUs.
    pub isolated: bool,
    /// The applied partitions other work stays off (isolated or shared), for a refusal to name.
    pub isolated_names: Vec<String>,
}

impl PartitionTarget {
    /// Why a program placed here would not run undisturbed; `None` when it would.
    fn not_isolated(&self) -> Option<String> {
        if self.isolated {
            return None;
        }
        let instead = match self.isolated_names.as_slice() {
            [] => "an isolated partition (add one to the spec and tame apply it)".to_string(),
            [one] => format!("an isolated or shared partition (-p {one})"),
            names => format!(
                "an isolated or shared partition (-p one of {})",
                names.join(", ")
            ),
        };
        Some(format!(
            "partition {:?} is the system partition, so the machine's other work runs on its CPUs {} — use {instead}, or pass --shared-ok to place it there anyway",
            self.name, self.cpus
        ))
    }
}

/// The resolved target: CPUs, the partition cgroup to join, scheduling.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub cpus: CpuList,
    pub cgroup: Option<PartitionCgroup>,
    pub sched: Option<SchedSpec>,
}

impl Target {
    /// The cpuset the program joins, relative to the cpuset hierarchy.
    pub fn cpuset(&self) -> Option<String> {
        self.cgroup.as_ref().map(|c| c.path.clone())
    }

    /// What `tame detach PID --threads …` does to this target (checked by
    /// [`crate::detach::detach`] before anything moves).
    pub fn detach_request(&self, pid: u32, threads: ThreadSelection) -> DetachRequest {
        DetachRequest {
            pid,
            cpus: self.cpus.clone(),
            threads,
            sched: self.sched,
            cgroup: self.cgroup.clone(),
        }
    }
}

/// Check the request against the host and the applied partitions; nothing is changed.
pub fn resolve(root: &Root, req: &TargetRequest, caller: &Caller) -> Result<Target, LaunchError> {
    let online = root.cpus_online().map_err(|e| failed(e.to_string()))?;
    let (cpus, cgroup, not_isolated) = match &req.partition {
        Some(name) => {
            let p = partition_target(root, &applied(&req.journal_dir, root)?, name, caller)?;
            let why = p.not_isolated();
            (p.cpus, Some(p.cgroup), why)
        }
        None => {
            let cpus = requested_cpus(req)?;
            let isolated = boot_isolated(root, &online).is_some_and(|iso| cpus.is_subset(&iso));
            let why = (!isolated).then(|| format!(
                "CPU {cpus} is not isolated: isolcpus=/nohz_full= do not cover it and --cpus joins no partition, so other work still runs there — use -p PARTITION for an applied isolated partition, isolate it first (tame apply), or pass --shared-ok to place it anyway"
            ));
            (cpus, None, why)
        }
    };
    if cgroup.is_none() {
        // Without a partition cgroup to join, the program inherits tame's own CPUs.
        check_usable(root, &req.journal_dir, &cpus, &online, "-p")?;
    } else {
        let offline = cpus.difference(&online);
        if !offline.is_empty() {
            return Err(invalid(format!("partition CPU {offline} is not online (online: {online}) — revert and re-apply the partitions")));
        }
    }
    if let Some(why) = not_isolated.filter(|_| !req.shared_ok) {
        return Err(invalid(why));
    }
    let sched = match req.policy {
        None if req.priority.is_some() => {
            return Err(invalid(
                "--priority without --policy — add --policy fifo or rr",
            ))
        }
        None => None,
        Some(policy) => Some(permitted_sched(policy, req.priority)?),
    };
    Ok(Target {
        cpus,
        cgroup,
        sched,
    })
}

fn requested_cpus(req: &TargetRequest) -> Result<CpuList, LaunchError> {
    match (&req.cpus, req.cpu) {
        (Some(list), _) => CpuList::parse(list).map_err(|e| {
            invalid(format!(
                "--cpus: {e} — write CPUs as a list such as 1 or 2-3"
            ))
        }),
        (None, Some(c)) => Ok(CpuList::from_cpus([c])),
        (None, None) => Err(invalid(
            "no target — say where it goes with -p PARTITION, --cpus LIST or --cpu N",
        )),
    }
}

/// The scheduling spec for `policy`, after checking the priority range and
/// that this process may use it (a throw-away thread tries, unpinned: tame
/// itself is not in the target's cpuset).
fn permitted_sched(policy: Policy, priority: Option<i32>) -> Result<SchedSpec, LaunchError> {
    let spec = checked_sched(policy, priority)?;
    sched::probe(spec, None).map_err(|e| {
        invalid(format!(
            "policy {policy} priority {} is not permitted: {e} — run as root (CAP_SYS_NICE), raise RLIMIT_RTPRIO, or leave out --policy",
            spec.priority
        ))
    })?;
    Ok(spec)
}

/// The spec for `policy` and `priority` (default 80 for fifo/rr), range-checked.
fn checked_sched(policy: Policy, priority: Option<i32>) -> Result<SchedSpec, LaunchError> {
    let priority = priority.unwrap_or(if matches!(policy, Policy::Fifo | Policy::Rr) {
        DEFAULT_RT_PRIORITY
    } else {
        0
    });
    let (lo, hi) = policy.priority_range();
    if priority < lo || priority > hi {
        return Err(invalid(format!(
            "priority {priority} is out of range for policy {policy} ({lo}..{hi}) — pick one in that range"
        )));
    }
    if policy == Policy::Deadline {
        return Err(invalid(
            "--policy deadline needs a runtime and period: use `tame reserve --backend deadline` for that",
        ));
    }
    Ok(SchedSpec::static_priority(policy, priority))
}

/// CPUs isolated at boot (isolcpus= or nohz_full=), if any; read with the host
/// layer's command-line parser (quotes, flags, `N`, the last value of a key wins).
pub fn boot_isolated(root: &Root, online: &CpuList) -> Option<CpuList> {
    let cmdline = root.kernel_cmdline().ok()?;
    let boot = BootIsolation::from_cmdline(&cmdline, online.last());
    let all = boot
        .isolcpus
        .map(|i| i.cpus)
        .unwrap_or_default()
        .union(&boot.nohz_full.unwrap_or_default());
    (!all.is_empty()).then_some(all)
}

/// The partitions applied with the journal in `journal_dir` (read once: pass them on);
/// refused when none are.
pub fn applied(journal_dir: &Path, root: &Root) -> Result<Applied, LaunchError> {
    Applied::read(root, journal_dir)
        .map_err(LaunchError::from_layer)?
        .ok_or_else(|| {
            invalid(format!(
                "no partitions are applied (no journal in {}) — apply a spec with `tame apply SPEC` first, or use --cpus",
                journal_dir.display()
            ))
        })
}

/// `cpus` as CPUs this process may place a thread or program on: some, online and within
/// its cpuset — or why not. A CPU outside it that an applied partition (journal in
/// `journal_dir`) holds is named with its partition and how to go there (`use` is the
/// option that picks a partition, `-p`), not as a cpuset to run tame from.
pub fn check_usable(
    root: &Root,
    journal_dir: &Path,
    cpus: &CpuList,
    online: &CpuList,
    use_option: &str,
) -> Result<(), LaunchError> {
    let allowed = CpuList::from_cpus(sched::allowed_cpus());
    let Err(e) = cpus.check_usable(online, &allowed) else {
        return Ok(());
    };
    // The journal is read only where it can name a partition.
    let applied = matches!(e, UnusableCpus::NotAllowed { .. })
        .then(|| Applied::read(root, journal_dir).ok().flatten())
        .flatten();
    Err(refusal(e, applied.as_ref(), use_option))
}

/// Why `e` refuses CPUs: where an applied partition holds those outside tame's cpuset,
/// that partition and `use_option` to reach it; else the cpuset tame runs in.
fn refusal(e: UnusableCpus, applied: Option<&Applied>, use_option: &str) -> LaunchError {
    if let UnusableCpus::NotAllowed { refused, .. } = &e {
        if let Some(p) = applied.and_then(|a| a.holding(refused)) {
            return invalid(format!(
                "{} {} to partition {:?}, which tame apply gave a cpuset of its own (tame runs outside it) — use {use_option} {}",
                refused.named(),
                tame_rt::plural::word(refused.len() as u64, "belongs", "belong"),
                p.name,
                p.name
            ));
        }
    }
    invalid(e.to_string())
}

/// Where a program started for work on `cpus` goes: on those CPUs, and, where they lie
/// outside this process's cpuset in an applied partition (journal in `journal_dir`), in
/// that partition's cgroup — if `caller` may use it. `tame reserve -- PROG` places its
/// program this way, so a reservation on a partition's CPU needs no `tame run -p` around it.
pub fn placement_on(
    root: &Root,
    journal_dir: &Path,
    cpus: &CpuList,
    caller: &Caller,
) -> Result<crate::spawn::Placement, LaunchError> {
    let placement = crate::spawn::Placement::on_cpus(cpus.clone());
    let online = root.cpus_online().map_err(|e| failed(e.to_string()))?;
    let allowed = CpuList::from_cpus(sched::allowed_cpus());
    let e = match cpus.check_usable(&online, &allowed) {
        Ok(()) => return Ok(placement),
        Err(e @ UnusableCpus::NotAllowed { .. }) => e,
        Err(e) => return Err(invalid(e.to_string())),
    };
    let applied = Applied::read(root, journal_dir).map_err(LaunchError::from_layer)?;
    let Some((a, p)) = applied
        .as_ref()
        .and_then(|a| a.holding(cpus).map(|p| (a, p)))
    else {
        // No partition holds them all: the refusal says which CPUs tame may use.
        return Err(refusal(e, applied.as_ref(), "-p"));
    };
    let target = partition_target(root, a, &p.name, caller)?;
    Ok(crate::spawn::Placement {
        cgroup_procs: Some(target.cgroup.procs()),
        ..placement
    })
}

/// Partition `name` of the applied ones (read from the journal in `journal_dir`), if
/// `caller` may use it, with the cgroup its programs join, which must exist.
pub fn applied_partition(
    root: &Root,
    journal_dir: &Path,
    name: &str,
    caller: &Caller,
) -> Result<PartitionTarget, LaunchError> {
    partition_target(root, &applied(journal_dir, root)?, name, caller)
}

/// Partition `name` of `applied`, if `caller` may use it, with the cgroup its programs
/// join, which must exist: a cgroup that is gone is refused here, so it never reads as a
/// failure to start the program later.
pub fn partition_target(
    root: &Root,
    applied: &Applied,
    name: &str,
    caller: &Caller,
) -> Result<PartitionTarget, LaunchError> {
    let p = applied.partition(name).ok_or_else(|| {
        invalid(format!(
            "no partition {name:?} is applied — the applied ones are {:?}",
            applied.names()
        ))
    })?;
    check_partition_access(&root.accounts().unwrap_or_default(), p, caller)?;
    let cgroup = p.cgroup.clone().ok_or_else(|| {
        failed("no cpuset controller is mounted (cgroup v1 cpuset or v2 with cpuset) — the partition's cpuset cannot be joined")
    })?;
    if !root.exists(cgroup.procs()) {
        return Err(invalid(format!(
            "partition cgroup {} does not exist (no {}) — is the spec still applied? run tame status",
            cgroup.dir,
            cgroup.procs()
        )));
    }
    Ok(PartitionTarget {
        name: p.name.clone(),
        cpus: p.cpus.clone(),
        cgroup,
        isolated: p.is_isolated(),
        isolated_names: applied.isolated_names(),
    })
}

/// Root may use any partition; another caller only one whose spec names its
/// user or one of its groups.
pub fn check_partition_access(
    accounts: &Accounts,
    p: &AppliedPartition,
    caller: &Caller,
) -> Result<(), LaunchError> {
    if caller.is_root() {
        return Ok(());
    }
    let user_ok = p.user.as_deref().and_then(|u| accounts.uid_of(u)) == Some(caller.uid);
    let group_ok = p
        .group
        .as_deref()
        .and_then(|g| accounts.gid_of(g))
        .is_some_and(|gid| caller.in_group(gid));
    if user_ok || group_ok {
        return Ok(());
    }
    let allowed = match (&p.user, &p.group) {
        (None, None) => "only root (its spec names no user or group)".to_string(),
        (Some(u), None) => format!("user {u}"),
        (None, Some(g)) => format!("members of group {g}"),
        (Some(u), Some(g)) => format!("user {u} and members of group {g}"),
    };
    Err(invalid(format!(
        "partition {:?} admits {allowed}; you are uid {} — rule: a caller that is not root may use only partitions whose spec allows its user or group",
        p.name, caller.uid
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    use tame_host::cgroup::CgroupVersion;
    use tame_partition::apply::SPEC_NOTE;
    use tame_partition::spec::Spec;

    const SPEC: &str = r#"
[[partition]]
name = "system"
cpus = "0-1"
role = "system"

[[partition]]
name = "rt"
cpus = "2-3"
role = "isolated"
user = "alice"

[[partition]]
name = "team"
cpus = "4"
role = "shared"
group = "rtgroup"
"#;

    const ALICE: u32 = 1000;
    const BOB: u32 = 1001;
    const RTGROUP: u32 = 2000;

    /// A fixture host with 6 CPUs, the spec above applied on cgroup `version`
    /// (the v2 hierarchy at /sys/fs/cgroup/unified, as on this VM), and a
    /// journal dir that holds the applied spec.
    struct Host {
        dir: tempfile::TempDir,
        root: Root,
    }

    impl Host {
        fn new(version: CgroupVersion, cmdline: &str) -> Self {
            let dir = tame_testing::scratch_dir("tame-launch-target-");
            let root = tame_testing::fixture_root(dir.path().join("root"));
            let h = Host { dir, root };
            h.put("/sys/devices/system/cpu/online", "0-5\n");
            h.put("/proc/cmdline", &format!("{cmdline}\n"));
            h.put(
                "/etc/passwd",
                "root:x:0:0::/root:/bin/sh\nalice:x:1000:1000::/home/alice:/bin/sh\nbob:x:1001:1001::/home/bob:/bin/sh\n",
            );
            h.put("/etc/group", "root:x:0:\nrtgroup:x:2000:bob\n");
            let (mounts, cgroups, partitions): (&str, &str, &[&str]) = match version {
                CgroupVersion::V1 => (
                    "cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0\ncgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n",
                    "/sys/fs/cgroup/cpuset",
                    &["system", "rt", "team"],
                ),
                CgroupVersion::V2 => (
                    "tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0\ncgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n",
                    "/sys/fs/cgroup/unified",
                    &["rt", "team"],
                ),
            };
            h.put("/proc/mounts", mounts);
            h.put(&format!("{cgroups}/cgroup.procs"), "1\n");
            if version == CgroupVersion::V2 {
                h.put(&format!("{cgroups}/cgroup.controllers"), "cpuset cpu\n");
                h.put(&format!("{cgroups}/cgroup.subtree_control"), "cpuset\n");
            } else {
                h.put(&format!("{cgroups}/tasks"), "1\n");
            }
            for p in partitions {
                h.put(&format!("{cgroups}/tame-{p}/cgroup.procs"), "");
            }
            let mut j = tame_host::journal::Journal::open(&h.root, &h.journal_dir()).unwrap();
            j.note(SPEC_NOTE, SPEC.as_bytes()).unwrap();
            h
        }

        fn put(&self, path: &str, text: &str) {
            let f = self.root.path(path);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, text).unwrap();
        }

        fn journal_dir(&self) -> PathBuf {
            self.dir.path().join("state")
        }

        fn request(&self, partition: &str) -> TargetRequest {
            TargetRequest {
                partition: Some(partition.into()),
                journal_dir: self.journal_dir(),
                ..Default::default()
            }
        }

        fn resolve(&self, req: &TargetRequest, caller: &Caller) -> Result<Target, LaunchError> {
            resolve(&self.root, req, caller)
        }
    }

    fn root_caller() -> Caller {
        Caller {
            uid: 0,
            gids: vec![0],
        }
    }

    fn user(uid: u32, gids: &[u32]) -> Caller {
        Caller {
            uid,
            gids: gids.to_vec(),
        }
    }

    fn invalid_text(r: Result<impl std::fmt::Debug, LaunchError>) -> String {
        match r {
            Err(e @ LaunchError::Invalid(_)) => e.to_string(),
            other => panic!("expected bad input, got {other:?}"),
        }
    }

    #[test]
    fn a_v1_partition_is_its_tame_cgroup_in_the_cpuset_hierarchy() {
        let h = Host::new(CgroupVersion::V1, "quiet");
        let t = h.resolve(&h.request("rt"), &root_caller()).unwrap();
        assert_eq!(t.cpus.to_string(), "2-3");
        let c = t.cgroup.clone().unwrap();
        assert_eq!(c.version, CgroupVersion::V1);
        assert_eq!(c.path, "/tame-rt");
        assert_eq!(c.procs(), "/sys/fs/cgroup/cpuset/tame-rt/cgroup.procs");
        assert_eq!(t.cpuset().as_deref(), Some("/tame-rt"));
        assert_eq!(t.sched, None);
        // v1 takes single threads.
        let req = t.detach_request(7, ThreadSelection::Main);
        assert_eq!(req.cgroup, t.cgroup);
        assert_eq!(req.threads, ThreadSelection::Main);
        // The system partition has a cgroup of its own on v1, and is not isolated.
        let err = invalid_text(h.resolve(&h.request("system"), &root_caller()));
        assert_eq!(
            err,
            r#"partition "system" is the system partition, so the machine's other work runs on its CPUs 0-1 — use an isolated or shared partition (-p one of rt, team), or pass --shared-ok to place it there anyway"#
        );
        let mut req = h.request("system");
        req.shared_ok = true;
        let t = h.resolve(&req, &root_caller()).unwrap();
        assert_eq!(
            t.cgroup.unwrap().procs(),
            "/sys/fs/cgroup/cpuset/tame-system/cgroup.procs"
        );
    }

    #[test]
    fn the_system_partition_names_the_partitions_to_use_instead() {
        let h = Host::new(CgroupVersion::V1, "quiet");
        let mut p = applied_partition(&h.root, &h.journal_dir(), "system", &root_caller()).unwrap();
        assert_eq!(p.isolated_names, ["rt", "team"]);
        assert_eq!(
            applied_partition(&h.root, &h.journal_dir(), "team", &root_caller())
                .unwrap()
                .not_isolated(),
            None
        );
        p.isolated_names = vec!["rt".into()];
        assert!(p
            .not_isolated()
            .unwrap()
            .contains("use an isolated or shared partition (-p rt), or pass --shared-ok"));
        p.isolated_names.clear();
        assert!(p.not_isolated().unwrap().contains("use an isolated partition (add one to the spec and tame apply it), or pass --shared-ok"));
    }

    #[test]
    fn a_v2_partition_is_below_the_v2_mount_and_system_is_the_root_cgroup() {
        let h = Host::new(CgroupVersion::V2, "quiet");
        let t = h.resolve(&h.request("rt"), &root_caller()).unwrap();
        let c = t.cgroup.clone().unwrap();
        assert_eq!(c.version, CgroupVersion::V2);
        assert_eq!(c.dir, "/sys/fs/cgroup/unified/tame-rt");
        assert_eq!(c.procs(), "/sys/fs/cgroup/unified/tame-rt/cgroup.procs");
        let mut req = h.request("system");
        req.shared_ok = true;
        let t = h.resolve(&req, &root_caller()).unwrap();
        assert_eq!(t.cpus.to_string(), "0-1");
        let c = t.cgroup.clone().unwrap();
        assert_eq!(c.path, "/");
        assert_eq!(c.procs(), "/sys/fs/cgroup/unified/cgroup.procs");
        assert_eq!(t.cpuset().as_deref(), Some("/"));
    }

    #[test]
    fn a_detach_request_carries_the_resolved_partition_cgroup() {
        // detach refuses a part of the threads on v2 (tests/it/detach_fixture.rs); the
        // request carries the hierarchy, so detach does not walk the cgroups again.
        let h = Host::new(CgroupVersion::V2, "quiet");
        let t = h.resolve(&h.request("rt"), &root_caller()).unwrap();
        let req = t.detach_request(7, ThreadSelection::All);
        let c = req.cgroup.clone().unwrap();
        assert_eq!(
            (c.mount.as_str(), c.path.as_str()),
            ("/sys/fs/cgroup/unified", "/tame-rt")
        );
        assert_eq!(c.hierarchy().version(), CgroupVersion::V2);
        assert_eq!(c.hierarchy().mount(), "/sys/fs/cgroup/unified");
        assert_eq!(req.cpus.to_string(), "2-3");
    }

    #[test]
    fn a_partition_cgroup_that_is_gone_is_refused_before_anything_starts() {
        for version in [CgroupVersion::V1, CgroupVersion::V2] {
            let h = Host::new(version, "quiet");
            let mount = match version {
                CgroupVersion::V1 => "/sys/fs/cgroup/cpuset",
                CgroupVersion::V2 => "/sys/fs/cgroup/unified",
            };
            std::fs::remove_dir_all(h.root.path(format!("{mount}/tame-rt"))).unwrap();
            let err = invalid_text(h.resolve(&h.request("rt"), &root_caller()));
            assert!(
                err.contains(&format!("partition cgroup {mount}/tame-rt does not exist"))
                    && err.contains("is the spec still applied? run tame status"),
                "{err}"
            );
        }
    }

    #[test]
    fn without_a_cpuset_controller_a_partition_cannot_be_joined() {
        let h = Host::new(CgroupVersion::V2, "quiet");
        h.put("/sys/fs/cgroup/unified/cgroup.controllers", "cpu memory\n");
        let err = h
            .resolve(&h.request("rt"), &root_caller())
            .unwrap_err()
            .to_string();
        assert!(err.contains("no cpuset controller is mounted"), "{err}");
    }

    #[test]
    fn partitions_must_be_applied_and_named() {
        let h = Host::new(CgroupVersion::V1, "quiet");
        let err = invalid_text(h.resolve(&h.request("nope"), &root_caller()));
        assert!(
            err.contains(
                r#"no partition "nope" is applied — the applied ones are ["system", "rt", "team"]"#
            ),
            "{err}"
        );
        let mut req = h.request("rt");
        req.journal_dir = h.dir.path().join("elsewhere");
        let err = invalid_text(h.resolve(&req, &root_caller()));
        assert!(err.contains("no partitions are applied"), "{err}");
    }

    #[test]
    fn a_caller_that_is_not_root_uses_only_partitions_naming_its_user_or_group() {
        let h = Host::new(CgroupVersion::V2, "quiet");
        // alice is the rt partition's user.
        assert!(h.resolve(&h.request("rt"), &user(ALICE, &[ALICE])).is_ok());
        let err = invalid_text(h.resolve(&h.request("rt"), &user(BOB, &[BOB])));
        assert!(
            err.contains(r#"partition "rt" admits user alice; you are uid 1001"#),
            "{err}"
        );
        // bob is in rtgroup (a supplementary group), the team partition's group.
        assert!(h
            .resolve(&h.request("team"), &user(BOB, &[BOB, RTGROUP]))
            .is_ok());
        let err = invalid_text(h.resolve(&h.request("team"), &user(ALICE, &[ALICE])));
        assert!(err.contains("admits members of group rtgroup"), "{err}");
        // The system partition names nobody: root only.
        let mut req = h.request("system");
        req.shared_ok = true;
        let err = invalid_text(h.resolve(&req, &user(ALICE, &[ALICE])));
        assert!(
            err.contains("admits only root (its spec names no user or group)"),
            "{err}"
        );
        assert!(h.resolve(&req, &root_caller()).is_ok());
    }

    #[test]
    fn access_names_user_and_group_when_the_spec_gives_both() {
        let accounts = Accounts::parse("alice:x:1000:1000::/:/bin/sh\n", "rtgroup:x:2000:\n");
        let spec = Spec::parse("t", SPEC).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let applied = Applied::new(&Root::new(dir.path()), spec, SPEC, dir.path());
        let mut p = applied.partitions[1].clone();
        p.group = Some("rtgroup".into());
        assert!(check_partition_access(&accounts, &p, &user(BOB, &[RTGROUP])).is_ok());
        assert!(check_partition_access(&accounts, &p, &user(ALICE, &[])).is_ok());
        let err = check_partition_access(&accounts, &p, &user(BOB, &[BOB]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("admits user alice and members of group rtgroup"),
            "{err}"
        );
        // A name missing from the account database admits nobody.
        p.user = Some("carol".into());
        p.group = None;
        assert!(check_partition_access(&accounts, &p, &user(u32::MAX, &[])).is_err());
    }

    #[test]
    fn the_current_caller_has_its_real_and_effective_groups() {
        let me = Caller::current();
        assert_eq!(me.uid, nix::unistd::getuid().as_raw());
        assert!(me.in_group(nix::unistd::getegid().as_raw()));
        assert!(me.in_group(nix::unistd::getgid().as_raw()));
    }

    /// A CPU this test process may use (`--cpus` targets are checked against it).
    fn usable_cpu() -> u32 {
        sched::allowed_cpus()[0]
    }

    fn cpus_request(h: &Host, cpu: u32) -> TargetRequest {
        TargetRequest {
            cpu: Some(cpu),
            journal_dir: h.journal_dir(),
            ..Default::default()
        }
    }

    #[test]
    fn cpus_are_isolated_when_the_boot_command_line_isolates_them() {
        let c = usable_cpu();
        let h = Host::new(
            CgroupVersion::V1,
            &format!("ro isolcpus=domain,managed_irq,{c}"),
        );
        let t = h.resolve(&cpus_request(&h, c), &root_caller()).unwrap();
        assert_eq!((t.cpus.to_string(), t.cgroup), (c.to_string(), None));
        // nohz_full= counts too, quoted.
        let h = Host::new(CgroupVersion::V1, &format!("nohz_full=\"{c}\""));
        assert!(h.resolve(&cpus_request(&h, c), &root_caller()).is_ok());
        // The last isolcpus= wins, as the kernel reads it.
        let other = (c + 1) % 6;
        let h = Host::new(CgroupVersion::V1, &format!("isolcpus={c} isolcpus={other}"));
        let err = invalid_text(h.resolve(&cpus_request(&h, c), &root_caller()));
        assert!(err.contains(&format!("CPU {c} is not isolated: isolcpus=/nohz_full= do not cover it and --cpus joins no partition")), "{err}");
        assert!(
            err.contains("use -p PARTITION for an applied isolated partition"),
            "{err}"
        );
        let mut req = cpus_request(&h, c);
        req.shared_ok = true;
        assert!(h.resolve(&req, &root_caller()).is_ok());
    }

    #[test]
    fn cpu_lists_are_checked_before_anything_starts() {
        let h = Host::new(CgroupVersion::V1, "quiet");
        let mut req = cpus_request(&h, 0);
        req.cpu = None;
        let err = invalid_text(h.resolve(&req, &root_caller()));
        assert!(err.contains("no target"), "{err}");
        req.cpus = Some("3-x".into());
        let err = invalid_text(h.resolve(&req, &root_caller()));
        assert!(err.starts_with("--cpus: "), "{err}");
        req.cpus = Some("7".into());
        req.shared_ok = true;
        let err = invalid_text(h.resolve(&req, &root_caller()));
        assert!(err.contains("CPU 7 is not online"), "{err}");

        let online = CpuList::parse("0-5").unwrap();
        let allowed = CpuList::parse("0-1").unwrap();
        let list = |t: &str| CpuList::parse(t).unwrap();
        assert!(list("1").check_usable(&online, &allowed).is_ok());
        let err = list("1-2")
            .check_usable(&online, &allowed)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("CPU 2 is online but this process may not run there"),
            "{err}"
        );
        req.cpus = Some(String::new());
        let err = invalid_text(h.resolve(&req, &root_caller()));
        assert!(err.starts_with("the CPU list is empty"), "{err}");
    }

    #[test]
    fn a_cpu_of_an_applied_partition_is_named_with_the_partition_and_joined_through_it() {
        let h = Host::new(CgroupVersion::V1, "quiet");
        let mine = usable_cpu();
        let theirs = if mine == 3 { 2 } else { 3 };
        // tame runs on one CPU, as after tame apply: the partition's CPUs are outside it.
        std::thread::scope(|s| {
            s.spawn(|| {
                sched::pin_current_thread(mine).unwrap();
                let mut req = cpus_request(&h, theirs);
                req.shared_ok = true;
                let err = invalid_text(h.resolve(&req, &root_caller()));
                assert!(
                    err.contains(&format!("CPU {theirs} belongs to partition \"rt\""))
                        && err.ends_with("use -p rt"),
                    "{err}"
                );
                let jd = h.journal_dir();
                let on = |cpu: u32, caller: &Caller| {
                    placement_on(&h.root, &jd, &CpuList::from_cpus([cpu]), caller)
                };
                let placed = on(theirs, &root_caller()).unwrap();
                assert!(
                    placed
                        .cgroup_procs
                        .as_deref()
                        .is_some_and(|p| p.ends_with("/tame-rt/cgroup.procs")),
                    "{placed:?}"
                );
                assert_eq!(placed.cpus.to_string(), theirs.to_string());
                assert_eq!(on(mine, &root_caller()).unwrap().cgroup_procs, None);
                // Joining a partition is allowed only to whom its spec names.
                let err = invalid_text(on(theirs, &user(BOB, &[BOB])));
                assert!(err.contains("partition \"rt\" admits user alice"), "{err}");
                // A CPU no partition holds: the cpuset tame runs in is the reason.
                let err = invalid_text(on(5, &root_caller()));
                assert!(
                    err.contains("CPU 5 is online but this process may not run there"),
                    "{err}"
                );
            });
        });
    }

    #[test]
    fn policy_and_priority_are_checked() {
        let h = Host::new(CgroupVersion::V1, "quiet");
        let mut req = cpus_request(&h, usable_cpu());
        req.shared_ok = true;
        req.priority = Some(10);
        let err = invalid_text(h.resolve(&req, &root_caller()));
        assert!(err.contains("--priority without --policy"), "{err}");
        req.policy = Some(Policy::Fifo);
        req.priority = Some(100);
        let err = invalid_text(h.resolve(&req, &root_caller()));
        assert!(
            err.contains("priority 100 is out of range for policy fifo (1..99)"),
            "{err}"
        );
        let err = invalid_text(checked_sched(Policy::Deadline, None));
        assert!(err.contains("tame reserve --backend deadline"), "{err}");
        assert_eq!(
            checked_sched(Policy::Rr, None).unwrap(),
            SchedSpec::static_priority(Policy::Rr, DEFAULT_RT_PRIORITY)
        );
        assert_eq!(
            checked_sched(Policy::Other, None).unwrap(),
            SchedSpec::static_priority(Policy::Other, 0)
        );
        // Policy other is always permitted: resolved with its spec.
        req.policy = Some(Policy::Other);
        req.priority = None;
        let t = h.resolve(&req, &root_caller()).unwrap();
        assert_eq!(t.sched, Some(SchedSpec::static_priority(Policy::Other, 0)));
    }
}
