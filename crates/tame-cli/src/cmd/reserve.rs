//! `tame reserve`: guarantee a process a CPU share per period through the scheduling server,
//! SCHED_DEADLINE or a cgroup bandwidth cap; list and release reservations; check a set of
//! periodic reservations without running anything. The backends are `tame_reserve`'s.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use tame_bench::units::parse_duration_ns;
use tame_reserve::backend::{self, Places};
use tame_reserve::bandwidth::Limits;
use tame_reserve::reservation::{self, CpuSplit, Made};
use tame_reserve::server as srv;
use tame_reserve::spec;
use tame_reserve::view::{analysis_text, list_text, made_text, ListDoc, MadeDoc, ReleasedDoc};
use tame_reserve::{admission, Backend};

use crate::output::print_json;
use crate::{bad_input, Context};

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("what").args(["pid", "list", "release", "check", "command"]).required(true)))]
pub struct ReserveArgs {
    /// CPU share to guarantee, e.g. 25%.
    #[arg(long, allow_hyphen_values = true)]
    share: Option<String>,
    /// Period the share holds in, e.g. 40ms (1 ms … 10 s).
    #[arg(long, allow_hyphen_values = true)]
    period: Option<String>,
    /// The CPU (server: default the highest CPU of the applied isolated and shared
    /// partitions, else the highest online; a program started for a partition's CPU is
    /// placed in that partition; cgroup: pins the process there; deadline: refused —
    /// SCHED_DEADLINE cannot pin outside an exclusive cpuset).
    #[arg(long, allow_hyphen_values = true)]
    cpu: Option<u32>,
    /// server (tame serve), deadline (SCHED_DEADLINE) or cgroup (a bandwidth cap, not a guarantee).
    #[arg(long, default_value = "server")]
    backend: String,
    /// Reserve for a running process.
    #[arg(long, allow_hyphen_values = true)]
    pid: Option<u32>,
    /// List reservations of every backend.
    #[arg(long)]
    list: bool,
    /// Release a process's reservation, whichever backend holds it.
    #[arg(long, allow_hyphen_values = true, value_name = "PID")]
    release: Option<u32>,
    /// Admission analysis of a set of periodic reservations (EDF and deadline-monotonic), nothing run.
    #[arg(long, value_name = "SET.toml")]
    check: Option<PathBuf>,
    /// The scheduling server's socket.
    #[arg(long, default_value = srv::DEFAULT_SOCKET)]
    socket: PathBuf,
    // The default is below --root (Context::journal_dir); the help shows it as before.
    /// Where tame apply's journal says which partitions are applied, and where cgroup
    /// reservations keep their journals [default: /var/lib/tame]
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// Print the result as JSON (the reservation made or released, the list, or the analysis).
    #[arg(long)]
    json: bool,
    /// Run this program with the reservation; released when it exits.
    #[arg(last = true, value_name = "CMD")]
    command: Vec<OsString>,
}

impl ReserveArgs {
    /// `--state-dir`, else the journal directory below `--root` (where apply journals).
    pub(crate) fn state_dir(&self, ctx: &Context) -> PathBuf {
        ctx.journal_dir(self.state_dir.as_deref())
    }
}

pub fn run(ctx: &Context, args: ReserveArgs) -> anyhow::Result<i32> {
    if let Some(path) = &args.check {
        return check(path, args.json);
    }
    let at = Places {
        root: ctx.root.clone(),
        socket: args.socket.clone(),
        state_dir: args.state_dir(ctx),
    };
    if args.list {
        return list(&at, args.json);
    }
    if let Some(pid) = args.release {
        let released: Vec<String> = reservation::release(&at, pid)?
            .iter()
            .map(Backend::to_string)
            .collect();
        if args.json {
            print_json(&ReleasedDoc::new(pid, released))?;
        } else {
            eprintln!("released process {pid} ({})", released.join(", "));
        }
        return Ok(0);
    }
    let backend = backend::open(args.backend.parse().map_err(bad_input)?, &at);
    let share = args
        .share
        .as_deref()
        .ok_or_else(|| bad_input("no --share — say how much CPU to guarantee, e.g. --share 25%"))?;
    let period = args.period.as_deref().ok_or_else(|| {
        bad_input("no --period — say the period the share holds in, e.g. --period 40ms")
    })?;
    let share_ppm = spec::parse_share_ppm(share)?;
    let period_ns = parse_duration_ns(period).map_err(|e| bad_input(format!("--period: {e}")))?;
    let limits = Limits::read(&ctx.root)?;
    let req = reservation::request(&*backend, share_ppm, period_ns, args.cpu, &limits)?;
    match args.pid {
        Some(pid) => {
            reservation::reserve_running(&*backend, &ctx.root, pid, &req)?;
            print_made(&Made::new(&*backend, &req, pid, &limits), args.json)?;
            Ok(0)
        }
        None => {
            // The program runs only once the reservation holds; its exit code is ours.
            let running = reservation::start(&*backend, &at, &req, &limits, &args.command)?;
            let pid = running.pid();
            print_made(&Made::new(&*backend, &req, pid, &limits), args.json)?;
            let ended = running.wait()?;
            if let Some(split) = ended.unreserved {
                eprintln!("{}", unreserved_text(&split, pid, req.backend));
            }
            Ok(ended.code)
        }
    }
}

fn print_made(made: &Made, json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(&MadeDoc::new(made));
    }
    eprint!("{}", made_text(made));
    Ok(())
}

/// The warning when much of a started program's work ran outside its reservation (stderr).
fn unreserved_text(split: &CpuSplit, pid: u32, backend: Backend) -> String {
    format!("tame reserve: warning: {}", split.warning(pid, backend))
}

fn list(at: &Places, json: bool) -> anyhow::Result<i32> {
    let listing = reservation::list(at);
    if json {
        print_json(&ListDoc::new(&listing.reservations, &listing.notes))?;
        return Ok(0);
    }
    print!("{}", list_text(&listing.reservations));
    for n in listing.notes {
        eprintln!("note: {n}");
    }
    Ok(0)
}

fn check(path: &Path, json: bool) -> anyhow::Result<i32> {
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
        print_json(&a)?;
    } else {
        print!("{}", analysis_text(&a));
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
            crate::error::is_bad_input(&err),
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
            "share \"-5%\" is negative — a share must be above 0",
        );
        // Without `=` too: clap hands the value over instead of its `-- -5` tip.
        bad(
            &["--share", "-5%", "--period", "40ms", "--pid", &me],
            "is negative",
        );
        bad(
            &["--share", "25", "--period", "40ms", "--pid", &me],
            "share \"25\" has no % — write it as 25%",
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
    fn reservations_read_in_ms_and_an_empty_list_says_none() {
        let made = Made {
            backend: tame_reserve::spec::Backend::Deadline,
            pid: 42,
            share_ppm: 100_000,
            period_ns: 20_000_000,
            runtime_ns: 2_000_000,
            cpu: None,
            notes: vec!["RT throttling: …".into()],
        };
        assert_eq!(
            made_text(&made),
            "reserved 10 % of every 20 ms (2 ms per period) for process 42 on any CPU (deadline backend)\n  note: RT throttling: …\n"
        );
        assert_eq!(list_text(&[]), "reservations: none\n");
        let held = backend::Reservation {
            backend: tame_reserve::spec::Backend::Cgroup,
            pid: 7,
            share_ppm: 250_000,
            period_ns: 1_500_000,
            cpu: None,
            detail: "/tame-reserve-7".into(),
        };
        let text = list_text(&[held]);
        assert!(text.starts_with("backend "), "{text}");
        assert!(
            text.contains("  25 %     1.5 ms  any  /tame-reserve-7"),
            "{text}"
        );
    }

    #[test]
    fn work_outside_the_reservation_is_a_warning() {
        let split = CpuSplit {
            reserved_ns: 4_000_000,
            threads_ns: 0,
            children_ns: 2_986_000_000,
        };
        let text = unreserved_text(&split, 4242, Backend::Deadline);
        assert!(
            text.starts_with("tame reserve: warning: process 4242 used 4 ms of CPU time in its reserved thread, but 2.986 s ran outside the reservation (2.986 s in processes it started) — SCHED_DEADLINE is set with reset-on-fork"),
            "{text}"
        );
        assert!(text.contains("or use --backend cgroup"), "{text}");
    }

    #[test]
    fn check_names_the_order_it_analyses() {
        let set = admission::parse_set(
            "[[task]]\nname = \"slow\"\nruntime = \"10ms\"\nperiod = \"40ms\"\n[[task]]\nname = \"fast\"\nruntime = \"1.5ms\"\nperiod = \"40ms\"\ndeadline = \"5ms\"\n",
            |d| parse_duration_ns(d).map_err(|e| e.to_string()),
        )
        .unwrap();
        let text = analysis_text(&admission::analyse(&set));
        assert!(
            text.contains(
                "deadline-monotonic fixed priorities (response-time analysis): schedulable"
            ),
            "{text}"
        );
        assert!(!text.contains("rate-monotonic"), "{text}");
        // The shorter deadline ranks first, whatever the periods.
        let fast = text.lines().find(|l| l.contains("fast")).unwrap();
        assert!(fast.trim_start().starts_with("1 fast"), "{text}");
        assert!(fast.contains("1.5 ms") && fast.contains("5 ms"), "{text}");
        let slow = text.lines().find(|l| l.contains("slow")).unwrap();
        assert!(slow.ends_with("11.5 ms"), "{text}");
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
