//! `tame serve`'s live figures as series (`tame serve --metrics`): what the server holds
//! (reservations, the share reserved per CPU and per client, its scheduler threads and
//! watchdog), what it did since it started (requests, admissions, releases, refusals), and
//! what each client received: the CPU time its threads ran, read from the kernel
//! (schedstat) by the reader's thread — `rate()` of it is the share received.

use tame_reserve::server::live::{Live, Turned};

use crate::cpu_tally::CpuTally;
use crate::writer::{labels, Exposition, Kind, Labels, WriteError};

/// The exposition of `live` now. Reads /proc (through tame-host) for the clients' CPU time,
/// kept in `tally` across scrapes so that it never goes down; holds no lock of the server's.
pub fn render(live: &Live, tally: &mut CpuTally) -> Result<String, WriteError> {
    let mut e = Exposition::new();
    let snap = live.snapshot();
    let none = Labels::new();
    let gauge = |e: &mut Exposition, name: &str, help: &str, l: &Labels, v: f64| {
        e.declare(name, Kind::Gauge, help)?;
        e.sample(name, l, v)
    };
    let counter = |e: &mut Exposition, name: &str, help: &str, l: &Labels, v: u64| {
        e.declare(name, Kind::Counter, help)?;
        e.sample(name, l, v as f64)
    };
    gauge(
        &mut e,
        "tame_serve_start_time_seconds",
        "When this tame serve started, in seconds since the Unix epoch.",
        &none,
        live.started_unix_ns as f64 / 1e9,
    )?;
    gauge(
        &mut e,
        "tame_serve_uptime_seconds",
        "How long this tame serve has run, in seconds.",
        &none,
        live.uptime_ns() as f64 / 1e9,
    )?;
    counter(
        &mut e,
        "tame_serve_requests_total",
        "Requests answered since the server started (reserve, release, list, and malformed ones).",
        &none,
        live.requests.load(std::sync::atomic::Ordering::Relaxed),
    )?;
    counter(
        &mut e,
        "tame_serve_admissions_total",
        "Reservations admitted since the server started.",
        &none,
        live.admitted.load(std::sync::atomic::Ordering::Relaxed),
    )?;
    counter(
        &mut e,
        "tame_serve_releases_total",
        "Reservations released on request since the server started.",
        &none,
        live.released.load(std::sync::atomic::Ordering::Relaxed),
    )?;
    e.declare(
        "tame_serve_refusals_total",
        Kind::Counter,
        "Requests turned down since the server started, by reason: refused (admission control or the policy said no), invalid (malformed, or naming what is not there), failed (the server could not do it).",
    )?;
    for (reason, why) in [
        ("invalid", Turned::Invalid),
        ("refused", Turned::Refused),
        ("failed", Turned::Failed),
    ] {
        e.sample(
            "tame_serve_refusals_total",
            &labels(&[("reason", reason)]),
            live.turned(why) as f64,
        )?;
    }
    counter(
        &mut e,
        "tame_serve_connections_refused_total",
        "Connections refused before a request was read (too many open, or a peer that cannot be told).",
        &none,
        live.connections_refused
            .load(std::sync::atomic::Ordering::Relaxed),
    )?;
    // Before the server's first publication nothing is known of its watchdog or threads:
    // the series are left out rather than given as 0 (a watchdog down).
    let Some(status) = &snap.status else {
        return Ok(e.render());
    };
    gauge(
        &mut e,
        "tame_serve_watchdog_up",
        "1 while the watchdog that restores the clients if the server dies runs, else 0.",
        &none,
        f64::from(u8::from(snap.watchdog_alive)),
    )?;
    gauge(
        &mut e,
        "tame_serve_scheduler_threads",
        "Scheduler threads running (one per CPU with clients so far).",
        &none,
        snap.scheduler_cpus.len() as f64,
    )?;
    gauge(
        &mut e,
        "tame_serve_cap_ratio",
        "The admission cap per CPU: the most all reservations on one CPU may add up to, 0-1.",
        &none,
        status.cap_ppm as f64 / 1e6,
    )?;
    gauge(
        &mut e,
        "tame_serve_reservations",
        "Reservations the server holds now.",
        &none,
        status.clients.len() as f64,
    )?;
    e.declare(
        "tame_serve_reserved_ratio",
        Kind::Gauge,
        "The share reserved on each CPU that holds reservations (granted, all clients together), 0-1.",
    )?;
    // Every CPU with a scheduler thread, 0 once its last client left: the series stays
    // rather than vanishing (an absent series reads as "no data", not "nothing reserved").
    let mut per_cpu: std::collections::BTreeMap<u32, u64> =
        snap.scheduler_cpus.iter().map(|&c| (c, 0)).collect();
    for c in &status.clients {
        *per_cpu.entry(c.cpu).or_default() += c.share_ppm;
    }
    for (cpu, ppm) in per_cpu {
        e.sample(
            "tame_serve_reserved_ratio",
            &labels(&[("cpu", &cpu.to_string())]),
            ppm as f64 / 1e6,
        )?;
    }
    e.declare(
        "tame_serve_client_reserved_ratio",
        Kind::Gauge,
        "The share each client holds (granted), 0-1.",
    )?;
    e.declare(
        "tame_serve_client_period_seconds",
        Kind::Gauge,
        "The period of each client's reservation, in seconds.",
    )?;
    e.declare(
        "tame_serve_client_threads",
        Kind::Gauge,
        "The client's threads the server schedules (those alive).",
    )?;
    e.declare(
        "tame_serve_client_cpu_seconds_total",
        Kind::Counter,
        "CPU time the client's scheduled threads have run (the kernel's schedstat, since each thread started; a thread that exited keeps its last-seen time), in seconds: rate() of it is the share the client received.",
    )?;
    for c in &status.clients {
        let l = labels(&[("pid", &c.pid.to_string()), ("cpu", &c.cpu.to_string())]);
        e.sample(
            "tame_serve_client_reserved_ratio",
            &l,
            c.share_ppm as f64 / 1e6,
        )?;
        e.sample(
            "tame_serve_client_period_seconds",
            &l,
            c.period_ns as f64 / 1e9,
        )?;
        e.sample("tame_serve_client_threads", &l, c.tids.len() as f64)?;
        let process = live.root.process(c.pid);
        let read: Vec<(u32, Option<u64>)> = c
            .tids
            .iter()
            .map(|&t| (t, process.task(t).schedstat().ok().map(|s| s.run_ns)))
            .collect();
        if let Some(ran) = tally.total(c.pid, c.cpu, &read) {
            e.sample("tame_serve_client_cpu_seconds_total", &l, ran as f64 / 1e9)?;
        }
    }
    let held: Vec<(u32, u32)> = status.clients.iter().map(|c| (c.pid, c.cpu)).collect();
    tally.keep_only(&held);
    Ok(e.render())
}
