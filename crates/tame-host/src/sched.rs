//! Scheduler and timers: RT throttling, the deadline fair server, timer
//! migration, the NMI and softlockup watchdogs, and the clocksource.

use serde::{Deserialize, Serialize};

use crate::error::ParseError;
use crate::reader::Reader;
use crate::{CpuList, HostError, Root};

pub const RT_RUNTIME: &str = "/proc/sys/kernel/sched_rt_runtime_us";
pub const RT_PERIOD: &str = "/proc/sys/kernel/sched_rt_period_us";
pub const TIMER_MIGRATION: &str = "/proc/sys/kernel/timer_migration";
pub const NMI_WATCHDOG: &str = "/proc/sys/kernel/nmi_watchdog";
pub const WATCHDOG: &str = "/proc/sys/kernel/watchdog";
pub const SOFT_WATCHDOG: &str = "/proc/sys/kernel/soft_watchdog";
pub const WATCHDOG_CPUMASK: &str = "/proc/sys/kernel/watchdog_cpumask";
pub const WATCHDOG_THRESH: &str = "/proc/sys/kernel/watchdog_thresh";
pub const FAIR_SERVER: &str = "/sys/kernel/debug/sched/fair_server";
pub const CLOCKSOURCE: &str = "/sys/devices/system/clocksource/clocksource0";

/// The deadline server that reserves time for normal tasks on one CPU
/// (kernel 6.12+; the replacement for RT throttling).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FairServer {
    pub cpu: u32,
    pub runtime_ns: u64,
    pub period_ns: u64,
}

/// What we know of the fair server.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FairServerInfo {
    /// Per-CPU settings, when debugfs is mounted and readable.
    pub cpus: Vec<FairServer>,
    /// The debugfs directory exists but could not be read (lockdown, EPERM).
    pub refused: bool,
}

/// Scheduler and timer settings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchedTimers {
    /// -1 disables RT throttling.
    pub rt_runtime_us: Option<i64>,
    pub rt_period_us: Option<u64>,
    pub fair_server: FairServerInfo,
    pub timer_migration: Option<bool>,
    pub nmi_watchdog: Option<bool>,
    /// kernel.watchdog: the lockup detectors as a whole.
    pub watchdog: Option<bool>,
    pub soft_watchdog: Option<bool>,
    /// CPUs the watchdogs run on.
    pub watchdog_cpus: Option<CpuList>,
    pub watchdog_thresh_s: Option<u32>,
    pub clocksource: Option<String>,
    pub clocksources_available: Vec<String>,
}

impl SchedTimers {
    /// RT tasks get at most runtime/period of each CPU (None: unlimited or unknown).
    pub fn rt_throttled(&self) -> Option<bool> {
        self.rt_runtime_us.map(|r| r >= 0)
    }

    pub fn read(r: &mut Reader, debugfs_mounted: bool) -> Self {
        let watchdog_cpus = r.knob_cpu_list(WATCHDOG_CPUMASK);
        let mut s = SchedTimers {
            rt_runtime_us: r.knob_number(RT_RUNTIME),
            rt_period_us: r.number(RT_PERIOD),
            timer_migration: r.knob_flag(TIMER_MIGRATION),
            nmi_watchdog: r.flag(NMI_WATCHDOG),
            watchdog: r.flag(WATCHDOG),
            soft_watchdog: r.flag(SOFT_WATCHDOG),
            watchdog_cpus,
            watchdog_thresh_s: r.number(WATCHDOG_THRESH),
            clocksource: r.value(&format!("{CLOCKSOURCE}/current_clocksource")),
            clocksources_available: r
                .value(&format!("{CLOCKSOURCE}/available_clocksource"))
                .map(|t| t.split_whitespace().map(str::to_string).collect())
                .unwrap_or_default(),
            ..Default::default()
        };
        if debugfs_mounted {
            s.fair_server = read_fair_server(r);
        }
        s
    }
}

fn read_fair_server(r: &mut Reader) -> FairServerInfo {
    let mut info = FairServerInfo::default();
    match r.root().list_dir(FAIR_SERVER) {
        Ok(_) => {}
        Err(e) if e.is_not_found() => return info,
        Err(_) => {
            info.refused = true;
            return info;
        }
    }
    for cpu in r.numbered(FAIR_SERVER, "cpu") {
        let dir = format!("{FAIR_SERVER}/cpu{cpu}");
        let runtime = r.root().read_trimmed(format!("{dir}/runtime"));
        let period = r.root().read_trimmed(format!("{dir}/period"));
        match (runtime, period) {
            (Ok(rt), Ok(p)) => {
                if let (Ok(runtime_ns), Ok(period_ns)) = (rt.parse(), p.parse()) {
                    info.cpus.push(FairServer {
                        cpu,
                        runtime_ns,
                        period_ns,
                    });
                }
            }
            _ => info.refused = true,
        }
    }
    info
}

/// RT throttling: real-time tasks may run `runtime_us` of every `period_us`
/// (`runtime_us` -1: no limit).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RtBandwidth {
    pub runtime_us: i64,
    pub period_us: u64,
}

impl Root {
    /// `sched_rt_runtime_us` and `sched_rt_period_us`.
    pub fn rt_bandwidth(&self) -> Result<RtBandwidth, HostError> {
        fn number<T: std::str::FromStr>(root: &Root, path: &str) -> Result<T, HostError> {
            let text = root.read_trimmed(path)?;
            text.parse()
                .map_err(|_| ParseError::new(1, format!("{text:?} is not a number")).at(path))
        }
        Ok(RtBandwidth {
            runtime_us: number(self, RT_RUNTIME)?,
            period_us: number(self, RT_PERIOD)?,
        })
    }
}
