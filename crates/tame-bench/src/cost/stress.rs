//! One stress-ng workload run: `stress-ng --CLASS N --taskset CPUS` for a whole number of
//! seconds, its figures read from the YAML file it writes (`--metrics-brief --yaml`), what it
//! printed kept beside (the parity test compares the two). stress-ng runs in its own process
//! group, dies with tame (parent-death signal, and its own `--timeout`), and nothing of it
//! outlives [`run`].

use std::fs::File;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use tame_host::CpuList;
use tame_launch::spawn::Spawn;

use crate::engine::RunControl;
use crate::error::{failed, io_failed, Result};
use crate::load::end_group;

/// What one run gave.
#[derive(Clone, Debug, PartialEq)]
pub struct StressRun {
    /// bogo-ops/s over wall-clock time, as stress-ng wrote it.
    pub throughput: f64,
    /// What stress-ng printed (its `metrc:` table included).
    pub printed: String,
    /// The exact command.
    pub command: String,
}

/// Beyond its run time, how long stress-ng may take to start (syscall calibrates) and to
/// write its figures before it counts as hung.
const GRACE: Duration = Duration::from_secs(30);

/// The arguments for `stressor` on `cpus` for `seconds`, writing its figures to `yaml`.
pub fn arguments(
    stressor: &str,
    cpus: &CpuList,
    seconds: u64,
    dir: &Path,
    yaml: &Path,
) -> Vec<String> {
    let mut args = vec![
        format!("--{stressor}"),
        cpus.len().to_string(),
        "--taskset".into(),
        cpus.to_string(),
        "--temp-path".into(),
        dir.display().to_string(),
        "--timeout".into(),
        format!("{seconds}s"),
        "--metrics-brief".into(),
        "--yaml".into(),
        yaml.display().to_string(),
    ];
    if stressor == "hdd" {
        // Bounded files per instance: the default (1 GiB each) would measure the disk's
        // free space as much as the CPUs.
        args.extend(["--hdd-bytes".into(), "32M".into()]);
    }
    args
}

/// Run `stressor` on `cpus` for `duration` (whole seconds) in `dir`; `None` when Ctrl-C
/// stopped it (a cut run's rate is not a sample).
pub fn run(
    stressor: &str,
    cpus: &CpuList,
    duration: Duration,
    dir: &Path,
    control: &RunControl,
) -> Result<Option<StressRun>> {
    let yaml = dir.join(format!("{stressor}.yaml"));
    let log = dir.join(format!("{stressor}.log"));
    // A file from an earlier round must not be read as this one's.
    let _ = std::fs::remove_file(&yaml);
    let args = arguments(stressor, cpus, duration.as_secs(), dir, &yaml);
    let command = format!("stress-ng {}", args.join(" "));
    let out =
        File::create(&log).map_err(|e| io_failed(format!("cannot create {}", log.display()), e))?;
    let err = out
        .try_clone()
        .map_err(|e| io_failed(format!("cannot open {} twice", log.display()), e))?;
    let mut child = Spawn::program("stress-ng")
        .args(&args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group()
        .die_with_parent(libc::SIGTERM)
        .spawn()?;
    let outcome = wait(&mut child, duration + GRACE, control);
    if !matches!(outcome, Ok(Some(_))) {
        // Interrupted or hung: its leader is still ours to kill and reap.
        // SAFETY: signalling the process group we created, whose leader is not reaped.
        unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
        let _ = child.wait();
    }
    end_group(child.id());
    let printed = std::fs::read_to_string(&log).unwrap_or_default();
    let status = match outcome? {
        Some(status) => status,
        None => return Ok(None),
    };
    if !status.success() {
        return Err(failed(format!(
            "`{command}` failed ({status}); it printed:\n{}",
            last_lines(&printed, 8)
        )));
    }
    let text = std::fs::read_to_string(&yaml).map_err(|e| {
        io_failed(
            format!("stress-ng wrote no figures to {}", yaml.display()),
            e,
        )
    })?;
    let throughput = crate::stress_ng::throughput_of(&text, stressor).map_err(|e| {
        failed(format!(
            "cannot read stress-ng's figures in {}: {e} — `{command}` printed:\n{}",
            yaml.display(),
            last_lines(&printed, 8)
        ))
    })?;
    Ok(Some(StressRun {
        throughput,
        printed,
        command,
    }))
}

/// Wait for stress-ng to end; `None` when Ctrl-C came first (the caller then ends it).
fn wait(
    child: &mut Child,
    limit: Duration,
    control: &RunControl,
) -> Result<Option<std::process::ExitStatus>> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child
            .try_wait()
            .map_err(|e| io_failed("cannot wait for stress-ng", e))?
        {
            return Ok(Some(status));
        }
        if control.stopped() {
            return Ok(None);
        }
        if Instant::now() >= deadline {
            return Err(failed(format!(
                "stress-ng did not end within {} s of its run time — it is stopped; see whether it runs at all (stress-ng --cpu 1 --timeout 1s)",
                GRACE.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_confine_stress_ng_and_bound_the_hdd_files() {
        let cpus = CpuList::parse("0,2-3").unwrap();
        let a = arguments(
            "hdd",
            &cpus,
            5,
            Path::new("/tmp/w"),
            Path::new("/tmp/w/hdd.yaml"),
        );
        assert_eq!(
            a.join(" "),
            "--hdd 3 --taskset 0,2-3 --temp-path /tmp/w --timeout 5s --metrics-brief --yaml /tmp/w/hdd.yaml --hdd-bytes 32M"
        );
        let a = arguments("cpu", &cpus, 1, Path::new("/t"), Path::new("/t/c.yaml"));
        assert_eq!(a[..2], ["--cpu".to_string(), "3".to_string()]);
        assert!(!a.contains(&"--hdd-bytes".to_string()));
    }

    /// Parity: tame's reading of a real stress-ng run equals what stress-ng printed.
    #[test]
    fn tames_reading_equals_what_stress_ng_printed() {
        if !tame_testing::require::require(
            tame_launch::spawn::resolve("stress-ng").is_some(),
            "stress-ng (apt-get install stress-ng)",
        ) {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let cpus = CpuList::parse("0").unwrap();
        let run = run(
            "cpu",
            &cpus,
            Duration::from_secs(1),
            dir.path(),
            &RunControl::new(),
        )
        .unwrap()
        .expect("not interrupted");
        let printed = crate::stress_ng::tests::printed_rate(&run.printed, "cpu")
            .unwrap_or_else(|| panic!("no metrics line in:\n{}", run.printed));
        assert_eq!(format!("{:.2}", run.throughput), printed, "{}", run.printed);
        assert!(run.throughput > 0.0);
        assert!(run.command.starts_with("stress-ng --cpu 1 --taskset 0 "));
    }
}
