//! `tame assess` for real: both phases measured, and the machine left exactly as found —
//! every file the partition writes byte-identical, no tame cgroup, no journal, no load —
//! after a normal run, after Ctrl-C, and after `kill -9` at each phase once the next
//! assess (or `tame revert`) has finished the job from the journal. A test binary of its
//! own: applying a partition moves every task on the machine.

use crate::common::partitioned::{
    assert_restored, exclusive, machine_fits, state, tame_cgroups, wait_for_journal, RevertOnDrop,
};
use crate::common::{tame, Killed};

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use tame_assess::{Length, Observer, Options, Requirement};
use tame_bench::engine::RunControl;
use tame_bench::load::LoadKind;
use tame_testing::child::{assert_ran_one, child_arg, child_test};

fn stress_ng_running() -> bool {
    Command::new("pgrep")
        .args(["-x", "stress-ng"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The machine is as `before`: same values, no tame cgroup, no journal, no load (its
/// processes get a moment to end after their parent died).
fn assert_as_found(before: &BTreeMap<String, Vec<u8>>, journal: &Path) {
    assert_restored(
        before,
        journal,
        &stress_ng_running,
        "the load outlived the assessment",
    );
    // The busy loop's tracing: no instance of a dead noise session, no trace journal.
    let instances: Vec<String> = [
        "/sys/kernel/tracing/instances",
        "/sys/kernel/debug/tracing/instances",
    ]
    .iter()
    .flat_map(|d| std::fs::read_dir(d).into_iter().flatten().flatten())
    .map(|e| e.file_name().to_string_lossy().into_owned())
    .filter(|n| n.starts_with("tame-noise-") || n.starts_with("tame-watch-"))
    .collect();
    assert_eq!(instances, Vec::<String>::new(), "tracing instances left");
    let trace_journals: Vec<_> = std::fs::read_dir(tame_trace::tracefs::JOURNAL_BASE)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(
        trace_journals.is_empty(),
        "trace journals left: {trace_journals:?}"
    );
}

fn assess(journal: &Path, out: &Path, duration: &str, load: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tame"));
    c.args([
        "assess",
        "--duration",
        duration,
        "--load",
        load,
        "--journal-dir",
    ])
    .arg(journal)
    .arg("--out")
    .arg(out);
    c
}

#[test]
fn assess_measures_both_phases_and_leaves_the_machine_as_found() {
    let _machine = tame_testing::serial::module(module_path!());
    let _one = exclusive();
    if !machine_fits() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (journal, out) = (dir.path().join("j"), dir.path().join("out"));
    let _revert = RevertOnDrop(&journal);
    let before = state();
    let child = assess(&journal, &out, "1500ms", "cpu,io")
        .args(["--json", "-"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = child;
    // Drained beside the sampling: a full pipe would stop the assessment.
    let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let samples = sample_threads(&mut child);
    let o = std::process::Output {
        status: child.wait().unwrap(),
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    };
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let work = r["layout"]["work_cpus"].as_str().unwrap();
    assert_off_the_measured_cpus(&samples, &tame_host::CpuList::parse(work).unwrap());
    assert_eq!(r["schema"], "tame.assess/2");
    // Three interleaved rounds: shared 1, partitioned 1, shared 2, … each after the last.
    let rounds = r["rounds"].as_array().unwrap();
    let order: Vec<(String, u64)> = rounds
        .iter()
        .map(|x| {
            (
                x["configuration"].as_str().unwrap().to_string(),
                x["index"].as_u64().unwrap(),
            )
        })
        .collect();
    let want: Vec<(String, u64)> = (1..=3)
        .flat_map(|i| [("shared".to_string(), i), ("partitioned".to_string(), i)])
        .collect();
    assert_eq!(order, want);
    let times: Vec<(u64, u64)> = rounds
        .iter()
        .map(|x| {
            (
                x["started_unix_ns"].as_u64().unwrap(),
                x["ended_unix_ns"].as_u64().unwrap(),
            )
        })
        .collect();
    for pair in times.windows(2) {
        assert!(
            pair[0].0 < pair[0].1 && pair[0].1 <= pair[1].0,
            "rounds overlap or run out of order: {times:?}"
        );
    }
    // The work was calibrated and run at every activation.
    let calibrated = &r["calibration"];
    assert!(
        calibrated["work"]["steps"].as_u64().unwrap() > 0,
        "{calibrated}"
    );
    for phase in ["shared", "partitioned"] {
        assert_eq!(r[phase]["measured"], true, "{phase}");
        assert_eq!(r[phase]["rounds"], 3, "{phase}");
        let job = &r[phase]["job"];
        assert!(job["activations"].as_u64().unwrap() > 500, "{phase}");
        assert!(
            job["run_time"]["p50"].as_u64().unwrap() > 0,
            "{phase}: the work ran"
        );
        assert!(
            r[phase]["noise"]["share_percent"].as_f64().is_some(),
            "{phase}"
        );
        assert_eq!(r[phase]["load"]["kinds"], serde_json::json!(["cpu", "io"]));
        let holds = &r["verdict"][phase];
        assert!(holds["miss_bound"].as_f64().is_some(), "{phase}: {holds}");
        assert_eq!(holds["activations"], job["activations"], "{phase}");
    }
    // Each round's results, in the common schema, inside the one document and as files.
    for x in rounds {
        let name = format!("{}-{}", x["configuration"].as_str().unwrap(), x["index"]);
        assert_eq!(x["results"]["job"]["bench"], "job", "{name}");
        assert_eq!(x["results"]["noise"]["bench"], "noise", "{name}");
        assert_eq!(
            x["results"]["job"]["merged"],
            serde_json::from_str::<serde_json::Value>(
                &std::fs::read_to_string(out.join(format!("{name}-job.json"))).unwrap()
            )
            .unwrap()["merged"],
            "{name}: the file and the report differ"
        );
        let partition = x["results"]["job"]["partition"].clone();
        match x["configuration"].as_str().unwrap() {
            "shared" => assert_eq!(partition, serde_json::Value::Null),
            _ => {
                assert_eq!(partition, "rt");
                // The load ran on the system partition's CPUs while partitioned.
                assert_eq!(x["load"]["cpus"], r["layout"]["system"]);
            }
        }
    }
    assert!(!r["effects"].as_array().unwrap().is_empty());
    assert!(r["restoration"]["changes_reverted"].as_u64().unwrap() > 3);
    assert_eq!(r["restoration"]["not_restored"], serde_json::json!([]));
    assert!(r["verdict"]["next_step"]
        .as_str()
        .is_some_and(|s| !s.is_empty()));
    assert!(r["verdict"]["rests_on"]
        .as_str()
        .is_some_and(|s| s.contains("3 interleaved rounds")));
    for file in [
        "spec.toml",
        "assess.json",
        "shared-1-job.json",
        "shared-3-noise.json",
        "partitioned-1-job.json",
        "partitioned-3-noise.json",
        "report/index.html",
        "report/assess-cycle-histogram.svg",
    ] {
        assert!(out.join(file).is_file(), "{file} not written");
    }
    // The page is tame report's of assess.json: the verdict first, both phases overlaid.
    let page = std::fs::read_to_string(out.join("report/index.html")).unwrap();
    assert!(
        page.contains("id=\"verdict\"") && page.contains("id=\"fig-assess-cycle-histogram\""),
        "the page holds the verdict and the phases' histogram"
    );
    // The raw results are what `tame compare` reads.
    let compared = tame(&[
        "compare",
        out.join("shared-1-job.json").to_str().unwrap(),
        out.join("partitioned-1-job.json").to_str().unwrap(),
    ]);
    assert!(
        compared.status.success(),
        "{}",
        String::from_utf8_lossy(&compared.stderr)
    );
    let summary = String::from_utf8_lossy(&o.stderr);
    assert!(summary.contains("verdict: "), "{summary}");
    assert!(summary.contains("the partition was reverted"), "{summary}");
    assert_as_found(&before, &journal);
}

/// One of tame's threads in one sample: comm, state, the CPU it was last on, its allowed CPUs.
type Thread = (String, char, u32, tame_host::CpuList);

/// `(comm, state, processor, allowed CPUs)` from /proc/PID/task/TID.
fn thread_of(pid: u32, tid: &str) -> Option<Thread> {
    let dir = format!("/proc/{pid}/task/{tid}");
    let stat = std::fs::read_to_string(format!("{dir}/stat")).ok()?;
    let (head, rest) = stat.rsplit_once(')')?;
    let comm = head.split_once('(')?.1.to_string();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = fields.first()?.chars().next()?;
    // Field 39 (processor); `rest` starts at field 3.
    let cpu = fields.get(36)?.parse().ok()?;
    let status = std::fs::read_to_string(format!("{dir}/status")).ok()?;
    let allowed = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .and_then(|l| tame_host::CpuList::parse(l.trim()).ok())?;
    Some((comm, state, cpu, allowed))
}

/// Every thread of `child`, sampled every 10 ms until it exits (it is not reaped here),
/// each sample with whether the partition was applied then.
fn sample_threads(child: &mut std::process::Child) -> Vec<(bool, Vec<Thread>)> {
    let pid = child.id();
    let mut samples = Vec::new();
    while matches!(child.try_wait(), Ok(None)) {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            break;
        };
        let partitioned = Path::new("/sys/fs/cgroup/cpuset/tame-rt").exists();
        let threads: Vec<Thread> = tasks
            .flatten()
            .filter_map(|t| thread_of(pid, &t.file_name().to_string_lossy()))
            .collect();
        samples.push((partitioned, threads));
        std::thread::sleep(Duration::from_millis(10));
    }
    samples
}

/// While a measuring thread was pinned to the work's CPUs (`measured`), shared and
/// partitioned, tame's own threads (the waiting thread, the trace reader) were never
/// allowed there, nor seen running there.
fn assert_off_the_measured_cpus(samples: &[(bool, Vec<Thread>)], measured: &tame_host::CpuList) {
    let measuring = |threads: &[Thread]| {
        threads.iter().any(|(comm, _, _, allowed)| {
            comm.starts_with("tame-measure") && allowed.is_subset(measured)
        })
    };
    let mut wrong = Vec::new();
    for partitioned in [false, true] {
        let during: Vec<&Vec<Thread>> = samples
            .iter()
            .filter(|(p, threads)| *p == partitioned && measuring(threads))
            .map(|(_, t)| t)
            .collect();
        assert!(
            during.len() > 10,
            "{} samples while measuring (partitioned: {partitioned})",
            during.len()
        );
        let own = during
            .iter()
            .flat_map(|t| t.iter())
            .filter(|(comm, ..)| !comm.starts_with("tame-measure"));
        let mut reader_seen = false;
        for (comm, state, cpu, allowed) in own {
            reader_seen |= comm == "tame-trace-read";
            // A sleeping thread's last CPU may predate its placement: only a running one's counts.
            if !allowed.intersection(measured).is_empty()
                || (*state == 'R' && measured.contains(*cpu))
            {
                wrong.push(format!("{comm} (partitioned: {partitioned}): allowed {allowed}, state {state} on CPU {cpu}"));
            }
        }
        assert!(
            reader_seen,
            "no trace reader seen while measuring (partitioned: {partitioned})"
        );
    }
    wrong.dedup();
    assert!(
        wrong.is_empty(),
        "tame's own threads on measured CPU {measured}: {wrong:#?}"
    );
}

/// The verdict is drawn from the activations and never claims more than they show: a
/// deadline below any response is not met; a clean run of a few hundred activations is never
/// met (a miss rate of 0 cannot be shown), and says what would decide.
#[test]
fn the_verdict_rests_on_the_activations_it_measured() {
    let _machine = tame_testing::serial::module(module_path!());
    let _one = exclusive();
    if !machine_fits() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (journal, out) = (dir.path().join("j"), dir.path().join("out"));
    let _revert = RevertOnDrop(&journal);
    let before = state();
    let verdict = |args: &[&str], duration: &str| {
        let o = assess(&journal, &out, duration, "none")
            .args(["--rounds", "1", "--no-cost", "--no-trace", "--json", "-"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        r["verdict"].clone()
    };
    let v = verdict(
        &["--period", "1ms", "--deadline", "5us", "--budget", "1us"],
        "600ms",
    );
    assert_eq!(v["outcome"], "not_met", "{v:#}");
    let v = verdict(&["--period", "50ms", "--budget", "10us"], "1500ms");
    let outcome = v["outcome"].as_str().unwrap();
    assert!(
        outcome == "inconclusive" || outcome == "not_met",
        "never met on {} activations: {v:#}",
        v["shared"]["activations"]
    );
    if outcome == "inconclusive" {
        assert!(
            v["next_step"].as_str().unwrap().contains("--miss-rate"),
            "{v:#}"
        );
    }
    assert_as_found(&before, &journal);
}

/// Start an assessment and kill -9 it once its partition is applied.
fn kill_once_partitioned(journal: &Path, out: &Path) {
    let child = Killed(
        assess(journal, out, "2s", "cpu")
            .arg("--no-cost")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for_journal(journal, Duration::from_secs(60));
    // Inside the partitioned measurement (2 s from the check inside the partition on).
    std::thread::sleep(Duration::from_millis(1000));
    drop(child); // SIGKILL, reaped
    assert!(journal.join("journal").exists());
    assert_eq!(
        tame_cgroups().len(),
        2,
        "the killed run's partition is still applied"
    );
}

#[test]
fn after_kill_9_the_next_assess_or_revert_restores_everything() {
    let _machine = tame_testing::serial::module(module_path!());
    let _one = exclusive();
    if !machine_fits() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (journal, out) = (dir.path().join("j"), dir.path().join("out"));
    let _revert = RevertOnDrop(&journal);
    let before = state();

    // Killed in the shared phase: nothing was applied, and the load dies with it.
    let child = Killed(
        assess(&journal, &out, "3s", "cpu")
            .arg("--no-cost")
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(1000));
    drop(child);
    assert_as_found(&before, &journal);

    // Killed partitioned, then the next assess finishes the revert before it starts.
    kill_once_partitioned(&journal, &out);
    let o = assess(&journal, &out, "400ms", "none")
        .args(["--no-cost", "--json", "-"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["restoration"]["recovered_earlier_run"], true);
    assert_as_found(&before, &journal);

    // Killed partitioned, then tame revert.
    kill_once_partitioned(&journal, &out);
    let o = tame(&["revert", "--journal-dir", journal.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_as_found(&before, &journal);
}

#[test]
fn another_applied_spec_is_refused_before_anything_runs() {
    let _machine = tame_testing::serial::module(module_path!());
    let _one = exclusive();
    if !machine_fits() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("j");
    let _revert = RevertOnDrop(&journal);
    let spec = dir.path().join("own.toml");
    let last = crate::common::last_cpu();
    let first: u32 = last.parse::<u32>().unwrap() - 1;
    std::fs::write(
        &spec,
        format!("[[partition]]\nname = \"system\"\ncpus = \"0-{first}\"\nrole = \"system\"\n[[partition]]\nname = \"mine\"\ncpus = \"{last}\"\nrole = \"isolated\"\n"),
    )
    .unwrap();
    let jd = journal.to_str().unwrap();
    let o = tame(&["apply", spec.to_str().unwrap(), "--journal-dir", jd]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = assess(&journal, &dir.path().join("out"), "400ms", "none")
        .output()
        .unwrap();
    let reverted = tame(&["revert", "--journal-dir", jd]);
    assert!(reverted.status.success());
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("a partition spec is applied already"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Interrupt a running assessment with SIGINT (Ctrl-C) after `after`, from the moment
/// `ready` holds; it must end by itself, exit 130 and report what it measured.
fn interrupt(
    journal: &Path,
    out: &Path,
    ready: impl Fn() -> bool,
    after: Duration,
) -> serde_json::Value {
    let mut child = Killed(
        assess(journal, out, "2s", "cpu")
            .args(["--rounds", "1", "--no-cost", "--json", "-"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pid = child.0.id() as i32;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready() {
        assert!(Instant::now() < deadline, "the assessment never got there");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(after);
    // SAFETY: kill(2) on our own child's pid has no memory-safety preconditions.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let mut stdout = Vec::new();
    std::io::Read::read_to_end(&mut child.0.stdout.take().unwrap(), &mut stdout).unwrap();
    assert_eq!(
        child.0.wait().unwrap().code(),
        Some(130),
        "Ctrl-C is exit 130"
    );
    let r: serde_json::Value = serde_json::from_slice(&stdout).unwrap();
    assert_eq!(r["interrupted"], true);
    r
}

#[test]
fn ctrl_c_ends_the_assessment_early_and_reverts() {
    let _machine = tame_testing::serial::module(module_path!());
    let _one = exclusive();
    if !machine_fits() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (journal, out) = (dir.path().join("j"), dir.path().join("out"));
    let _revert = RevertOnDrop(&journal);
    let before = state();

    // Before anything is measured (the CPU sample takes the first second): exit 130 too.
    let r = interrupt(&journal, &out, || true, Duration::from_millis(300));
    assert_eq!(r["shared"]["measured"], false);
    assert_eq!(r["verdict"]["outcome"], "unknown");
    assert_as_found(&before, &journal);

    // In the shared phase (its work from about 1.1 s to 2.4 s): nothing applied, the
    // partitioned phase is not measured.
    let r = interrupt(&journal, &out, || true, Duration::from_millis(1700));
    assert_eq!(r["shared"]["measured"], true);
    assert_eq!(r["partitioned"]["measured"], false);
    assert_eq!(r["verdict"]["outcome"], "unknown");
    assert_as_found(&before, &journal);

    // Partitioned: the measurement ends early, and the partition is reverted.
    let r = interrupt(
        &journal,
        &out,
        || journal.join("journal").exists(),
        Duration::from_millis(1000),
    );
    assert_eq!(r["partitioned"]["measured"], true);
    assert!(r["restoration"]["changes_reverted"].as_u64().unwrap() > 3);
    assert_eq!(r["restoration"]["not_restored"], serde_json::json!([]));
    assert_as_found(&before, &journal);
}

/// The phases of an assessment, as its observer hears of them, in order.
const PHASES: [&str; 9] = [
    "check",
    "calibrating the work",
    "round 1/1 shared: the work",
    "round 1/1 shared: busy-loop noise",
    "round 1/1: applying the partition",
    "check inside the partition",
    "round 1/1 partitioned: the work",
    "round 1/1 partitioned: busy-loop noise",
    "round 1/1: reverting the partition",
];

const KILL_AT_ENV: &str = "TAME_ASSESS_TEST_KILL_AT";
const KILL_CHILD: &str = "child_assess_killed_at_a_phase";
const KILL_PARENT: &str = "kill_9_at_each_phase_then_the_next_assess_or_revert_restores_everything";

/// Kills its own process in phase `target`: at once in a quick phase, a third of the way
/// through a measurement.
struct KillIn {
    target: String,
    inside: bool,
}

impl KillIn {
    fn die() {
        // SAFETY: kill(2) on our own pid has no memory-safety preconditions.
        unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    }
}

impl Observer for KillIn {
    fn phase(&mut self, title: &str, expected_ns: u64) {
        self.inside = title == self.target;
        if self.inside && expected_ns == 0 {
            Self::die();
        }
    }

    fn progress(&mut self, permille: u64) {
        if self.inside && permille >= 333 {
            Self::die();
        }
    }

    fn note(&mut self, _: &str) {}
}

/// Runs only as the child of the test below: assesses through the library (what the CLI
/// calls) and kills itself in the phase it is given.
#[test]
#[ignore = "child side of kill_9_at_each_phase_then_the_next_assess_or_revert_restores_everything, run by it"]
fn child_assess_killed_at_a_phase() {
    let arg = child_arg(KILL_AT_ENV, KILL_PARENT);
    let (target, journal) = arg.split_once('\t').unwrap();
    let options = Options {
        requirement: Requirement::new(1_000_000, 100_000, None, 0.0, 1).unwrap(),
        // Short phases: each kill lands a third of the way into its phase; the cost
        // probe runs between phases, in none of those killed here.
        length: Length::Fixed(400_000_000),
        rounds: 1,
        working_set_bytes: None,
        load: vec![LoadKind::Cpu],
        load_cmd: None,
        spec: None,
        minimal: false,
        share_core: false,
        journal_dir: journal.into(),
        out_dir: None,
        attribute: true,
        cost_probe: false,
        command_line: vec!["assess-kill-test".into()],
        program: None,
    };
    let mut observer = KillIn {
        target: target.to_string(),
        inside: false,
    };
    let result = tame_assess::assess(
        &tame_host::Root::system(),
        &options,
        &RunControl::new(),
        &mut observer,
    );
    panic!(
        "the assessment ended without reaching {target:?}: {:?}",
        result.map(|r| r.verdict)
    );
}

#[test]
fn kill_9_at_each_phase_then_the_next_assess_or_revert_restores_everything() {
    let _machine = tame_testing::serial::module(module_path!());
    let _one = exclusive();
    if !machine_fits() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (journal, out) = (dir.path().join("j"), dir.path().join("out"));
    let _revert = RevertOnDrop(&journal);
    let before = state();
    for (i, phase) in PHASES.iter().enumerate() {
        let child = tame_testing::serial::test_name(module_path!(), KILL_CHILD);
        let o = child_test(&child)
            .env(KILL_AT_ENV, format!("{phase}\t{}", journal.display()))
            .output()
            .unwrap();
        assert_ran_one(&child, &o.stdout);
        assert_eq!(
            o.status.signal(),
            Some(libc::SIGKILL),
            "not killed in {phase:?}: {}",
            String::from_utf8_lossy(&o.stdout)
        );
        let applied = journal.join("journal").exists();
        // From the check inside the partition on, the partition is applied.
        assert_eq!(
            applied,
            i >= 5,
            "killed in {phase:?}: journal left = {applied}"
        );
        if i % 2 == 0 {
            let o = tame(&["revert", "--journal-dir", journal.to_str().unwrap()]);
            assert!(
                o.status.success(),
                "{phase}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        } else {
            let o = assess(&journal, &out, "400ms", "none")
                .args(["--no-cost", "--json", "-"])
                .output()
                .unwrap();
            assert!(
                o.status.success(),
                "{phase}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            assert_eq!(
                r["restoration"]["recovered_earlier_run"], applied,
                "{phase}"
            );
        }
        assert_as_found(&before, &journal);
    }
}

/// `tame assess -- cyclictest …`: cyclictest is the work, watched shared and inside the
/// partition; the verdict counts its measuring thread's activations (1 kHz), not its
/// main thread's, and the machine is left as found.
#[test]
fn assess_watches_a_users_program_as_the_work() {
    let _machine = tame_testing::serial::module(module_path!());
    let _one = exclusive();
    if !machine_fits()
        || !crate::common::require(
            crate::common::have_program("cyclictest"),
            "cyclictest (rt-tests)",
        )
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (journal, out) = (dir.path().join("j"), dir.path().join("out"));
    let json = dir.path().join("assess.json");
    let _revert = RevertOnDrop(&journal);
    let before = state();
    let o = assess(&journal, &out, "3s", "cpu")
        .args(["--rounds", "1", "--no-cost", "--json"])
        .arg(&json)
        .args(["--", "cyclictest", "-m", "-q", "-p", "90", "-i", "1000"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(r["program"]["command"][0], "cyclictest");
    assert!(r.get("calibration").is_none(), "nothing is calibrated");
    // The work's share of each 3 s configuration is 2 s: about 2000 activations at 1 kHz;
    // the main thread's 100 Hz would give about 200.
    for phase in ["shared", "partitioned"] {
        let n = r[phase]["job"]["activations"].as_u64().unwrap();
        assert!((1_600..=2_100).contains(&n), "{phase}: {n} activations");
        assert_eq!(r["verdict"][phase]["activations"], n, "{phase}");
    }
    for x in r["rounds"].as_array().unwrap() {
        let watch = &x["results"]["watch"];
        assert_eq!(watch["bench"], "watch", "{x}");
        assert!(x["results"]["job"].is_null());
        let partitioned = x["configuration"] == "partitioned";
        assert_eq!(watch["partition"] == "rt", partitioned, "{watch}");
    }
    let summary = String::from_utf8_lossy(&o.stdout);
    assert!(summary.contains("your program `cyclictest"), "{summary}");
    assert!(summary.contains("verdict: "), "{summary}");
    assert_as_found(&before, &journal);
}
