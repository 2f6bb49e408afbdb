//! `tame run`, `tame detach`, `tame attach`, `tame ps`: place programs on
//! isolated CPUs and put them back.

use std::ffi::OsString;
use std::path::PathBuf;

use tame_bench::units::parse_duration_ns;
use tame_host::journal::DEFAULT_JOURNAL_DIR;
use tame_host::{CpuList, Root};
use tame_launch::detach::{self, DetachRequest, PlacementRecord, Store, ThreadSelection};
use tame_launch::spawn::{self, Placement};
use tame_launch::{proc, LaunchError};
use tame_rt::sched::{self, SchedSpec};
use tame_rt::Policy;

use crate::{bad_input, Context};

/// Where the program goes and how it is scheduled; shared by run and detach.
#[derive(clap::Args)]
pub struct Target {
    /// A partition applied with `tame apply` (its CPUs and cpuset).
    #[arg(short = 'p', long, conflicts_with_all = ["cpus", "cpu"])]
    partition: Option<String>,
    /// CPUs to place it on.
    #[arg(long)]
    cpus: Option<String>,
    /// One CPU to place it on.
    #[arg(long)]
    cpu: Option<u32>,
    /// Scheduling policy: fifo, rr, deadline or other (default: unchanged).
    #[arg(long)]
    policy: Option<Policy>,
    /// Static priority for fifo/rr (default 80).
    #[arg(long)]
    priority: Option<i32>,
    /// Place it even though the CPUs are not isolated (no partition or isolcpus covers them).
    #[arg(long)]
    shared_ok: bool,
    /// Where `tame apply` keeps its journal and tame its placement records.
    #[arg(long, default_value = DEFAULT_JOURNAL_DIR)]
    journal_dir: PathBuf,
}

#[derive(clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    target: Target,
    /// Lock all memory of the program after exec (mlockall through a preload library).
    #[arg(long)]
    mlock: bool,
    /// Heap to fault in and keep locked after exec (implies --mlock), e.g. 64M.
    #[arg(long, value_name = "SIZE")]
    prefault: Option<String>,
    /// RLIMIT_RTTIME: the longest a real-time thread may run without blocking (e.g. 500ms).
    #[arg(long, value_name = "LIMIT")]
    rttime: Option<String>,
    /// Children of the program start as SCHED_OTHER (SCHED_RESET_ON_FORK).
    #[arg(long)]
    reset_on_fork: bool,
    /// The program and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<OsString>,
}

#[derive(clap::Args)]
pub struct DetachArgs {
    pid: u32,
    #[command(flatten)]
    target: Target,
    /// Which threads: all, main, or thread ids (1234,1240).
    #[arg(long, default_value = "all")]
    threads: String,
}

#[derive(clap::Args)]
pub struct AttachArgs {
    pid: u32,
    #[arg(long, default_value = DEFAULT_JOURNAL_DIR)]
    journal_dir: PathBuf,
}

#[derive(clap::Args)]
pub struct PsArgs {
    #[arg(long)]
    json: bool,
    #[arg(long, default_value = DEFAULT_JOURNAL_DIR)]
    journal_dir: PathBuf,
}

fn lift(e: LaunchError) -> anyhow::Error {
    match e {
        LaunchError::Invalid(m) => bad_input(m),
        LaunchError::Failed(m) => anyhow::anyhow!(m),
    }
}

fn caller_uid() -> u32 {
    // SAFETY: no arguments.
    unsafe { libc::getuid() }
}

/// The resolved target: CPUs, cpuset to join, scheduling.
struct Resolved {
    cpus: CpuList,
    cpuset: Option<String>,
    sched: Option<SchedSpec>,
}

impl Target {
    fn resolve(&self, root: &Root) -> anyhow::Result<Resolved> {
        let online = CpuList::parse(&root.read_trimmed("/sys/devices/system/cpu/online")?)?;
        let (cpus, cpuset, isolated) = if let Some(name) = &self.partition {
            let (cpus, cpuset, isolated) = applied_partition(root, &self.journal_dir, name)?;
            (cpus, Some(cpuset), isolated)
        } else {
            let cpus =
                match (&self.cpus, self.cpu) {
                    (Some(list), _) => CpuList::parse(list).map_err(|e| {
                        bad_input(format!(
                            "--cpus: {e} — write CPUs as a list such as 1 or 2-3"
                        ))
                    })?,
                    (None, Some(c)) => CpuList::from_cpus([c]),
                    (None, None) => return Err(bad_input(
                        "no target — say where it goes with -p PARTITION, --cpus LIST or --cpu N",
                    )),
                };
            let isolated = boot_isolated(root).is_some_and(|iso| cpus.is_subset(&iso));
            (cpus, None, isolated)
        };
        if cpuset.is_none() {
            // Without a partition cpuset to join, the program inherits tame's own CPUs.
            tame_bench::engine::validate_cpus(&cpus, &online)
                .map_err(|e| bad_input(e.to_string()))?;
        } else {
            let offline = cpus.difference(&online);
            if !offline.is_empty() {
                return Err(bad_input(format!("partition CPU {offline} is not online (online: {online}) — revert and re-apply the partitions")));
            }
        }
        if !isolated && !self.shared_ok {
            return Err(bad_input(format!(
                "CPU {cpus} is not isolated: no applied tame partition or isolcpus= covers it, so other work still runs there — isolate it first (tame apply), or pass --shared-ok to place it anyway"
            )));
        }
        let sched = match self.policy {
            None => {
                if self.priority.is_some() {
                    return Err(bad_input(
                        "--priority without --policy — add --policy fifo or rr",
                    ));
                }
                None
            }
            Some(policy) => {
                let priority =
                    self.priority
                        .unwrap_or(if matches!(policy, Policy::Fifo | Policy::Rr) {
                            80
                        } else {
                            0
                        });
                let (lo, hi) = policy.priority_range();
                if priority < lo || priority > hi {
                    return Err(bad_input(format!(
                        "priority {priority} is out of range for policy {policy} ({lo}..{hi}) — pick one in that range"
                    )));
                }
                let spec = if policy == Policy::Deadline {
                    return Err(bad_input(
                        "--policy deadline needs a runtime and period: use `tame reserve --backend deadline` for that",
                    ));
                } else {
                    SchedSpec::static_priority(policy, priority)
                };
                // Probed unpinned: tame itself is not in the target's cpuset.
                sched::probe(spec, None).map_err(|e| {
                    bad_input(format!(
                        "policy {policy} priority {priority} is not permitted: {e} — run as root (CAP_SYS_NICE), raise RLIMIT_RTPRIO, or leave out --policy"
                    ))
                })?;
                Some(spec)
            }
        };
        Ok(Resolved {
            cpus,
            cpuset,
            sched,
        })
    }
}

/// CPUs isolated at boot (isolcpus= or nohz_full=), if any.
fn boot_isolated(root: &Root) -> Option<CpuList> {
    let cmdline = root.read_trimmed("/proc/cmdline").ok()?;
    let mut all = CpuList::new();
    for word in cmdline.split_whitespace() {
        let value = word
            .strip_prefix("isolcpus=")
            .or_else(|| word.strip_prefix("nohz_full="));
        if let Some(v) = value {
            // isolcpus may lead with flags (managed_irq,domain,2-3): keep what parses as CPUs.
            let cpus: Vec<&str> = v
                .split(',')
                .filter(|p| p.starts_with(|c: char| c.is_ascii_digit()))
                .collect();
            if let Ok(list) = CpuList::parse(&cpus.join(",")) {
                all = all.union(&list);
            }
        }
    }
    (!all.is_empty()).then_some(all)
}

/// A partition from the applied spec: its CPUs, its cgroup v1 cpuset path,
/// whether it is isolated. A caller that is not root must be the partition's
/// `user` or in its `group`.
fn applied_partition(
    root: &Root,
    journal_dir: &std::path::Path,
    name: &str,
) -> anyhow::Result<(CpuList, String, bool)> {
    let status = tame_partition::status::status(root, journal_dir)?;
    let spec_text = status.spec.filter(|_| status.applied).ok_or_else(|| {
        bad_input(format!(
            "no partitions are applied (no journal in {}) — apply a spec with `tame apply SPEC` first, or use --cpus",
            journal_dir.display()
        ))
    })?;
    let spec = tame_partition::spec::Spec::parse("applied spec", &spec_text)?;
    let p = spec
        .partitions
        .iter()
        .find(|p| p.name == name)
        .ok_or_else(|| {
            let names: Vec<&str> = spec.partitions.iter().map(|p| p.name.as_str()).collect();
            bad_input(format!(
                "no partition {name:?} is applied — the applied ones are {names:?}"
            ))
        })?;
    check_partition_access(root, p)?;
    let isolated = p.role != tame_partition::spec::Role::System;
    Ok((
        p.cpus.clone(),
        format!("/{}{}", tame_partition::plan::DIR_PREFIX, p.name),
        isolated,
    ))
}

/// Root may use any partition; another caller only one whose spec names its user or one of its groups.
fn check_partition_access(
    root: &Root,
    p: &tame_partition::spec::PartitionSpec,
) -> anyhow::Result<()> {
    let uid = caller_uid();
    if uid == 0 {
        return Ok(());
    }
    use tame_host::accounts::{group_id, user_id};
    let passwd = root.read("/etc/passwd").unwrap_or_default();
    let groups = root.read("/etc/group").unwrap_or_default();
    let user_ok = p.user.as_deref().and_then(|u| user_id(&passwd, u)) == Some(uid);
    let group_ok = p
        .group
        .as_deref()
        .and_then(|g| group_id(&groups, g))
        .is_some_and(in_group);
    if user_ok || group_ok {
        return Ok(());
    }
    let allowed = match (&p.user, &p.group) {
        (None, None) => "only root (its spec names no user or group)".to_string(),
        (u, g) => format!(
            "{}{}{}",
            u.as_ref().map_or(String::new(), |u| format!("user {u}")),
            if u.is_some() && g.is_some() {
                " and "
            } else {
                ""
            },
            g.as_ref()
                .map_or(String::new(), |g| format!("members of group {g}"))
        ),
    };
    Err(bad_input(format!(
        "partition {:?} admits {allowed}; you are uid {uid} — rule: a caller that is not root may use only partitions whose spec allows its user or group",
        p.name
    )))
}

fn in_group(gid: u32) -> bool {
    // SAFETY: getgroups with a buffer of the size passed.
    unsafe {
        if libc::getgid() == gid || libc::getegid() == gid {
            return true;
        }
        let mut list = [0 as libc::gid_t; 256];
        let n = libc::getgroups(list.len() as i32, list.as_mut_ptr());
        n > 0 && list[..n as usize].contains(&gid)
    }
}

fn size_bytes(text: &str) -> anyhow::Result<u64> {
    let t = text.trim();
    let (num, mult) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 1u64 << 10),
        Some('M' | 'm') => (&t[..t.len() - 1], 1 << 20),
        Some('G' | 'g') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| {
            bad_input(format!(
                "size {text:?} is not a number of bytes (e.g. 64M, 512K)"
            ))
        })
}

pub fn run_run(ctx: &Context, a: RunArgs) -> anyhow::Result<i32> {
    let target = a.target.resolve(&ctx.root)?;
    let prefault = a.prefault.as_deref().map(size_bytes).transpose()?;
    let rttime_us = a
        .rttime
        .as_deref()
        .map(|t| parse_duration_ns(t).map(|ns| ns / 1000))
        .transpose()
        .map_err(|e| bad_input(format!("--rttime: {e}")))?;
    let placement = Placement {
        cpus: target.cpus.clone(),
        sched: target.sched,
        reset_on_fork: a.reset_on_fork,
        rttime_us,
        cgroup_procs: target.cpuset.as_ref().map(|c| {
            ctx.root
                .path(format!("{}{c}/cgroup.procs", detach::CPUSET_MOUNT))
                .display()
                .to_string()
        }),
        mlock: a.mlock || prefault.is_some(),
        prefault_bytes: prefault.unwrap_or(0),
    };
    let store = Store::new(&a.target.journal_dir);
    let mut launched = spawn::spawn(&placement, &a.command).map_err(lift)?;
    let pid = launched.child.id();
    // A record for `tame ps`; best effort, removed when the program ends.
    let recorded = proc::inspect(&ctx.root, pid).ok().and_then(|info| {
        let threads = info
            .tids
            .iter()
            .filter_map(|&t| detach::thread_state(&ctx.root, pid, t).ok())
            .collect();
        store
            .save(&PlacementRecord {
                version: detach::RECORD_VERSION,
                kind: "run".into(),
                pid,
                start_time: info.start_time,
                comm: info.comm,
                cpus: target.cpus.clone(),
                cpuset: target.cpuset.clone(),
                threads,
            })
            .ok()
    });
    let status = spawn::wait_forwarding(&mut launched).map_err(lift)?;
    if recorded.is_some() {
        store.remove(pid);
    }
    Ok(spawn::exit_code(status))
}

pub fn run_detach(ctx: &Context, a: DetachArgs) -> anyhow::Result<i32> {
    let target = a.target.resolve(&ctx.root)?;
    let req = DetachRequest {
        pid: a.pid,
        cpus: target.cpus,
        threads: ThreadSelection::parse(&a.threads).map_err(lift)?,
        sched: target.sched,
        cpuset: target.cpuset,
    };
    let store = Store::new(&a.target.journal_dir);
    let record = detach::detach(&ctx.root, &store, &req, caller_uid()).map_err(lift)?;
    println!(
        "detached process {} ({}) onto CPUs {}:",
        record.pid, record.comm, record.cpus
    );
    for t in &record.threads {
        println!(
            "  thread {}: affinity {} → {}{}{}",
            t.tid,
            t.affinity,
            record.cpus,
            req.sched
                .map(|s| format!(
                    ", policy {} → {} {}",
                    policy_name(t.sched.policy),
                    s.policy,
                    s.priority
                ))
                .unwrap_or_default(),
            match (&t.cpuset, &record.cpuset) {
                (Some(old), Some(new)) => format!(", cpuset {old} → {new}"),
                _ => String::new(),
            }
        );
    }
    println!(
        "`tame attach {}` puts every thread back as it was.",
        record.pid
    );
    Ok(0)
}

pub fn run_attach(ctx: &Context, a: AttachArgs) -> anyhow::Result<i32> {
    let store = Store::new(&a.journal_dir);
    let report = detach::attach(&ctx.root, &store, a.pid, caller_uid()).map_err(lift)?;
    if report.exited {
        println!(
            "process {} has exited; its placement record was removed",
            a.pid
        );
        return Ok(0);
    }
    println!(
        "attached process {}: {} thread(s) restored, {} created since detach given the main thread's previous placement",
        a.pid,
        report.restored.len(),
        report.adopted.len()
    );
    for (tid, why) in &report.failed {
        eprintln!("  thread {tid} not restored: {why}");
    }
    Ok(if report.failed.is_empty() { 0 } else { 1 })
}

fn policy_name(raw: i32) -> &'static str {
    match raw {
        libc::SCHED_OTHER => "other",
        libc::SCHED_FIFO => "fifo",
        libc::SCHED_RR => "rr",
        libc::SCHED_BATCH => "batch",
        libc::SCHED_IDLE => "idle",
        6 => "deadline",
        _ => "?",
    }
}

/// One thread in `tame ps`.
#[derive(serde::Serialize)]
struct PsRow {
    partition_cpus: String,
    kind: String,
    pid: u32,
    tid: u32,
    comm: String,
    policy: String,
    priority: i32,
    cpu: Option<u32>,
    /// Since placement.
    voluntary_switches: u64,
    involuntary_switches: u64,
    minor_faults: u64,
    major_faults: u64,
    cpu_ticks: u64,
}

pub fn run_ps(ctx: &Context, a: PsArgs) -> anyhow::Result<i32> {
    let store = Store::new(&a.journal_dir);
    let mut rows = Vec::new();
    for record in store.list() {
        let Ok(info) = proc::inspect(&ctx.root, record.pid) else {
            continue;
        };
        if info.start_time != record.start_time {
            continue;
        }
        for tid in info.tids {
            let now = proc::counters(&ctx.root, record.pid, tid).unwrap_or_default();
            let base = record
                .threads
                .iter()
                .find(|t| t.tid == tid)
                .map(|t| t.counters)
                .unwrap_or_default();
            let sched = sched::get_thread_sched(tid as i32).ok();
            let stat = ctx
                .root
                .read(format!("/proc/{}/task/{tid}/stat", record.pid))
                .ok();
            let comm = stat
                .as_deref()
                .and_then(|s| tame_host::process::parse_stat(s).ok())
                .map(|s| (s.comm, s.last_cpu));
            rows.push(PsRow {
                partition_cpus: record.cpus.to_string(),
                kind: record.kind.clone(),
                pid: record.pid,
                tid,
                comm: comm.as_ref().map_or(record.comm.clone(), |c| c.0.clone()),
                policy: sched.map_or("?", |s| policy_name(s.policy)).to_string(),
                priority: sched.map_or(0, |s| s.priority),
                cpu: comm.map(|c| c.1),
                voluntary_switches: now
                    .voluntary_switches
                    .saturating_sub(base.voluntary_switches),
                involuntary_switches: now
                    .involuntary_switches
                    .saturating_sub(base.involuntary_switches),
                minor_faults: now.minor_faults.saturating_sub(base.minor_faults),
                major_faults: now.major_faults.saturating_sub(base.major_faults),
                cpu_ticks: now.cpu_ticks.saturating_sub(base.cpu_ticks),
            });
        }
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(0);
    }
    if rows.is_empty() {
        println!("nothing placed by tame is running (tame run / tame detach)");
        return Ok(0);
    }
    println!(
        "{:<8} {:<7} {:>7} {:>7} {:<16} {:<9} {:>3}  {:>8} {:>8} {:>8} {:>8} {:>8}",
        "cpus",
        "how",
        "pid",
        "tid",
        "command",
        "policy",
        "cpu",
        "vol-cs",
        "invol-cs",
        "minflt",
        "majflt",
        "ticks"
    );
    for r in rows {
        println!(
            "{:<8} {:<7} {:>7} {:>7} {:<16} {:<9} {:>3}  {:>8} {:>8} {:>8} {:>8} {:>8}",
            r.partition_cpus,
            r.kind,
            r.pid,
            r.tid,
            r.comm,
            format!("{} {}", r.policy, r.priority),
            r.cpu.map_or("-".into(), |c| c.to_string()),
            r.voluntary_switches,
            r.involuntary_switches,
            r.minor_faults,
            r.major_faults,
            r.cpu_ticks
        );
    }
    println!("counters since placement: a real-time thread in its time-critical phase should add no switches or faults");
    Ok(0)
}
