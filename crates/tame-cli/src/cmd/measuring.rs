//! What every measuring command shares (`tame bench …`): the clock argument, Ctrl-C that
//! stops a run but keeps what was measured, the progress bar, and `-p` (measuring inside
//! an applied partition, the load on the system partition).

use std::io::IsTerminal;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::Context as _;
use tame_bench::engine::RunControl;
use tame_bench::load::LoadSpec;
use tame_bench::placement::Placement;
use tame_host::CpuList;
use tame_launch::target;
use tame_rt::ClockKind;

use crate::Context;

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

/// Runs expected to be shorter get no bar: it would only flash.
const PROGRESS_AFTER_NS: u64 = 2_000_000_000;

/// Whether a run gets a progress bar: only where stderr is a terminal — a pipe or a file
/// gets nothing, so captured output and logs stay clean — and only for a run expected to
/// last long enough to wait for (`None`: not known beforehand, shown).
pub fn progress_shown(stderr_is_terminal: bool, expected_ns: Option<u64>) -> bool {
    stderr_is_terminal && expected_ns.is_none_or(|ns| ns > PROGRESS_AFTER_NS)
}

/// Every bench's progress on stderr (see [`progress_shown`]): the returned `tick(done)`
/// moves the bar towards `total`. Benches call it between their runs, rounds or segments,
/// or from the thread that waits for the measuring ones — never inside a measuring loop.
/// The bar is cleared when `tick` is dropped, finished or not (Ctrl-C).
pub fn progress(total: u64, expected_ns: Option<u64>) -> impl FnMut(u64) {
    let bar = progress_shown(std::io::stderr().is_terminal(), expected_ns).then(|| {
        let bar =
            indicatif::ProgressBar::new(total).with_finish(indicatif::ProgressFinish::AndClear);
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
        }
    }
}

/// [`progress`] for a run that knows only how long it lasts (its ticks count loops, not
/// towards a total): the bar follows the time elapsed since the call.
pub fn timed_progress(expected_ns: u64) -> impl FnMut(u64) {
    const STEPS: u64 = 1000;
    let started = std::time::Instant::now();
    let mut tick = progress(STEPS, Some(expected_ns));
    move |_| {
        let elapsed = started.elapsed().as_nanos() as u64;
        tick((elapsed.saturating_mul(STEPS) / expected_ns.max(1)).min(STEPS));
    }
}

/// `-p NAME`: the applied partition the measuring threads run in, with the CPUs of the
/// system partition, where the load goes unless `--load-cpus` says otherwise.
pub struct Partitioned {
    pub placement: Placement,
    pub system_cpus: Option<CpuList>,
    /// The cache ways the spec reserves for the partition (resctrl), if any.
    pub cache_ways: Option<u32>,
}

/// Resolve `-p NAME` against the applied spec (journal in `journal_dir`, default below
/// `--root`); `None` without `-p`.
pub fn partition(
    ctx: &Context,
    name: Option<&str>,
    journal_dir: Option<&Path>,
) -> anyhow::Result<Option<Partitioned>> {
    let Some(name) = name else {
        return Ok(None);
    };
    // Read once: the partition, the system partition and the cache ways come from it.
    let applied = target::applied(&ctx.journal_dir(journal_dir), &ctx.root)?;
    let target = target::partition_target(&ctx.root, &applied, name, &ctx.caller)?;
    Ok(Some(Partitioned {
        placement: Placement {
            partition: name.to_string(),
            cpus: target.cpus,
            group: target.cgroup.group(),
        },
        system_cpus: applied.system().map(|p| p.cpus.clone()),
        cache_ways: applied.partition(name).and_then(|p| p.cache_ways),
    }))
}

/// The CPUs to measure: `--cpus` (`all` = every online CPU); with `-p` and no `--cpus`,
/// every CPU of the partition. A `--cpus` CPU outside tame's cpuset is refused naming the
/// applied partition (journal in `journal_dir`) that holds it.
pub fn measured_cpus(
    ctx: &Context,
    cpus: Option<&str>,
    partitioned: Option<&Partitioned>,
    journal_dir: Option<&Path>,
) -> anyhow::Result<CpuList> {
    if let (None, Some(p)) = (cpus, partitioned) {
        return Ok(p.placement.cpus.clone());
    }
    let list = tame_bench::target::cpus(&ctx.root, cpus.unwrap_or("all"), "--cpus")?;
    if cpus.is_some() && partitioned.is_none() {
        // CPUs outside tame's cpuset that an applied partition holds: say which, and -p.
        let online = ctx.root.cpus_online()?;
        target::check_usable(
            &ctx.root,
            &ctx.journal_dir(journal_dir),
            &list,
            &online,
            "-p",
        )?;
    }
    Ok(list)
}

/// `--load` on `--load-cpus`; with `-p` the load CPUs default to the system partition.
pub fn load(
    ctx: &Context,
    kinds: Option<&str>,
    load_cpus: Option<&str>,
    partitioned: Option<&Partitioned>,
) -> anyhow::Result<Option<LoadSpec>> {
    let system = partitioned
        .and_then(|p| p.system_cpus.as_ref())
        .map(CpuList::to_string);
    // Only a load gets the default: --load-cpus alone stays an error.
    let cpus = load_cpus.or(system.as_deref().filter(|_| kinds.is_some()));
    Ok(tame_bench::target::load(&ctx.root, kinds, cpus)?)
}

#[cfg(test)]
mod tests {
    use super::progress_shown;

    #[test]
    fn progress_is_drawn_only_on_a_terminal_for_runs_worth_waiting_for() {
        // A pipe or a file: never, however long the run.
        assert!(!progress_shown(false, Some(60_000_000_000)));
        assert!(!progress_shown(false, None));
        // A terminal: runs over 2 s, and runs of unknown length (bench ipc).
        assert!(progress_shown(true, Some(60_000_000_000)));
        assert!(progress_shown(true, None));
        assert!(!progress_shown(true, Some(1_000_000_000)));
    }
}
