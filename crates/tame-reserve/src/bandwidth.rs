//! What the kernel lets real-time and deadline work have, read through the host layer:
//! RT throttling (sched_rt_runtime_us / sched_rt_period_us), the deadline fair server
//! (Linux ≥ 6.12 reserves 50 ms/s per CPU for SCHED_OTHER work), existing SCHED_DEADLINE
//! reservations, and the online CPUs. These bound what any backend can guarantee.

use serde::{Deserialize, Serialize};
pub use tame_host::sched::{RT_PERIOD, RT_RUNTIME};
use tame_host::Root;
use tame_rt::duration::format_ns;

use crate::error::{failed, Result};
use crate::spec::{percent, PPM};

/// The fair server's default: 50 ms of every second, per CPU.
pub const FAIR_SERVER_PPM: u64 = 50_000;
const SCHED_DEADLINE: u32 = 6;

/// The limits that bound a guarantee.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// -1: RT throttling off.
    pub rt_runtime_us: i64,
    pub rt_period_us: u64,
    pub online: Vec<u32>,
    pub kernel_release: String,
    /// The kernel has the deadline fair server (6.12 and later).
    pub fair_server: bool,
}

impl Limits {
    pub fn read(root: &Root) -> Result<Self> {
        let host = |e: tame_host::HostError| failed(e.to_string());
        let rt = root.rt_bandwidth().map_err(host)?;
        let (rt_runtime_us, rt_period_us) = (rt.runtime_us, rt.period_us);
        let online = root.cpus_online().map_err(host)?.iter().collect();
        let kernel_release = root.kernel_release().unwrap_or_default();
        let fair_server = kernel_at_least(&kernel_release, 6, 12);
        Ok(Self {
            rt_runtime_us,
            rt_period_us,
            online,
            kernel_release,
            fair_server,
        })
    }

    /// The share of each CPU real-time and deadline work may use (RT throttling), ppm.
    pub fn rt_cap_ppm(&self) -> u64 {
        if self.rt_runtime_us < 0 || self.rt_period_us == 0 {
            PPM
        } else {
            (self.rt_runtime_us as u64 * PPM / self.rt_period_us).min(PPM)
        }
    }

    /// What SCHED_DEADLINE admission leaves per CPU for new reservations before any exist:
    /// the RT cap less the fair server's reservation.
    pub fn deadline_cap_ppm(&self) -> u64 {
        let fair = if self.fair_server { FAIR_SERVER_PPM } else { 0 };
        self.rt_cap_ppm().saturating_sub(fair)
    }

    /// Human notes on what bounds a guarantee here.
    pub fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.rt_cap_ppm() < PPM {
            notes.push(format!(
                "RT throttling: real-time work may use at most {} of each CPU ({} of every {}, {RT_RUNTIME})",
                percent(self.rt_cap_ppm()),
                format_ns(self.rt_runtime_us as u64 * 1_000),
                format_ns(self.rt_period_us * 1_000)
            ));
        }
        if self.fair_server {
            notes.push(format!(
                "deadline fair server (kernel {}): SCHED_OTHER tasks starved by real-time work get 50 ms of every second per CPU, so a real-time slice can be cut short by up to 5 %",
                self.kernel_release
            ));
        }
        notes
    }
}

fn kernel_at_least(release: &str, major: u32, minor: u32) -> bool {
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .filter(|p| !p.is_empty())
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let got = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    got >= (major, minor)
}

/// A SCHED_DEADLINE thread found on the system.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadlineThread {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub runtime_ns: u64,
    pub period_ns: u64,
}

impl DeadlineThread {
    pub fn share_ppm(&self) -> u64 {
        if self.period_ns == 0 {
            0
        } else {
            (u128::from(self.runtime_ns) * u128::from(PPM) / u128::from(self.period_ns)) as u64
        }
    }
}

/// Every SCHED_DEADLINE thread under /proc. `params` reads a thread's runtime and period
/// (sched_getattr on the live system; tests pass a table).
pub fn deadline_threads(root: &Root) -> Vec<DeadlineThread> {
    let mut found = Vec::new();
    for pid in root.pids() {
        let process = root.process(pid);
        for tid in process.threads() {
            let Ok(stat) = process.task(tid).stat() else {
                continue;
            };
            if stat.policy != SCHED_DEADLINE {
                continue;
            }
            // Runtime and period are not in /proc: the backend asks the kernel (sched_getattr).
            let (runtime_ns, period_ns) = root
                .thread_sched(tid)
                .map_or((0, 0), |s| (s.dl_runtime_ns, s.dl_period_ns));
            found.push(DeadlineThread {
                pid,
                tid,
                comm: stat.comm,
                runtime_ns,
                period_ns,
            });
        }
    }
    found
}

/// Deadline bandwidth free on the root domain, in ppm of one CPU (so 2 CPUs × 90 % = 1 800 000).
pub fn free_deadline_ppm(limits: &Limits, existing: &[DeadlineThread]) -> u64 {
    let capacity = limits.deadline_cap_ppm() * limits.online.len() as u64;
    let used: u64 = existing.iter().map(DeadlineThread::share_ppm).sum();
    capacity.saturating_sub(used)
}

/// The kernel said EBUSY to sched_setattr: say why in numbers.
pub fn exhausted_message(asked_ppm: u64, limits: &Limits, existing: &[DeadlineThread]) -> String {
    let free = free_deadline_ppm(limits, existing);
    let used: u64 = existing.iter().map(DeadlineThread::share_ppm).sum();
    let mut msg = format!(
        "CPU bandwidth exhausted: {} asked, {} free on CPUs {} (each CPU: {} RT cap",
        percent(asked_ppm),
        percent(free),
        crate::spec::join(&limits.online),
        percent(limits.rt_cap_ppm()),
    );
    if limits.fair_server {
        msg.push_str(", less 5 % held by the deadline fair server");
    }
    msg.push(')');
    if !existing.is_empty() {
        msg.push_str(&format!(
            "; {} already reserved by {} (tame reserve --list)",
            percent(used),
            tame_rt::plural::count(
                existing.len() as u64,
                "SCHED_DEADLINE thread",
                "SCHED_DEADLINE threads"
            )
        ));
    }
    msg.push_str(" — ask for less, release a reservation (tame reserve --release PID), or use --backend server");
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(files: &[(&str, &str)]) -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let p = dir.path().join(path.trim_start_matches('/'));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        let backend = std::sync::Arc::new(tame_testing::FixtureBackend::new());
        backend.set_thread(
            10,
            tame_testing::FixtureThread {
                affinity: tame_host::CpuList::parse("0-1").unwrap(),
                sched: tame_rt::sched::ThreadSched {
                    policy: 6,
                    dl_runtime_ns: 10_000_000,
                    dl_deadline_ns: 40_000_000,
                    dl_period_ns: 40_000_000,
                    ..tame_rt::sched::ThreadSched::default()
                },
            },
        );
        let root = backend.root(dir.path());
        (dir, root)
    }

    fn stat(tid: u32, comm: &str, policy: u32) -> String {
        // Fields 3..=41: state, then 37 numbers; policy is field 41.
        let mut fields = vec!["S".to_string()];
        fields.extend((4..=41).map(|n| {
            if n == 41 {
                policy.to_string()
            } else {
                "0".into()
            }
        }));
        format!("{tid} ({comm}) {}\n", fields.join(" "))
    }

    #[test]
    fn reads_limits_and_finds_deadline_threads() {
        let (_d, root) = fixture(&[
            (RT_RUNTIME, "950000\n"),
            (RT_PERIOD, "1000000\n"),
            ("/sys/devices/system/cpu/online", "0-1\n"),
            ("/proc/sys/kernel/osrelease", "6.18.44-fc\n"),
            ("/proc/10/task/10/stat", &stat(10, "dl task", 6)),
            ("/proc/10/task/11/stat", &stat(11, "dl task", 0)),
            ("/proc/20/task/20/stat", &stat(20, "other", 1)),
        ]);
        let limits = Limits::read(&root).unwrap();
        assert_eq!(limits.rt_cap_ppm(), 950_000);
        assert!(limits.fair_server);
        assert_eq!(limits.deadline_cap_ppm(), 900_000);
        assert_eq!(limits.notes().len(), 2);
        assert_eq!(
            limits.notes()[0],
            format!("RT throttling: real-time work may use at most 95 % of each CPU (950 ms of every 1 s, {RT_RUNTIME})")
        );
        let found = deadline_threads(&root);
        assert_eq!(found.len(), 1);
        assert_eq!(
            (found[0].pid, found[0].tid, found[0].share_ppm()),
            (10, 10, 250_000)
        );
        assert_eq!(free_deadline_ppm(&limits, &found), 1_550_000);
        let msg = exhausted_message(1_600_000, &limits, &found);
        assert!(
            msg.starts_with("CPU bandwidth exhausted: 160 % asked, 155 % free on CPUs 0,1"),
            "{msg}"
        );
        assert!(msg.contains("fair server"), "{msg}");
    }

    #[test]
    fn old_kernels_have_no_fair_server_and_throttling_can_be_off() {
        assert!(!kernel_at_least("6.6.30", 6, 12));
        assert!(kernel_at_least("6.12.0", 6, 12));
        let limits = Limits {
            rt_runtime_us: -1,
            rt_period_us: 1_000_000,
            online: vec![0],
            kernel_release: "5.15".into(),
            fair_server: false,
        };
        assert_eq!(limits.deadline_cap_ppm(), PPM);
        assert!(limits.notes().is_empty());
    }
}
