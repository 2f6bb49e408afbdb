//! Processes and threads: for each thread its affinity, policy and priority,
//! whether it is a kernel thread and whether its affinity may be changed;
//! and irqbalance — whether it runs and which CPUs it leaves alone.

use serde::{Deserialize, Serialize};

use crate::error::ParseError;
use crate::reader::Reader;
use crate::CpuList;

mod inspect;
mod view;

pub use inspect::{counters, inspect, InspectError, ProcessInfo, ThreadCounters};
pub use view::{parse_schedstat, ProcStatus, ProcessView, Schedstat, ThreadView};

/// PF_KTHREAD in /proc/PID/stat `flags`.
pub const PF_KTHREAD: u64 = 0x0020_0000;
/// PF_NO_SETAFFINITY: the kernel refuses affinity changes (per-CPU kthreads).
pub const PF_NO_SETAFFINITY: u64 = 0x0400_0000;

/// The irqbalance configuration files of Debian-like and Red Hat-like systems.
pub const IRQBALANCE_CONFIGS: &[&str] = &["/etc/default/irqbalance", "/etc/sysconfig/irqbalance"];

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SchedPolicy {
    Other,
    Fifo,
    RoundRobin,
    Batch,
    Idle,
    Deadline,
    Unknown,
}

impl SchedPolicy {
    pub fn from_number(n: u32) -> Self {
        match n {
            0 => Self::Other,
            1 => Self::Fifo,
            2 => Self::RoundRobin,
            3 => Self::Batch,
            5 => Self::Idle,
            6 => Self::Deadline,
            _ => Self::Unknown,
        }
    }

    /// FIFO, RR and DEADLINE preempt ordinary threads.
    pub fn is_realtime(self) -> bool {
        matches!(self, Self::Fifo | Self::RoundRobin | Self::Deadline)
    }
}

/// One thread.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    /// Thread-group id (the process).
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    /// R, S, D, …
    pub state: char,
    pub kthread: bool,
    /// The kernel refuses to change this thread's affinity (PF_NO_SETAFFINITY).
    pub affinity_locked: bool,
    pub policy: SchedPolicy,
    /// 1–99 for FIFO/RR, 0 otherwise.
    pub rt_priority: u32,
    pub nice: i32,
    /// Cpus_allowed_list.
    pub affinity: CpuList,
    /// The CPU it last ran on.
    pub last_cpu: Option<u32>,
}

/// The fields of /proc/PID/task/TID/stat that matter here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskStat {
    pub tid: u32,
    pub comm: String,
    pub state: char,
    pub flags: u64,
    pub nice: i32,
    pub last_cpu: u32,
    pub rt_priority: u32,
    pub policy: u32,
    /// Minor and major page faults so far.
    pub minor_faults: u64,
    pub major_faults: u64,
    /// User and system CPU time, clock ticks.
    pub utime_ticks: u64,
    pub stime_ticks: u64,
    /// Start time in clock ticks after boot: with the pid it names a process across pid reuse.
    pub start_time: u64,
}

/// Parse a stat line; the comm may contain spaces and parentheses, so the
/// fields are counted from the last `)`.
pub fn parse_stat(text: &str) -> Result<TaskStat, ParseError> {
    let err = |m: &str| ParseError::new(1, m.to_string());
    let open = text
        .find('(')
        .ok_or_else(|| err("no '(' before the command name"))?;
    let close = text
        .rfind(')')
        .ok_or_else(|| err("no ')' after the command name"))?;
    if close < open {
        return Err(err("')' before '('"));
    }
    let tid = text[..open]
        .trim()
        .parse()
        .map_err(|_| err("thread id is not a number"))?;
    let comm = text[open + 1..close].to_string();
    // fields[0] is field 3 (state) of proc(5).
    let f: Vec<&str> = text[close + 1..].split_whitespace().collect();
    let get = |field: usize| -> Result<&str, ParseError> {
        f.get(field - 3)
            .copied()
            .ok_or_else(|| err(&format!("only {} fields, need field {field}", f.len() + 2)))
    };
    let num = |field: usize| -> Result<i64, ParseError> {
        get(field)?
            .parse()
            .map_err(|_| err(&format!("field {field} is not a number")))
    };
    Ok(TaskStat {
        tid,
        comm,
        state: get(3)?.chars().next().unwrap_or('?'),
        flags: num(9)? as u64,
        nice: num(19)? as i32,
        last_cpu: num(39)? as u32,
        rt_priority: num(40)? as u32,
        policy: num(41)? as u32,
        minor_faults: num(10)? as u64,
        major_faults: num(12)? as u64,
        utime_ticks: num(14)? as u64,
        stime_ticks: num(15)? as u64,
        start_time: num(22)? as u64,
    })
}

/// `Cpus_allowed_list` of /proc/PID/status.
pub fn status_affinity(text: &str) -> Option<&str> {
    text.lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(str::trim)
}

/// irqbalance and the CPUs it was told to leave alone.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Irqbalance {
    /// PIDs of running irqbalance processes.
    pub pids: Vec<u32>,
    /// Banned CPUs from the process environment, else from the config file.
    pub banned_cpus: Option<CpuList>,
    /// Where `banned_cpus` came from (`/proc/812/environ`, `/etc/default/irqbalance`).
    pub banned_source: Option<String>,
}

impl Irqbalance {
    pub fn running(&self) -> bool {
        !self.pids.is_empty()
    }
}

/// Banned CPUs named by `IRQBALANCE_BANNED_CPULIST` (a list) or
/// `IRQBALANCE_BANNED_CPUS` (a mask) in `KEY=VALUE` pairs (shell file or environ).
pub fn banned_from_vars<'a>(pairs: impl Iterator<Item = &'a str>) -> Option<CpuList> {
    let mut list = None;
    let mut mask = None;
    for p in pairs {
        let p = p.trim();
        if p.starts_with('#') {
            continue;
        }
        let p = p.strip_prefix("export ").unwrap_or(p);
        let Some((k, v)) = p.split_once('=') else {
            continue;
        };
        let v = v.trim().trim_matches(|c| c == '"' || c == '\'');
        match k.trim() {
            "IRQBALANCE_BANNED_CPULIST" => list = CpuList::parse(v).ok(),
            "IRQBALANCE_BANNED_CPUS" if !v.is_empty() => mask = CpuList::parse_mask(v).ok(),
            _ => {}
        }
    }
    list.or(mask)
}

/// All threads of the machine.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Processes {
    pub tasks: Vec<Task>,
    pub irqbalance: Irqbalance,
}

impl Processes {
    /// Threads allowed to run on `cpu`.
    pub fn runnable_on(&self, cpu: u32) -> impl Iterator<Item = &Task> {
        self.tasks.iter().filter(move |t| t.affinity.contains(cpu))
    }

    /// Kernel threads bound to exactly `cpu` (ksoftirqd/N, migration/N, kworker/N:…).
    pub fn kthreads_bound_to(&self, cpu: u32) -> impl Iterator<Item = &Task> {
        self.tasks
            .iter()
            .filter(move |t| t.kthread && t.affinity.len() == 1 && t.affinity.contains(cpu))
    }

    /// Kernel threads bound to exactly one CPU of `cpus`: each counted once, in one pass
    /// (not one pass per CPU: thousands of each on a big machine).
    pub fn kthreads_bound_within<'a>(
        &'a self,
        cpus: &'a CpuList,
    ) -> impl Iterator<Item = &'a Task> {
        self.tasks.iter().filter(move |t| {
            t.kthread
                && t.affinity.len() == 1
                && t.affinity.first().is_some_and(|c| cpus.contains(c))
        })
    }

    pub fn realtime(&self) -> impl Iterator<Item = &Task> {
        self.tasks.iter().filter(|t| t.policy.is_realtime())
    }

    pub fn read(r: &mut Reader) -> Self {
        let mut out = Processes::default();
        let pids: Vec<u32> = r
            .list("/proc")
            .iter()
            .filter_map(|n| n.parse().ok())
            .collect();
        for pid in pids {
            let tids: Vec<u32> = r
                .list(&format!("/proc/{pid}/task"))
                .iter()
                .filter_map(|n| n.parse().ok())
                .collect();
            for tid in tids {
                if let Some(t) = read_task(r, pid, tid) {
                    out.tasks.push(t);
                }
            }
        }
        out.irqbalance = read_irqbalance(r, &out.tasks);
        out
    }
}

/// One thread read as [`Processes::read`] reads each (`None` once it is gone): for a
/// watcher told of one task that need not read them all.
pub fn read_one(root: &crate::Root, pid: u32, tid: u32) -> Option<Task> {
    read_task(&mut Reader::new(root), pid, tid)
}

fn read_task(r: &mut Reader, pid: u32, tid: u32) -> Option<Task> {
    let dir = format!("/proc/{pid}/task/{tid}");
    // Threads come and go while we read: a vanished one is not a problem.
    let stat_path = format!("{dir}/stat");
    let stat = r.root().read(&stat_path).ok()?;
    let st = match parse_stat(&stat) {
        Ok(s) => s,
        Err(e) => {
            r.parse_problem(&stat_path, e);
            return None;
        }
    };
    let status = r.root().read(format!("{dir}/status")).ok()?;
    let affinity = status_affinity(&status)
        .and_then(|a| CpuList::parse(a).ok())
        .unwrap_or_default();
    Some(Task {
        pid,
        tid: st.tid,
        comm: st.comm,
        state: st.state,
        kthread: st.flags & PF_KTHREAD != 0,
        affinity_locked: st.flags & PF_NO_SETAFFINITY != 0,
        policy: SchedPolicy::from_number(st.policy),
        rt_priority: st.rt_priority,
        nice: st.nice,
        affinity,
        last_cpu: Some(st.last_cpu),
    })
}

fn read_irqbalance(r: &mut Reader, tasks: &[Task]) -> Irqbalance {
    let mut ib = Irqbalance::default();
    for t in tasks {
        if t.comm == "irqbalance" && t.pid == t.tid && !t.kthread {
            ib.pids.push(t.pid);
        }
    }
    for &pid in &ib.pids {
        let path = format!("/proc/{pid}/environ");
        if let Some(env) = r.optional(&path) {
            if let Some(b) = banned_from_vars(env.split('\0')) {
                ib.banned_cpus = Some(b);
                ib.banned_source = Some(path);
                return ib;
            }
        }
    }
    for path in IRQBALANCE_CONFIGS {
        if let Some(text) = r.optional(path) {
            if let Some(b) = banned_from_vars(text.lines()) {
                ib.banned_cpus = Some(b);
                ib.banned_source = Some(path.to_string());
                break;
            }
        }
    }
    ib
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_awkward_comm() {
        let s = "1 (process_api) S 0 0 0 0 -1 4194560 30434 650574 0 648 34 174 1877 1171 10 -10 13 0 25 42946560 3106 18446744073709551615 1 1 0 0 0 0 0 4096 1256 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0";
        let st = parse_stat(s).unwrap();
        assert_eq!(st.tid, 1);
        assert_eq!(st.comm, "process_api");
        assert_eq!(st.state, 'S');
        assert_eq!(st.flags, 4194560);
        assert_eq!(st.nice, -10);
        assert_eq!(st.last_cpu, 1);
        assert_eq!(st.policy, 0);
        assert_eq!((st.minor_faults, st.major_faults), (30434, 0));
        assert_eq!(
            (st.utime_ticks, st.stime_ticks, st.start_time),
            (34, 174, 25)
        );
        let k = "17 (ksoftirqd/1) S 2 0 0 0 -1 69238848 0 0 0 0 0 3 0 0 20 0 1 0 8 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0";
        let st = parse_stat(k).unwrap();
        assert!(st.flags & PF_KTHREAD != 0);
        assert!(st.flags & PF_NO_SETAFFINITY != 0);
        let w = "99 (a) b) c) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 -2 0 1 0 8 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 3 50 1 0 0 0 0 0 0 0 0 0 0 0";
        let st = parse_stat(w).unwrap();
        assert_eq!(st.comm, "a) b) c");
        assert_eq!((st.rt_priority, st.policy), (50, 1));
        assert_eq!(st.start_time, 8, "fields are counted from the last ')'");
        assert!(parse_stat("12 (x) S 1 2").is_err());
        assert!(parse_stat("garbage").is_err());
    }

    #[test]
    fn irqbalance_bans_from_list_or_mask() {
        let conf = "# comment\n#IRQBALANCE_BANNED_CPUS=ff\nIRQBALANCE_BANNED_CPULIST=\"2-5\"\n";
        assert_eq!(banned_from_vars(conf.lines()).unwrap().to_string(), "2-5");
        let env = "PATH=/bin\0IRQBALANCE_BANNED_CPUS=0000000c\0";
        assert_eq!(
            banned_from_vars(env.split('\0')).unwrap().to_string(),
            "2-3"
        );
        assert_eq!(banned_from_vars("IRQBALANCE_ONESHOT=1".lines()), None);
    }

    #[test]
    fn affinity_from_status() {
        assert_eq!(
            status_affinity("Name:\tx\nCpus_allowed:\t3\nCpus_allowed_list:\t0-1\n"),
            Some("0-1")
        );
    }
}
