//! Tracepoints that wake the guard early: `sched/sched_process_fork` and `task/task_newtask`
//! (filtered to those made on a watched CPU: a task confined to the system CPUs only makes
//! children confined there too, and a fork storm there must cost the guard nothing) and
//! `sched/sched_migrate_task` (filtered to migrations onto a watched CPU) in a private
//! tracefs instance. A line only names a task to look at; the truth is read back from the
//! task itself. A reader thread polls the instance's pipe and hands the pids on.

use std::io::Read as _;
use std::os::fd::AsRawFd as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tame_host::{CpuList, Root};
use tame_trace::tracefs::{CaptureSpec, TraceClock, TraceSession, EVENTS};

/// The events enabled (`group/event`).
pub const WAKE_EVENTS: &[&str] = &[
    "sched/sched_process_fork",
    "task/task_newtask",
    "sched/sched_migrate_task",
];

/// How long the reader waits in poll() before it looks at its stop flag.
const POLL_MS: i32 = 200;

/// The pid a trace line names as the task to look at: the child of a fork, the new task,
/// the migrated task.
pub fn pid_of(line: &str) -> Option<u32> {
    let field = |key: &str| -> Option<u32> {
        let at = line.rfind(key)? + key.len();
        let rest = &line[at..];
        rest.split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    };
    if line.contains("sched_process_fork:") {
        field(" child_pid=")
    } else if line.contains("task_newtask:") || line.contains("sched_migrate_task:") {
        // `comm=` comes first and may hold anything: take the first ` pid=` after it.
        let at = line.find(": ")?;
        let rest = &line[at..];
        let p = rest.find(" pid=")? + " pid=".len();
        rest[p..]
            .split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    } else {
        None
    }
}

/// The tracefs filters keeping events whose `field` names one of `cpus` (`CPU`, the field
/// every event has, for where it was made; `dest_cpu` for a migration's target): the
/// cpumask form of kernels since 6.6 first, then the same as a list of comparisons.
pub fn cpu_filters(field: &str, cpus: &CpuList) -> [String; 2] {
    [
        format!("{field} & CPUS{{{cpus}}}"),
        cpus.iter()
            .map(|c| format!("{field} == {c}"))
            .collect::<Vec<_>>()
            .join(" || "),
    ]
}

/// A running waker: the session (restored when stopped) and its reader thread.
pub struct Waker {
    session: Option<TraceSession>,
    stop: Arc<AtomicBool>,
    reader: Option<JoinHandle<()>>,
}

impl Waker {
    /// Start tracing on every online CPU (a fork or a migration onto a watched CPU is
    /// recorded where it happens) and the reader that sends each named pid to `tx`.
    pub fn start(root: &Root, watched: &CpuList, tx: Sender<u32>) -> Result<Waker, String> {
        let online = root
            .cpus_online()
            .map_err(|e| format!("cannot read the online CPUs: {e}"))?;
        let spec = CaptureSpec {
            cpus: online.iter().collect(),
            clock: TraceClock::Mono,
            use_instance: true,
            extra_events: WAKE_EVENTS,
            without_events: EVENTS,
            purpose: "guard",
            buffer_kb: Some(64),
        };
        let mut session = TraceSession::start(root, &spec).map_err(|e| e.to_string())?;
        let (enabled, missing) = session.events();
        if !missing.is_empty() {
            return Err(format!(
                "this kernel lacks the tracepoints {}",
                missing.join(", ")
            ));
        }
        debug_assert_eq!(enabled.len(), WAKE_EVENTS.len());
        for (event, field) in [
            ("sched/sched_process_fork", "CPU"),
            ("task/task_newtask", "CPU"),
            ("sched/sched_migrate_task", "dest_cpu"),
        ] {
            let [mask, list] = cpu_filters(field, watched);
            session
                .set_filter(event, &mask)
                .or_else(|_| session.set_filter(event, &list))
                .map_err(|e| e.to_string())?;
        }
        let pipe = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(session.trace_pipe())
            .map_err(|e| format!("cannot open {}: {e}", session.trace_pipe().display()))?;
        session.begin().map_err(|e| e.to_string())?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let reader = std::thread::Builder::new()
            .name("tame-guard-trace".into())
            .spawn(move || read_pipe(pipe, &flag, &tx))
            .map_err(|e| format!("cannot start the trace reader: {e}"))?;
        Ok(Waker {
            session: Some(session),
            stop,
            reader: Some(reader),
        })
    }

    /// The tracefs instance in use (host path).
    pub fn dir(&self) -> Option<&str> {
        self.session.as_ref().map(TraceSession::dir)
    }

    /// Stop the reader (its pipe closed first, or the instance could not be removed), then
    /// undo every tracing change and remove the instance. What could not be undone.
    pub fn stop(mut self) -> Vec<String> {
        self.stop_inner()
    }

    fn stop_inner(&mut self) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        match self.session.take() {
            Some(s) => s.restore().not_restored,
            None => Vec::new(),
        }
    }
}

impl Drop for Waker {
    fn drop(&mut self) {
        let _ = self.stop_inner();
    }
}

fn read_pipe(mut pipe: std::fs::File, stop: &AtomicBool, tx: &Sender<u32>) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut partial = String::new();
    while !stop.load(Ordering::Relaxed) {
        let mut fds = libc::pollfd {
            fd: pipe.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the length given; the descriptor stays open (owned
        // by `pipe`) for the call.
        let n = unsafe { libc::poll(&mut fds, 1, POLL_MS) };
        if n <= 0 {
            continue;
        }
        match pipe.read(&mut buf) {
            Ok(0) => std::thread::sleep(Duration::from_millis(POLL_MS as u64)),
            Ok(n) => {
                partial.push_str(&String::from_utf8_lossy(&buf[..n]));
                while let Some(end) = partial.find('\n') {
                    let line: String = partial.drain(..=end).collect();
                    if let Some(pid) = pid_of(&line) {
                        if tx.send(pid).is_err() {
                            return;
                        }
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => std::thread::sleep(Duration::from_millis(POLL_MS as u64)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_task_each_event_names() {
        assert_eq!(
            pid_of("            bash-812     [000] ..... 1234.567890: sched_process_fork: comm=bash pid=812 child_comm=bash child_pid=4711"),
            Some(4711)
        );
        assert_eq!(
            pid_of("            bash-812     [000] ..... 1234.567890: task_newtask: pid=4711 comm=bash clone_flags=1200000 oom_score_adj=0"),
            Some(4711)
        );
        assert_eq!(
            pid_of("  <idle>-0 [001] d..2. 1.000000: sched_migrate_task: comm=my pid=3 prog pid=99 prio=120 orig_cpu=0 dest_cpu=1"),
            Some(3),
            "the first pid= after the event name (a comm with ` pid=` in it is rare and harmless: it only wakes a look)"
        );
        assert_eq!(pid_of("sched_switch: prev_comm=a prev_pid=1"), None);
    }

    #[test]
    fn filters_name_every_watched_cpu_as_a_mask_and_as_a_list() {
        assert_eq!(
            cpu_filters("CPU", &CpuList::parse("1,3-4").unwrap()),
            [
                "CPU & CPUS{1,3-4}".to_string(),
                "CPU == 1 || CPU == 3 || CPU == 4".to_string()
            ]
        );
        assert_eq!(
            cpu_filters("dest_cpu", &CpuList::parse("1,3").unwrap())[1],
            "dest_cpu == 1 || dest_cpu == 3"
        );
    }
}
