//! `tame bench reserve`: the scheduling-server study (seed 004, tables 1–4) for the
//! server, deadline and cgroup backends, as one result of the common schema; and the
//! hidden `tame reserve-kit …` the study starts its work kernels and server with.

use std::path::PathBuf;
use std::sync::atomic::Ordering;

use anyhow::Context as _;
use tame_bench::result::{unix_now_ns, BenchResult};
use tame_host::environment::RunEnvironment;
use tame_reserve::kit::Kit;
use tame_reserve::spec::Backend;
use tame_reserve_study::result::{self, ReserveResult, ReserveSettings};
use tame_reserve_study::{self as bench, Options};
use tame_rt::clock::monotonic_ns;

use crate::error::{bad_input, finished};
use crate::output::JsonOut;
use crate::Context;

/// The hidden subcommand the study's helpers run under.
pub const KIT_COMMAND: &str = "reserve-kit";

#[derive(clap::Args)]
pub struct ReserveBenchArgs {
    /// Fewer shares (20, 50, 80 %) and windows: about 1.5 minutes in place of 8.
    #[arg(long)]
    quick: bool,
    /// The CPU the reserved client (and, pinned, its competitor) runs on, one (default: the
    /// last online CPU). `--cpu` is read too (what this option was called before).
    #[arg(
        long = "cpus",
        alias = "cpu",
        value_name = "CPU",
        allow_hyphen_values = true
    )]
    cpu: Option<u32>,
    /// Backends to study, comma-separated: server, deadline, cgroup.
    #[arg(long, default_value = "server,deadline,cgroup", value_name = "LIST")]
    backends: String,
    /// The shares the overhead is measured at, comma-separated (`25%,50%`, each above 0 and
    /// below 100 %) [default: 10 % to 90 % in steps of 10; 20, 50, 80 % with --quick].
    #[arg(long, allow_hyphen_values = true, value_name = "LIST")]
    shares: Option<String>,
    /// The most background processes the stability series add, one more per step (1 to 100)
    /// [default: 10, as in the paper].
    #[arg(long, allow_hyphen_values = true, value_name = "N")]
    max_load: Option<usize>,
    /// Write the result as JSON to FILE, or to stdout with `-` (the tables then go to stderr).
    #[arg(long, value_name = "FILE|-")]
    json: Option<String>,
    /// Also write the tables (markdown, laid out like the paper's) to FILE.
    #[arg(long, value_name = "FILE")]
    md: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct KitArgs {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<String>,
}

/// `tame reserve-kit work|frames|serve …`: a helper of the study (see `tame_reserve::kit`).
pub fn run_kit(a: KitArgs) -> anyhow::Result<i32> {
    tame_reserve::kit::helper_mode(&a.args).ok_or_else(|| {
        bad_input(
            "tame reserve-kit runs the helpers of `tame bench reserve` (work FILE, frames FILE ROUNDS FRAME_NS, serve SOCKET) — it is not meant to be run by hand",
        )
    })
}

fn backends(text: &str) -> anyhow::Result<Vec<Backend>> {
    let mut list = Vec::new();
    for word in text.split(',').map(str::trim) {
        let b: Backend = word.parse().map_err(|_| {
            bad_input(format!(
                "--backends: unknown backend {word:?} — give any of server, deadline, cgroup, comma-separated"
            ))
        })?;
        if !list.contains(&b) {
            list.push(b);
        }
    }
    Ok(list)
}

/// `--max-load` at most: each step of a stability series adds one background process.
const MAX_LOAD_LIMIT: usize = 100;

/// `--shares`: each above 0 and below 100 %, in ascending order, each once.
fn shares(text: &str) -> anyhow::Result<Vec<u64>> {
    let mut list = Vec::new();
    for word in text.split(',').map(str::trim) {
        let ppm = tame_reserve::spec::parse_share_ppm(word)
            .map_err(|e| bad_input(format!("--shares: {e}")))?;
        if ppm == 0 || ppm >= 1_000_000 {
            return Err(bad_input(format!(
                "--shares: {word:?} is not between 0 and 100 % — a reservation needs some of the CPU and leaves the rest some, give e.g. 25%"
            )));
        }
        list.push(ppm);
    }
    list.sort_unstable();
    list.dedup();
    Ok(list)
}

pub fn run(ctx: &Context, a: ReserveBenchArgs) -> anyhow::Result<i32> {
    let backends = backends(&a.backends)?;
    let chosen_shares = a.shares.as_deref().map(shares).transpose()?;
    if let Some(n) = a.max_load {
        if !(1..=MAX_LOAD_LIMIT).contains(&n) {
            return Err(bad_input(format!(
                "--max-load {n} is out of range: the stability series need at least one background process and take 3 s or more per step — give 1 to {MAX_LOAD_LIMIT}"
            )));
        }
    }
    let environment = RunEnvironment::capture(&ctx.root);
    let online = environment.online_cpus.clone();
    let cpu = match a.cpu {
        Some(c) if !online.contains(c) => {
            return Err(bad_input(format!(
                "--cpus {c} is not online (online: {online}) — pick one of them"
            )))
        }
        Some(c) => c,
        None => online.iter().last().ok_or_else(|| {
            anyhow::anyhow!("no online CPU found below {}", ctx.root.base().display())
        })?,
    };
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err(bad_input(
            "tame bench reserve needs root: it reserves with SCHED_DEADLINE, real-time priorities and cgroups — run it with sudo",
        ));
    }
    if tame_launch::spawn::resolve("stress-ng").is_none() {
        return Err(bad_input(
            "tame bench reserve needs stress-ng for the background load — apt-get install stress-ng",
        ));
    }
    let json = JsonOut::open(a.json.as_deref(), "JSON result")?;
    let md =
        a.md.as_ref()
            .map(|p| crate::output::create(p, "tables"))
            .transpose()?;
    // On disk, not tmpfs: the disk-I/O load must reach the disk.
    let scratch = tempfile::Builder::new()
        .prefix("tame-reserve-bench-")
        .tempdir_in("/var/tmp")
        .context("cannot make a scratch directory below /var/tmp")?;
    let kit = Kit::this_program(&[KIT_COMMAND]).context("cannot find tame's own program")?;
    let mut o = Options::standard(kit, scratch.path().to_path_buf(), cpu, backends, a.quick);
    if let Some(list) = chosen_shares {
        o.shares_ppm = list;
    }
    if let Some(n) = a.max_load {
        o.max_load = n;
    }
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, o.stop.clone())
            .context("cannot install the Ctrl-C handler")?;
    }
    let started_unix_ns = unix_now_ns();
    let t0 = monotonic_ns();
    let report = bench::run(&o, |line| eprintln!("{line}"))?;
    let elapsed_ns = monotonic_ns() - t0;
    let (groups, merged) = result::groups(&report);
    let done = ReserveResult {
        result: BenchResult {
            schema_version: <BenchResult as tame_host::Document>::SCHEMA.version,
            bench: "reserve".into(),
            tool_version: env!("CARGO_PKG_VERSION").into(),
            command_line: ctx.command_line.clone(),
            started_unix_ns,
            elapsed_ns,
            interrupted: report.interrupted || o.stop.load(Ordering::Relaxed),
            environment,
            calibration: Default::default(),
            load: None,
            partition: None,
            settings: ReserveSettings::of(&o, a.quick),
            groups,
            merged,
        },
        reserve: report,
    };
    let tables = bench::markdown(&done.reserve, &ctx.command_line.join(" "));
    if let Some(mut f) = md {
        use std::io::Write as _;
        f.write_all(tables.as_bytes())
            .context("cannot write the tables")?;
    }
    json.emit(&done, &tables)?;
    Ok(finished(done.result.interrupted))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_sorted_once_each_and_strictly_between_0_and_100_percent() {
        assert_eq!(shares("50%, 10%,10%,50%").unwrap(), vec![100_000, 500_000]);
        assert_eq!(shares("99.5%").unwrap(), vec![995_000]);
        for bad in ["0%", "100%", "1.0", "0.1", "", "25%,,50%", "-5%"] {
            assert!(shares(bad).is_err(), "{bad:?} accepted");
        }
    }
}
