//! A partition applied for a measurement only (`tame assess`, `tame bench cost`): applied
//! through the journal with a marker line naming the command and its pid, reverted after
//! the measurement, on error and on a panic ([`TemporaryPartition`]'s drop). After `kill -9` the journal
//! is on disk: the next run of either command knows a marked journal for one a measurement
//! left and reverts it first ([`recover_earlier_run`]); `tame revert` does too.

use std::path::Path;

use tame_host::journal::RevertReport;
use tame_host::Root;
use tame_partition::{Applied, AppliedSpecError, Spec};

use crate::error::{invalid, AssessError};
use crate::layout::MARKER;

/// The marker of `tame bench cost`'s spec (assess's is [`MARKER`]).
pub const COST_MARKER: &str = "# applied by tame bench cost";

/// Every marker of a partition applied for a measurement only.
const MARKERS: [&str; 2] = [MARKER, COST_MARKER];

/// The spec text as applied: the marker and this process's pid first.
pub fn marked(marker: &str, spec_text: &str) -> String {
    format!(
        "{marker} (pid {}) — `tame revert` undoes it\n{spec_text}",
        std::process::id()
    )
}

/// A journal left by a killed measurement is reverted (true when one was); any other
/// applied spec is refused: `command` measures the machine without it and applies its own.
pub fn recover_earlier_run(
    root: &Root,
    journal_dir: &Path,
    may_change: bool,
    command: &str,
) -> Result<bool, AssessError> {
    let refuse = || {
        invalid(format!(
            "a partition spec is applied already (journal in {}) — {command} measures the machine without it and applies its own: run `tame revert` first (or give that spec with --spec FILE after reverting)",
            journal_dir.display()
        ))
    };
    // The one reader of the applied partitions; not root: the spec apply published
    // beside the journal (root's) tells.
    let applied = match tame_partition::Applied::read(root, journal_dir) {
        Ok(applied) => applied,
        Err(_) if !may_change => return Ok(false),
        // A note that is no spec is no measurement's: refused like any other spec.
        Err(AppliedSpecError::Spec(_)) => return Err(refuse()),
        Err(AppliedSpecError::Journal(e)) => {
            return Err(AssessError::Failed(format!(
                "cannot read the journal in {}: {e} — see `tame status`; `tame revert` undoes what it records",
                journal_dir.display()
            )))
        }
    };
    let Some(applied) = applied else {
        return Ok(false);
    };
    let text = applied.text;
    let Some(marker) = MARKERS.iter().find(|m| may_change && text.starts_with(**m)) else {
        return Err(refuse());
    };
    let who = marker.trim_start_matches("# applied by ");
    if let Some(pid) = running_measurement(root, &text) {
        return Err(invalid(format!(
            "another {who} (pid {pid}) is running with its partition applied — wait until it ends (it reverts its partition), or stop it with Ctrl-C / kill {pid}"
        )));
    }
    let report = tame_partition::revert(root, journal_dir)?;
    // An assess's busy-loop phase may have been killed with tracing set up.
    tame_trace::tracefs::recover_stale(root);
    if !report.not_restored.is_empty() {
        return Err(AssessError::Failed(format!(
            "an earlier {who} left its partition applied and reverting it left {} change(s) unrestored — see `tame status`, fix the cause and run `tame revert`",
            report.not_restored.len()
        )));
    }
    Ok(true)
}

/// The measurement that applied the marked spec `text`, if it still runs.
fn running_measurement(root: &Root, text: &str) -> Option<u32> {
    let first = text.lines().next()?;
    let pid: u32 = first
        .split("(pid ")
        .nth(1)?
        .split(')')
        .next()?
        .parse()
        .ok()?;
    let comm = root.process(pid).stat().ok()?.comm;
    (pid != std::process::id() && comm == "tame").then_some(pid)
}

/// A partition applied by a measurement: reverted when dropped unless
/// [`TemporaryPartition::revert`] ran. Either way the calling thread gets back the CPUs it
/// had before the apply.
pub struct TemporaryPartition<'a> {
    root: &'a Root,
    journal_dir: &'a Path,
    applied: Applied,
    reverted: bool,
    /// The calling thread's CPUs before the apply moved it into the system partition.
    affinity: Vec<u32>,
}

impl<'a> TemporaryPartition<'a> {
    /// Apply `spec`, whose text (`text`, noted in the journal) is marked with `marker`.
    pub fn apply(
        root: &'a Root,
        spec: &Spec,
        text: &str,
        marker: &str,
        journal_dir: &'a Path,
    ) -> Result<Self, AssessError> {
        let affinity = tame_rt::sched::allowed_cpus();
        let report = tame_partition::apply(root, spec, &marked(marker, text), journal_dir, None)?;
        Ok(Self {
            root,
            journal_dir,
            applied: report.applied,
            reverted: false,
            affinity,
        })
    }

    /// The partitions applied, typed: what the measurement runs in.
    pub fn applied(&self) -> &Applied {
        &self.applied
    }

    pub fn revert(mut self) -> Result<RevertReport, AssessError> {
        self.reverted = true;
        let report = tame_partition::revert(self.root, self.journal_dir);
        self.give_back_cpus();
        Ok(report?)
    }

    /// Moving this thread back to the root cpuset does not widen it again where it set its
    /// own affinity inside the system partition (the engine's waiting thread does): the
    /// kernel keeps that request and intersects with it. A failure is left to the next
    /// placement on those CPUs, which says which CPU it lacks.
    fn give_back_cpus(&self) {
        if tame_rt::sched::allowed_cpus() != self.affinity {
            let _ = tame_rt::sched::set_affinity(0, self.affinity.iter().copied());
        }
    }
}

impl Drop for TemporaryPartition<'_> {
    fn drop(&mut self) {
        if !self.reverted {
            // An error or panic between apply and revert: put the machine back anyway.
            let _ = tame_partition::revert(self.root, self.journal_dir);
            self.give_back_cpus();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marked_text_names_the_command_and_this_process() {
        let t = marked(COST_MARKER, "[[partition]]\n");
        assert!(t.starts_with(&format!(
            "# applied by tame bench cost (pid {}) — `tame revert` undoes it\n",
            std::process::id()
        )));
        assert!(t.ends_with("[[partition]]\n"));
        // The running check never takes this process for another measurement.
        let root = Root::new("/");
        assert_eq!(running_measurement(&root, &t), None);
        assert_eq!(
            running_measurement(&root, "# applied by tame assess (pid x)"),
            None
        );
    }

    #[test]
    fn without_root_a_journal_is_refused_and_none_is_fine() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        assert!(!recover_earlier_run(&root, dir.path(), false, "tame bench cost").unwrap());
    }
}
