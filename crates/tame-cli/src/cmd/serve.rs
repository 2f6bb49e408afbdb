//! `tame serve`: the scheduling server behind `tame reserve --backend server`, and
//! `tame serve --recover`, which gives the clients of a server that died their policy and
//! affinity back (the unit's `ExecStopPost=`). `--metrics` serves the server's live
//! figures as Prometheus text (TCP, a Unix socket, or a file; `cmd/metrics.rs`, docs/metrics.md).

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use tame_reserve::server::live::Live;
use tame_reserve::server::policy::Policy;
use tame_reserve::server::{self as srv, daemon};
use tame_reserve::spec::parse_share_ppm;
use tame_reserve::ReserveError;

use crate::cmd::metrics::{self, MetricsArgs};
use crate::{bad_input, Context};

#[derive(clap::Args)]
pub struct ServeArgs {
    /// Where to listen. The restore record and the lock lie beside it (NAME.record, NAME.lock).
    #[arg(long, default_value = srv::DEFAULT_SOCKET)]
    socket: PathBuf,
    /// Admission cap per CPU: the most all reservations on one CPU may add up to
    /// (default: the policy's `cap`, 90 %).
    #[arg(long, allow_hyphen_values = true)]
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
    #[arg(long, conflicts_with_all = ["cap", "policy", "journal_dir", "metrics", "metrics_file"])]
    recover: bool,
    /// The live figures (reservations, shares granted and received, refusals, uptime).
    #[command(flatten)]
    metrics: MetricsArgs,
}

pub fn run(ctx: &Context, args: ServeArgs) -> anyhow::Result<i32> {
    if args.recover {
        let done = daemon::recover(&ctx.root, &args.socket)?;
        println!("{}", daemon::describe(&done));
        return Ok(if done.failed.is_empty() { 0 } else { 1 });
    }
    let metrics = args.metrics.sink()?;
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
    let Some(sink) = metrics else {
        daemon::serve(config, stop)?;
        return Ok(0);
    };
    let live = Arc::new(Live::new(ctx.root.clone()));
    let reader = live.clone();
    let stop_metrics = stop.clone();
    let (required, gid) = (args.metrics.metrics_required, config.policy.socket_gid);
    // Set up once the watchdog is forked: it never holds the port.
    daemon::serve_with(config, stop, Some(live), move || {
        // The clients' CPU time seen so far, kept across scrapes (one render at a time).
        let mut tally = tame_prometheus::cpu_tally::CpuTally::default();
        metrics::start("tame serve", &sink, required, gid, stop_metrics, move || {
            tame_prometheus::live::render(&reader, &mut tally).map_err(|e| e.to_string())
        })
        .map_err(|e| match e {
            metrics::NotStarted::Unavailable(why) => ReserveError::Invalid(why),
            // Not the user's input: the system refused a thread (exit 1, as other failures).
            metrics::NotStarted::Thread(e) => ReserveError::Failed(tame_host::Failure::io(
                "--metrics: starting the metrics thread (the system is out of threads or memory: stop other processes, or serve without --metrics)",
                e,
            )),
        })
    })?;
    Ok(0)
}
