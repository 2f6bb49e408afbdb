//! `tame serve`: the scheduling server behind `tame reserve --backend server`, and
//! `tame serve --recover`, which gives the clients of a server that died their policy and
//! affinity back (the unit's `ExecStopPost=`). `--metrics ADDR` serves the server's live
//! figures as Prometheus text on a thread of its own (docs/metrics.md).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use tame_reserve::server::live::Live;
use tame_reserve::server::policy::Policy;
use tame_reserve::server::{self as srv, daemon};
use tame_reserve::spec::parse_share_ppm;
use tame_reserve::ReserveError;

use crate::{bad_input, Context};

#[derive(clap::Args)]
pub struct ServeArgs {
    /// Where to listen. The restore record and the lock lie beside it (NAME.record, NAME.lock).
    #[arg(long, default_value = srv::DEFAULT_SOCKET)]
    socket: PathBuf,
    /// Admission cap per CPU: the most all reservations on one CPU may add up to
    /// (default: the policy's `cap`, 90 %).
    #[arg(long)]
    cap: Option<String>,
    /// Who may reserve what (default: /etc/tame/serve.toml when it exists, else root
    /// only, on reservable CPUs only). See docs/reserve.md, "The policy".
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// Where the applied partition spec is journaled (the policy's reservable CPUs).
    #[arg(long, value_name = "DIR")]
    journal_dir: Option<PathBuf>,
    /// Do not serve: give the clients of a stopped server their policy and affinity back
    /// from its restore record, and remove the record.
    #[arg(long, conflicts_with_all = ["cap", "policy", "journal_dir", "metrics"])]
    recover: bool,
    /// Serve the live figures (reservations, shares granted and received, refusals,
    /// uptime) as Prometheus text at http://ADDR/metrics: IP:PORT or a port alone
    /// (127.0.0.1:PORT); port 0 picks a free one. Loopback only, unless --metrics-remote.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<String>,
    /// Allow --metrics on an address other than loopback: anyone who reaches it sees the
    /// clients' pids and shares (put a firewall or a proxy in front).
    #[arg(long, requires = "metrics")]
    metrics_remote: bool,
}

/// `--metrics ADDR`, checked before anything starts (`tame serve`'s and `tame guard`'s).
pub(crate) fn metrics_addr(text: &str, remote: bool) -> anyhow::Result<SocketAddr> {
    let addr: SocketAddr = match text.parse::<u16>() {
        Ok(port) => SocketAddr::from(([127, 0, 0, 1], port)),
        Err(_) => text.parse().map_err(|_| {
            bad_input(format!(
                "--metrics {text}: not an address — give IP:PORT (127.0.0.1:9464, [::1]:9464) or a port alone"
            ))
        })?,
    };
    if !remote && !tame_prometheus::http::is_local(&addr) {
        return Err(bad_input(format!(
            "--metrics {addr}: not a loopback address — tame runs as root and its figures name processes of this machine; serve them on 127.0.0.1:{} (and let the scraper reach it through a proxy or tunnel), or add --metrics-remote to serve them on {addr} anyway",
            addr.port()
        )));
    }
    Ok(addr)
}

pub fn run(ctx: &Context, args: ServeArgs) -> anyhow::Result<i32> {
    if args.recover {
        let done = daemon::recover(&ctx.root, &args.socket)?;
        println!("{}", daemon::describe(&done));
        return Ok(if done.failed.is_empty() { 0 } else { 1 });
    }
    let metrics = args
        .metrics
        .as_deref()
        .map(|m| metrics_addr(m, args.metrics_remote))
        .transpose()?;
    let mut policy = Policy::load(&ctx.root, args.policy.as_deref())?;
    if let Some(c) = &args.cap {
        policy.cap_ppm = parse_share_ppm(c).map_err(|e| bad_input(format!("--cap: {e}")))?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    let config = daemon::Config {
        socket: args.socket,
        journal_dir: ctx.journal_dir(args.journal_dir.as_deref()),
        policy,
        root: ctx.root.clone(),
    };
    // The cap and socket are validated inside serve before anything starts.
    let Some(addr) = metrics else {
        daemon::serve(config, stop)?;
        return Ok(0);
    };
    let live = Arc::new(Live::new(ctx.root.clone()));
    let reader = live.clone();
    let stop_metrics = stop.clone();
    // Bound once the watchdog is forked: it never holds the port.
    daemon::serve_with(config, stop, Some(live), move || {
        let (listener, bound) = tame_prometheus::http::bind(addr).map_err(|e| {
            ReserveError::Invalid(format!(
                "--metrics: cannot listen on {addr}: {e} — give another address or port (port 0 picks a free one)"
            ))
        })?;
        eprintln!("tame serve: metrics at http://{bound}/metrics");
        // The clients' CPU time seen so far, kept across scrapes by the one metrics thread.
        let mut tally = tame_prometheus::cpu_tally::CpuTally::default();
        let handle = tame_prometheus::http::spawn(listener, stop_metrics, move || {
            tame_prometheus::live::render(&reader, &mut tally).map_err(|e| e.to_string())
        })
        // Not the user's input: the system refused a thread (exit 1, as other failures).
        .map_err(|e| {
            ReserveError::Failed(tame_host::Failure::io(
                "--metrics: starting the metrics thread (the system is out of threads or memory: stop other processes, or serve without --metrics)",
                e,
            ))
        })?;
        Ok(Some(handle))
    })?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_are_loopback_unless_asked() {
        assert_eq!(
            metrics_addr("9464", false).unwrap(),
            "127.0.0.1:9464".parse::<SocketAddr>().unwrap()
        );
        assert!(metrics_addr("[::1]:0", false).is_ok());
        let e = metrics_addr("0.0.0.0:9464", false).unwrap_err().to_string();
        assert!(
            e.contains("not a loopback address") && e.contains("--metrics-remote"),
            "{e}"
        );
        assert!(metrics_addr("0.0.0.0:9464", true).is_ok());
        let e = metrics_addr("localhost:x", false).unwrap_err().to_string();
        assert!(e.contains("not an address"), "{e}");
    }
}
