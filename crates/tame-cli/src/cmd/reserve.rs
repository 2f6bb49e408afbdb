//! `tame reserve`: guarantee a process a CPU share per period through the scheduling server,
//! SCHED_DEADLINE or a cgroup bandwidth cap; list and release reservations; check a set of
//! periodic reservations without running anything.

use std::ffi::OsString;
use std::path::PathBuf;

use serde::Serialize;
use tame_bench::units::parse_duration_ns;
use tame_host::journal::DEFAULT_JOURNAL_DIR;
use tame_launch::LaunchError;
use tame_reserve::bandwidth::{self, Limits};
use tame_reserve::server::{self as srv, client, protocol::Request as Wire};
use tame_reserve::spec::{self, percent, Backend, Request, DEFAULT_CAP_PPM, PPM};
use tame_reserve::{admission, cgroup, deadline, gate, ReserveError};

use crate::{bad_input, Context};

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("what").args(["pid", "list", "release", "check", "command"]).required(true)))]
pub struct ReserveArgs {
    /// CPU share to guarantee, e.g. 25%.
    #[arg(long)]
    share: Option<String>,
    /// Period the share holds in, e.g. 40ms (1 ms … 10 s).
    #[arg(long)]
    period: Option<String>,
    /// The CPU (server: default the highest online CPU; cgroup: pins the process there;
    /// deadline: refused — SCHED_DEADLINE cannot pin outside an exclusive cpuset).
    #[arg(long)]
    cpu: Option<u32>,
    /// server (tame serve), deadline (SCHED_DEADLINE) or cgroup (a bandwidth cap, not a guarantee).
    #[arg(long, default_value = "server")]
    backend: String,
    /// Reserve for a running process.
    #[arg(long)]
    pid: Option<u32>,
    /// List reservations of every backend.
    #[arg(long)]
    list: bool,
    /// Release a process's reservation, whichever backend holds it.
    #[arg(long, value_name = "PID")]
    release: Option<u32>,
    /// Admission analysis of a set of periodic reservations (EDF and rate-monotonic), nothing run.
    #[arg(long, value_name = "SET.toml")]
    check: Option<PathBuf>,
    /// The scheduling server's socket.
    #[arg(long, default_value = srv::DEFAULT_SOCKET)]
    socket: PathBuf,
    /// Where cgroup reservations keep their journals.
    #[arg(long, default_value = DEFAULT_JOURNAL_DIR)]
    state_dir: PathBuf,
    /// Print the result as JSON (the reservation made, the list, or the analysis).
    #[arg(long)]
    json: bool,
    /// Run this program with the reservation; released when it exits.
    #[arg(last = true, value_name = "CMD")]
    command: Vec<OsString>,
}

fn lift(e: ReserveError) -> anyhow::Error {
    if e.is_bad_input() {
        bad_input(e.to_string())
    } else {
        anyhow::anyhow!(e.to_string())
    }
}

fn lift_launch(e: LaunchError) -> anyhow::Error {
    match e {
        LaunchError::Invalid(m) => bad_input(m),
        LaunchError::Failed(m) => anyhow::anyhow!(m),
    }
}

/// A reservation made, as printed.
#[derive(Serialize)]
struct Made {
    backend: Backend,
    pid: u32,
    share_ppm: u64,
    period_ns: u64,
    runtime_ns: u64,
    cpu: Option<u32>,
    notes: Vec<String>,
}

pub fn run(ctx: &Context, args: ReserveArgs) -> anyhow::Result<i32> {
    if let Some(path) = &args.check {
        return check(path, args.json);
    }
    if args.list {
        return list(ctx, &args);
    }
    if let Some(pid) = args.release {
        return release(ctx, &args, pid);
    }
    let (req, limits) = request(ctx, &args)?;
    match args.pid {
        Some(pid) => {
            let info = tame_launch::proc::inspect(&ctx.root, pid).map_err(lift_launch)?;
            tame_launch::detach::check_owner(&info, caller_uid()).map_err(lift_launch)?;
            reserve(ctx, &args, &req, pid)?;
            print_made(&args, &req, pid, &limits);
            Ok(0)
        }
        None => run_command(ctx, &args, &req, &limits),
    }
}

fn caller_uid() -> u32 {
    // SAFETY: no arguments.
    unsafe { libc::getuid() }
}

/// Parse and validate the request before anything is started or written.
fn request(ctx: &Context, args: &ReserveArgs) -> anyhow::Result<(Request, Limits)> {
    let backend: Backend = args.backend.parse().map_err(bad_input)?;
    let share = args
        .share
        .as_deref()
        .ok_or_else(|| bad_input("no --share — say how much CPU to guarantee, e.g. --share 25%"))?;
    let period = args.period.as_deref().ok_or_else(|| {
        bad_input("no --period — say the period the share holds in, e.g. --period 40ms")
    })?;
    let share_ppm = spec::parse_share_ppm(share).map_err(lift)?;
    let period_ns = parse_duration_ns(period).map_err(|e| bad_input(format!("--period: {e}")))?;
    let limits = Limits::read(&ctx.root).map_err(lift)?;
    let cpu = match (backend, args.cpu) {
        (Backend::Deadline, Some(c)) => return Err(bad_input(deadline::pinning_refusal(c))),
        (Backend::Server, None) => limits.online.last().copied(),
        (_, c) => c,
    };
    let cap = match backend {
        Backend::Server => DEFAULT_CAP_PPM,
        Backend::Deadline => limits.deadline_cap_ppm(),
        Backend::Cgroup => PPM,
    };
    let req = Request {
        share_ppm,
        period_ns,
        cpu,
        backend,
    };
    req.validate(cap, &limits.online).map_err(lift)?;
    if backend == Backend::Cgroup {
        cgroup::quota_period_us(&req).map_err(lift)?;
        cgroup::controller(&ctx.root).map_err(lift)?;
    }
    Ok((req, limits))
}

fn reserve(ctx: &Context, args: &ReserveArgs, req: &Request, pid: u32) -> anyhow::Result<()> {
    match req.backend {
        Backend::Server => {
            client::call(
                &args.socket,
                &Wire::Reserve {
                    pid,
                    share_ppm: req.share_ppm,
                    period_ns: req.period_ns,
                    cpu: req.cpu.unwrap_or(0),
                },
            )
            .map_err(lift)?;
        }
        Backend::Deadline => {
            deadline::reserve_pid(&ctx.root, pid, req).map_err(lift)?;
        }
        Backend::Cgroup => {
            cgroup::reserve_pid(&ctx.root, &args.state_dir, pid, req).map_err(lift)?;
        }
    }
    Ok(())
}

fn print_made(args: &ReserveArgs, req: &Request, pid: u32, limits: &Limits) {
    let mut notes = limits.notes();
    if req.backend == Backend::Cgroup {
        notes.push("cgroup bandwidth is a cap, not a guarantee: the process may use at most this share, but may get less".into());
    }
    let made = Made {
        backend: req.backend,
        pid,
        share_ppm: req.share_ppm,
        period_ns: req.period_ns,
        runtime_ns: req.runtime_ns(),
        cpu: req.cpu,
        notes,
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&made).unwrap_or_default()
        );
        return;
    }
    let place = made
        .cpu
        .map_or("any CPU".to_string(), |c| format!("CPU {c}"));
    eprintln!(
        "reserved {} of every {} µs ({} µs) for process {pid} on {place} ({} backend)",
        percent(made.share_ppm),
        made.period_ns / 1_000,
        made.runtime_ns / 1_000,
        made.backend
    );
    for n in &made.notes {
        eprintln!("  note: {n}");
    }
}

fn run_command(
    ctx: &Context,
    args: &ReserveArgs,
    req: &Request,
    limits: &Limits,
) -> anyhow::Result<i32> {
    let cpus: Vec<u32> = match (req.backend, req.cpu) {
        (Backend::Deadline, _) | (_, None) => limits.online.clone(),
        (_, Some(c)) => vec![c],
    };
    // The program waits before exec until the reservation holds.
    let mut gated = gate::spawn(&args.command, &cpus).map_err(lift)?;
    let pid = gated.pid();
    if let Err(e) = reserve(ctx, args, req, pid) {
        gated.abandon();
        return Err(e);
    }
    gated.open().map_err(lift)?;
    print_made(args, req, pid, limits);
    let status = gated.wait().map_err(lift);
    // The program is gone: give the share back now.
    match req.backend {
        Backend::Cgroup => {
            cgroup::release_pid(&ctx.root, &args.state_dir, pid).map_err(lift)?;
        }
        Backend::Server => {
            let _ = client::call(&args.socket, &Wire::Release { pid });
        }
        Backend::Deadline => {}
    }
    Ok(gate::exit_code(status?))
}

#[derive(Serialize)]
struct Listed {
    backend: Backend,
    pid: u32,
    share_ppm: u64,
    period_ns: u64,
    cpu: Option<u32>,
    detail: String,
}

fn list(ctx: &Context, args: &ReserveArgs) -> anyhow::Result<i32> {
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    match client::call(&args.socket, &Wire::List) {
        Ok(status) => {
            for c in status.clients {
                rows.push(Listed {
                    backend: Backend::Server,
                    pid: c.pid,
                    share_ppm: c.share_ppm,
                    period_ns: c.period_ns,
                    cpu: Some(c.cpu),
                    detail: format!("threads {:?}", c.tids),
                });
            }
        }
        Err(_) => notes.push(format!("no scheduling server at {}", args.socket.display())),
    }
    let live = if ctx.root.is_system() {
        bandwidth::live_params
    } else {
        |_| None
    };
    for t in bandwidth::deadline_threads(&ctx.root, live) {
        rows.push(Listed {
            backend: Backend::Deadline,
            pid: t.pid,
            share_ppm: t.share_ppm(),
            period_ns: t.period_ns,
            cpu: None,
            detail: format!("thread {} ({})", t.tid, t.comm),
        });
    }
    for r in cgroup::list(&args.state_dir) {
        rows.push(Listed {
            backend: Backend::Cgroup,
            pid: r.pid,
            share_ppm: r.share_ppm,
            period_ns: r.period_us * 1_000,
            cpu: None,
            detail: r.group.clone(),
        });
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(0);
    }
    println!(
        "{:<9} {:>8} {:>8} {:>10} {:>4}  detail",
        "backend", "pid", "share", "period", "cpu"
    );
    for r in &rows {
        println!(
            "{:<9} {:>8} {:>8} {:>8}ms {:>4}  {}",
            r.backend,
            r.pid,
            percent(r.share_ppm),
            r.period_ns / 1_000_000,
            r.cpu.map_or("any".to_string(), |c| c.to_string()),
            r.detail
        );
    }
    for n in notes {
        eprintln!("note: {n}");
    }
    Ok(0)
}

fn release(ctx: &Context, args: &ReserveArgs, pid: u32) -> anyhow::Result<i32> {
    let mut released = Vec::new();
    if let Ok(status) = client::call(&args.socket, &Wire::List) {
        if status.clients.iter().any(|c| c.pid == pid) {
            client::call(&args.socket, &Wire::Release { pid }).map_err(lift)?;
            released.push("server");
        }
    }
    if cgroup::release_pid(&ctx.root, &args.state_dir, pid).map_err(lift)? {
        released.push("cgroup");
    }
    if ctx.root.exists(format!("/proc/{pid}")) {
        let info = tame_launch::proc::inspect(&ctx.root, pid).map_err(lift_launch)?;
        let is_dl = bandwidth::deadline_threads(&ctx.root, |_| None)
            .iter()
            .any(|t| t.pid == pid);
        if is_dl {
            tame_launch::detach::check_owner(&info, caller_uid()).map_err(lift_launch)?;
            deadline::release_pid(&ctx.root, pid).map_err(lift)?;
            released.push("deadline");
        }
    }
    if released.is_empty() {
        return Err(bad_input(format!(
            "process {pid} holds no reservation — see tame reserve --list"
        )));
    }
    eprintln!("released process {pid} ({})", released.join(", "));
    Ok(0)
}

fn check(path: &PathBuf, json: bool) -> anyhow::Result<i32> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        bad_input(format!(
            "cannot read {}: {e} — give the path of a reservation set (TOML)",
            path.display()
        ))
    })?;
    let set = admission::parse_set(&text, |d| parse_duration_ns(d).map_err(|e| e.to_string()))
        .map_err(|e| bad_input(format!("{}: {e}", path.display())))?;
    let a = admission::analyse(&set);
    if json {
        println!("{}", serde_json::to_string_pretty(&a)?);
    } else {
        println!(
            "utilisation {} (cap {}), density {}; Liu–Layland bound for {} tasks {}",
            percent(a.utilisation_ppm),
            percent(a.cap_ppm),
            percent(a.density_ppm),
            a.tasks.len(),
            percent(a.liu_layland_ppm)
        );
        println!(
            "EDF: {}",
            if a.edf_schedulable {
                "schedulable"
            } else {
                "NOT schedulable"
            }
        );
        println!(
            "rate-monotonic (response-time analysis): {}",
            if a.fixed_priority_schedulable {
                "schedulable"
            } else {
                "NOT schedulable"
            }
        );
        println!(
            "{:>4} {:<16} {:>10} {:>10} {:>10} {:>12}",
            "rank", "task", "runtime", "period", "deadline", "response"
        );
        for t in &a.tasks {
            println!(
                "{:>4} {:<16} {:>8}µs {:>8}µs {:>8}µs {:>12}",
                t.rank,
                t.name,
                t.runtime_ns / 1_000,
                t.period_ns / 1_000,
                t.deadline_ns / 1_000,
                t.response_ns
                    .map_or("MISS".to_string(), |r| format!("{}µs", r / 1_000))
            );
        }
    }
    // 0: admissible under EDF (what SCHED_DEADLINE and the server use); 3: not.
    Ok(if a.edf_schedulable { 0 } else { 3 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ReserveArgs,
    }

    fn ctx() -> Context {
        Context::new(PathBuf::from("/"))
    }

    fn run_with(argv: &[&str]) -> anyhow::Result<i32> {
        let mut full = vec!["tame-reserve", "--socket", "/nonexistent/tame-test.sock"];
        full.extend_from_slice(argv);
        let cli = Cli::try_parse_from(full).expect("arguments parse");
        run(&ctx(), cli.args)
    }

    fn bad(argv: &[&str], expect: &str) {
        let err = run_with(argv).expect_err("accepted bad input");
        assert!(
            err.downcast_ref::<crate::BadInput>().is_some(),
            "{argv:?}: not bad input: {err:#}"
        );
        assert!(err.to_string().contains(expect), "{argv:?}: {err}");
    }

    #[test]
    fn bad_input_is_refused_with_exit_2_and_nothing_changed() {
        let me = std::process::id().to_string();
        let before = tame_rt::sched::get_thread_sched(0).unwrap();
        let affinity = tame_rt::sched::get_affinity(0).unwrap();
        bad(
            &["--share", "0%", "--period", "40ms", "--pid", &me],
            "above 0",
        );
        bad(
            &["--share=-5%", "--period", "40ms", "--pid", &me],
            "percentage",
        );
        bad(&["--share", "95%", "--period", "40ms", "--pid", &me], "cap");
        bad(
            &["--share", "25%", "--period", "500us", "--pid", &me],
            "1 ms",
        );
        bad(&["--share", "25%", "--period", "11s", "--pid", &me], "10 s");
        bad(&["--share", "25%", "--period", "40", "--pid", &me], "unit");
        bad(
            &[
                "--share",
                "25%",
                "--period",
                "40ms",
                "--backend",
                "cfs",
                "--pid",
                &me,
            ],
            "unknown backend",
        );
        bad(
            &[
                "--share", "25%", "--period", "40ms", "--cpu", "4096", "--pid", &me,
            ],
            "not online",
        );
        bad(
            &[
                "--share",
                "25%",
                "--period",
                "40ms",
                "--backend",
                "deadline",
                "--cpu",
                "1",
                "--pid",
                &me,
            ],
            "strict subset",
        );
        bad(
            &["--share", "25%", "--period", "40ms", "--pid", "999999999"],
            "no process",
        );
        bad(
            &[
                "--share",
                "25%",
                "--period",
                "2s",
                "--backend",
                "cgroup",
                "--pid",
                &me,
            ],
            "1 s",
        );
        bad(&["--period", "40ms", "--pid", &me], "--share");
        bad(&["--share", "25%", "--pid", &me], "--period");
        // No server listening: refused, with what to do.
        bad(
            &["--share", "25%", "--period", "40ms", "--pid", &me],
            "tame serve",
        );
        bad(&["--release", "999999999"], "holds no reservation");
        bad(&["--check", "/nonexistent/set.toml"], "cannot read");
        assert_eq!(tame_rt::sched::get_thread_sched(0).unwrap(), before);
        assert_eq!(tame_rt::sched::get_affinity(0).unwrap(), affinity);
    }

    #[test]
    fn check_reports_schedulability_in_its_exit_code() {
        let dir = tempfile::tempdir().unwrap();
        let ok = dir.path().join("ok.toml");
        std::fs::write(&ok, "[[task]]\nname = \"a\"\nruntime = \"10ms\"\nperiod = \"40ms\"\n[[task]]\nname = \"b\"\nruntime = \"1.5ms\"\nperiod = \"5ms\"\n").unwrap();
        assert_eq!(
            run_with(&["--check", ok.to_str().unwrap(), "--json"]).unwrap(),
            0
        );
        let over = dir.path().join("over.toml");
        std::fs::write(
            &over,
            "cap = \"50%\"\n[[task]]\nname = \"a\"\nruntime = \"30ms\"\nperiod = \"40ms\"\n",
        )
        .unwrap();
        assert_eq!(run_with(&["--check", over.to_str().unwrap()]).unwrap(), 3);
        let broken = dir.path().join("broken.toml");
        std::fs::write(&broken, "[[task]]\nname = \"a\"\nruntime = \"30ms\"\n").unwrap();
        bad(
            &["--check", broken.to_str().unwrap()],
            "not a reservation set",
        );
    }
}
