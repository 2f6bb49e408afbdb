//! Background load during a measurement: stress-ng stressors and a
//! compile-like `build` load, confined to the load CPUs, started as children in
//! their own process groups and always stopped and reaped (on return, error
//! or Ctrl-C; a parent-death signal and stress-ng's own timeout cover SIGKILL).

use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tame_host::CpuList;
use tame_launch::spawn::{resolve, Launched, Spawn};
use tame_rt::sched::{self, SchedSpec};
use tame_rt::Policy;

use crate::error::{invalid, io_failed, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LoadKind {
    Cpu,
    Io,
    Hdd,
    Vm,
    Sock,
    Build,
    /// stress-ng's cache thrashing workers (for `bench mem` and `bench cache`).
    Cache,
    /// stress-ng's STREAM memory-bandwidth workers.
    Stream,
    /// A competing real-time thread per load CPU (stress-ng cyclic at SCHED_FIFO
    /// [`RT_LOAD_PRIORITY`]): what a partition cannot keep out once one is put there.
    Rt,
}

/// The `rt` load's SCHED_FIFO priority: below the measuring threads' 95, so it competes
/// for a shared CPU but never preempts the work.
pub const RT_LOAD_PRIORITY: i32 = 80;

/// The `rt` load's period, in nanoseconds: 100 µs, a periodic real-time task as busy as
/// a fast control loop.
const RT_LOAD_SLEEP_NS: u64 = 100_000;

/// The cache size stress-ng's STREAM workers are told: each sizes its three arrays at four
/// times it (48 MiB a worker), past most last-level caches, so the load streams from
/// memory, while a large LLC does not make each worker's memory grow with it.
const STREAM_L3_SIZE: &str = "4M";

impl LoadKind {
    const ALL: [(&'static str, LoadKind); 9] = [
        ("cpu", LoadKind::Cpu),
        ("io", LoadKind::Io),
        ("hdd", LoadKind::Hdd),
        ("vm", LoadKind::Vm),
        ("sock", LoadKind::Sock),
        ("build", LoadKind::Build),
        ("cache", LoadKind::Cache),
        ("stream", LoadKind::Stream),
        ("rt", LoadKind::Rt),
    ];

    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, k)| *k == self)
            .map_or("?", |(n, _)| n)
    }

    /// Parse `cpu,io,hdd` (any combination, no repeats needed).
    pub fn parse_list(text: &str) -> Result<Vec<LoadKind>> {
        let mut kinds = Vec::new();
        for word in text.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            let kind = Self::ALL
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(word))
                .map(|(_, k)| *k)
                .ok_or_else(|| {
                    invalid(format!(
                        "unknown load {word:?} — tame can generate cpu, io, hdd, vm, sock, build, cache, stream and rt load; pick any of them, comma-separated"
                    ))
                })?;
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
        kinds.sort();
        Ok(kinds)
    }

    /// This load's stress-ng arguments for `workers` workers (none for `build`, which is
    /// not stress-ng).
    pub fn stress_ng_args(self, workers: usize) -> Vec<String> {
        let (stressor, extra): (&str, Vec<String>) = match self {
            LoadKind::Build => return Vec::new(),
            LoadKind::Vm => ("vm", words(&["--vm-bytes", "64M"])),
            LoadKind::Hdd => ("hdd", words(&["--hdd-bytes", "64M"])),
            // Left alone, each worker moves itself from CPU to CPU; the load stays where
            // --taskset puts it.
            LoadKind::Cache => ("cache", words(&["--cache-no-affinity"])),
            LoadKind::Stream => ("stream", words(&["--stream-l3-size", STREAM_L3_SIZE])),
            LoadKind::Rt => (
                "cyclic",
                vec![
                    "--cyclic-policy".into(),
                    "fifo".into(),
                    "--cyclic-prio".into(),
                    RT_LOAD_PRIORITY.to_string(),
                    "--cyclic-sleep".into(),
                    RT_LOAD_SLEEP_NS.to_string(),
                ],
            ),
            LoadKind::Cpu | LoadKind::Io | LoadKind::Sock => (self.name(), Vec::new()),
        };
        let mut args = vec![format!("--{stressor}"), workers.to_string()];
        args.extend(extra);
        args
    }
}

/// What load to run and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadSpec {
    pub kinds: Vec<LoadKind>,
    pub cpus: CpuList,
    /// The user's own load (`--load-cmd`), run as `sh -c COMMAND` on all of `cpus`
    /// instead of `kinds` (which must then be empty).
    pub command: Option<String>,
}

/// The load as recorded in a result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoadDescription {
    pub kinds: Vec<LoadKind>,
    pub cpus: CpuList,
    /// The exact commands started.
    pub commands: Vec<String>,
    /// The user's own load command (`--load-cmd`), when it ran instead of tame's load;
    /// its throughput is not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// What the load got done: stress-ng's bogo-ops per second of each stressor over its
    /// run (what `tame assess` compares shared vs partitioned). Empty when not reported.
    #[serde(default)]
    pub throughput: Vec<Throughput>,
}

/// One stress-ng stressor's throughput.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Throughput {
    pub stressor: String,
    /// Bogo operations per second of wall-clock time.
    pub bogo_ops_per_s: f64,
}

/// The file stress-ng writes its metrics to, in the load's work directory.
const METRICS_FILE: &str = "stress-ng-metrics.yaml";

/// What the load's stress-ng reported: each stressor's bogo-ops per second over its run
/// ([`crate::stress_ng`] reads the file). A file that does not read (stress-ng killed while
/// writing it) or a rate stress-ng could not tell (`nan`) reports nothing for the load:
/// the load's throughput is a side figure of the measurement, not what it measures.
pub fn parse_metrics(yaml: &str) -> Vec<Throughput> {
    crate::stress_ng::parse(yaml)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| {
            let rate = m.bogo_ops_per_s.filter(|r| r.is_finite() && *r >= 0.0)?;
            Some(Throughput {
                stressor: m.stressor,
                bogo_ops_per_s: rate,
            })
        })
        .collect()
}

/// A user's load command (`--load-cmd`) that `sh -c` can be given: not empty, no NUL byte.
pub fn validate_command(command: &str) -> Result<()> {
    if command.trim().is_empty() {
        return Err(invalid(
            "--load-cmd is empty — give the command of your own load, e.g. --load-cmd 'make -j4', or leave it out for tame's load",
        ));
    }
    if command.contains('\0') {
        return Err(invalid(
            "--load-cmd contains a NUL byte, which no command line can carry — give the command as plain text",
        ));
    }
    Ok(())
}

impl LoadSpec {
    /// Check the load can run (tools, privilege, a valid command) before anything starts.
    pub fn check_tools(&self) -> Result<()> {
        if let Some(command) = &self.command {
            self.check_command(command)?;
        }
        let needs_stress = self.kinds.iter().any(|k| *k != LoadKind::Build);
        if needs_stress && resolve("stress-ng").is_none() {
            return Err(invalid(
                "stress-ng not found in PATH — cpu/io/hdd/vm/sock/cache/stream load runs stress-ng; install the Debian package stress-ng (apt-get install stress-ng) or run `make run` once",
            ));
        }
        if self.kinds.contains(&LoadKind::Build) && resolve("gcc").is_none() {
            return Err(invalid(
                "gcc not found in PATH — the build load compiles C sources with gcc; install the Debian package gcc (apt-get install gcc)",
            ));
        }
        if self.kinds.contains(&LoadKind::Rt) {
            check_rt_allowed()?;
        }
        if self.cpus.is_empty() {
            return Err(invalid(
                "no load CPUs — give --load-cpus a non-empty CPU list",
            ));
        }
        Ok(())
    }

    fn check_command(&self, command: &str) -> Result<()> {
        validate_command(command)?;
        if !self.kinds.is_empty() {
            return Err(invalid(
                "a load command runs instead of tame's load — give either --load-cmd or --load, not both",
            ));
        }
        if resolve("sh").is_none() {
            return Err(invalid(
                "sh not found in PATH — --load-cmd runs its command with sh -c; install a POSIX shell (dash)",
            ));
        }
        Ok(())
    }
}

/// The `rt` load's cyclic threads run at SCHED_FIFO [`RT_LOAD_PRIORITY`]: stress-ng would
/// skip them silently where this process may not, so say so before anything starts.
fn check_rt_allowed() -> Result<()> {
    let spec = SchedSpec::static_priority(Policy::Fifo, RT_LOAD_PRIORITY);
    sched::probe(spec, None).map_err(|e| {
        invalid(format!(
            "the rt load cannot run: its threads need SCHED_FIFO priority {RT_LOAD_PRIORITY}, which this process may not use ({e}) — run as root (CAP_SYS_NICE) or raise RLIMIT_RTPRIO to {RT_LOAD_PRIORITY}, or leave rt out of --load"
        ))
    })
}

/// Load that is running; dropping it stops and reaps every process.
pub struct RunningLoad {
    children: Vec<Launched>,
    /// The stress-ng parent, which writes its metrics when interrupted (SIGINT) alone.
    stress_ng: Option<u32>,
    workdir: Option<tempfile::TempDir>,
    description: LoadDescription,
}

impl RunningLoad {
    /// Start the load. `max_runtime` bounds stress-ng even if tame is killed.
    pub fn start(spec: &LoadSpec, max_runtime: Duration) -> Result<Self> {
        spec.check_tools()?;
        let workdir = tempfile::Builder::new()
            .prefix("tame-load.")
            .tempdir()
            .map_err(|e| io_failed("cannot create a temporary directory for the load", e))?;
        let mut load = RunningLoad {
            children: Vec::new(),
            workdir: None,
            description: LoadDescription {
                kinds: spec.kinds.clone(),
                cpus: spec.cpus.clone(),
                commands: Vec::new(),
                command: spec.command.clone(),
                throughput: Vec::new(),
            },
            stress_ng: None,
        };
        if let Some(command) = &spec.command {
            // One shell allowed on every load CPU, in a group of its own: whatever it
            // starts is pinned with it and ends with the group.
            load.spawn("sh", &["-c".to_string(), command.clone()], Some(&spec.cpus))?;
        }
        if let Some(args) = stress_ng_args(spec, workdir.path(), max_runtime) {
            load.spawn("stress-ng", &args, None)?;
            load.stress_ng = load.children.last().map(|c| c.id());
        }
        if spec.kinds.contains(&LoadKind::Build) {
            let source = workdir.path().join("load.c");
            std::fs::write(&source, generated_c_source())
                .map_err(|e| io_failed(format!("cannot write {}", source.display()), e))?;
            for cpu in spec.cpus.iter() {
                let object = workdir.path().join(format!("load{cpu}.o"));
                let script = format!(
                    "while :; do gcc -O2 -c {} -o {}; done",
                    shell_quote(&source),
                    shell_quote(&object)
                );
                load.spawn(
                    "sh",
                    &["-c".to_string(), script],
                    Some(&CpuList::from_cpus([cpu])),
                )?;
            }
        }
        load.workdir = Some(workdir);
        Ok(load)
    }

    fn spawn(&mut self, program: &str, args: &[String], pin: Option<&CpuList>) -> Result<()> {
        // Pinned before exec, and a refused pin fails the start: a load never runs unpinned.
        let mut spawn = Spawn::program(program)
            .args(args)
            .null_stdio()
            .process_group()
            .die_with_parent(libc::SIGTERM);
        if let Some(cpus) = pin {
            spawn = spawn.cpus(cpus);
        }
        let child = spawn.spawn()?;
        let shown = match pin {
            Some(cpus) => format!("taskset -c {cpus} {program} {}", shown_args(args)),
            None => format!("{program} {}", shown_args(args)),
        };
        self.description.commands.push(shown);
        self.children.push(child);
        Ok(())
    }

    pub fn description(&self) -> &LoadDescription {
        &self.description
    }

    /// Process ids of the load's group leaders (for tests and diagnostics).
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(|c| c.id()).collect()
    }

    /// Stop the load: SIGINT to stress-ng (so it writes its metrics), then SIGTERM to each
    /// process group, SIGKILL after a grace period, reap all. Returns what ran, with the
    /// throughput stress-ng reported.
    pub fn stop(mut self) -> LoadDescription {
        self.interrupt_stress_ng();
        let metrics = self
            .workdir
            .as_ref()
            .and_then(|d| std::fs::read_to_string(d.path().join(METRICS_FILE)).ok());
        self.stop_all();
        let mut description = self.description.clone();
        description.throughput = metrics.as_deref().map(parse_metrics).unwrap_or_default();
        description
    }

    /// SIGINT to the stress-ng parent alone, and a short wait for it to write its metrics and exit.
    fn interrupt_stress_ng(&mut self) {
        let Some(pid) = self.stress_ng else { return };
        let Some(child) = self.children.iter_mut().find(|c| c.id() == pid) else {
            return;
        };
        // SAFETY: signalling our own child, not yet reaped (its pid cannot be reused).
        unsafe { libc::kill(pid as i32, libc::SIGINT) };
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if !matches!(child.try_wait(), Ok(None)) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn stop_all(&mut self) {
        for child in &self.children {
            // SAFETY: signalling a process group we created.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGTERM) };
        }
        let deadline = Instant::now() + Duration::from_secs(3);
        for child in &mut self.children {
            loop {
                match child.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() >= deadline => {
                        // SAFETY: as above.
                        unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
                        let _ = child.wait();
                        break;
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        }
        for child in &self.children {
            end_group(child.id());
        }
        self.children.clear();
        self.workdir.take();
    }
}

impl Drop for RunningLoad {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// End what is left of process group `pgid` (one tame created, its leader reaped or
/// about to be): stragglers such as a gcc mid-compile or stress-ng workers get SIGKILL,
/// and since they are not our children it reaches them asynchronously, so wait (briefly)
/// until the group is gone: nothing of it outlives this call.
pub(crate) fn end_group(pgid: u32) {
    // SAFETY: signalling a process group we created; ESRCH when it is gone already is fine.
    unsafe { libc::kill(-(pgid as i32), libc::SIGKILL) };
    let deadline = Instant::now() + Duration::from_secs(2);
    // SAFETY: signal 0 only probes whether the group still has members.
    while unsafe { libc::kill(-(pgid as i32), 0) } == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// stress-ng's command line for `spec`'s stressors (`None` when it has none): one
/// invocation for all of them, confined to the load CPUs, bounded by its own timeout, its
/// metrics to the work directory.
fn stress_ng_args(spec: &LoadSpec, workdir: &Path, max_runtime: Duration) -> Option<Vec<String>> {
    let stressors: Vec<LoadKind> = spec
        .kinds
        .iter()
        .copied()
        .filter(|k| *k != LoadKind::Build)
        .collect();
    if stressors.is_empty() {
        return None;
    }
    let mut args: Vec<String> = vec![
        "--taskset".into(),
        spec.cpus.to_string(),
        "--temp-path".into(),
        workdir.display().to_string(),
        "--timeout".into(),
        format!("{}s", max_runtime.as_secs() + 5),
        "--metrics-brief".into(),
        "--yaml".into(),
        workdir.join(METRICS_FILE).display().to_string(),
    ];
    for kind in stressors {
        args.extend(kind.stress_ng_args(spec.cpus.len()));
    }
    Some(args)
}

fn words(w: &[&str]) -> Vec<String> {
    w.iter().map(|s| s.to_string()).collect()
}

/// Arguments as a shell would take them back: quoted where they hold more than a word.
fn shown_args(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./,:=+@%".contains(c))
            {
                a.clone()
            } else {
                quote(a)
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

fn shell_quote(path: &Path) -> String {
    quote(&path.display().to_string())
}

/// A C file that takes gcc -O2 a noticeable fraction of a second: many small
/// functions with loops and arithmetic for the optimiser to chew on.
fn generated_c_source() -> String {
    let mut s = String::from("#include <stddef.h>\n");
    for i in 0..400 {
        s.push_str(&format!(
            "unsigned long f{i}(unsigned long *a, size_t n) {{ unsigned long s = {i}; \
             for (size_t j = 0; j < n; j++) {{ s = s * 31 + a[j] * {m}; if (s & 1) s ^= a[(j * 7) % n]; }} \
             return s; }}\n",
            m = i * 2 + 1
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stress_ng_metrics_give_each_stressors_rate() {
        let yaml = "---\nsystem-info:\n      stressor: no\n      bogo-ops-per-second-real-time: 9\nmetrics:\n    - stressor: cpu\n      bogo-ops: 2574\n      bogo-ops-per-second-real-time: 1287.715038\n\n    - stressor: vm\n      bogo-ops-per-second-real-time: nan\n    - stressor: io\n      bogo-ops-per-second-real-time: 12\n...\n";
        let t = parse_metrics(yaml);
        assert_eq!(
            t,
            vec![
                Throughput {
                    stressor: "cpu".into(),
                    bogo_ops_per_s: 1287.715038
                },
                Throughput {
                    stressor: "io".into(),
                    bogo_ops_per_s: 12.0
                }
            ]
        );
        assert!(parse_metrics("").is_empty());
    }

    /// Live processes whose process group is `pgid` (read from /proc/PID/stat).
    fn group_members(pgid: u32) -> Vec<u32> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // Fields after the parenthesised command: state ppid pgrp ...
            let after = &stat[stat.rfind(')').map_or(0, |i| i + 2)..];
            let fields: Vec<&str> = after.split_whitespace().collect();
            if fields.first() != Some(&"Z") && fields.get(2) == Some(&pgid.to_string().as_str()) {
                found.push(pid);
            }
        }
        found
    }

    /// A pin the kernel refuses fails the start: no load process runs unpinned.
    #[test]
    fn a_refused_pin_fails_the_start_and_leaves_nothing_running() {
        let mut load = RunningLoad {
            children: Vec::new(),
            workdir: None,
            description: LoadDescription {
                kinds: Vec::new(),
                cpus: CpuList::new(),
                commands: Vec::new(),
                command: None,
                throughput: Vec::new(),
            },
            stress_ng: None,
        };
        let err = load
            .spawn(
                "sh",
                &["-c".into(), "sleep 60".into()],
                Some(&CpuList::from_cpus([1000])),
            )
            .unwrap_err();
        assert!(err.to_string().contains("sched_setaffinity"), "{err}");
        assert!(load.pids().is_empty());
        assert!(load.description().commands.is_empty());
    }

    #[test]
    fn parses_any_combination_once_each() {
        assert_eq!(
            LoadKind::parse_list("sock,cpu,io,cpu").unwrap(),
            vec![LoadKind::Cpu, LoadKind::Io, LoadKind::Sock]
        );
        let err = LoadKind::parse_list("cpu,gpu").unwrap_err().to_string();
        assert!(err.contains("gpu") && err.contains("build"), "{err}");
    }

    #[test]
    fn build_load_runs_gcc_and_stops_without_leftovers() {
        if !tame_testing::require::require(resolve("gcc").is_some(), "gcc (the build load)") {
            return;
        }
        let spec = LoadSpec {
            kinds: vec![LoadKind::Build],
            cpus: CpuList::parse("0").unwrap(),
            command: None,
        };
        let load = RunningLoad::start(&spec, Duration::from_secs(5)).unwrap();
        let pids = load.pids();
        assert_eq!(pids.len(), 1);
        assert!(load.description().commands[0].starts_with("taskset -c 0 sh"));
        std::thread::sleep(Duration::from_millis(300));
        load.stop();
        for pid in pids {
            // SIGKILL reaches a straggler (a gcc mid-compile, not our child) asynchronously:
            // give the kernel a moment before calling it left running.
            let until = Instant::now() + Duration::from_secs(2);
            while !group_members(pid).is_empty() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(10));
            }
            assert_eq!(
                group_members(pid),
                Vec::<u32>::new(),
                "load group {pid} left running"
            );
        }
    }

    #[test]
    fn stress_ng_load_is_reaped_on_drop() {
        if !tame_testing::require::require(resolve("stress-ng").is_some(), "stress-ng") {
            return;
        }
        let spec = LoadSpec {
            kinds: vec![LoadKind::Cpu, LoadKind::Io],
            cpus: CpuList::parse("0").unwrap(),
            command: None,
        };
        let pids = {
            let load = RunningLoad::start(&spec, Duration::from_secs(5)).unwrap();
            std::thread::sleep(Duration::from_millis(500));
            load.pids()
        };
        for pid in pids {
            assert_eq!(
                group_members(pid),
                Vec::<u32>::new(),
                "stress-ng group {pid} left running"
            );
        }
    }

    #[test]
    fn cache_stream_and_rt_get_bounded_background_arguments() {
        assert_eq!(
            LoadKind::Cache.stress_ng_args(2),
            ["--cache", "2", "--cache-no-affinity"]
        );
        assert_eq!(
            LoadKind::Stream.stress_ng_args(3),
            ["--stream", "3", "--stream-l3-size", "4M"]
        );
        assert_eq!(
            LoadKind::Rt.stress_ng_args(2),
            [
                "--cyclic",
                "2",
                "--cyclic-policy",
                "fifo",
                "--cyclic-prio",
                "80",
                "--cyclic-sleep",
                "100000"
            ]
        );
        assert_eq!(LoadKind::Cpu.stress_ng_args(1), ["--cpu", "1"]);
        assert!(LoadKind::Build.stress_ng_args(4).is_empty());
        assert_eq!(
            LoadKind::parse_list("rt,cache").unwrap(),
            vec![LoadKind::Cache, LoadKind::Rt]
        );
        assert_eq!(LoadKind::Rt.name(), "rt");
    }

    #[test]
    fn every_stressor_runs_in_one_stress_ng_on_the_load_cpus() {
        let spec = LoadSpec {
            kinds: LoadKind::parse_list("cpu,cache,stream,rt,build").unwrap(),
            cpus: CpuList::parse("2-3").unwrap(),
            command: None,
        };
        let args = stress_ng_args(&spec, Path::new("/tmp/w"), Duration::from_secs(10)).unwrap();
        let line = args.join(" ");
        assert!(line.starts_with("--taskset 2-3 "), "{line}");
        assert!(line.contains("--timeout 15s"), "{line}");
        for part in ["--cpu 2", "--cache 2", "--stream 2", "--cyclic 2"] {
            assert!(line.contains(part), "{part} missing: {line}");
        }
        assert!(!line.contains("build"), "{line}");
        let own = LoadSpec {
            kinds: Vec::new(),
            command: Some("sleep 1".into()),
            ..spec
        };
        assert_eq!(
            stress_ng_args(&own, Path::new("/tmp/w"), Duration::ZERO),
            None
        );
    }

    #[test]
    fn a_load_command_must_be_some_text_and_alone() {
        let spec = |kinds: Vec<LoadKind>, command: &str| LoadSpec {
            kinds,
            cpus: CpuList::parse("0").unwrap(),
            command: Some(command.into()),
        };
        for bad in ["", "  \t", "sleep\0 1"] {
            let err = spec(Vec::new(), bad).check_tools().unwrap_err();
            assert!(err.is_bad_input(), "{bad:?}: {err}");
            assert!(err.to_string().contains("--load-cmd"), "{err}");
        }
        let both = spec(vec![LoadKind::Cpu], "sleep 1")
            .check_tools()
            .unwrap_err();
        assert!(
            both.is_bad_input() && both.to_string().contains("not both"),
            "{both}"
        );
        if tame_testing::require::require(resolve("sh").is_some(), "sh") {
            spec(Vec::new(), "make -j4").check_tools().unwrap();
        }
    }

    /// Root may use SCHED_FIFO 80: the rt load passes its check (the refusal is the
    /// probe's, tested in tame-rt).
    #[test]
    fn the_rt_load_is_allowed_to_root() {
        if !tame_testing::require::require(tame_testing::require::is_root(), "root (SCHED_FIFO)")
            || !tame_testing::require::require(resolve("stress-ng").is_some(), "stress-ng")
        {
            return;
        }
        let spec = LoadSpec {
            kinds: vec![LoadKind::Rt],
            cpus: CpuList::parse("0").unwrap(),
            command: None,
        };
        spec.check_tools().unwrap();
    }

    /// The CPUs `pid` may run on, from /proc/PID/status.
    fn allowed_cpus(pid: u32) -> Option<String> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .map(|v| v.trim().to_string())
    }

    /// `--load-cmd`: the user's command runs pinned to the load CPUs, is recorded as run,
    /// and ends with its whole process group.
    #[test]
    fn a_load_command_runs_pinned_and_ends_with_its_group() {
        if !tame_testing::require::require(resolve("sh").is_some(), "sh") {
            return;
        }
        // A strict subset of the CPUs allowed here where there are several, so the pin
        // is seen to be the load's and not inherited.
        let allowed = tame_rt::sched::allowed_cpus();
        let take = allowed.len().saturating_sub(1).clamp(1, 2);
        let cpus = CpuList::from_cpus(allowed.into_iter().take(take));
        let spec = LoadSpec {
            kinds: Vec::new(),
            cpus: cpus.clone(),
            command: Some("sleep 30; echo never".into()),
        };
        let load = RunningLoad::start(&spec, Duration::from_secs(5)).unwrap();
        let pids = load.pids();
        assert_eq!(pids.len(), 1);
        let leader = pids[0];
        // The shell has started its sleep: both are in the group, both pinned.
        assert!(tame_testing::poll::until(Duration::from_secs(2), || {
            group_members(leader).len() >= 2
        }));
        for pid in group_members(leader) {
            assert_eq!(allowed_cpus(pid), Some(cpus.to_string()), "pid {pid}");
        }
        let description = load.stop();
        assert_eq!(
            description.commands,
            [format!("taskset -c {cpus} sh -c 'sleep 30; echo never'")]
        );
        assert_eq!(description.command.as_deref(), Some("sleep 30; echo never"));
        assert!(description.throughput.is_empty());
        assert_eq!(
            group_members(leader),
            Vec::<u32>::new(),
            "load group left running"
        );
    }
}
