//! A host backend for fixture trees that behaves like the kernel where tame
//! relies on the kernel's behaviour, so production code runs unchanged on a
//! fixture:
//!
//! - writing a task id to a cgroup task list (`tasks`, `cgroup.procs`,
//!   `cgroup.threads`) moves it out of the list of the same name that had it in
//!   the same hierarchy (ESRCH when none had it); joining a cpuset gives a known
//!   thread the cpuset's CPUs as its affinity, as cgroup v1 does;
//! - a directory made inside a cgroup gets the parent's task lists, empty;
//!   removing it removes its files, and is refused (EBUSY) while a task list
//!   still holds a task or a child group exists;
//! - `cgroup.subtree_control` takes `+ctrl` / `-ctrl` and prints the enabled
//!   controllers in the kernel's order;
//! - a file that shows a choice (`[local] global x86-tsc`, `always [madvise] never`)
//!   takes one of the names and moves the brackets; anything else is EINVAL;
//! - thread placement (affinity, scheduling attributes) is kept in memory per
//!   thread id; a thread never added is ESRCH;
//! - mounting is refused.
//!
//! Everything else is a plain file operation below the fixture's base.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use tame_host::backend::{read_file, HostBackend, Ownership, RealBackend};
use tame_host::{CpuList, Root};
use tame_rt::sched::ThreadSched;

/// The files through which tasks join a cgroup.
pub const TASK_LISTS: &[&str] = &["tasks", "cgroup.procs", "cgroup.threads"];
const SUBTREE_CONTROL: &str = "cgroup.subtree_control";
/// The order in which cgroup v2 lists controllers.
const CONTROLLER_ORDER: &[&str] = &[
    "cpuset", "cpu", "io", "memory", "hugetlb", "pids", "rdma", "misc",
];

/// A thread's placement as the fixture kernel keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FixtureThread {
    pub affinity: CpuList,
    pub sched: ThreadSched,
}

/// See the module documentation.
#[derive(Debug, Default)]
pub struct FixtureBackend {
    threads: Mutex<BTreeMap<u32, FixtureThread>>,
}

/// A root on `base` with a fresh fixture backend.
pub fn fixture_root(base: impl Into<PathBuf>) -> Root {
    Arc::new(FixtureBackend::new()).root(base)
}

fn errno(e: nix::errno::Errno) -> io::Error {
    io::Error::from_raw_os_error(e as i32)
}

impl FixtureBackend {
    pub fn new() -> Self {
        Self::default()
    }

    /// A root on `base` using this backend (keep the `Arc` to look at threads).
    pub fn root(self: &Arc<Self>, base: impl Into<PathBuf>) -> Root {
        Root::with_backend(base, self.clone())
    }

    fn threads(&self) -> MutexGuard<'_, BTreeMap<u32, FixtureThread>> {
        self.threads.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A running thread with this affinity, SCHED_OTHER.
    pub fn add_thread(&self, tid: u32, affinity: CpuList) {
        self.set_thread(
            tid,
            FixtureThread {
                affinity,
                sched: ThreadSched::default(),
            },
        );
    }

    pub fn set_thread(&self, tid: u32, thread: FixtureThread) {
        self.threads().insert(tid, thread);
    }

    /// The thread's placement now; `None` for a thread never added (or removed).
    pub fn thread(&self, tid: u32) -> Option<FixtureThread> {
        self.threads().get(&tid).cloned()
    }

    fn with_thread<T>(
        &self,
        tid: u32,
        f: impl FnOnce(&mut FixtureThread) -> io::Result<T>,
    ) -> io::Result<T> {
        match self.threads().get_mut(&tid) {
            Some(t) => f(t),
            None => Err(errno(nix::errno::Errno::ESRCH)),
        }
    }

    fn move_task(&self, list: &Path, name: &str, data: &[u8]) -> io::Result<()> {
        let tid: u32 = std::str::from_utf8(data)
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .ok_or_else(|| errno(nix::errno::Errno::EINVAL))?;
        let dir = list.parent().unwrap_or(Path::new("/"));
        let mut top = dir;
        while let Some(parent) = top.parent() {
            if !parent.join(name).is_file() {
                break;
            }
            top = parent;
        }
        let mut lists = Vec::new();
        find_lists(top, name, &mut lists);
        let mut found = false;
        for other in lists.iter().filter(|l| l.as_path() != list) {
            let mut ids = read_ids(other)?;
            if ids.remove(&tid) {
                found = true;
                write_ids(other, &ids)?;
            }
        }
        let mut ids = read_ids(list)?;
        if !found && !ids.contains(&tid) {
            return Err(errno(nix::errno::Errno::ESRCH));
        }
        ids.insert(tid);
        write_ids(list, &ids)?;
        let cpus = std::fs::read_to_string(dir.join("cpuset.cpus"))
            .ok()
            .and_then(|t| CpuList::parse(&t).ok())
            .filter(|c| !c.is_empty());
        if let (Some(cpus), Some(t)) = (cpus, self.threads().get_mut(&tid)) {
            t.affinity = cpus;
        }
        Ok(())
    }
}

fn find_lists(dir: &Path, name: &str, out: &mut Vec<PathBuf>) {
    let list = dir.join(name);
    if list.is_file() {
        out.push(list);
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            find_lists(&entry.path(), name, out);
        }
    }
}

fn read_ids(list: &Path) -> io::Result<BTreeSet<u32>> {
    Ok(std::fs::read_to_string(list)?
        .split_whitespace()
        .filter_map(|s| s.parse().ok())
        .collect())
}

/// Numeric order, one per line: how the kernel shows a task list.
fn write_ids(list: &Path, ids: &BTreeSet<u32>) -> io::Result<()> {
    let text: String = ids.iter().map(|id| format!("{id}\n")).collect();
    std::fs::write(list, text)
}

fn subtree_control(path: &Path, data: &[u8]) -> io::Result<()> {
    let invalid = || errno(nix::errno::Errno::EINVAL);
    let mut enabled: Vec<String> = std::fs::read_to_string(path)?
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let available: Option<Vec<String>> = path
        .parent()
        .and_then(|d| std::fs::read_to_string(d.join("cgroup.controllers")).ok())
        .map(|t| t.split_whitespace().map(str::to_string).collect());
    let text = std::str::from_utf8(data).map_err(|_| invalid())?;
    for word in text.split_whitespace() {
        let (on, ctrl) = match (word.strip_prefix('+'), word.strip_prefix('-')) {
            (Some(c), _) => (true, c),
            (_, Some(c)) => (false, c),
            _ => return Err(invalid()),
        };
        if on
            && available
                .as_ref()
                .is_some_and(|a| !a.iter().any(|c| c == ctrl))
        {
            return Err(errno(nix::errno::Errno::ENOENT));
        }
        enabled.retain(|c| c != ctrl);
        if on {
            enabled.push(ctrl.to_string());
        }
    }
    let rank = |c: &String| {
        CONTROLLER_ORDER
            .iter()
            .position(|k| k == c)
            .unwrap_or(CONTROLLER_ORDER.len())
    };
    enabled.sort_by_key(rank);
    std::fs::write(path, enabled.join(" ") + "\n")
}

/// A file showing `a [b] c`: writing `a` gives `[a] b c`. `None`: not such a file.
fn select_choice(current: &str, data: &[u8]) -> Option<io::Result<String>> {
    let words: Vec<&str> = current.split_whitespace().collect();
    let selected = words
        .iter()
        .filter(|w| w.len() > 2 && w.starts_with('[') && w.ends_with(']'))
        .count();
    if words.len() < 2 || selected != 1 {
        return None;
    }
    let want = std::str::from_utf8(data).unwrap_or("").trim();
    let names: Vec<&str> = words.iter().map(|w| w.trim_matches(['[', ']'])).collect();
    if !names.contains(&want) {
        return Some(Err(errno(nix::errno::Errno::EINVAL)));
    }
    let shown: Vec<String> = names
        .iter()
        .map(|n| {
            if *n == want {
                format!("[{n}]")
            } else {
                n.to_string()
            }
        })
        .collect();
    let newline = if current.ends_with('\n') { "\n" } else { "" };
    Some(Ok(shown.join(" ") + newline))
}

fn is_cgroup(dir: &Path) -> bool {
    TASK_LISTS.iter().any(|l| dir.join(l).is_file())
}

impl HostBackend for FixtureBackend {
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        read_file(path)
    }

    fn write(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_file() {
            if TASK_LISTS.contains(&name) {
                return self.move_task(path, name, data);
            }
            if name == SUBTREE_CONTROL {
                return subtree_control(path, data);
            }
            if let Ok(current) = std::fs::read_to_string(path) {
                if let Some(text) = select_choice(&current, data) {
                    return std::fs::write(path, text?);
                }
            }
        }
        std::fs::write(path, data)
    }

    // Reading a fixture tree is reading files: the real backend does that.
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        RealBackend.list_dir(path)
    }

    fn exists(&self, path: &Path) -> bool {
        RealBackend.exists(path)
    }

    fn is_dir(&self, path: &Path) -> bool {
        RealBackend.is_dir(path)
    }

    fn create_dir(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir(path)?;
        if let Some(parent) = path.parent() {
            for list in TASK_LISTS.iter().filter(|l| parent.join(l).is_file()) {
                std::fs::write(path.join(list), "")?;
            }
        }
        Ok(())
    }

    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        if is_cgroup(path) {
            let busy = || errno(nix::errno::Errno::EBUSY);
            for list in TASK_LISTS
                .iter()
                .map(|l| path.join(l))
                .filter(|l| l.is_file())
            {
                if !read_ids(&list)?.is_empty() {
                    return Err(busy());
                }
            }
            let entries: Vec<_> = std::fs::read_dir(path)?.collect::<Result<_, _>>()?;
            if entries.iter().any(|e| e.path().is_dir()) {
                return Err(busy());
            }
            for e in entries {
                std::fs::remove_file(e.path())?;
            }
        }
        std::fs::remove_dir(path)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn ownership(&self, path: &Path) -> io::Result<Ownership> {
        Ownership::of(path)
    }

    fn set_ownership(&self, path: &Path, ownership: Ownership) -> io::Result<()> {
        ownership.apply(path)
    }

    fn mount(&self, fstype: &str, target: &Path) -> io::Result<()> {
        Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "a fixture tree cannot mount {fstype} at {}",
                target.display()
            ),
        ))
    }

    fn unmount(&self, _target: &Path) -> io::Result<()> {
        Err(errno(nix::errno::Errno::EINVAL))
    }

    fn affinity(&self, tid: u32) -> io::Result<CpuList> {
        self.with_thread(tid, |t| Ok(t.affinity.clone()))
    }

    fn set_affinity(&self, tid: u32, cpus: &CpuList) -> io::Result<()> {
        if cpus.is_empty() {
            return Err(errno(nix::errno::Errno::EINVAL));
        }
        self.with_thread(tid, |t| {
            t.affinity = cpus.clone();
            Ok(())
        })
    }

    fn thread_sched(&self, tid: u32) -> io::Result<ThreadSched> {
        self.with_thread(tid, |t| Ok(t.sched))
    }

    fn set_thread_sched(&self, tid: u32, sched: &ThreadSched) -> io::Result<()> {
        self.with_thread(tid, |t| {
            t.sched = *sched;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> (tempfile::TempDir, Arc<FixtureBackend>, Root) {
        let dir = tempfile::tempdir().unwrap();
        let backend = Arc::new(FixtureBackend::new());
        let root = backend.root(dir.path());
        let put = |p: &str, t: &str| {
            let f = root.path(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, t).unwrap();
        };
        put("/sys/fs/cgroup/cpuset/tasks", "1\n5\n9\n");
        put("/sys/fs/cgroup/cpuset/cpuset.cpus", "0-3\n");
        put("/sys/fs/cgroup/cpuset/a/tasks", "7\n");
        put("/sys/fs/cgroup/cpuset/a/cpuset.cpus", "2\n");
        put(
            "/sys/fs/cgroup/unified/cgroup.controllers",
            "cpuset cpu io memory\n",
        );
        put(
            "/sys/fs/cgroup/unified/cgroup.subtree_control",
            "cpu memory\n",
        );
        put(
            "/sys/kernel/tracing/trace_clock",
            "[local] global x86-tsc\n",
        );
        (dir, backend, root)
    }

    fn read(root: &Root, p: &str) -> String {
        root.read(p).unwrap()
    }

    fn write(root: &Root, p: &str, v: &str) -> io::Result<()> {
        Arc::new(FixtureBackend::new()).write(&root.path(p), v.as_bytes())
    }

    #[test]
    fn a_task_written_to_a_list_moves_there_from_the_list_that_had_it() {
        let (_d, backend, root) = tree();
        backend.add_thread(5, CpuList::parse("0-3").unwrap());
        let b = &*backend;
        b.write(&root.path("/sys/fs/cgroup/cpuset/a/tasks"), b"5")
            .unwrap();
        assert_eq!(read(&root, "/sys/fs/cgroup/cpuset/tasks"), "1\n9\n");
        assert_eq!(read(&root, "/sys/fs/cgroup/cpuset/a/tasks"), "5\n7\n");
        assert_eq!(backend.thread(5).unwrap().affinity.to_string(), "2");
        let err = b
            .write(&root.path("/sys/fs/cgroup/cpuset/a/tasks"), b"4242")
            .unwrap_err();
        assert_eq!(err.raw_os_error(), Some(nix::errno::Errno::ESRCH as i32));
    }

    #[test]
    fn cgroup_directories_come_with_task_lists_and_refuse_removal_while_busy() {
        let (_d, backend, root) = tree();
        let b = &*backend;
        let dir = root.path("/sys/fs/cgroup/cpuset/a/b");
        b.create_dir(&dir).unwrap();
        assert_eq!(read(&root, "/sys/fs/cgroup/cpuset/a/b/tasks"), "");
        b.write(&dir.join("tasks"), b"7").unwrap();
        b.write(&dir.join("cpuset.cpus"), b"2").unwrap();
        let busy = b.remove_dir(&dir).unwrap_err();
        assert_eq!(busy.raw_os_error(), Some(nix::errno::Errno::EBUSY as i32));
        b.write(&root.path("/sys/fs/cgroup/cpuset/tasks"), b"7")
            .unwrap();
        b.remove_dir(&dir).unwrap();
        assert!(!dir.exists());
        // Not a cgroup: a plain directory.
        let plain = root.path("/sys/kernel/tracing/instances");
        b.create_dir(&plain).unwrap();
        assert_eq!(std::fs::read_dir(&plain).unwrap().count(), 0);
    }

    #[test]
    fn subtree_control_and_choice_files_take_what_the_kernel_takes() {
        let (_d, _b, root) = tree();
        let sc = "/sys/fs/cgroup/unified/cgroup.subtree_control";
        write(&root, sc, "+cpuset").unwrap();
        assert_eq!(read(&root, sc), "cpuset cpu memory\n");
        write(&root, sc, "-cpuset -memory").unwrap();
        assert_eq!(read(&root, sc), "cpu\n");
        assert!(
            write(&root, sc, "+rdma").is_err(),
            "not in cgroup.controllers"
        );
        assert!(write(&root, sc, "cpu").is_err());
        let clock = "/sys/kernel/tracing/trace_clock";
        write(&root, clock, "x86-tsc").unwrap();
        assert_eq!(read(&root, clock), "local global [x86-tsc]\n");
        assert!(write(&root, clock, "[local] global x86-tsc\n").is_err());
        write(&root, clock, "local").unwrap();
        assert_eq!(read(&root, clock), "[local] global x86-tsc\n");
    }

    #[test]
    fn threads_live_in_memory() {
        let b = FixtureBackend::new();
        assert!(b.affinity(3).is_err());
        b.add_thread(3, CpuList::parse("0-1").unwrap());
        b.set_affinity(3, &CpuList::parse("1").unwrap()).unwrap();
        assert!(b.set_affinity(3, &CpuList::new()).is_err());
        let mut s = b.thread_sched(3).unwrap();
        s.policy = 1;
        s.priority = 5;
        b.set_thread_sched(3, &s).unwrap();
        assert_eq!(b.thread(3).unwrap().sched.priority, 5);
        assert_eq!(b.affinity(3).unwrap().to_string(), "1");
        assert!(b
            .mount("tracefs", Path::new("/x"))
            .unwrap_err()
            .to_string()
            .contains("cannot mount"));
    }
}
