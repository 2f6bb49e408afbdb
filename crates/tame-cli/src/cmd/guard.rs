//! `tame guard`: watch the applied partitions live and report (and with `--repair` undo)
//! their erosion, one logfmt line per event on stdout; `--metrics` serves the counts
//! as Prometheus text (docs/guard.md).

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tame_guard::{Config, Metrics};

use crate::cmd::metrics::{self, MetricsArgs};
use crate::{bad_input, Context};

#[derive(clap::Args)]
pub struct GuardArgs {
    /// Watch only these isolated partitions (repeat, or a comma-separated list; default:
    /// every isolated partition applied).
    #[arg(
        short = 'p',
        long = "partition",
        value_name = "NAME",
        value_delimiter = ','
    )]
    partitions: Vec<String>,
    /// Put back what erodes: a stray task onto the system partition, a drifted value
    /// written again — through the apply journal, so `tame revert` still restores the
    /// machine as found. Never touches kernel-placed threads or the partitions' own tasks;
    /// backs off from a thing that keeps coming back.
    #[arg(long)]
    repair: bool,
    /// The counts of what eroded.
    #[command(flatten)]
    metrics: MetricsArgs,
    /// How often a full pass reads the partitions' state (drift, IRQs, rates); every task's
    /// affinity is swept four times as often (at most every 100 ms): a `taskset` emits no
    /// tracepoint, and the sweep finds it.
    #[arg(long, default_value = "1s", value_name = "DURATION")]
    interval: String,
    /// Interrupts per second on an isolated CPU above which it is reported.
    #[arg(long, default_value_t = tame_guard::DEFAULT_MAX_IRQ_RATE, value_name = "N")]
    max_irq_rate: u64,
    /// No tracepoints: the periodic /proc scan only.
    #[arg(long)]
    no_trace: bool,
    /// Where the applied partition spec is journaled.
    #[arg(long, value_name = "DIR")]
    journal_dir: Option<PathBuf>,
}

pub fn run(ctx: &Context, args: GuardArgs) -> anyhow::Result<i32> {
    let interval_ns = tame_rt::duration::parse_ns(&args.interval)
        .map_err(|e| bad_input(format!("--interval {}: {e}", args.interval)))?;
    if !(10_000_000..=3_600_000_000_000).contains(&interval_ns) {
        return Err(bad_input(format!(
            "--interval {}: out of range — give 10ms to 1h (the default, 1s, reports a taskset within a second)",
            args.interval
        )));
    }
    if args.max_irq_rate == 0 {
        return Err(bad_input(
            "--max-irq-rate 0: every CPU takes some interrupts — give a rate per second above 0",
        ));
    }
    let metrics = args.metrics.sink()?;
    if !tame_host::privilege::may_change(&ctx.root) {
        return Err(bad_input(
            "tame guard needs root: it reads the apply journal (root's, mode 0600), traces through tracefs and repairs through the journal — run it as root (sudo tame guard, or the tame-guard.service unit)",
        ));
    }
    let config = Config {
        root: ctx.root.clone(),
        journal_dir: ctx.journal_dir(args.journal_dir.as_deref()),
        partitions: args.partitions,
        repair: args.repair,
        interval: Duration::from_nanos(interval_ns),
        max_irq_rate: args.max_irq_rate,
        backoff: Default::default(),
        // Tracing only on the live machine: a fixture tree has no kernel to trace.
        trace: !args.no_trace && ctx.root.is_system(),
    };
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    // Nothing applied or a bad -p is refused before the port is taken.
    tame_guard::Guard::new(config.clone(), Arc::default())?;
    let shared = Arc::new(Mutex::new(Metrics::default()));
    let server = match metrics {
        Some(sink) => {
            let reader = shared.clone();
            metrics::start(
                "tame guard",
                &sink,
                args.metrics.metrics_required,
                None,
                stop.clone(),
                move || {
                    let m = reader.lock().unwrap_or_else(|p| p.into_inner()).clone();
                    tame_prometheus::guard::render(&m).map_err(|e| e.to_string())
                },
            )
            .map_err(|e| match e {
                metrics::NotStarted::Unavailable(why) => bad_input(why),
                metrics::NotStarted::Thread(e) => e.into(),
            })?
        }
        None => None,
    };
    let result = tame_guard::run(config, stop.clone(), shared, &mut std::io::stdout().lock());
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    if let Some(h) = server {
        let _ = h.join();
    }
    result?;
    Ok(0)
}
