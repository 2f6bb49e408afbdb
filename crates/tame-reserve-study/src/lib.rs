//! The reservation study (`tame bench reserve`), the proof's harness: the scheduling-server
//! study reproduced for tame-reserve's three backends. A crate of its own so tame-reserve
//! (the backends) does not depend on tame-bench (whose result schema the study's report uses). Work is counted by the kernel processes in shared memory and read by
//! wall clock; the sampling loop sleeps to absolute times and reads memory, nothing else.
//!
//! - Overhead (the paper's Table 1): for each share p, a reserved client and an ordinary
//!   competitor run the same kernel on the same CPU; O_I = 1 − L_I/(pG), O_E = 1 − L_E/((1−p)G),
//!   G the kernel's rate alone. The deadline backend cannot pin (see [`tame_reserve::deadline`]):
//!   there the client runs on any CPU beside one competitor per CPU, and L_E is compared
//!   with (n − p)G.
//! - Stability (Table 2): the coefficient of variation of the client's rate over ≥ 100
//!   windows, with the competitor always present (so the CPU is saturated and the client
//!   gets exactly what the reservation gives), unloaded and with 0…10 background processes
//!   of computational and of disk-I/O load (stress-ng), one more every few windows.

mod markdown;
mod process;
pub mod result;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tame_host::Root;
use tame_rt::clock::{monotonic_ns, sleep_until};

pub use markdown::markdown;
pub use tame_reserve::kit::ServerProcess;

use process::{Load, Worker};

use tame_reserve::error::Failure;
use tame_reserve::kit::Kit;
use tame_reserve::server::protocol::Request as WireRequest;
use tame_reserve::spec::{Backend, Request, PPM};
use tame_reserve::work::Counter;
use tame_reserve::ReserveError;

/// The study's outcome: tame-reserve's error (bad input, refused, or a failure with its cause).
pub type Result<T, E = ReserveError> = std::result::Result<T, E>;

/// A failure with nothing underneath.
fn failed(message: impl Into<String>) -> ReserveError {
    ReserveError::Failed(Failure::Message(message.into()))
}

impl tame_host::Document for Report {
    const SCHEMA: tame_host::Schema = tame_host::schema!(Number "tame.reserve.study", 1);
}

#[derive(Clone, Debug)]
pub struct Options {
    /// How to start the work kernels and the server (see [`tame_reserve::kit`]).
    pub kit: Kit,
    /// Scratch directory (counters, socket, disk-I/O load files).
    pub scratch: PathBuf,
    pub state_dir: PathBuf,
    pub cpu: u32,
    pub backends: Vec<Backend>,
    pub shares_ppm: Vec<u64>,
    pub period_ns: u64,
    pub warmup_ns: u64,
    /// Measurement time per overhead point.
    pub overhead_window_ns: u64,
    pub stability_share_ppm: u64,
    pub stability_window_ns: u64,
    /// Windows per background-load step (0…max_load), and for the unloaded series.
    pub windows_per_step: usize,
    pub unloaded_windows: usize,
    pub max_load: usize,
    /// Periodic-client study: frames due every frame_ns, each needing frame_cpu_ns of CPU;
    /// `frames` per configuration (0 skips the study).
    pub frame_ns: u64,
    pub frame_cpu_ns: u64,
    pub frames: usize,
    /// Set (by Ctrl-C) to end the study early with what it measured so far.
    pub stop: Arc<AtomicBool>,
}

impl Options {
    /// The study as the paper ran it (`quick`: fewer shares and windows, about 1.5 minutes
    /// in place of 8), on `cpu`, for `backends`, with scratch files below `scratch`.
    pub fn standard(
        kit: Kit,
        scratch: PathBuf,
        cpu: u32,
        backends: Vec<Backend>,
        quick: bool,
    ) -> Self {
        Options {
            kit,
            state_dir: scratch.join("state"),
            scratch,
            cpu,
            backends,
            shares_ppm: if quick {
                vec![200_000, 500_000, 800_000]
            } else {
                (1..=9).map(|i| i * 100_000).collect()
            },
            period_ns: 40_000_000,
            warmup_ns: 500_000_000,
            overhead_window_ns: if quick { 1_000_000_000 } else { 3_000_000_000 },
            stability_share_ppm: 500_000,
            // Five whole periods: a window always holds the same number of slices.
            stability_window_ns: 200_000_000,
            windows_per_step: if quick { 3 } else { 10 },
            unloaded_windows: if quick { 20 } else { 100 },
            max_load: 10,
            frame_ns: 100_000_000,
            frame_cpu_ns: 15_000_000,
            frames: if quick { 10 } else { 30 },
            stop: Arc::new(AtomicBool::new(false)),
        }
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OverheadRow {
    pub backend: Backend,
    pub share_ppm: u64,
    /// G for this point (SCHED_FIFO 1, median of 100 ms windows), and the kernel's rate as
    /// an ordinary process alone beside the machine's other jobs.
    pub g: f64,
    pub g_shared: f64,
    /// Kernel rounds per second.
    pub client_rate: f64,
    pub rest_rate: f64,
    /// L_I / G and L_E / G (in CPUs).
    pub client_cpu: f64,
    pub rest_cpu: f64,
    pub o_i: f64,
    pub o_e: f64,
    /// O_E against what an ordinary process gets of the shared CPU: 1 − L_E/((1−p)·G_shared).
    /// The machine's other jobs take part of the rest too; this leaves them out.
    pub o_e_shared: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StabilityRow {
    pub backend: Backend,
    pub share_ppm: u64,
    /// none, cpu or io.
    pub load: String,
    pub windows: usize,
    pub mean_rate: f64,
    pub cv: f64,
    /// Mean client CPU share per load step (0…max_load background processes).
    pub step_cpu: Vec<f64>,
    /// The client's rate in each window, in order (absent in reports written before).
    #[serde(default)]
    pub window_rates: Vec<f64>,
}

/// The periodic-client study: a frame due every 100 ms, needing a fixed CPU time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FrameRow {
    /// "none" or "server HIGH/LOW ms" (slice / rest of the period).
    pub config: String,
    pub background: usize,
    pub frames: usize,
    pub min_ms: f64,
    pub avg_ms: f64,
    pub max_ms: f64,
    /// Each distance between two frames' completions, ns (absent in reports written before).
    #[serde(default)]
    pub distances_ns: Vec<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema: u32,
    pub kernel: String,
    pub online_cpus: usize,
    pub cpu: u32,
    pub period_ns: u64,
    pub stability_window_ns: u64,
    pub loadavg_before: String,
    pub loadavg_after: String,
    /// G: kernel rounds per second alone on the CPU (measured before and after).
    pub g_before: f64,
    pub g_after: f64,
    /// The kernel's rate alone as an ordinary process: below G by what other jobs took.
    pub shared_rate_before: f64,
    /// S of the kernel alone at SCHED_FIFO 1 (RT throttling included), and its windows.
    pub floor_cv: f64,
    pub floor_windows: usize,
    pub overhead: Vec<OverheadRow>,
    pub stability: Vec<StabilityRow>,
    /// CPU time per frame, and the study's rows.
    pub frame_cpu_ns: u64,
    pub periodic: Vec<FrameRow>,
    /// Backends that could not run, and why.
    pub skipped: Vec<String>,
    /// True when Ctrl-C ended the study early: the tables hold what was measured.
    #[serde(default)]
    pub interrupted: bool,
}

/// A reservation held for the length of one measurement.
enum Held {
    Server(PathBuf, u32),
    Deadline(u32),
    Cgroup(u32),
}

fn reserve(
    o: &Options,
    backend: Backend,
    server: Option<&ServerProcess>,
    pid: u32,
    share_ppm: u64,
) -> Result<Held> {
    let root = Root::system();
    match backend {
        Backend::Server => {
            let s = server.ok_or_else(|| failed("no server running"))?;
            tame_reserve::server::client::call(
                &s.socket,
                &WireRequest::Reserve {
                    pid,
                    share_ppm,
                    period_ns: o.period_ns,
                    cpu: o.cpu,
                },
            )?;
            Ok(Held::Server(s.socket.clone(), pid))
        }
        Backend::Deadline => {
            let req = Request {
                share_ppm,
                period_ns: o.period_ns,
                cpu: None,
                backend,
            };
            tame_reserve::deadline::reserve_pid(&root, &o.state_dir, pid, &req)?;
            Ok(Held::Deadline(pid))
        }
        Backend::Cgroup => {
            let req = Request {
                share_ppm,
                period_ns: o.period_ns,
                cpu: Some(o.cpu),
                backend,
            };
            tame_reserve::cgroup::reserve_pid(&root, &o.state_dir, pid, &req)?;
            Ok(Held::Cgroup(pid))
        }
    }
}

fn release(o: &Options, held: Held) {
    match held {
        Held::Cgroup(pid) => {
            let _ = tame_reserve::cgroup::release_pid(&Root::system(), &o.state_dir, pid);
        }
        Held::Server(socket, pid) => {
            let _ = tame_reserve::server::client::call(&socket, &WireRequest::Release { pid });
        }
        Held::Deadline(pid) => {
            let _ = tame_reserve::deadline::release_pid(&Root::system(), &o.state_dir, pid);
        }
    }
}

fn rate(counter: &Counter, window_ns: u64) -> f64 {
    let (c0, t0) = (counter.get(), monotonic_ns());
    sleep_until(t0 + window_ns);
    let (c1, t1) = (counter.get(), monotonic_ns());
    (c1 - c0) as f64 * 1e9 / (t1 - t0) as f64
}

fn rates(counters: &[&Counter], window_ns: u64) -> Vec<f64> {
    let t0 = monotonic_ns();
    let c0: Vec<u64> = counters.iter().map(|c| c.get()).collect();
    sleep_until(t0 + window_ns);
    let t1 = monotonic_ns();
    counters
        .iter()
        .zip(c0)
        .map(|(c, s)| (c.get() - s) as f64 * 1e9 / (t1 - t0) as f64)
        .collect()
}

/// Coefficient of variation: population standard deviation over the mean (the paper's S).
pub fn coefficient_of_variation(values: &[f64]) -> f64 {
    let n = values.len() as f64;
    if values.is_empty() {
        return 0.0;
    }
    let mean = values.iter().sum::<f64>() / n;
    if mean == 0.0 {
        return 0.0;
    }
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    var.sqrt() / mean
}

/// O_I and O_E as the paper defines them (shares in ppm, rates in rounds/s; `cpus` is what
/// client and rest share: 1 for a pinned CPU, n for the whole root domain).
pub fn overheads(
    share_ppm: u64,
    g: f64,
    client_rate: f64,
    rest_rate: f64,
    cpus: f64,
) -> (f64, f64) {
    let p = share_ppm as f64 / PPM as f64;
    (
        1.0 - client_rate / (p * g),
        1.0 - rest_rate / ((cpus - p) * g),
    )
}

/// G, the kernel's rate with the CPU to itself. The machine is shared (other jobs run on
/// it), so the kernel runs at SCHED_FIFO 1 for this: the median of 100 ms windows leaves
/// out the windows where RT throttling or the fair server stopped it.
/// Also returns the rate as an ordinary process (what the shared CPU gives).
fn measure_g(o: &Options, shared_ns: u64, fifo_windows: usize) -> Result<(f64, f64)> {
    let w = Worker::start(o, "alone", Some(o.cpu))?;
    sleep_until(monotonic_ns() + 100_000_000);
    let shared = rate(&w.counter, shared_ns);
    drop(w);
    // A kernel of its own at FIFO 1, set as it starts: tame changes no running thread here.
    let w = Worker::start_with(o, "alone-fifo", Some(o.cpu), fifo1()).map_err(|e| {
        failed(format!(
            "cannot run the kernel at SCHED_FIFO 1 to measure G (root needed): {e}"
        ))
    })?;
    let mut windows: Vec<f64> = (0..fifo_windows)
        .map(|_| rate(&w.counter, 100_000_000))
        .collect();
    drop(w);
    windows.sort_by(f64::total_cmp);
    Ok((windows[windows.len() / 2], shared))
}

/// The kernel's policy where it measures alone: SCHED_FIFO 1 (its children ordinary).
fn fifo1() -> tame_rt::sched::SchedSpec {
    tame_rt::sched::SchedSpec::static_priority(tame_rt::Policy::Fifo, 1)
}

/// The floor any backend's S stands on: the kernel alone at SCHED_FIFO 1, the same windows.
fn stability_floor(o: &Options) -> Result<(f64, usize)> {
    let w = Worker::start_with(o, "floor", Some(o.cpu), fifo1()).map_err(|e| {
        failed(format!(
            "cannot run the kernel at SCHED_FIFO 1 (root needed): {e}"
        ))
    })?;
    let n = (o.unloaded_windows / 2).max(10);
    let mut samples: Vec<f64> = (0..n)
        .map(|_| rate(&w.counter, o.stability_window_ns))
        .collect();
    // Windows RT throttling cut (50 ms of every second at SCHED_FIFO) are the kernel's
    // doing, not the hardware's: left out of the floor.
    let mut sorted = samples.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    samples.retain(|&v| v >= 0.9 * median);
    Ok((coefficient_of_variation(&samples), samples.len()))
}

fn loadavg(root: &Root) -> String {
    root.loadavg().map(|l| l.line).unwrap_or_default()
}

/// Run the study. `progress` gets one line per step.
pub fn run(o: &Options, mut progress: impl FnMut(&str)) -> Result<Report> {
    let root = Root::system();
    let limits = tame_reserve::bandwidth::Limits::read(&root)?;
    let n_cpus = limits.online.len();
    let loadavg_before = loadavg(&root);
    let (g_before, shared_rate_before) = measure_g(o, o.overhead_window_ns, 15)?;
    progress(&format!(
        "G = {g_before:.0} rounds/s on CPU {} ({shared_rate_before:.0} as an ordinary process beside the other jobs)",
        o.cpu
    ));
    let mut report = Report {
        schema: <Report as tame_host::Document>::SCHEMA.version,
        kernel: limits.kernel_release.clone(),
        online_cpus: n_cpus,
        cpu: o.cpu,
        period_ns: o.period_ns,
        stability_window_ns: o.stability_window_ns,
        loadavg_before,
        loadavg_after: String::new(),
        g_before,
        g_after: 0.0,
        shared_rate_before,
        floor_cv: 0.0,
        floor_windows: 0,
        overhead: Vec::new(),
        stability: Vec::new(),
        frame_cpu_ns: o.frame_cpu_ns,
        periodic: Vec::new(),
        skipped: Vec::new(),
        interrupted: false,
    };
    (report.floor_cv, report.floor_windows) = stability_floor(o)?;
    progress(&format!(
        "S floor (kernel alone at SCHED_FIFO 1) = {:.4}",
        report.floor_cv
    ));
    for &backend in &o.backends {
        study_backend(o, backend, n_cpus, g_before, &mut report, &mut progress)?;
    }
    if o.frames > 0 && o.backends.contains(&Backend::Server) && !o.stopped() {
        match periodic(o, g_before, &mut progress) {
            Ok(rows) => report.periodic = rows,
            Err(e) => report.skipped.push(format!("periodic client: {e}")),
        }
    }
    report.interrupted = o.stopped();
    if !report.interrupted {
        report.g_after = measure_g(o, o.overhead_window_ns, 15)?.0;
    }
    report.loadavg_after = loadavg(&root);
    Ok(report)
}

/// One backend's part of the study: its overhead points (Table 1), then its stability
/// under each kind of background load (Table 2). What the backend refuses is noted in
/// `report.skipped` and the study goes on.
fn study_backend(
    o: &Options,
    backend: Backend,
    n_cpus: usize,
    g_before: f64,
    report: &mut Report,
    progress: &mut impl FnMut(&str),
) -> Result<()> {
    let server = match backend {
        Backend::Server => match ServerProcess::start(&o.kit, &o.scratch.join("serve.sock")) {
            Ok(s) => Some(s),
            Err(e) => {
                report.skipped.push(format!("server: {e}"));
                return Ok(());
            }
        },
        _ => None,
    };
    for &share in &o.shares_ppm {
        if o.stopped() {
            return Ok(());
        }
        match overhead_point(o, backend, server.as_ref(), share, n_cpus)? {
            Ok(row) => {
                progress(&format!(
                    "{backend} {}: O_I {:+.3} O_E {:+.3} (vs shared {:+.3})",
                    tame_reserve::spec::percent(share),
                    row.o_i,
                    row.o_e,
                    row.o_e_shared
                ));
                report.overhead.push(row);
            }
            Err(e) => report.skipped.push(format!(
                "{backend} at {}: {e}",
                tame_reserve::spec::percent(share)
            )),
        }
    }
    for load in ["none", "cpu", "io"] {
        if o.stopped() {
            return Ok(());
        }
        match stability(o, backend, server.as_ref(), load, g_before, n_cpus) {
            Ok(row) => {
                progress(&format!("{backend} stability ({load}): S = {:.4}", row.cv));
                report.stability.push(row);
            }
            Err(e) => report
                .skipped
                .push(format!("{backend} stability ({load}): {e}")),
        }
    }
    Ok(())
}

/// One point of Table 1: G measured before and after (it drifts on a shared VM: steal
/// time, other jobs), and between them the rates of a reserved client and its
/// competitors. The inner error is the backend refusing the reservation.
fn overhead_point(
    o: &Options,
    backend: Backend,
    server: Option<&ServerProcess>,
    share: u64,
    n_cpus: usize,
) -> Result<Result<OverheadRow>> {
    let (g0, shared0) = measure_g(o, 500_000_000, 7)?;
    let r = match reserved_rates(o, backend, server, share, n_cpus)? {
        Ok(r) => r,
        Err(refused) => return Ok(Err(refused)),
    };
    let (g1, shared1) = measure_g(o, 500_000_000, 7)?;
    let (g, g_shared) = ((g0 + g1) / 2.0, (shared0 + shared1) / 2.0);
    // A pinned client and its competitor share one CPU; otherwise the whole root domain.
    let pinned = backend != Backend::Deadline;
    let cpus = if pinned { 1.0 } else { n_cpus as f64 };
    let (client_rate, rest_rate) = (r[0], r[1..].iter().sum::<f64>());
    let (o_i, o_e) = overheads(share, g, client_rate, rest_rate, cpus);
    let (_, o_e_shared) = overheads(share, g_shared, client_rate, rest_rate, cpus);
    Ok(Ok(OverheadRow {
        backend,
        share_ppm: share,
        g,
        g_shared,
        client_rate,
        rest_rate,
        client_cpu: client_rate / g,
        rest_cpu: rest_rate / g,
        o_i,
        o_e,
        o_e_shared,
    }))
}

/// The rates of a client holding `share` and of its competitors (client first), over one
/// overhead window after the warm-up. The inner error is the backend refusing the
/// reservation.
fn reserved_rates(
    o: &Options,
    backend: Backend,
    server: Option<&ServerProcess>,
    share: u64,
    n_cpus: usize,
) -> Result<Result<Vec<f64>>> {
    let pinned = backend != Backend::Deadline;
    let client = Worker::start(o, "client", pinned.then_some(o.cpu))?;
    let rest = competitors(o, pinned, n_cpus)?;
    let held = match reserve(o, backend, server, client.pid(), share) {
        Ok(h) => h,
        Err(refused) => return Ok(Err(refused)),
    };
    sleep_until(monotonic_ns() + o.warmup_ns);
    let mut counters = vec![&client.counter];
    counters.extend(rest.iter().map(|w| &w.counter));
    let r = rates(&counters, o.overhead_window_ns);
    release(o, held);
    drop(client);
    drop(rest);
    Ok(Ok(r))
}

/// The ordinary processes that compete with the client: one on its CPU when pinned,
/// else one per online CPU (the deadline backend cannot pin).
fn competitors(o: &Options, pinned: bool, n_cpus: usize) -> Result<Vec<Worker>> {
    if pinned {
        Ok(vec![Worker::start(o, "rest0", Some(o.cpu))?])
    } else {
        (0..n_cpus)
            .map(|i| Worker::start(o, &format!("rest{i}"), None))
            .collect()
    }
}

fn stability(
    o: &Options,
    backend: Backend,
    server: Option<&ServerProcess>,
    load: &str,
    g: f64,
    n_cpus: usize,
) -> Result<StabilityRow> {
    let pinned = backend != Backend::Deadline;
    let client = Worker::start(o, "client", pinned.then_some(o.cpu))?;
    let _rest = competitors(o, pinned, n_cpus)?;
    let held = reserve(o, backend, server, client.pid(), o.stability_share_ppm)?;
    sleep_until(monotonic_ns() + o.warmup_ns);
    let mut samples = Vec::new();
    let mut step_cpu = Vec::new();
    let mut bg = Load::new();
    let result: Result<()> = (|| {
        if load == "none" {
            for _ in 0..o.unloaded_windows {
                if o.stopped() {
                    break;
                }
                samples.push(rate(&client.counter, o.stability_window_ns));
            }
            if !samples.is_empty() {
                step_cpu.push(samples.iter().sum::<f64>() / samples.len() as f64 / g);
            }
            return Ok(());
        }
        for step in 0..=o.max_load {
            if step > 0 {
                bg.add(load, pinned.then_some(o.cpu), &o.scratch)?;
            }
            let first = samples.len();
            for _ in 0..o.windows_per_step {
                if o.stopped() {
                    return Ok(());
                }
                samples.push(rate(&client.counter, o.stability_window_ns));
            }
            let part = &samples[first..];
            step_cpu.push(part.iter().sum::<f64>() / part.len() as f64 / g);
        }
        Ok(())
    })();
    drop(bg);
    release(o, held);
    result?;
    if samples.is_empty() {
        return Err(failed("stopped before the first window"));
    }
    Ok(StabilityRow {
        backend,
        share_ppm: o.stability_share_ppm,
        load: load.to_string(),
        windows: samples.len(),
        mean_rate: samples.iter().sum::<f64>() / samples.len() as f64,
        cv: coefficient_of_variation(&samples),
        step_cpu,
        window_rates: samples,
    })
}

/// One periodic-client configuration: its label, the server reservation (share, period)
/// if any, and the numbers of background processes it runs beside.
type FrameConfig = (&'static str, Option<(u64, u64)>, &'static [usize]);

/// Frame distances of a periodic client, without and with server reservations (the
/// paper's Tables 3–6), beside 0, 5 and 10 computational background processes on its CPU.
fn periodic(o: &Options, g: f64, progress: &mut impl FnMut(&str)) -> Result<Vec<FrameRow>> {
    let server = ServerProcess::start(&o.kit, &o.scratch.join("periodic.sock"))?;
    let rounds = ((o.frame_cpu_ns as f64 * g / 1e9).round() as u64).max(1);
    // (label, (share, period), background processes): high/low phases as in the paper —
    // Tables 3, 5 and 6 (none and the short periods, 0/5/10 background processes) and
    // Table 4 (a 100 ms server period, unloaded).
    const LOADS: &[usize] = &[0, 5, 10];
    const UNLOADED: &[usize] = &[0];
    let configs: [FrameConfig; 9] = [
        ("none", None, LOADS),
        ("server 10/40 ms", Some((200_000, 50_000_000)), LOADS),
        ("server 10/30 ms", Some((250_000, 40_000_000)), LOADS),
        ("server 20/20 ms", Some((500_000, 40_000_000)), LOADS),
        ("server 10/90 ms", Some((100_000, 100_000_000)), UNLOADED),
        ("server 20/80 ms", Some((200_000, 100_000_000)), UNLOADED),
        ("server 30/70 ms", Some((300_000, 100_000_000)), UNLOADED),
        ("server 40/60 ms", Some((400_000, 100_000_000)), UNLOADED),
        ("server 50/50 ms", Some((500_000, 100_000_000)), UNLOADED),
    ];
    let mut rows = Vec::new();
    for (label, reservation, backgrounds) in configs {
        for &background in backgrounds {
            if o.stopped() {
                return Ok(rows);
            }
            let mut load = Load::new();
            for _ in 0..background {
                load.add("cpu", Some(o.cpu), &o.scratch)?;
            }
            let client = Worker::start_mode(
                o,
                "frames",
                Some(o.cpu),
                None,
                "frames",
                &[rounds.to_string(), o.frame_ns.to_string()],
            )?;
            if let Some((share_ppm, period_ns)) = reservation {
                tame_reserve::server::client::call(
                    &server.socket,
                    &WireRequest::Reserve {
                        pid: client.pid(),
                        share_ppm,
                        period_ns,
                        cpu: o.cpu,
                    },
                )?;
            }
            // Frames finished before the reservation held are left out.
            let start = monotonic_ns() + o.frame_ns;
            sleep_until(start + o.frames as u64 * o.frame_ns);
            let times: Vec<u64> = client
                .counter
                .frame_times()
                .into_iter()
                .filter(|&t| t >= start)
                .collect();
            if reservation.is_some() {
                let _ = tame_reserve::server::client::call(
                    &server.socket,
                    &WireRequest::Release { pid: client.pid() },
                );
            }
            drop(client);
            drop(load);
            let distances_ns: Vec<u64> = times.windows(2).map(|w| w[1] - w[0]).collect();
            let distances: Vec<f64> = distances_ns.iter().map(|&d| d as f64 / 1e6).collect();
            let row = FrameRow {
                config: label.to_string(),
                background,
                frames: distances.len(),
                min_ms: distances.iter().copied().fold(f64::INFINITY, f64::min),
                avg_ms: distances.iter().sum::<f64>() / distances.len().max(1) as f64,
                max_ms: distances.iter().copied().fold(0.0, f64::max),
                distances_ns,
            };
            progress(&format!(
                "periodic {label}, {background} background: frame distance {:.1}/{:.1}/{:.1} ms",
                row.min_ms, row.avg_ms, row.max_ms
            ));
            rows.push(row);
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_definitions() {
        // Paper, 10 % row: client got 7.13 % of G, the rest 89.58 %.
        let (o_i, o_e) = overheads(100_000, 1.0, 0.0713, 0.8958, 1.0);
        assert!((o_i - 0.287).abs() < 0.001, "{o_i}");
        assert!((o_e - 0.0047).abs() < 0.001, "{o_e}");
        assert!((coefficient_of_variation(&[1.0, 1.0, 1.0])).abs() < 1e-12);
        let cv = coefficient_of_variation(&[9.0, 11.0]);
        assert!((cv - 0.1).abs() < 1e-12, "{cv}");
    }
}
