//! Scheduling policy, priority and CPU affinity of the calling thread.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    Other,
    Fifo,
    Rr,
    /// SCHED_DEADLINE; runtime/deadline/period are given when applying.
    Deadline,
}

impl Policy {
    /// The valid static priority range for this policy (deadline and other take 0).
    pub fn priority_range(self) -> (i32, i32) {
        match self {
            Policy::Fifo | Policy::Rr => {
                let raw = self.raw();
                // SAFETY: both calls take a policy number and touch no memory of ours
                // (an unknown policy would only give -1).
                unsafe {
                    (
                        libc::sched_get_priority_min(raw),
                        libc::sched_get_priority_max(raw),
                    )
                }
            }
            Policy::Other | Policy::Deadline => (0, 0),
        }
    }

    pub fn is_realtime(self) -> bool {
        self != Policy::Other
    }

    /// The kernel's policy number (SCHED_OTHER 0, FIFO 1, RR 2, DEADLINE 6).
    pub fn raw(self) -> libc::c_int {
        match self {
            Policy::Other => libc::SCHED_OTHER,
            Policy::Fifo => libc::SCHED_FIFO,
            Policy::Rr => libc::SCHED_RR,
            Policy::Deadline => SCHED_DEADLINE,
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Policy::Other => "other",
            Policy::Fifo => "fifo",
            Policy::Rr => "rr",
            Policy::Deadline => "deadline",
        })
    }
}

impl FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "other" | "normal" => Ok(Policy::Other),
            "fifo" => Ok(Policy::Fifo),
            "rr" => Ok(Policy::Rr),
            "deadline" | "dl" => Ok(Policy::Deadline),
            _ => Err(format!(
                "unknown policy {s:?}: use fifo, rr, deadline or other"
            )),
        }
    }
}

/// How a thread should be scheduled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchedSpec {
    pub policy: Policy,
    /// Static priority for fifo/rr.
    pub priority: i32,
    /// For deadline: runtime, deadline and period in ns.
    pub dl_runtime_ns: u64,
    pub dl_deadline_ns: u64,
    pub dl_period_ns: u64,
}

impl SchedSpec {
    pub fn other() -> Self {
        Self::static_priority(Policy::Other, 0)
    }

    pub fn static_priority(policy: Policy, priority: i32) -> Self {
        Self {
            policy,
            priority,
            dl_runtime_ns: 0,
            dl_deadline_ns: 0,
            dl_period_ns: 0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchedError {
    #[error("cannot set policy {policy} priority {priority}: {errno_text}")]
    Policy {
        policy: Policy,
        priority: i32,
        errno: i32,
        errno_text: String,
    },
    #[error("cannot pin thread to CPU {cpu}: {errno_text}")]
    Affinity {
        cpu: u32,
        errno: i32,
        errno_text: String,
    },
}

impl SchedError {
    pub fn errno(&self) -> i32 {
        match self {
            SchedError::Policy { errno, .. } | SchedError::Affinity { errno, .. } => *errno,
        }
    }
}

const SCHED_DEADLINE: libc::c_int = 6;

/// The kernel's struct sched_attr (v0 layout, 48 bytes).
#[repr(C)]
#[derive(Default)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
}

fn last_errno() -> (i32, String) {
    let e = std::io::Error::last_os_error();
    (e.raw_os_error().unwrap_or(0), e.to_string())
}

/// SCHED_RESET_ON_FORK: children of the thread start as SCHED_OTHER.
pub const RESET_ON_FORK: libc::c_int = 0x4000_0000;
const SCHED_FLAG_RESET_ON_FORK: u64 = 0x01;

/// Apply a scheduling spec to thread `tid` (0 = the calling thread) using only
/// async-signal-safe calls, so it may run between fork and exec. Returns 0 or an errno.
pub fn apply_raw(tid: libc::pid_t, spec: &SchedSpec, reset_on_fork: bool) -> libc::c_int {
    let rc = if spec.policy == Policy::Deadline {
        let attr = SchedAttr {
            size: std::mem::size_of::<SchedAttr>() as u32,
            sched_policy: SCHED_DEADLINE as u32,
            sched_flags: if reset_on_fork {
                SCHED_FLAG_RESET_ON_FORK
            } else {
                0
            },
            sched_runtime: spec.dl_runtime_ns,
            sched_deadline: spec.dl_deadline_ns,
            sched_period: spec.dl_period_ns,
            ..Default::default()
        };
        // SAFETY: `attr` is a live, fully initialised sched_attr whose `size` field is
        // its own size, so the kernel reads nothing beyond it; a raw syscall is
        // async-signal-safe.
        unsafe {
            libc::syscall(libc::SYS_sched_setattr, tid, &attr as *const SchedAttr, 0) as libc::c_int
        }
    } else {
        let param = libc::sched_param {
            sched_priority: spec.priority,
        };
        let policy = spec.policy.raw() | if reset_on_fork { RESET_ON_FORK } else { 0 };
        // SAFETY: `param` is a live sched_param that the kernel only reads during the call.
        unsafe { libc::sched_setscheduler(tid, policy, &param) }
    };
    if rc == 0 {
        0
    } else {
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL)
    }
}

/// Apply a scheduling spec to the calling thread.
pub fn set_current_thread(spec: &SchedSpec) -> Result<(), SchedError> {
    match apply_raw(0, spec, false) {
        0 => Ok(()),
        errno => Err(SchedError::Policy {
            policy: spec.policy,
            priority: spec.priority,
            errno,
            errno_text: std::io::Error::from_raw_os_error(errno).to_string(),
        }),
    }
}

/// A thread's scheduling as the kernel reports it. The default is how a thread
/// starts: SCHED_OTHER at nice 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadSched {
    /// The raw policy number (SCHED_OTHER 0, FIFO 1, RR 2, BATCH 3, IDLE 5, DEADLINE 6).
    pub policy: i32,
    pub priority: i32,
    pub nice: i32,
    pub reset_on_fork: bool,
    pub dl_runtime_ns: u64,
    pub dl_deadline_ns: u64,
    pub dl_period_ns: u64,
}

impl ThreadSched {
    /// A policy without a static priority (SCHED_OTHER, BATCH, IDLE) at `nice`.
    pub fn ordinary(policy: i32, nice: i32) -> Self {
        Self {
            policy,
            nice,
            ..Self::default()
        }
    }
}

/// Read thread `tid`'s scheduling attributes (sched_getattr), exactly enough to restore them.
pub fn get_thread_sched(tid: libc::pid_t) -> std::io::Result<ThreadSched> {
    let mut attr = SchedAttr::default();
    // SAFETY: `attr` is a live, writable sched_attr and the size passed is its own, so
    // the kernel writes nothing beyond it.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            tid,
            &mut attr as *mut SchedAttr,
            std::mem::size_of::<SchedAttr>() as u32,
            0,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(ThreadSched {
        policy: attr.sched_policy as i32,
        priority: attr.sched_priority as i32,
        nice: attr.sched_nice,
        reset_on_fork: attr.sched_flags & SCHED_FLAG_RESET_ON_FORK != 0,
        dl_runtime_ns: attr.sched_runtime,
        dl_deadline_ns: attr.sched_deadline,
        dl_period_ns: attr.sched_period,
    })
}

/// Restore attributes read by [`get_thread_sched`] (policy, priority, nice, reset-on-fork, deadline parameters).
pub fn set_thread_sched(tid: libc::pid_t, s: &ThreadSched) -> std::io::Result<()> {
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        sched_policy: s.policy as u32,
        sched_flags: if s.reset_on_fork {
            SCHED_FLAG_RESET_ON_FORK
        } else {
            0
        },
        sched_nice: s.nice,
        sched_priority: s.priority as u32,
        sched_runtime: s.dl_runtime_ns,
        sched_deadline: s.dl_deadline_ns,
        sched_period: s.dl_period_ns,
    };
    // SAFETY: `attr` is a live, fully initialised sched_attr whose `size` field is its
    // own size, so the kernel reads nothing beyond it.
    let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, tid, &attr as *const SchedAttr, 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// A CPU mask of any size. The C library's `cpu_set_t` holds only `CPU_SETSIZE`
/// (1024) CPUs, and CPUs beyond it would be dropped without a word; this grows to
/// hold the highest CPU given. Built ahead of time (e.g. before fork), it is then
/// handed to the kernel as a pointer and a size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuSet {
    words: Vec<libc::c_ulong>,
}

const WORD_BITS: usize = libc::c_ulong::BITS as usize;

impl CpuSet {
    /// An empty set with room for `bits` CPUs (at least a `cpu_set_t`'s).
    fn with_room(bits: usize) -> Self {
        let bits = bits.max(libc::CPU_SETSIZE as usize);
        Self {
            words: vec![0; bits.div_ceil(WORD_BITS)],
        }
    }

    pub fn new(cpus: impl IntoIterator<Item = u32>) -> Self {
        let cpus: Vec<usize> = cpus.into_iter().map(|c| c as usize).collect();
        let mut set = Self::with_room(cpus.iter().max().map_or(0, |&c| c + 1));
        for c in cpus {
            set.words[c / WORD_BITS] |= 1 << (c % WORD_BITS);
        }
        set
    }

    pub fn contains(&self, cpu: u32) -> bool {
        let c = cpu as usize;
        self.words
            .get(c / WORD_BITS)
            .is_some_and(|w| w & (1 << (c % WORD_BITS)) != 0)
    }

    /// The CPUs in the set, ascending.
    pub fn cpus(&self) -> Vec<u32> {
        (0..self.words.len() * WORD_BITS)
            .filter(|&c| self.words[c / WORD_BITS] & (1 << (c % WORD_BITS)) != 0)
            .map(|c| c as u32)
            .collect()
    }

    /// The size in bytes to hand the kernel with [`CpuSet::as_ptr`].
    pub fn size_bytes(&self) -> usize {
        std::mem::size_of_val(self.words.as_slice())
    }

    /// The mask as the kernel reads it (`size_bytes` long).
    pub fn as_ptr(&self) -> *const libc::cpu_set_t {
        self.words.as_ptr().cast()
    }
}

/// Thread `tid`'s CPU affinity.
pub fn get_affinity(tid: libc::pid_t) -> std::io::Result<Vec<u32>> {
    let mut bits = libc::CPU_SETSIZE as usize;
    loop {
        let mut set = CpuSet::with_room(bits);
        let size = set.size_bytes();
        // SAFETY: `set.words` is a live, writable buffer of exactly `size` bytes.
        let rc = unsafe { libc::sched_getaffinity(tid, size, set.words.as_mut_ptr().cast()) };
        if rc == 0 {
            return Ok(set.cpus());
        }
        let err = std::io::Error::last_os_error();
        // EINVAL: the kernel's mask is larger than ours (a machine with more CPUs).
        if err.raw_os_error() != Some(libc::EINVAL) || bits >= 1 << 22 {
            return Err(err);
        }
        bits *= 2;
    }
}

/// A CPU mask for `cpus`, built ahead of time (e.g. before fork); any CPU number fits.
pub fn cpu_set(cpus: impl IntoIterator<Item = u32>) -> CpuSet {
    CpuSet::new(cpus)
}

/// Set thread `tid`'s CPU affinity.
pub fn set_affinity(tid: libc::pid_t, cpus: impl IntoIterator<Item = u32>) -> std::io::Result<()> {
    let set = cpu_set(cpus);
    // SAFETY: `set` is a live mask of exactly the size passed; the kernel only reads it.
    if unsafe { libc::sched_setaffinity(tid, set.size_bytes(), set.as_ptr()) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Pin the calling thread to one CPU.
pub fn pin_current_thread(cpu: u32) -> Result<(), SchedError> {
    let set = cpu_set([cpu]);
    // SAFETY: `set` is a live mask of exactly the size passed; the kernel only reads it.
    if unsafe { libc::sched_setaffinity(0, set.size_bytes(), set.as_ptr()) } != 0 {
        let (errno, errno_text) = last_errno();
        return Err(SchedError::Affinity {
            cpu,
            errno,
            errno_text,
        });
    }
    Ok(())
}

/// The CPUs the calling thread may run on (its affinity mask, which the cpuset bounds).
pub fn allowed_cpus() -> Vec<u32> {
    get_affinity(0).unwrap_or_default()
}

/// The CPU the calling thread is running on now.
pub fn current_cpu() -> Option<u32> {
    // SAFETY: takes no arguments and touches no memory of ours; -1 on failure.
    let c = unsafe { libc::sched_getcpu() };
    (c >= 0).then_some(c as u32)
}

/// Find out, without changing the caller, whether a thread of this process may
/// use `spec` on `cpu`: a throw-away thread tries it and reports the error.
pub fn probe(spec: SchedSpec, cpu: Option<u32>) -> Result<(), SchedError> {
    std::thread::spawn(move || {
        if let Some(c) = cpu {
            pin_current_thread(c)?;
        }
        set_current_thread(&spec)
    })
    .join()
    .unwrap_or_else(|_| {
        Err(SchedError::Policy {
            policy: spec.policy,
            priority: spec.priority,
            errno: 0,
            errno_text: "probe thread panicked".into(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_policy_names() {
        assert_eq!("FIFO".parse::<Policy>().unwrap(), Policy::Fifo);
        assert_eq!("deadline".parse::<Policy>().unwrap(), Policy::Deadline);
        assert!("batch".parse::<Policy>().unwrap_err().contains("fifo"));
        assert_eq!(Policy::Rr.to_string(), "rr");
    }

    #[test]
    fn realtime_priority_range_is_1_to_99() {
        assert_eq!(Policy::Fifo.priority_range(), (1, 99));
        assert_eq!(Policy::Other.priority_range(), (0, 0));
    }

    #[test]
    fn probe_reports_an_invalid_priority_without_touching_the_caller() {
        let err = probe(SchedSpec::static_priority(Policy::Fifo, 100), None).unwrap_err();
        assert_eq!(err.errno(), libc::EINVAL);
        // The caller stayed SCHED_OTHER.
        // SAFETY: takes a thread id (0: the caller) and touches no memory of ours.
        assert_eq!(unsafe { libc::sched_getscheduler(0) }, libc::SCHED_OTHER);
    }

    #[test]
    fn thread_sched_round_trips_through_get_and_set() {
        std::thread::spawn(|| {
            let before = get_thread_sched(0).unwrap();
            assert_eq!(before.policy, libc::SCHED_OTHER);
            let mut changed = before;
            changed.nice = before.nice + 1;
            changed.reset_on_fork = true;
            set_thread_sched(0, &changed).unwrap();
            assert_eq!(get_thread_sched(0).unwrap(), changed);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn affinity_round_trips() {
        std::thread::spawn(|| {
            set_affinity(0, [0]).unwrap();
            assert_eq!(get_affinity(0).unwrap(), vec![0]);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn cpu_sets_keep_cpus_beyond_1024() {
        let cpus = vec![0, 63, 64, 1023, 1024, 5000];
        let set = cpu_set(cpus.iter().copied());
        assert_eq!(set.cpus(), cpus);
        assert!(set.contains(5000) && !set.contains(4999) && !set.contains(1 << 20));
        assert!(set.size_bytes() * 8 > 5000);
        assert_eq!(
            cpu_set([3]).size_bytes(),
            std::mem::size_of::<libc::cpu_set_t>()
        );
        // The kernel takes a large mask and ignores CPUs this machine does not have.
        std::thread::spawn(|| {
            set_affinity(0, [0, 4095]).unwrap();
            assert_eq!(get_affinity(0).unwrap(), vec![0]);
            // CPU 4095 alone does not exist here: refused, not silently emptied.
            assert!(pin_current_thread(4095).is_err());
        })
        .join()
        .unwrap();
    }

    #[test]
    fn allowed_cpus_include_the_current_one() {
        let cpu = current_cpu().unwrap();
        assert!(allowed_cpus().contains(&cpu));
    }

    #[test]
    fn pinning_moves_the_thread() {
        std::thread::spawn(|| {
            pin_current_thread(0).unwrap();
            assert_eq!(current_cpu(), Some(0));
        })
        .join()
        .unwrap();
    }
}
