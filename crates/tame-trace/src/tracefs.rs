//! A tracing session on tracefs that leaves the system as it found it.
//!
//! Where tracefs offers instances (every kernel since 3.10), the session makes
//! its own instance (`instances/tame-noise-<pid>`): its clock, CPU mask and
//! events are private to it, so nobody else's tracing is disturbed, and
//! removing it restores everything. Otherwise the top-level settings are used.
//! Either way every change goes through the host [`Journal`] (previous value
//! first, synced before the change is made) in `/run/tame/trace/<pid>`, so a
//! session killed with SIGKILL is undone by the next one ([`recover_stale`]).
//! If tracefs is not mounted, it is mounted at `/sys/kernel/tracing` and
//! unmounted afterwards. Restoration runs in [`TraceSession::restore`], in
//! `Drop` (errors, panics) and therefore after Ctrl-C too, since the CLI turns
//! Ctrl-C into an orderly stop.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};

use tame_host::cgroup::{mounts_of_type, parse_mounts, PROC_MOUNTS};
use tame_host::journal::{self, Journal};
use tame_host::Root;

use crate::event::Timestamp;

/// Where tracefs is mounted on current kernels.
pub const TRACEFS_MOUNT: &str = tame_host::kernel::TRACEFS_MOUNT;
/// Where it appears through debugfs on older ones.
pub const DEBUGFS_TRACING: &str = tame_host::tracing::DEBUGFS_TRACING;
/// Journals of running sessions, one directory per process.
pub const JOURNAL_BASE: &str = "/run/tame/trace";
const MOUNT_NOTE: &str = "mounted";

/// The events attribution uses (`group/event`); those missing on a kernel are skipped.
pub const EVENTS: &[&str] = &[
    "irq/irq_handler_entry",
    "irq/irq_handler_exit",
    "irq/softirq_entry",
    "irq/softirq_exit",
    "irq_vectors/local_timer_entry",
    "irq_vectors/local_timer_exit",
    "irq_vectors/call_function_entry",
    "irq_vectors/call_function_exit",
    "irq_vectors/call_function_single_entry",
    "irq_vectors/call_function_single_exit",
    "irq_vectors/reschedule_entry",
    "irq_vectors/reschedule_exit",
    "irq_vectors/irq_work_entry",
    "irq_vectors/irq_work_exit",
    "irq_vectors/x86_platform_ipi_entry",
    "irq_vectors/x86_platform_ipi_exit",
    "irq_vectors/thermal_apic_entry",
    "irq_vectors/thermal_apic_exit",
    "irq_vectors/error_apic_entry",
    "irq_vectors/error_apic_exit",
    "irq_vectors/spurious_apic_entry",
    "irq_vectors/spurious_apic_exit",
    "sched/sched_switch",
    "sched/sched_wakeup",
    "workqueue/workqueue_execute_start",
    "workqueue/workqueue_execute_end",
    "timer/hrtimer_expire_entry",
    "timer/hrtimer_expire_exit",
    "nmi/nmi_handler",
];

/// Which trace clock the events are stamped with; it must match the detector's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceClock {
    /// `x86-tsc`: the raw TSC, printed as an integer (cycle resolution).
    X86Tsc,
    /// `mono`: CLOCK_MONOTONIC, printed as secs.usecs (µs resolution in text).
    Mono,
}

impl TraceClock {
    pub fn name(self) -> &'static str {
        match self {
            TraceClock::X86Tsc => "x86-tsc",
            TraceClock::Mono => "mono",
        }
    }

    pub fn timestamp(self) -> Timestamp {
        match self {
            TraceClock::X86Tsc => Timestamp::Counter,
            TraceClock::Mono => Timestamp::SecsUsecs,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// Tracing cannot be used here; the reason is for the report.
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    Failed(String),
}

/// What to capture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaptureSpec {
    pub cpus: Vec<u32>,
    pub clock: TraceClock,
    /// Use a private instance where tracefs has them (the default); false uses the top level.
    pub use_instance: bool,
    /// Events beyond [`EVENTS`] (`group/event`), those missing skipped the same way.
    pub extra_events: &'static [&'static str],
    /// Events of [`EVENTS`] this capture does without (each costs the traced CPUs time).
    pub without_events: &'static [&'static str],
    /// Names the instance (`tame-PURPOSE-<session>`): which tame command owns it.
    pub purpose: &'static str,
    /// Per-CPU buffer size to set (KiB); `None` keeps the kernel's. A bigger buffer
    /// rides out a reader that falls behind under load instead of losing events.
    pub buffer_kb: Option<u32>,
}

impl CaptureSpec {
    /// The attribution events on `cpus`, in a private instance named for `purpose`.
    pub fn new(cpus: Vec<u32>, clock: TraceClock, purpose: &'static str) -> Self {
        CaptureSpec {
            cpus,
            clock,
            use_instance: true,
            extra_events: &[],
            without_events: &[],
            purpose,
            buffer_kb: None,
        }
    }
}

/// Where tracefs is, or why it cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    Mounted(String),
    /// Not mounted, but the kernel has it and we may mount it here.
    Mountable,
}

fn is_root_user() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Find tracefs below `root`, or say why it cannot be used.
pub fn locate(root: &Root) -> Result<Location, TraceError> {
    if let Ok(text) = root.read(PROC_MOUNTS) {
        if let Ok(mounts) = parse_mounts(&text) {
            if let Some(m) = mounts_of_type(&mounts, "tracefs").next() {
                if root.exists(format!("{}/trace_clock", m.target)) {
                    return Ok(Location::Mounted(m.target.clone()));
                }
            }
        }
    }
    for dir in [TRACEFS_MOUNT, DEBUGFS_TRACING] {
        if root.exists(format!("{dir}/trace_clock")) {
            return Ok(Location::Mounted(dir.to_string()));
        }
    }
    let known = root
        .filesystems()
        .map(|fs| fs.iter().any(|f| f.name == "tracefs"))
        .unwrap_or(false);
    if !known {
        return Err(TraceError::Unavailable(
            "this kernel has no tracefs (CONFIG_TRACING off) — events cannot be captured; gaps are reported without causes".into(),
        ));
    }
    if !is_root_user() {
        return Err(TraceError::Unavailable(
            "tracefs is not mounted and mounting it needs root — run as root (or mount tracefs at /sys/kernel/tracing) for attribution; gaps only".into(),
        ));
    }
    Ok(Location::Mountable)
}

/// An active session. Dropping it restores everything it changed.
pub struct TraceSession {
    root: Root,
    journal: Option<Journal>,
    journal_dir: PathBuf,
    /// The tracefs directory used: an instance or the top level (host path).
    dir: String,
    mounted: Option<String>,
    clock: TraceClock,
    cpus: Vec<u32>,
    enabled: Vec<String>,
    missing: Vec<String>,
    /// Events whose filter this session set.
    filtered: Vec<String>,
    restored: bool,
    /// What was undone of sessions killed earlier, before this one started.
    recovered: Vec<String>,
    /// This process's turn (see [`SESSION_TURN`]); released after restoring.
    _turn: MutexGuard<'static, ()>,
}

/// What restoring found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RestoreReport {
    pub restored: usize,
    /// Changes that could not be undone, with the reason.
    pub not_restored: Vec<String>,
}

fn journal_dir(root: &Root, id: &str) -> PathBuf {
    root.path(format!("{JOURNAL_BASE}/{id}"))
}

/// `<pid>-<n>`: unique per session, and names the process that owns it.
fn session_id() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Sessions take turns within a process: one may mount tracefs and unmount it
/// at its end, under another's feet.
static SESSION_TURN: Mutex<()> = Mutex::new(());

fn failed(what: &str, e: impl std::fmt::Display) -> TraceError {
    TraceError::Failed(format!("{what}: {e}"))
}

/// Undo what sessions of processes that no longer exist left behind (killed with SIGKILL).
pub fn recover_stale(root: &Root) -> Vec<String> {
    let mut notes = Vec::new();
    let Ok(entries) = root.list_dir(JOURNAL_BASE) else {
        return notes;
    };
    for name in entries {
        let Ok(pid) = name.split('-').next().unwrap_or("").parse::<u32>() else {
            continue;
        };
        if pid == std::process::id() || root.process(pid).exists() {
            continue;
        }
        let dir = journal_dir(root, &name);
        let mounted = journal::load(&dir).ok().flatten().and_then(|r| {
            r.note(MOUNT_NOTE)
                .map(|m| String::from_utf8_lossy(m).into_owned())
        });
        match journal::revert(root, &dir) {
            Ok(r) if r.not_restored.is_empty() => {
                if let Some(m) = mounted {
                    let _ = root.unmount(&m);
                }
                let _ = std::fs::remove_dir_all(&dir);
                remove_empty_journal_base(root);
                notes.push(format!(
                    "restored {} left by killed process {pid}",
                    tame_rt::plural::count(
                        r.restored as u64,
                        "tracing setting",
                        "tracing settings"
                    )
                ));
            }
            Ok(r) => notes.push(format!(
                "could not restore tracing settings left by process {pid}: {:?} — see {}",
                r.not_restored,
                dir.display()
            )),
            Err(e) => notes.push(format!("cannot revert {}: {e}", dir.display())),
        }
    }
    notes
}

fn mount_tracefs(root: &Root, target: &str) -> Result<(), TraceError> {
    root.mount("tracefs", target).map_err(|e| {
        TraceError::Unavailable(format!(
            "cannot mount tracefs at {target}: {e} — mount it by hand for attribution; gaps only"
        ))
    })
}

/// Remove `/run/tame/trace` and `/run/tame` when no journal is left in them
/// (`remove_dir` refuses non-empty directories, so other sessions' journals stay).
fn remove_empty_journal_base(root: &Root) {
    let _ = std::fs::remove_dir(root.path(JOURNAL_BASE));
    if let Some(parent) = std::path::Path::new(JOURNAL_BASE).parent() {
        let _ = std::fs::remove_dir(root.path(parent));
    }
}

/// `1408` or `7 (expanded: 1408)` → `1408`.
fn expanded_size(text: &str) -> Option<String> {
    let t = text.trim();
    let n = match t.split_once("expanded:") {
        Some((_, rest)) => rest.trim().trim_end_matches(')').trim(),
        None => t,
    };
    n.parse::<u64>().ok().map(|n| n.to_string())
}

/// `[local] global x86-tsc` → `local`.
fn selected_clock(text: &str) -> Option<String> {
    tame_host::reader::bracketed(text)
}

impl TraceSession {
    /// Set up capture (tracing stays off until [`TraceSession::begin`]).
    /// On any failure, whatever was changed is restored before the error returns.
    pub fn start(root: &Root, spec: &CaptureSpec) -> Result<Self, TraceError> {
        let turn = SESSION_TURN.lock().unwrap_or_else(|p| p.into_inner());
        let recovered = recover_stale(root);
        let location = locate(root)?;
        let id = session_id();
        let journal_dir = journal_dir(root, &id);
        let mut journal = Journal::open(root, &journal_dir)
            .map_err(|e| TraceError::Unavailable(format!("{e}")))?;
        let mut session = TraceSession {
            root: root.clone(),
            journal: None,
            journal_dir,
            dir: String::new(),
            mounted: None,
            clock: spec.clock,
            cpus: spec.cpus.clone(),
            enabled: Vec::new(),
            missing: Vec::new(),
            filtered: Vec::new(),
            restored: false,
            recovered,
            _turn: turn,
        };
        if location == Location::Mountable {
            journal
                .note(MOUNT_NOTE, TRACEFS_MOUNT.as_bytes())
                .map_err(|e| failed("cannot journal the mount", e))?;
        }
        session.journal = Some(journal);
        // From here on, an error drops `session`, which restores.
        let top = match location {
            Location::Mounted(dir) => dir,
            Location::Mountable => {
                mount_tracefs(root, TRACEFS_MOUNT)?;
                session.mounted = Some(TRACEFS_MOUNT.to_string());
                TRACEFS_MOUNT.to_string()
            }
        };
        session.configure(&top, spec)?;
        Ok(session)
    }

    fn journal(&mut self) -> &mut Journal {
        self.journal
            .as_mut()
            .expect("a started session has a journal")
    }

    fn write(
        &mut self,
        path: &str,
        value: &str,
        restore_with: Option<&str>,
    ) -> Result<(), TraceError> {
        let r = self
            .journal()
            .write(path, value.as_bytes(), restore_with.map(str::as_bytes))
            .map_err(|e| failed("cannot journal a tracing change", e))?;
        r.map_err(|e| failed(&format!("cannot write {value:?} to {path}"), e))
    }

    fn configure(&mut self, top: &str, spec: &CaptureSpec) -> Result<(), TraceError> {
        let clocks = self
            .root
            .read(format!("{top}/trace_clock"))
            .map_err(|e| failed("cannot read the trace clocks", e))?;
        if !clocks
            .split_whitespace()
            .any(|c| c.trim_matches(['[', ']']) == spec.clock.name())
        {
            return Err(TraceError::Unavailable(format!(
                "the trace clock {} is not offered here ({}) — events cannot be joined to gaps; gaps only",
                spec.clock.name(),
                clocks.trim()
            )));
        }
        let instances = format!("{top}/instances");
        self.dir = if spec.use_instance && self.root.is_dir(&instances) {
            let id = self
                .journal_dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let dir = format!("{instances}/tame-{}-{id}", spec.purpose);
            let r = self
                .journal()
                .create_dir(&dir, None)
                .map_err(|e| failed("cannot journal the instance", e))?;
            r.map_err(|e| failed(&format!("cannot create the tracing instance {dir}"), e))?;
            dir
        } else {
            top.to_string()
        };
        let dir = self.dir.clone();
        self.write(&format!("{dir}/tracing_on"), "0", None)?;
        let current = self
            .root
            .read(format!("{dir}/trace_clock"))
            .map_err(|e| failed("cannot read the trace clock", e))?;
        // The file lists every clock; writing the selected name back restores it.
        let restore = selected_clock(&current);
        self.write(
            &format!("{dir}/trace_clock"),
            spec.clock.name(),
            restore.as_deref(),
        )?;
        self.write(
            &format!("{dir}/tracing_cpumask"),
            &cpumask_hex(&spec.cpus),
            None,
        )?;
        if let Some(kb) = spec.buffer_kb {
            let path = format!("{dir}/buffer_size_kb");
            // `7 (expanded: 1408)` before first use: the size it will have is the restore value.
            let before = self.root.read(&path).ok().and_then(|t| expanded_size(&t));
            self.write(&path, &kb.to_string(), before.as_deref())?;
        }
        let wanted = EVENTS
            .iter()
            .filter(|e| !spec.without_events.contains(e))
            .chain(spec.extra_events);
        for event in wanted {
            let path = format!("{dir}/events/{event}/enable");
            if !self.root.exists(&path) {
                self.missing.push(event.to_string());
                continue;
            }
            self.write(&path, "1", None)?;
            self.enabled.push(event.to_string());
        }
        if self.enabled.is_empty() {
            return Err(TraceError::Unavailable(format!(
                "none of the needed trace events exist under {dir}/events — gaps only"
            )));
        }
        Ok(())
    }

    /// Keep only the occurrences of `event` (`group/event`, enabled) that match
    /// `filter` (tracefs' filter syntax). The first filter set is journaled (restored
    /// by clearing it); later ones replace it without a new record.
    pub fn set_filter(&mut self, event: &str, filter: &str) -> Result<(), TraceError> {
        if !self.enabled.iter().any(|e| e == event) {
            return Err(TraceError::Failed(format!(
                "cannot filter {event}: it is not enabled in this session"
            )));
        }
        let path = format!("{}/events/{event}/filter", self.dir);
        if self.filtered.iter().any(|e| e == event) {
            return self.write_unjournaled(&path, filter);
        }
        self.write(&path, filter, Some("0"))?;
        self.filtered.push(event.to_string());
        Ok(())
    }

    /// Turn recording on (after the readers are open).
    pub fn begin(&mut self) -> Result<(), TraceError> {
        let dir = self.dir.clone();
        self.write_unjournaled(&format!("{dir}/tracing_on"), "1")
    }

    /// Turn recording off; what is buffered can still be read.
    pub fn end(&mut self) -> Result<(), TraceError> {
        let dir = self.dir.clone();
        self.write_unjournaled(&format!("{dir}/tracing_on"), "0")
    }

    /// tracing_on was journaled (its original value) when it was first set to 0;
    /// toggling it afterwards needs no new record.
    fn write_unjournaled(&mut self, path: &str, value: &str) -> Result<(), TraceError> {
        self.journal()
            .rewrite(path, value.as_bytes())
            .map_err(|e| failed(&format!("cannot write {path}"), e))
    }

    /// The tracefs directory in use (host path).
    pub fn dir(&self) -> &str {
        &self.dir
    }

    pub fn clock(&self) -> TraceClock {
        self.clock
    }

    pub fn cpus(&self) -> &[u32] {
        &self.cpus
    }

    /// Events enabled, and those this kernel lacks.
    pub fn events(&self) -> (&[String], &[String]) {
        (&self.enabled, &self.missing)
    }

    /// Notes on settings left by killed sessions that were restored before this one.
    pub fn recovered(&self) -> &[String] {
        &self.recovered
    }

    /// The per-CPU pipe of `cpu` (a real path, for opening).
    pub fn pipe_path(&self, cpu: u32) -> PathBuf {
        self.root
            .path(format!("{}/per_cpu/cpu{cpu}/trace_pipe", self.dir))
    }

    /// The pipe of every traced CPU at once, merged by the kernel (a real path, for opening).
    pub fn trace_pipe(&self) -> PathBuf {
        self.root.path(format!("{}/trace_pipe", self.dir))
    }

    /// Undo every change (in reverse), remove the instance, unmount if we mounted.
    pub fn restore(mut self) -> RestoreReport {
        self.restore_inner()
    }

    fn restore_inner(&mut self) -> RestoreReport {
        if self.restored {
            return RestoreReport::default();
        }
        self.restored = true;
        let mut report = RestoreReport::default();
        // Close the journal file before reverting from it.
        self.journal = None;
        match journal::revert(&self.root, &self.journal_dir) {
            Ok(r) => {
                report.restored = r.restored;
                report.not_restored = r
                    .not_restored
                    .into_iter()
                    .map(|n| format!("{}: {}", n.what, n.reason))
                    .collect();
            }
            Err(e) => report.not_restored.push(e.to_string()),
        }
        if report.not_restored.is_empty() {
            if let Some(m) = self.mounted.take() {
                let _ = self.root.unmount(&m);
            }
            let _ = std::fs::remove_dir_all(&self.journal_dir);
            remove_empty_journal_base(&self.root);
        }
        report
    }
}

impl Drop for TraceSession {
    fn drop(&mut self) {
        let r = self.restore_inner();
        if !r.not_restored.is_empty() {
            eprintln!(
                "tame: could not restore tracing settings: {:?} — the journal stays in {}; the next tame noise run retries",
                r.not_restored,
                self.journal_dir.display()
            );
        }
    }
}

/// `tracing_cpumask` for a CPU list: comma-separated 32-bit hex words, most significant first.
pub fn cpumask_hex(cpus: &[u32]) -> String {
    let words = cpus.iter().map(|c| c / 32 + 1).max().unwrap_or(1) as usize;
    let mut w = vec![0u32; words];
    for &c in cpus {
        w[(c / 32) as usize] |= 1 << (c % 32);
    }
    w.iter()
        .rev()
        .enumerate()
        .map(|(i, v)| {
            if i == 0 {
                format!("{v:x}")
            } else {
                format!("{v:08x}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn buffer_sizes_read_as_the_size_they_will_have() {
        assert_eq!(
            expanded_size("7 (expanded: 1408)\n").as_deref(),
            Some("1408")
        );
        assert_eq!(expanded_size("4096\n").as_deref(), Some("4096"));
        assert_eq!(expanded_size("X\n"), None);
    }

    #[test]
    fn cpumask_words() {
        assert_eq!(cpumask_hex(&[1]), "2");
        assert_eq!(cpumask_hex(&[0, 1]), "3");
        assert_eq!(cpumask_hex(&[33]), "2,00000000");
    }

    fn fixture(with_instances: bool) -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().unwrap();
        let root = tame_testing::fixture_root(dir.path());
        let w = |p: &str, s: &str| {
            let path = root.path(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, s).unwrap();
        };
        w("/proc/filesystems", "nodev\ttracefs\n");
        w(
            "/proc/mounts",
            "tracefs /sys/kernel/tracing tracefs rw,nosuid 0 0\n",
        );
        let t = TRACEFS_MOUNT;
        w(
            &format!("{t}/trace_clock"),
            "[local] global counter mono x86-tsc\n",
        );
        w(&format!("{t}/tracing_on"), "1\n");
        w(&format!("{t}/tracing_cpumask"), "3\n");
        w(&format!("{t}/buffer_size_kb"), "7 (expanded: 1408)\n");
        w(&format!("{t}/per_cpu/cpu1/trace_pipe"), "");
        for e in EVENTS.iter().filter(|e| !e.starts_with("nmi/")) {
            w(&format!("{t}/events/{e}/enable"), "0\n");
        }
        w(&format!("{t}/events/sched/sched_switch/enable"), "1\n");
        if with_instances {
            std::fs::create_dir_all(root.path(format!("{t}/instances"))).unwrap();
        }
        (dir, root)
    }

    /// The host files; the journals under /run are checked separately.
    fn snapshot(dir: &Path) -> tame_testing::TreeSnapshot {
        let mut out = tame_testing::snapshot_tree(&dir.join("sys"));
        out.extend(tame_testing::snapshot_tree(&dir.join("proc")));
        out
    }

    fn spec(use_instance: bool) -> CaptureSpec {
        CaptureSpec {
            use_instance,
            ..CaptureSpec::new(vec![1], TraceClock::X86Tsc, "noise")
        }
    }

    #[test]
    fn top_level_settings_are_restored_byte_for_byte() {
        let (dir, root) = fixture(false);
        let before = snapshot(dir.path());
        let mut s = TraceSession::start(&root, &spec(true)).unwrap();
        let t = TRACEFS_MOUNT;
        assert_eq!(s.dir(), t, "no instances: the top level is used");
        assert_eq!(
            root.read(format!("{t}/trace_clock")).unwrap(),
            "local global counter mono [x86-tsc]\n"
        );
        assert_eq!(root.read(format!("{t}/tracing_cpumask")).unwrap(), "2");
        assert_eq!(
            root.read(format!("{t}/events/irq/softirq_entry/enable"))
                .unwrap(),
            "1"
        );
        assert_eq!(s.events().1, &["nmi/nmi_handler".to_string()]);
        s.begin().unwrap();
        assert_eq!(root.read(format!("{t}/tracing_on")).unwrap(), "1");
        s.end().unwrap();
        drop(s);
        assert_eq!(snapshot(dir.path()), before, "every byte is back");
        assert!(
            !root.exists(JOURNAL_BASE),
            "the journal and its directories are gone"
        );
    }

    #[test]
    fn a_failed_start_restores_what_it_changed() {
        let (dir, root) = fixture(false);
        // An enable "file" that cannot be written: a directory.
        let bad = root.path(format!(
            "{TRACEFS_MOUNT}/events/timer/hrtimer_expire_entry/enable"
        ));
        std::fs::remove_file(&bad).unwrap();
        std::fs::create_dir(&bad).unwrap();
        let before = snapshot(dir.path());
        let err = TraceSession::start(&root, &spec(false)).err().unwrap();
        assert!(err.to_string().contains("hrtimer_expire_entry"), "{err}");
        assert_eq!(snapshot(dir.path()), before);
    }

    #[test]
    fn an_instance_is_made_and_removed() {
        let (dir, root) = fixture(true);
        let before = snapshot(dir.path());
        // A fixture's new instance directory stays empty (the kernel would fill it).
        let inst_dir = root.path(format!("{TRACEFS_MOUNT}/instances"));
        // Without kernel-made files the instance has no trace_clock: start fails and cleans up.
        let err = TraceSession::start(&root, &spec(true)).err().unwrap();
        assert!(err.to_string().contains("trace clock"), "{err}");
        assert_eq!(
            std::fs::read_dir(inst_dir).unwrap().count(),
            0,
            "the instance is removed again"
        );
        assert_eq!(snapshot(dir.path()), before);
    }

    #[test]
    fn a_killed_sessions_journal_is_reverted_by_the_next() {
        let (dir, root) = fixture(false);
        let before = snapshot(dir.path());
        // Journal written by a process id that does not exist in the fixture's /proc.
        let jdir = journal_dir(&root, "999999-0");
        let mut j = Journal::open(&root, &jdir).unwrap();
        let clock = format!("{TRACEFS_MOUNT}/trace_clock");
        j.write(&clock, b"x86-tsc", Some(b"local"))
            .unwrap()
            .unwrap();
        drop(j);
        assert_ne!(snapshot(dir.path()), before);
        let notes = recover_stale(&root);
        assert!(notes[0].contains("999999"), "{notes:?}");
        assert!(!jdir.exists());
        assert_eq!(snapshot(dir.path()), before);
    }

    #[test]
    fn missing_tracefs_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let root = tame_testing::fixture_root(dir.path());
        let err = locate(&root).unwrap_err().to_string();
        assert!(err.contains("no tracefs"), "{err}");
        std::fs::create_dir_all(root.path("/proc")).unwrap();
        std::fs::write(root.path("/proc/filesystems"), "nodev\ttracefs\n").unwrap();
        let before = snapshot(dir.path());
        // The kernel has tracefs but it is not mounted: mounting it (as root) is
        // refused here by the fixture, and the session says why and leaves nothing behind.
        let err = TraceSession::start(&root, &spec(true))
            .err()
            .unwrap()
            .to_string();
        if is_root_user() {
            assert!(
                err.contains("cannot mount tracefs at /sys/kernel/tracing"),
                "{err}"
            );
        } else {
            assert!(
                err.contains("not mounted and mounting it needs root"),
                "{err}"
            );
        }
        assert_eq!(snapshot(dir.path()), before);
        assert!(!root.exists(JOURNAL_BASE));
    }
}
