//! Live cgroup v2 for system tests on a machine that mounts cpuset and cpu as cgroup v1.
//!
//! [`CgroupV2Switch::engage`] unmounts the v1 hierarchies of the controllers asked for
//! (they must hold no child cgroup), waits until the kernel offers those controllers to
//! the v2 unified hierarchy, and enables the ones asked for in its root
//! `cgroup.subtree_control`. Restoring (explicit [`CgroupV2Switch::restore`], or on drop,
//! also when a test panics) removes the `tame-*` cgroups a test left in v2, disables the
//! controllers again, waits until their dying cgroups are gone, and mounts each v1
//! hierarchy again from its exact /proc/mounts line, with the root values it had.
//!
//! What was switched is written to [`STATE_FILE`] before the first change and removed
//! after the last restore step, so a run killed in between is restored by the next
//! engage before anything else. On a machine whose controllers already live in v2 the
//! switch only enables (and later disables) what is asked for.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::fmt;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tame_testing::poll::until;

use serde::{Deserialize, Serialize};

const MOUNTS: &str = "/proc/mounts";
const PROC_CGROUPS: &str = "/proc/cgroups";
/// Fixed places, so that a run killed midway is found and undone by the next one.
pub const STATE_DIR: &str = "/run/tame-test-cgroup-v2";
pub const STATE_FILE: &str = "/run/tame-test-cgroup-v2/switch.json";
/// Dying cgroups linger until RCU and their last references let go: usually well under
/// a second; a v1 hierarchy cannot take its controller back before.
const SETTLE: Duration = Duration::from_secs(30);

/// Why the switch did not engage.
#[derive(Debug)]
pub enum Refusal {
    NotRoot,
    /// The machine is not in a state the switch can handle (and it changed nothing).
    Precondition(String),
    /// Something failed midway; everything that was changed has been restored as far
    /// as the message says.
    Failed(String),
    /// The platform forbids the switch: a v1 hierarchy is held open by a process this
    /// test can neither see nor stop (everything was restored).
    Unsupported(String),
}

/// Why [`CgroupV2Switch::switch`] stopped.
enum SwitchError {
    /// A fault: an unexpected error, to be reported as a failure.
    Fault(String),
    /// A v1 hierarchy cannot be unmounted because a process out of this test's reach holds it.
    OutOfReach(String),
}

impl From<String> for SwitchError {
    fn from(m: String) -> Self {
        SwitchError::Fault(m)
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NotRoot => write!(f, "switching cgroup controllers to v2 needs root"),
            Refusal::Precondition(m) => write!(f, "cannot switch to cgroup v2: {m}"),
            Refusal::Failed(m) => write!(f, "switching to cgroup v2 failed: {m}"),
            Refusal::Unsupported(m) => write!(
                f,
                "a live switch to cgroup v2 is impossible on this machine: {m} (everything restored)"
            ),
        }
    }
}

/// Everything needed to put the machine back, persisted in [`STATE_FILE`].
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Prior {
    /// The unified hierarchy's mount point.
    v2_mount: String,
    /// Its root `cgroup.subtree_control` before.
    subtree_control: Vec<String>,
    /// Its child cgroups before: a `tame-*` one found at restore and not here was left by a test.
    v2_children: Vec<String>,
    /// Controllers taken from v1: restore waits until v2 holds no cgroup of theirs.
    freed: Vec<String>,
    /// The exact /proc/mounts lines of the v1 hierarchies unmounted.
    unmounted: Vec<String>,
    /// Per unmounted mount point: the names in the directory underneath, seen right after
    /// the unmount (whatever appears there later was written by the test).
    underlying: BTreeMap<String, Vec<String>>,
    /// Per unmounted mount point: its root's writable values (cpu.shares, …), restored
    /// after the remount where the fresh hierarchy starts with other defaults.
    root_values: BTreeMap<String, BTreeMap<String, String>>,
}

/// Controllers moved from cgroup v1 to the unified hierarchy until restored.
pub struct CgroupV2Switch {
    prior: Prior,
    restored: bool,
}

impl CgroupV2Switch {
    /// For a test: engaged, or `None` after a skip line where the test cannot run here.
    /// Under CI (`CI=true`) a refusal fails the test instead: CI must run it.
    /// `leftovers` runs first when a previous run was killed while switched, before that
    /// run's switch is restored (the test reverts what it had applied).
    pub fn engage_for_test(free: &[&str], enable: &[&str], leftovers: &dyn Fn()) -> Option<Self> {
        match Self::engage(free, enable, leftovers) {
            Ok(s) => Some(s),
            Err(e @ Refusal::Failed(_)) => panic!("{e}"),
            Err(e @ Refusal::Unsupported(_)) => {
                tame_testing::require::unsupported(e);
                None
            }
            Err(e) => {
                super::skip(e);
                None
            }
        }
    }

    /// Make `free` available to cgroup v2 (unmounting their v1 hierarchies) and enable
    /// `enable` (a subset) in the v2 root's `cgroup.subtree_control`.
    pub fn engage(free: &[&str], enable: &[&str], leftovers: &dyn Fn()) -> Result<Self, Refusal> {
        // SAFETY: no arguments.
        if unsafe { libc::geteuid() } != 0 {
            return Err(Refusal::NotRoot);
        }
        fs::create_dir_all(STATE_DIR)
            .map_err(|e| Refusal::Precondition(format!("cannot create {STATE_DIR}: {e}")))?;
        if let Some(prior) = load_state()? {
            eprintln!("cgroup-v2 switch: {STATE_FILE} exists: a previous run was stopped while switched; restoring first");
            leftovers();
            let r = restore_prior(&prior);
            for c in &r.cleaned {
                eprintln!("cgroup-v2 switch: recovered: {c}");
            }
            if !r.errors.is_empty() {
                return Err(Refusal::Failed(format!(
                    "restoring the state a previous run left failed ({STATE_FILE} kept): {}",
                    r.errors.join("; ")
                )));
            }
        }
        let prior = check(free, enable)?;
        let mut switch = CgroupV2Switch {
            prior,
            restored: false,
        };
        // From here on every change is undone on error, the state file first.
        if let Err(e) = switch.switch(free, enable) {
            let undone = switch.restore_now();
            return Err(match (e, undone) {
                (SwitchError::OutOfReach(why), Ok(())) => Refusal::Unsupported(why),
                (SwitchError::Fault(e), Ok(())) => {
                    Refusal::Failed(format!("{e} (everything restored)"))
                }
                (SwitchError::Fault(e) | SwitchError::OutOfReach(e), Err(errs)) => {
                    Refusal::Failed(format!(
                        "{e}; restoring failed too ({STATE_FILE} kept for the next run): {}",
                        errs.join("; ")
                    ))
                }
            });
        }
        Ok(switch)
    }

    fn switch(&mut self, free: &[&str], enable: &[&str]) -> Result<(), SwitchError> {
        save_state(&self.prior)?;
        let lines = self.prior.unmounted.clone();
        for line in &lines {
            let target = mount_target(line);
            let values = root_values(&target);
            if let Err(e) = umount(&target) {
                return Err(match held_out_of_reach(&target, &e) {
                    Some(why) => SwitchError::OutOfReach(why),
                    None => SwitchError::Fault(e.to_string()),
                });
            }
            eprintln!("cgroup-v2 switch: unmounted {line}");
            self.prior.root_values.insert(target.clone(), values);
            self.prior
                .underlying
                .insert(target.clone(), names_in(&target));
            save_state(&self.prior)?;
        }
        let v2 = self.prior.v2_mount.clone();
        let offered = until(SETTLE, || {
            let offered = words(&format!("{v2}/cgroup.controllers"));
            free.iter().all(|c| offered.iter().any(|o| o == c))
        });
        if !offered {
            return Err(format!(
                "after the unmount, {v2}/cgroup.controllers still lacks some of {free:?} (it lists {:?})",
                words(&format!("{v2}/cgroup.controllers"))
            )
            .into());
        }
        for c in enable {
            if !words(&format!("{v2}/cgroup.subtree_control"))
                .iter()
                .any(|w| w == c)
            {
                write(&format!("{v2}/cgroup.subtree_control"), &format!("+{c}"))?;
                eprintln!("cgroup-v2 switch: enabled +{c} in {v2}/cgroup.subtree_control");
            }
        }
        Ok(())
    }

    /// The unified hierarchy's mount point.
    pub fn v2_mount(&self) -> &str {
        &self.prior.v2_mount
    }

    /// Put everything back; the errors say what could not be, and the state file is
    /// then kept so the next engage tries again.
    pub fn restore(mut self) -> Result<(), String> {
        self.restore_now().map_err(|e| e.join("; "))
    }

    fn restore_now(&mut self) -> Result<(), Vec<String>> {
        self.restored = true;
        restore_prior(&self.prior).into_result()
    }
}

impl Drop for CgroupV2Switch {
    fn drop(&mut self) {
        if self.restored {
            return;
        }
        if let Err(errors) = self.restore_now() {
            let msg = format!(
                "cgroup-v2 switch: the machine is NOT as found ({STATE_FILE} kept; the next run retries): {}",
                errors.join("; ")
            );
            if std::thread::panicking() {
                eprintln!("{msg}");
            } else {
                panic!("{msg}");
            }
        }
    }
}

/// What engage will do, checked before any change: every v1 hierarchy to unmount is
/// mounted once and holds only its root cgroup; the unified hierarchy is mounted.
fn check(free: &[&str], enable: &[&str]) -> Result<Prior, Refusal> {
    let pre = Refusal::Precondition;
    if let Some(c) = enable.iter().find(|c| !free.contains(c)) {
        return Err(pre(format!("{c} is to be enabled but not freed")));
    }
    let mounts = fs::read_to_string(MOUNTS).map_err(|e| pre(format!("{MOUNTS}: {e}")))?;
    let v2: Vec<&str> = mounts
        .lines()
        .filter(|l| l.split_whitespace().nth(2) == Some("cgroup2"))
        .collect();
    let [v2_line] = v2[..] else {
        return Err(pre(format!(
            "expected one cgroup2 mount, found {} — mount the unified hierarchy once",
            v2.len()
        )));
    };
    let v2_mount = mount_target(v2_line);
    let offered = words(&format!("{v2_mount}/cgroup.controllers"));
    let cgroups = settled_proc_cgroups(&mounts, free);
    let mut unmounted: Vec<String> = Vec::new();
    for c in free {
        if offered.iter().any(|o| o == c) {
            continue; // already a v2 controller: nothing to unmount
        }
        let lines: Vec<&str> = mounts
            .lines()
            .filter(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.len() >= 4 && f[2] == "cgroup" && f[3].split(',').any(|o| o == *c)
            })
            .collect();
        let [line] = lines[..] else {
            return Err(pre(format!(
                "controller {c} is neither offered to cgroup v2 nor mounted once as v1 ({} v1 mounts)",
                lines.len()
            )));
        };
        let Some(&(hierarchy, _)) = cgroups.get(*c) else {
            return Err(pre(format!("{PROC_CGROUPS} does not list {c}")));
        };
        // Every controller sharing that hierarchy goes with it: all must be unused.
        for (name, (h, n)) in &cgroups {
            if *h == hierarchy && *n != 1 {
                return Err(pre(format!(
                    "the v1 hierarchy of {c} ({}) holds {n} {name} cgroups — it must hold only its root (someone else uses it)",
                    mount_target(line)
                )));
            }
        }
        let target = mount_target(line);
        let subdirs: Vec<String> = names_in(&target)
            .into_iter()
            .filter(|n| Path::new(&target).join(n).is_dir())
            .collect();
        if !subdirs.is_empty() {
            return Err(pre(format!(
                "{target} has child cgroups {subdirs:?} — they must go first"
            )));
        }
        // A mount in another mount namespace keeps the hierarchy alive after our unmount,
        // and the controller never reaches v2 (seen: a test's `unshare` child).
        if let Some(holder) = other_namespace_holding(c) {
            return Err(pre(format!(
                "the v1 {c} hierarchy is also mounted in another mount namespace ({holder}) — it stays alive after the unmount here; let that process end first"
            )));
        }
        if !unmounted.iter().any(|l| l == line) {
            unmounted.push(line.to_string());
        }
    }
    Ok(Prior {
        v2_mount: v2_mount.clone(),
        subtree_control: words(&format!("{v2_mount}/cgroup.subtree_control")),
        v2_children: names_in(&v2_mount)
            .into_iter()
            .filter(|n| Path::new(&v2_mount).join(n).is_dir())
            .collect(),
        freed: free.iter().map(|c| c.to_string()).collect(),
        unmounted,
        underlying: BTreeMap::new(),
        root_values: BTreeMap::new(),
    })
}

/// Every step runs even when an earlier one failed; each is a no-op where the machine
/// already is as recorded, so a second restore (or one after a reboot) is harmless.
fn restore_prior(p: &Prior) -> Restored {
    let mut errors = Vec::new();
    let mut cleaned = Vec::new();
    let v2 = &p.v2_mount;
    // 1. Cgroups tame made in v2 and left: tasks back to the root, then removed. Others
    //    (a service manager's scopes) are not ours to judge.
    for name in names_in(v2) {
        let dir = Path::new(v2).join(&name);
        if !dir.is_dir() || p.v2_children.contains(&name) || !name.starts_with("tame-") {
            continue;
        }
        eprintln!(
            "cgroup-v2 switch: removing left-over cgroup {}",
            dir.display()
        );
        match remove_cgroup(&dir, Path::new(v2)) {
            Ok(()) => cleaned.push(format!("cgroup {} was left in v2 (removed)", dir.display())),
            Err(e) => errors.push(e),
        }
    }
    // 2. The controllers enabled meanwhile are disabled again.
    let control = format!("{v2}/cgroup.subtree_control");
    for w in words(&control) {
        if !p.subtree_control.contains(&w) {
            match write(&control, &format!("-{w}")) {
                Ok(()) => eprintln!("cgroup-v2 switch: disabled {w} in {control}"),
                Err(e) => errors.push(e),
            }
        }
    }
    let missing: Vec<&String> = p
        .unmounted
        .iter()
        .filter(|l| !mounts_now().contains(l))
        .collect();
    if !missing.is_empty() {
        // 3. A controller goes back to v1 only when v2 holds no cgroup of it, dying ones too.
        if !until(SETTLE, || p.freed.iter().all(|c| v2_holds_only_root(v2, c))) {
            errors.push(format!(
                "after {SETTLE:?} {v2}/cgroup.stat still counts cgroups of {:?}: {}",
                p.freed,
                fs::read_to_string(format!("{v2}/cgroup.stat")).unwrap_or_default()
            ));
        }
    }
    for line in missing {
        let target = mount_target(line);
        // 4. What was written into the bare mount point meanwhile would hide below the mount.
        if let Some(before) = p.underlying.get(&target) {
            for n in names_in(&target) {
                if !before.contains(&n) {
                    let path = Path::new(&target).join(&n);
                    eprintln!(
                        "cgroup-v2 switch: removing {} (written into the unmounted mount point)",
                        path.display()
                    );
                    let r = if path.is_dir() {
                        fs::remove_dir_all(&path)
                    } else {
                        fs::remove_file(&path)
                    };
                    match r {
                        Ok(()) => cleaned.push(format!(
                            "{} was written into the unmounted v1 mount point (removed)",
                            path.display()
                        )),
                        Err(e) => errors.push(format!("cannot remove {}: {e}", path.display())),
                    }
                }
            }
        }
        // 5. Mounted again as it was (EBUSY while the kernel still releases the controller).
        let mut last = String::new();
        let mounted = until(SETTLE, || match mount(line) {
            Ok(()) => true,
            Err(e) => {
                last = e;
                false
            }
        });
        if mounted {
            eprintln!("cgroup-v2 switch: mounted {line}");
        } else {
            errors.push(format!("cannot mount {line:?} again: {last}"));
        }
    }
    // 6. The fresh hierarchy's root takes the values the old one had.
    for (target, values) in &p.root_values {
        if !mounts_now().iter().any(|l| mount_target(l) == *target) {
            continue;
        }
        for (file, old) in values {
            let path = format!("{target}/{file}");
            if fs::read_to_string(&path).ok().as_deref() != Some(old) {
                if let Err(e) = write(&path, old.trim_end()) {
                    errors.push(e);
                }
            }
        }
        for (file, old) in values {
            let path = format!("{target}/{file}");
            let now = fs::read_to_string(&path).unwrap_or_default();
            if now != *old {
                errors.push(format!("{path} is {now:?}, was {old:?}"));
            }
        }
    }
    // 7. Check: each line back exactly, each freed controller in a v1 hierarchy again.
    let now = mounts_now();
    for line in &p.unmounted {
        let n = now.iter().filter(|l| *l == line).count();
        if n != 1 {
            errors.push(format!("{MOUNTS} has {n} lines {line:?}, expected 1"));
        }
    }
    let cgroups = proc_cgroups();
    for line in &p.unmounted {
        let opts = line.split_whitespace().nth(3).unwrap_or("");
        for c in opts.split(',') {
            if let Some((h, n)) = cgroups.get(c) {
                if *h == 0 || *n != 1 {
                    errors.push(format!(
                        "{PROC_CGROUPS}: {c} in hierarchy {h} with {n} cgroups, expected a v1 hierarchy with 1"
                    ));
                }
            }
        }
    }
    if !words(&control).iter().eq(p.subtree_control.iter()) {
        errors.push(format!(
            "{control} is {:?}, was {:?}",
            words(&control),
            p.subtree_control
        ));
    }
    if errors.is_empty() {
        if let Err(e) = fs::remove_file(STATE_FILE) {
            if e.kind() != std::io::ErrorKind::NotFound {
                errors.push(format!("cannot remove {STATE_FILE}: {e}"));
            }
        }
        // Only when the tests left nothing in it either.
        let _ = fs::remove_dir(STATE_DIR);
    }
    Restored { errors, cleaned }
}

/// The outcome of a restore.
struct Restored {
    /// What is not as found (the state file is kept for the next run).
    errors: Vec<String>,
    /// What the code under test left and the restore removed: the machine is as found,
    /// but a test that leaves these must fail.
    cleaned: Vec<String>,
}

impl Restored {
    fn into_result(self) -> Result<(), Vec<String>> {
        if self.errors.is_empty() && self.cleaned.is_empty() {
            return Ok(());
        }
        let mut all = self.errors;
        all.extend(
            self.cleaned
                .into_iter()
                .map(|c| format!("machine restored, but {c}")),
        );
        Err(all)
    }
}

/// Whether the unified hierarchy holds no cgroup of `controller` but the root's, dying
/// ones included (`cgroup.stat`, Linux 6.10+; else /proc/cgroups' count).
fn v2_holds_only_root(v2: &str, controller: &str) -> bool {
    let stat = fs::read_to_string(format!("{v2}/cgroup.stat")).unwrap_or_default();
    let get = |key: &str| {
        stat.lines().find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == key).then(|| v.trim().parse::<u64>().ok()).flatten()
        })
    };
    match (
        get(&format!("nr_subsys_{controller}")),
        get(&format!("nr_dying_subsys_{controller}")),
    ) {
        (Some(live), Some(dying)) => live <= 1 && dying == 0,
        _ => proc_cgroups().get(controller).is_none_or(|&(_, n)| n == 1),
    }
}

/// Move every task of `dir` and its descendants to `root`'s cgroup.procs, then remove them.
fn remove_cgroup(dir: &Path, root: &Path) -> Result<(), String> {
    for n in names_in(&dir.display().to_string()) {
        let child = dir.join(n);
        if child.is_dir() {
            remove_cgroup(&child, root)?;
        }
    }
    let procs = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    for pid in procs.split_whitespace() {
        // A task that ended meanwhile is no failure; rmdir says if one stayed.
        let _ = write(&root.join("cgroup.procs").display().to_string(), pid);
    }
    let mut last = None;
    let removed = until(Duration::from_secs(5), || match fs::remove_dir(dir) {
        Ok(()) => true,
        Err(e) => {
            last = Some(e);
            false
        }
    });
    if removed {
        return Ok(());
    }
    Err(format!(
        "cannot remove {}: {}",
        dir.display(),
        last.map(|e| e.to_string()).unwrap_or_default()
    ))
}

/// The root values worth keeping across a remount: writable regular files, minus the
/// task lists (membership is not a value).
fn root_values(target: &str) -> BTreeMap<String, String> {
    use std::os::unix::fs::PermissionsExt as _;
    let mut out = BTreeMap::new();
    for n in names_in(target) {
        if matches!(n.as_str(), "tasks" | "cgroup.procs") {
            continue;
        }
        let path = Path::new(target).join(&n);
        let Ok(meta) = fs::metadata(&path) else {
            continue;
        };
        if meta.is_file() && meta.permissions().mode() & 0o200 != 0 {
            if let Ok(v) = fs::read_to_string(&path) {
                out.insert(n, v);
            }
        }
    }
    out
}

fn load_state() -> Result<Option<Prior>, Refusal> {
    match fs::read_to_string(STATE_FILE) {
        Ok(text) => serde_json::from_str(&text).map(Some).map_err(|e| {
            Refusal::Precondition(format!(
                "{STATE_FILE} is unreadable ({e}) — restore the cgroup mounts by hand, then remove it"
            ))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Refusal::Precondition(format!("{STATE_FILE}: {e}"))),
    }
}

/// Durably: the next run relies on it after a SIGKILL or a power cut.
fn save_state(p: &Prior) -> Result<(), String> {
    let tmp = format!("{STATE_FILE}.tmp");
    let json = serde_json::to_vec_pretty(p).expect("state serialises");
    let r = fs::create_dir_all(STATE_DIR)
        .and_then(|_| fs::File::create(&tmp))
        .and_then(|mut f| f.write_all(&json).and_then(|_| f.sync_all()))
        .and_then(|_| fs::rename(&tmp, STATE_FILE))
        .and_then(|_| fs::File::open(STATE_DIR).and_then(|d| d.sync_all()));
    r.map_err(|e| format!("cannot write {STATE_FILE}: {e}"))
}

/// controller → (hierarchy id, number of cgroups), from /proc/cgroups.
/// A process in another mount namespace whose mount table has a v1 hierarchy of
/// `controller` (`pid comm`), if any.
fn other_namespace_holding(controller: &str) -> Option<String> {
    let ours = fs::read_link("/proc/self/ns/mnt").ok()?;
    let mut seen = std::collections::BTreeSet::new();
    for entry in fs::read_dir("/proc").ok()?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(ns) = fs::read_link(format!("/proc/{name}/ns/mnt")) else {
            continue;
        };
        if ns == ours || !seen.insert(ns) {
            continue;
        }
        let table = fs::read_to_string(format!("/proc/{name}/mountinfo")).unwrap_or_default();
        let holds = table.lines().any(|l| {
            let Some((_, after)) = l.split_once(" - ") else {
                return false;
            };
            let f: Vec<&str> = after.split_whitespace().collect();
            f.first() == Some(&"cgroup")
                && f.get(2)
                    .is_some_and(|o| o.split(',').any(|o| o == controller))
        });
        if holds {
            let comm = fs::read_to_string(format!("/proc/{name}/comm")).unwrap_or_default();
            return Some(format!("pid {name} {}", comm.trim()));
        }
    }
    None
}

/// [`proc_cgroups`] once the cgroups removed just before have gone: /proc/cgroups still
/// counts a removed cgroup until the kernel frees it, shortly after the rmdir (a test that
/// reverted its partition a moment ago, in this process). Waits, at most 5 s, only while a
/// v1 hierarchy of `free` counts more cgroups than its root but has no child directory.
fn settled_proc_cgroups(mounts: &str, free: &[&str]) -> BTreeMap<String, (u32, u64)> {
    let v1_mounts: Vec<(String, String)> = mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 4 && f[2] == "cgroup").then(|| (f[3].to_string(), mount_target(l)))
        })
        .collect();
    let dying = |cgroups: &BTreeMap<String, (u32, u64)>| {
        free.iter().any(|c| {
            let Some(&(_, n)) = cgroups.get(*c) else {
                return false;
            };
            let Some((_, target)) = v1_mounts
                .iter()
                .find(|(options, _)| options.split(',').any(|o| o == *c))
            else {
                return false;
            };
            n > 1
                && !names_in(target)
                    .iter()
                    .any(|name| Path::new(target).join(name).is_dir())
        })
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let cgroups = proc_cgroups();
        if !dying(&cgroups) || Instant::now() > deadline {
            return cgroups;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn proc_cgroups() -> BTreeMap<String, (u32, u64)> {
    fs::read_to_string(PROC_CGROUPS)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some((
                f.first()?.to_string(),
                (f.get(1)?.parse().ok()?, f.get(2)?.parse().ok()?),
            ))
        })
        .collect()
}

fn mounts_now() -> Vec<String> {
    fs::read_to_string(MOUNTS)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// The mount point of a /proc/mounts line, octal escapes (`\040`) decoded by tame-host's parser.
fn mount_target(line: &str) -> String {
    tame_host::mounts::parse_mounts(line)
        .ok()
        .and_then(|m| m.into_iter().next())
        .map(|m| m.target)
        .unwrap_or_default()
}

fn words(path: &str) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

fn names_in(dir: &str) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn write(path: &str, value: &str) -> Result<(), String> {
    fs::write(path, value).map_err(|e| format!("writing {value:?} to {path}: {e}"))
}

fn cstr(s: &str) -> CString {
    CString::new(s).expect("no NUL in mount arguments")
}

/// A failed unmount: the target and the kernel's error.
struct UmountError {
    target: String,
    error: std::io::Error,
}

impl fmt::Display for UmountError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "umount {}: {}", self.target, self.error)
    }
}

fn umount(target: &str) -> Result<(), UmountError> {
    let t = cstr(target);
    // SAFETY: a valid NUL-terminated path; no flags.
    if unsafe { libc::umount2(t.as_ptr(), 0) } != 0 {
        return Err(UmountError {
            target: target.to_string(),
            error: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// Why `target` is busy when no process this test can inspect holds it: the processes
/// whose open files it may not read (e.g. a VM's init), named. `None` when the error is
/// not EBUSY, or when a visible process holds the hierarchy (a fault to report: a
/// leftover of ours, say), or when every process could be inspected.
fn held_out_of_reach(target: &str, e: &UmountError) -> Option<String> {
    if e.error.raw_os_error() != Some(libc::EBUSY) {
        return None;
    }
    let mut hidden = Vec::new();
    for entry in fs::read_dir("/proc").ok()?.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let dir = entry.path();
        let comm = fs::read_to_string(dir.join("comm")).unwrap_or_default();
        // Its open files, working directory and root; a link root may not read counts as hidden.
        let mut links = vec![dir.join("cwd"), dir.join("root")];
        let mut denied = false;
        match fs::read_dir(dir.join("fd")) {
            Ok(fds) => links.extend(fds.flatten().map(|fd| fd.path())),
            Err(err) => denied |= err.kind() == std::io::ErrorKind::PermissionDenied,
        }
        for link in links {
            match fs::read_link(&link) {
                Ok(p) if p.starts_with(target) => {
                    eprintln!(
                        "cgroup-v2 switch: PID {name} ({}) holds {target}",
                        comm.trim()
                    );
                    return None;
                }
                Ok(_) => {}
                Err(err) => denied |= err.kind() == std::io::ErrorKind::PermissionDenied,
            }
        }
        if denied {
            hidden.push(format!("PID {name} ({})", comm.trim()));
        }
    }
    (!hidden.is_empty()).then(|| {
        format!(
            "{e}: no process this test can inspect holds it, and root may not read the open files of {} — a process outside the test's reach keeps the v1 hierarchy mounted, so its controllers can never move to v2 here",
            hidden.join(", ")
        )
    })
}

/// Mount from a /proc/mounts line: flag words become mount flags, the rest (the
/// controllers, `name=…`) the data string.
fn mount(line: &str) -> Result<(), String> {
    let Some(m) = tame_host::mounts::parse_mounts(line)
        .ok()
        .and_then(|m| m.into_iter().next())
    else {
        return Err(format!("not a mount line: {line:?}"));
    };
    let (source, target, fstype) = (m.source, m.target, m.fstype.as_str());
    let mut flags: libc::c_ulong = 0;
    let mut data = Vec::new();
    for o in &m.options {
        let o = o.as_str();
        match o {
            "rw" => {}
            "ro" => flags |= libc::MS_RDONLY,
            "nosuid" => flags |= libc::MS_NOSUID,
            "nodev" => flags |= libc::MS_NODEV,
            "noexec" => flags |= libc::MS_NOEXEC,
            "sync" => flags |= libc::MS_SYNCHRONOUS,
            "dirsync" => flags |= libc::MS_DIRSYNC,
            "noatime" => flags |= libc::MS_NOATIME,
            "nodiratime" => flags |= libc::MS_NODIRATIME,
            "relatime" => flags |= libc::MS_RELATIME,
            "strictatime" => flags |= libc::MS_STRICTATIME,
            "lazytime" => flags |= libc::MS_LAZYTIME,
            other => data.push(other),
        }
    }
    let (s, t, ty, d) = (
        cstr(&source),
        cstr(&target),
        cstr(fstype),
        cstr(&data.join(",")),
    );
    // SAFETY: valid NUL-terminated strings that outlive the call; data is a C string
    // as cgroup's mount expects.
    let rc = unsafe {
        libc::mount(
            s.as_ptr(),
            t.as_ptr(),
            ty.as_ptr(),
            flags,
            d.as_ptr().cast(),
        )
    };
    if rc != 0 {
        return Err(format!(
            "mount {line:?}: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// A path below [`STATE_DIR`] for a test's own journal or state.
pub fn state_path(name: &str) -> PathBuf {
    Path::new(STATE_DIR).join(name)
}
