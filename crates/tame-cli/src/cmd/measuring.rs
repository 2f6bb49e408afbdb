//! What every measuring command shares (`tame bench …`): the clock argument, Ctrl-C that
//! stops a run but keeps what was measured, and the progress bar.

use std::io::IsTerminal;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::Context as _;
use tame_bench::engine::RunControl;
use tame_rt::ClockKind;

/// `--clock`: monotonic, or tsc.
pub fn parse_clock(s: &str) -> Result<ClockKind, String> {
    match s {
        "monotonic" => Ok(ClockKind::Monotonic),
        "tsc" => Ok(ClockKind::Tsc),
        _ => Err(format!("unknown clock {s:?}: use monotonic or tsc")),
    }
}

/// Ctrl-C and SIGTERM set the stop flag: measuring threads finish their
/// current iteration, the load is stopped and what was measured is reported.
pub fn install_stop_handler() -> anyhow::Result<RunControl> {
    let flag = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, flag.clone())
            .context("cannot install the Ctrl-C handler")?;
    }
    Ok(RunControl::with_flag(flag))
}

/// A progress bar on stderr for runs over 2 s, only when stderr is a terminal.
pub fn progress(total: u64, expected_ns: u64) -> impl FnMut(u64) {
    let bar = (std::io::stderr().is_terminal() && expected_ns > 2_000_000_000).then(|| {
        let bar = indicatif::ProgressBar::new(total);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{elapsed_precise} [{bar:40}] {percent}% {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        bar
    });
    move |done| {
        if let Some(b) = &bar {
            b.set_position(done);
            if done >= total {
                b.finish_and_clear();
            }
        }
    }
}
