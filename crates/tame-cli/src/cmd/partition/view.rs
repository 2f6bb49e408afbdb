//! The human views of plan, apply, status and revert: text made from the libraries'
//! results alone (nothing is read or written here), one function per section.

use std::fmt::Write as _;
use std::path::Path;

use tame_host::journal::RevertReport;
use tame_partition::plan::{describe, kept_summary, KeptBecause, Recommendation};
use tame_partition::status::Audit;
use tame_partition::{ApplyReport, Plan, Status, Step};

/// Add a line to the text (writing to a `String` cannot fail).
macro_rules! line {
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}

pub fn plan(spec: &Path, plan: &Plan, verbose: bool) -> String {
    let mut o = String::new();
    line!(
        o,
        "Plan for {} — isolated CPUs: {}",
        spec.display(),
        if plan.isolated_cpus.is_empty() {
            "none".to_string()
        } else {
            plan.isolated_cpus.to_string()
        }
    );
    plan_runtime(&mut o, plan, verbose);
    line!(o, "\nNeeds a reboot (add to the kernel command line):");
    if plan.needs_reboot.is_empty() {
        line!(o, "  nothing");
    }
    for p in &plan.needs_reboot {
        line!(o, "  {}    # {}", p.parameter, p.why);
    }
    if !plan.needs_reboot.is_empty() {
        line!(
            o,
            "  (`tame enable {}` writes them for the boot loader and applies the spec at every boot)",
            spec.display()
        );
    }
    if !plan.warnings.is_empty() {
        line!(o, "\nWarnings:");
        for w in &plan.warnings {
            line!(o, "  - {w}");
        }
    }
    if let Some(r) = &plan.recommendation {
        recommendation(&mut o, r);
    }
    o
}

fn plan_runtime(o: &mut String, plan: &Plan, verbose: bool) {
    line!(o, "\nAt run time (tame apply; no reboot):");
    if plan.is_empty() {
        line!(o, "  nothing to change: the spec is applied");
    }
    for step in &plan.runtime {
        let why = match step {
            Step::Mkdir { why, .. }
            | Step::Write { why, .. }
            | Step::Owner { why, .. }
            | Step::MoveTasks { why, .. } => why,
        };
        match step {
            Step::Write {
                ineffective: Some(note),
                ..
            } => line!(o, "  {}    # {why} — {note} (see warnings)", describe(step)),
            _ => line!(o, "  {}    # {why}", describe(step)),
        }
    }
    let kept: Vec<(KeptBecause, &str, u32)> = plan
        .stay
        .iter()
        .filter_map(|t| Some((t.kept_because()?, t.comm.as_str(), t.tid)))
        .collect();
    kept_threads(o, &kept, false, "  ", verbose);
}

/// How many threads the kernel keeps where they are, by kind; named with `verbose`.
fn kept_threads(
    o: &mut String,
    kept: &[(KeptBecause, &str, u32)],
    past: bool,
    indent: &str,
    verbose: bool,
) {
    let Some(summary) = kept_summary(kept.iter().map(|k| k.0), past) else {
        return;
    };
    if !verbose {
        line!(o, "{indent}{summary}; --verbose names them");
        return;
    }
    line!(o, "{indent}{summary}:");
    let mut kinds: Vec<KeptBecause> = kept.iter().map(|k| k.0).collect();
    kinds.sort();
    kinds.dedup();
    for kind in kinds {
        let names: Vec<String> = kept
            .iter()
            .filter(|k| k.0 == kind)
            .map(|(_, comm, tid)| format!("{comm} ({tid})"))
            .collect();
        line!(o, "{indent}  - {}", names.join(", "));
    }
}

fn recommendation(o: &mut String, r: &Recommendation) {
    let cpus = |n: usize| format!("{n} isolated CPU{}", if n == 1 { "" } else { "s" });
    if r.keep {
        line!(
            o,
            "\nRecommended layout: keep this one — every choice of {} warns on this machine, and this is the least bad:",
            cpus(r.isolated)
        );
    } else if r.every_choice_warns {
        line!(
            o,
            "\nRecommended layout — every choice of {} warns on this machine; this is the least bad:",
            cpus(r.isolated)
        );
    } else {
        line!(
            o,
            "\nRecommended layout — these isolated CPUs carry nothing the warnings name:"
        );
    }
    for c in &r.changes {
        line!(
            o,
            "  partition {:?}: cpus = \"{}\"    (the spec has \"{}\")",
            c.partition,
            c.cpus,
            c.spec_cpus
        );
    }
    for w in &r.why {
        line!(o, "  - {w}");
    }
    if let Some(boot) = &r.without_warnings {
        line!(o, "  Without these warnings: {boot}.");
    }
}

/// `tame apply`'s report. The threads the kernel keeps are counted (named with `verbose`):
/// a plain re-apply would otherwise list dozens of them every time.
pub fn apply(spec: &Path, report: &ApplyReport, verbose: bool) -> String {
    let mut o = String::new();
    if report.unchanged {
        line!(o, "Nothing changed: {} is already applied.", spec.display());
    } else {
        line!(
            o,
            "Applied {}: {} writes, {} directories, {} threads moved. Journal: {} (undo with `tame revert`).",
            spec.display(),
            report.writes,
            report.directories,
            report.tasks_moved,
            report.journal
        );
    }
    if let Some(moved) = moved_threads(report) {
        line!(o, "{moved}");
    }
    let kept: Vec<(KeptBecause, &str, u32)> = report
        .kept
        .iter()
        .map(|k| (k.because, k.comm.as_str(), k.tid))
        .collect();
    kept_threads(&mut o, &kept, true, "", verbose);
    if !report.refused.is_empty() {
        line!(o, "The kernel refused these:");
        // One line per reason.
        let mut by_reason: Vec<(&str, Vec<&str>)> = Vec::new();
        for r in &report.refused {
            match by_reason.iter_mut().find(|(reason, _)| *reason == r.reason) {
                Some((_, whats)) => whats.push(&r.what),
                None => by_reason.push((&r.reason, vec![&r.what])),
            }
        }
        for (reason, whats) in by_reason {
            line!(o, "  - {}: {reason}", whats.join(", "));
        }
    }
    for w in &report.warnings {
        line!(o, "warning: {w}");
    }
    o
}

/// Where the count of moved threads comes from, so it can be compared with a plan's:
/// threads (not processes) listed when apply read the host, less those that exited,
/// plus those started while it ran.
fn moved_threads(r: &ApplyReport) -> Option<String> {
    if r.tasks_moved == 0 && r.tasks_listed == 0 {
        return None;
    }
    let from_list = r.tasks_moved.saturating_sub(r.tasks_started);
    let mut how = format!(
        "{from_list} of the {} listed when apply read the host",
        r.tasks_listed
    );
    if r.tasks_gone > 0 {
        how.push_str(&format!(" ({} exited first)", r.tasks_gone));
    }
    if r.tasks_started > 0 {
        how.push_str(&format!(
            ", and {} started while apply ran",
            r.tasks_started
        ));
    }
    Some(format!(
        "The {} threads moved to the system partition: {how}. These are threads, not processes, and they come and go: a plan made earlier counted another moment.",
        r.tasks_moved
    ))
}

/// How `tame` was invoked, to give back the exact command that repairs drift.
#[derive(Clone, Debug, Default)]
pub struct Invocation {
    /// `--root`, when not `/`.
    pub root: Option<String>,
    /// `--journal-dir`, when given.
    pub journal_dir: Option<String>,
    /// The user may not change the host: the command needs sudo.
    pub sudo: bool,
}

impl Invocation {
    fn apply(&self, spec: &str) -> String {
        let mut cmd = String::new();
        if self.sudo {
            cmd.push_str("sudo ");
        }
        cmd.push_str("tame ");
        if let Some(root) = &self.root {
            cmd.push_str(&format!("--root {} ", quote(root)));
        }
        cmd.push_str(&format!("apply {}", quote(spec)));
        if let Some(dir) = &self.journal_dir {
            cmd.push_str(&format!(" --journal-dir {}", quote(dir)));
        }
        cmd
    }
}

/// A path as a shell word.
fn quote(s: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+,:=@%".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

pub fn status(status: &Status, invocation: &Invocation) -> String {
    let mut o = String::new();
    if !status.applied && status.previous_boot {
        line!(
            o,
            "No partitions applied: the journal at {} is from before the last reboot, which undid its changes (`tame apply` or `tame revert` clears it).",
            status.journal
        );
        enabled(&mut o, status);
        return o;
    }
    if let Some(partial) = &status.partial {
        if !status.applied {
            line!(o, "No partitions applied ({partial}).");
            return o;
        }
        line!(o, "Applied ({partial}):");
    } else if !status.applied {
        line!(
            o,
            "No partitions applied (no journal at {}).",
            status.journal
        );
        enabled(&mut o, status);
        return o;
    } else {
        line!(
            o,
            "Applied ({} changes journaled in {}):",
            status.changes,
            status.journal
        );
    }
    if let Some(spec) = &status.spec {
        for l in spec.lines() {
            line!(o, "  | {l}");
        }
    }
    if status.interrupted > 0 {
        line!(
            o,
            "\n{} changes have no recorded outcome: apply was interrupted — run `tame revert`.",
            status.interrupted
        );
    }
    if status.partial.is_none() {
        drift(&mut o, status, invocation);
    }
    audit_tasks(&mut o, &status.audit);
    audit_irqs_and_timers(&mut o, &status.audit);
    enabled(&mut o, status);
    o
}

/// The partition kept at boot (`tame enable`), and whether its boot parameters are active.
fn enabled(o: &mut String, status: &Status) {
    let Some(e) = &status.enabled else {
        return;
    };
    line!(
        o,
        "\nEnabled at boot: {} (tame-partition.service; `tame disable` removes it)",
        e.spec_file
    );
    line!(o, "  boot parameters: {}", e.boot_line());
    for path in &e.changed_since {
        line!(
            o,
            "  {path} no longer holds what tame enable wrote: disable will leave it in place"
        );
    }
}

fn drift(o: &mut String, status: &Status, invocation: &Invocation) {
    let drift = &status.drift;
    line!(o, "\nDrift (changed by someone else since apply):");
    if drift.is_empty() {
        line!(o, "  none");
        return;
    }
    for d in drift {
        let what = match (&d.what, d.reapply_fixes) {
            (Some(what), _) => format!(" — {what}"),
            (None, false) if status.reapply_refused.is_none() => {
                " — still fits the spec: re-applying leaves it".to_string()
            }
            (None, _) => String::new(),
        };
        line!(
            o,
            "  {}: applied {} → now {}{what}",
            d.path,
            d.applied,
            d.now.as_deref().unwrap_or("(gone)")
        );
    }
    line!(o, "{}", repair(status, invocation));
}

/// What repairs the drift: re-applying the spec (the exact command). That runs the whole
/// plan again: it writes the drifted values back and whatever else the plan now finds
/// (a new IRQ's affinity, a new thread to move).
fn repair(status: &Status, invocation: &Invocation) -> String {
    if let Some(why) = &status.reapply_refused {
        return format!(
            "Re-applying the spec would be refused now ({why}) — run `tame revert`, correct the spec, and apply it again."
        );
    }
    let fixes = status.drift.iter().filter(|d| d.reapply_fixes).count();
    if fixes == 0 {
        return "Nothing to repair: every value found still fits the spec.".to_string();
    }
    let writes = format!(
        "it writes the {fixes} drifted value{} back, and anything else the plan now finds",
        if fixes == 1 { "" } else { "s" }
    );
    match (&status.spec_file, status.spec_file_matches) {
        (Some(file), true) => format!(
            "Re-applying the spec repairs this ({writes}): {}",
            invocation.apply(file)
        ),
        (Some(file), false) => match &status.spec_file_unread {
            Some(why) => format!(
                "Re-applying the spec repairs this ({writes}), but {file} {why}: save the applied spec (shown above) to a file and run {}",
                invocation.apply("FILE")
            ),
            None => format!(
                "Re-applying the spec repairs this ({writes}), but {file} no longer holds the applied spec (shown above): put it back in a file and run {}",
                invocation.apply("FILE")
            ),
        },
        (None, _) => format!(
            "Re-applying the spec repairs this ({writes}): save the applied spec (shown above) to a file and run {}",
            invocation.apply("FILE")
        ),
    }
}

fn audit_tasks(o: &mut String, a: &Audit) {
    line!(o, "\nOn isolated CPUs {}:", a.isolated_cpus);
    let (bound, others): (Vec<_>, Vec<_>) = a.tasks.iter().partition(|t| t.bound_by_kernel);
    if others.is_empty() {
        line!(o, "  no movable task");
    }
    for t in &others {
        line!(
            o,
            "  task {} ({}{}) may run on {}",
            t.tid,
            t.comm,
            if t.kernel_thread {
                ", kernel thread"
            } else {
                ""
            },
            t.cpus_allowed
        );
    }
    if !bound.is_empty() {
        let names: Vec<&str> = bound.iter().map(|t| t.comm.as_str()).collect();
        line!(
            o,
            "  kernel threads the kernel places itself (cannot move): {}",
            names.join(", ")
        );
    }
}

fn audit_irqs_and_timers(o: &mut String, a: &Audit) {
    if a.irqs.is_empty() {
        line!(o, "  no device IRQ");
    }
    for i in &a.irqs {
        line!(
            o,
            "  IRQ {} ({}) fires on {}{}",
            i.irq,
            i.name,
            i.fires_on,
            if i.managed {
                " — kernel-managed, cannot move"
            } else if i.moving {
                " — routed away; moves when it next fires"
            } else {
                ""
            }
        );
    }
    for (cpu, timers) in &a.timers {
        let list: Vec<String> = timers.iter().map(|(f, n)| format!("{f} ×{n}")).collect();
        line!(o, "  CPU {cpu} hrtimers: {}", list.join(", "));
    }
    for (cpu, n) in &a.timer_interrupts {
        line!(o, "  CPU {cpu}: {n} local timer interrupts since boot");
    }
}

pub fn revert(dir: &Path, report: &RevertReport) -> String {
    let mut o = String::new();
    if report.nothing_to_revert {
        line!(o, "Nothing to revert (no journal in {}).", dir.display());
    } else if report.previous_boot {
        line!(
            o,
            "Nothing to revert: the journal in {} was from before the last reboot, which undid its {} changes; it is removed without acting on it.",
            dir.display(),
            report.entries
        );
    } else if report.not_restored.is_empty() {
        line!(
            o,
            "Reverted: {} journaled changes, {} values written back; the journal is removed.",
            report.entries,
            report.restored
        );
    } else {
        line!(
            o,
            "Could not restore everything; the journal stays so `tame revert` can be run again:"
        );
        for n in &report.not_restored {
            line!(o, "  - {}: {}", n.what, n.reason);
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use tame_host::journal::NotRestored;
    use tame_host::CpuList;
    use tame_partition::apply::{Kept, Refused};
    use tame_partition::plan::recommend::Change as RecommendedCpus;
    use tame_partition::status::{AuditIrq, AuditTask, Drift};
    use tame_partition::Task;

    fn cpus(s: &str) -> CpuList {
        CpuList::parse(s).unwrap()
    }

    #[test]
    fn status_shows_the_spec_drift_and_what_runs_on_isolated_cpus() {
        let task = |tid, comm: &str, kernel_thread, bound_by_kernel| AuditTask {
            pid: tid,
            tid,
            comm: comm.into(),
            kernel_thread,
            bound_by_kernel,
            cpus_allowed: cpus("0-3"),
        };
        let irq = |irq, managed, moving| AuditIrq {
            irq,
            name: format!("dev{irq}"),
            fires_on: cpus("2"),
            managed,
            moving,
        };
        let s = Status {
            schema: 1,
            applied: true,
            journal: "/var/lib/tame/journal".into(),
            spec: Some("[[partition]]\nname = \"rt\"".into()),
            changes: 7,
            interrupted: 1,
            drift: vec![
                Drift {
                    path: "/proc/sys/kernel/timer_migration".into(),
                    applied: "0".into(),
                    now: Some("1".into()),
                    what: Some("timers are not pulled onto busy isolated CPUs".into()),
                    reapply_fixes: true,
                },
                Drift {
                    path: "/sys/devices/virtual/workqueue/cpumask".into(),
                    applied: "03".into(),
                    now: None,
                    what: Some("unbound workqueue work runs on the system partition".into()),
                    reapply_fixes: true,
                },
            ],
            spec_file: Some("/etc/tame/rt.toml".into()),
            spec_file_matches: true,
            spec_file_unread: None,
            reapply_refused: None,
            audit: Audit {
                isolated_cpus: cpus("2-3"),
                tasks: vec![
                    task(1, "systemd", false, false),
                    task(3, "rcu_preempt", true, false),
                    task(20, "ksoftirqd/2", true, true),
                ],
                irqs: vec![
                    irq(24, true, false),
                    irq(25, false, true),
                    irq(26, false, false),
                ],
                timer_interrupts: [(2, 17)].into_iter().collect(),
                timers: [(
                    2,
                    [("tick_nohz_handler".to_string(), 1)].into_iter().collect(),
                )]
                .into_iter()
                .collect(),
            },
            enabled: None,
            partial: None,
            previous_boot: false,
        };
        let user = Invocation {
            sudo: true,
            ..Default::default()
        };
        assert_eq!(
            status(&s, &user),
            "Applied (7 changes journaled in /var/lib/tame/journal):
  | [[partition]]
  | name = \"rt\"

1 changes have no recorded outcome: apply was interrupted — run `tame revert`.

Drift (changed by someone else since apply):
  /proc/sys/kernel/timer_migration: applied 0 → now 1 — timers are not pulled onto busy isolated CPUs
  /sys/devices/virtual/workqueue/cpumask: applied 03 → now (gone) — unbound workqueue work runs on the system partition
Re-applying the spec repairs this (it writes the 2 drifted values back, and anything else the plan now finds): sudo tame apply /etc/tame/rt.toml

On isolated CPUs 2-3:
  task 1 (systemd) may run on 0-3
  task 3 (rcu_preempt, kernel thread) may run on 0-3
  kernel threads the kernel places itself (cannot move): ksoftirqd/2
  IRQ 24 (dev24) fires on 2 — kernel-managed, cannot move
  IRQ 25 (dev25) fires on 2 — routed away; moves when it next fires
  IRQ 26 (dev26) fires on 2
  CPU 2 hrtimers: tick_nohz_handler ×1
  CPU 2: 17 local timer interrupts since boot
"
        );
    }

    #[test]
    fn nothing_applied_and_a_clean_audit_say_so() {
        let mut s = empty_status();
        let root = Invocation::default();
        assert_eq!(
            status(&s, &root),
            "No partitions applied (no journal at /j/journal).\n"
        );
        s.applied = true;
        assert_eq!(
            status(&s, &root),
            "Applied (0 changes journaled in /j/journal):\n\nDrift (changed by someone else since apply):\n  none\n\nOn isolated CPUs :\n  no movable task\n  no device IRQ\n"
        );
    }

    #[test]
    fn a_status_read_without_root_says_what_it_shows_and_claims_no_drift() {
        let mut s = empty_status();
        s.partial = Some("read without root: …".into());
        assert_eq!(
            status(&s, &Invocation::default()),
            "No partitions applied (read without root: …).\n"
        );
        s.applied = true;
        s.spec = Some("[[partition]]".into());
        let text = status(&s, &Invocation::default());
        assert!(
            text.starts_with("Applied (read without root: …):\n  | [[partition]]\n"),
            "{text}"
        );
        assert!(!text.contains("Drift"), "{text}");
        assert!(!text.contains("writable"), "{text}");
    }

    fn drifted(status: &mut Status) {
        status.applied = true;
        status.drift = vec![Drift {
            path: "/proc/sys/kernel/timer_migration".into(),
            applied: "0".into(),
            now: Some("1".into()),
            what: Some("timers are not pulled onto busy isolated CPUs".into()),
            reapply_fixes: true,
        }];
    }

    #[test]
    fn status_says_what_is_enabled_at_boot_and_what_a_reboot_undid() {
        let mut s = empty_status();
        s.enabled = Some(tame_partition::enable::Enabled {
            spec_file: "/etc/tame/partition.toml".into(),
            loader: Some(tame_partition::enable::BootLoader::Grub),
            boot_file: Some("/etc/default/grub.d/tame.cfg".into()),
            parameters: vec!["nohz_full=1".into(), "irqaffinity=0".into()],
            missing_from_running_kernel: vec!["nohz_full=1".into()],
            rebooted_since: Some(false),
            changed_since: vec!["/etc/systemd/system.conf.d/tame.conf".into()],
        });
        let text = status(&s, &Invocation::default());
        assert!(text.contains("\nEnabled at boot: /etc/tame/partition.toml (tame-partition.service; `tame disable` removes it)\n  boot parameters: nohz_full=1 written to /etc/default/grub.d/tame.cfg: active after a reboot\n  /etc/systemd/system.conf.d/tame.conf no longer holds what tame enable wrote"), "{text}");
        s.enabled.as_mut().unwrap().rebooted_since = Some(true);
        let text = status(&s, &Invocation::default());
        assert!(
            text.contains("lacks nohz_full=1 although the machine rebooted since"),
            "{text}"
        );
        s.enabled = None;
        s.previous_boot = true;
        let text = status(&s, &Invocation::default());
        assert!(
            text.starts_with(
                "No partitions applied: the journal at /j/journal is from before the last reboot"
            ),
            "{text}"
        );
    }

    fn empty_status() -> Status {
        Status::nothing_applied("/j/journal".into())
    }

    /// The drift section and the line after it.
    fn repair_text(s: &Status, how: &Invocation) -> String {
        let text = status(s, how);
        let start = text.find("Drift").unwrap();
        let end = text[start..].find("\n\n").map_or(text.len(), |e| start + e);
        text[start..end].to_string()
    }

    #[test]
    fn drift_names_the_exact_command_that_repairs_it() {
        let mut s = empty_status();
        drifted(&mut s);
        s.spec_file = Some("/home/me/my specs/rt.toml".into());
        s.spec_file_matches = true;
        let fixture = Invocation {
            root: Some("/tmp/tree".into()),
            journal_dir: Some("/tmp/j".into()),
            sudo: false,
        };
        assert_eq!(
            repair_text(&s, &fixture),
            "Drift (changed by someone else since apply):
  /proc/sys/kernel/timer_migration: applied 0 → now 1 — timers are not pulled onto busy isolated CPUs
Re-applying the spec repairs this (it writes the 1 drifted value back, and anything else the plan now finds): tame --root /tmp/tree apply '/home/me/my specs/rt.toml' --journal-dir /tmp/j"
        );
        // The file changed since: the applied spec is shown above; put it back.
        s.spec_file_matches = false;
        assert!(repair_text(&s, &fixture).ends_with(
            "but /home/me/my specs/rt.toml no longer holds the applied spec (shown above): put it back in a file and run tame --root /tmp/tree apply FILE --journal-dir /tmp/j"
        ));
        // The file could not be read safely (a FIFO, a symlink, too large): say why.
        s.spec_file_unread = Some("is a FIFO, not a regular file".into());
        assert!(repair_text(&s, &fixture).ends_with(
            "but /home/me/my specs/rt.toml is a FIFO, not a regular file: save the applied spec (shown above) to a file and run tame --root /tmp/tree apply FILE --journal-dir /tmp/j"
        ));
        s.spec_file_unread = None;
        // Applied by a caller that gave no file (tame assess, a library user).
        s.spec_file = None;
        assert!(repair_text(&s, &Invocation::default()).ends_with(
            "Re-applying the spec repairs this (it writes the 1 drifted value back, and anything else the plan now finds): save the applied spec (shown above) to a file and run tame apply FILE"
        ));
        s.reapply_refused = Some("partition \"rt\": CPU 7 is not online".into());
        assert!(repair_text(&s, &Invocation::default()).ends_with(
            "Re-applying the spec would be refused now (partition \"rt\": CPU 7 is not online) — run `tame revert`, correct the spec, and apply it again."
        ));
    }

    #[test]
    fn drift_that_still_fits_the_spec_needs_no_repair() {
        let mut s = empty_status();
        drifted(&mut s);
        s.drift[0] = Drift {
            path: "/proc/irq/24/smp_affinity_list".into(),
            applied: "0-1".into(),
            now: Some("0".into()),
            what: None,
            reapply_fixes: false,
        };
        assert_eq!(
            repair_text(&s, &Invocation::default()),
            "Drift (changed by someone else since apply):
  /proc/irq/24/smp_affinity_list: applied 0-1 → now 0 — still fits the spec: re-applying leaves it
Nothing to repair: every value found still fits the spec."
        );
    }

    fn kept(tid: u32, comm: &str, because: KeptBecause) -> Kept {
        Kept {
            tid,
            comm: comm.into(),
            because,
        }
    }

    fn report() -> ApplyReport {
        ApplyReport {
            schema: 2,
            writes: 30,
            directories: 2,
            tasks_moved: 57,
            tasks_listed: 52,
            tasks_started: 7,
            tasks_gone: 2,
            kept: vec![
                kept(2, "kthreadd", KeptBecause::Kthreadd),
                kept(15, "ksoftirqd/0", KeptBecause::PerCpu),
                kept(16, "migration/1", KeptBecause::PerCpu),
                kept(90, "kworker/u8:0", KeptBecause::Workqueue),
            ],
            refused: vec![Refused {
                what: "IRQ 36 (virtio1-req.0) off isolated CPUs".into(),
                reason: "EIO: the kernel manages this IRQ's affinity".into(),
            }],
            journal: "/var/lib/tame/journal".into(),
            ..Default::default()
        }
    }

    #[test]
    fn apply_counts_the_threads_the_kernel_keeps_and_names_them_when_verbose() {
        let spec = Path::new("rt.toml");
        assert_eq!(
            apply(spec, &report(), false),
            "Applied rt.toml: 30 writes, 2 directories, 57 threads moved. Journal: /var/lib/tame/journal (undo with `tame revert`).
The 57 threads moved to the system partition: 50 of the 52 listed when apply read the host (2 exited first), and 7 started while apply ran. These are threads, not processes, and they come and go: a plan made earlier counted another moment.
4 kernel threads stayed where the kernel keeps them: 2 per-CPU kernel threads (bound to their CPU by the kernel), 1 workqueue worker (it follows the workqueue cpumask, which apply sets to the system CPUs), kthreadd (cgroup v1 never moves it); --verbose names them
The kernel refused these:
  - IRQ 36 (virtio1-req.0) off isolated CPUs: EIO: the kernel manages this IRQ's affinity
"
        );
        let verbose = apply(spec, &report(), true);
        assert!(
            verbose.contains(
                "4 kernel threads stayed where the kernel keeps them: 2 per-CPU kernel threads (bound to their CPU by the kernel), 1 workqueue worker (it follows the workqueue cpumask, which apply sets to the system CPUs), kthreadd (cgroup v1 never moves it):
  - ksoftirqd/0 (15), migration/1 (16)
  - kworker/u8:0 (90)
  - kthreadd (2)
"
            ),
            "{verbose}"
        );
        // A re-apply that changes nothing: one line for the kept threads, no list.
        let again = ApplyReport {
            unchanged: true,
            refused: vec![],
            tasks_moved: 0,
            tasks_listed: 0,
            tasks_started: 0,
            tasks_gone: 0,
            ..report()
        };
        assert_eq!(
            apply(spec, &again, false),
            "Nothing changed: rt.toml is already applied.
4 kernel threads stayed where the kernel keeps them: 2 per-CPU kernel threads (bound to their CPU by the kernel), 1 workqueue worker (it follows the workqueue cpumask, which apply sets to the system CPUs), kthreadd (cgroup v1 never moves it); --verbose names them
"
        );
    }

    fn plan_of(runtime: Vec<Step>, recommendation: Option<Recommendation>) -> Plan {
        Plan {
            schema: 1,
            cgroup: None,
            isolated_cpus: cpus("1"),
            runtime,
            needs_reboot: vec![],
            warnings: vec!["a warning".into()],
            recommendation,
            stay: vec![Task {
                tid: 13,
                comm: "ksoftirqd/1".into(),
                kernel_thread: true,
                pinned_by_kernel: true,
                cpus_allowed: Some(cpus("1")),
            }],
        }
    }

    #[test]
    fn plan_marks_an_ineffective_write_and_counts_the_kept_threads() {
        let write = Step::Write {
            path: "/sys/devices/system/cpu/cpu1/power/pm_qos_resume_latency_us".into(),
            old: Some("0".into()),
            new: "n/a".into(),
            why: "limit idle exit latency".into(),
            restore_with: None,
            may_be_refused: false,
            ineffective: Some("no effect here: no cpuidle driver".into()),
        };
        let text = plan(Path::new("rt.toml"), &plan_of(vec![write], None), false);
        assert!(
            text.contains("  /sys/devices/system/cpu/cpu1/power/pm_qos_resume_latency_us: 0 → n/a    # limit idle exit latency — no effect here: no cpuidle driver (see warnings)\n"),
            "{text}"
        );
        assert!(
            text.contains("  1 kernel thread stays where the kernel keeps it: 1 per-CPU kernel thread (bound to its CPU by the kernel); --verbose names them\n"),
            "{text}"
        );
        let verbose = plan(Path::new("rt.toml"), &plan_of(vec![], None), true);
        assert!(
            verbose.contains("(bound to its CPU by the kernel):\n    - ksoftirqd/1 (13)\n"),
            "{verbose}"
        );
    }

    #[test]
    fn plan_gives_one_recommended_layout() {
        let r = Recommendation {
            keep: false,
            every_choice_warns: true,
            isolated: 1,
            changes: vec![
                RecommendedCpus {
                    partition: "system".into(),
                    cpus: cpus("1"),
                    spec_cpus: cpus("0"),
                },
                RecommendedCpus {
                    partition: "rt".into(),
                    cpus: cpus("0"),
                    spec_cpus: cpus("1"),
                },
            ],
            why: vec!["CPU 1 → system: a reason".into()],
            without_warnings: Some(
                "boot with isolcpus=managed_irq,domain,1, then isolate CPU 1".into(),
            ),
        };
        let text = plan(
            Path::new("rt.toml"),
            &plan_of(vec![], Some(r.clone())),
            false,
        );
        assert!(
            text.ends_with(
                "\nRecommended layout — every choice of 1 isolated CPU warns on this machine; this is the least bad:
  partition \"system\": cpus = \"1\"    (the spec has \"0\")
  partition \"rt\": cpus = \"0\"    (the spec has \"1\")
  - CPU 1 → system: a reason
  Without these warnings: boot with isolcpus=managed_irq,domain,1, then isolate CPU 1.
"
            ),
            "{text}"
        );
        let keep = Recommendation {
            keep: true,
            changes: vec![],
            ..r
        };
        let text = plan(Path::new("rt.toml"), &plan_of(vec![], Some(keep)), false);
        assert!(
            text.contains("\nRecommended layout: keep this one — every choice of 1 isolated CPU warns on this machine, and this is the least bad:\n  - CPU 1 → system: a reason\n"),
            "{text}"
        );
    }

    #[test]
    fn revert_names_what_it_could_not_restore() {
        let dir = Path::new("/j");
        let mut r = RevertReport {
            nothing_to_revert: true,
            ..Default::default()
        };
        assert_eq!(revert(dir, &r), "Nothing to revert (no journal in /j).\n");
        r.nothing_to_revert = false;
        r.entries = 3;
        r.restored = 2;
        assert_eq!(
            revert(dir, &r),
            "Reverted: 3 journaled changes, 2 values written back; the journal is removed.\n"
        );
        r.not_restored.push(NotRestored {
            seq: 2,
            what: "/proc/irq/24/smp_affinity_list".into(),
            reason: "EIO".into(),
        });
        assert_eq!(
            revert(dir, &r),
            "Could not restore everything; the journal stays so `tame revert` can be run again:\n  - /proc/irq/24/smp_affinity_list: EIO\n"
        );
        let json = serde_json::to_value(tame_host::journal::RevertDoc::from(&r)).unwrap();
        assert_eq!(json["not_restored"][0]["reason"], "EIO");
    }
}
