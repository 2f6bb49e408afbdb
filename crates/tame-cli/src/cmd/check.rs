//! `tame check`: the real-time readiness audit (logic in tame-check).
use std::fmt::Write as _;

use tame_check::{Category, CheckReport, Severity, Target};
use tame_host::{CpuList, HostModel};
use tame_partition::Applied;

use crate::output::{print_json, print_out};
use crate::Context;

#[derive(clap::Args)]
pub struct CheckArgs {
    /// The CPUs meant for real-time work (kernel list format, e.g. 2-7, or `all`). Default: the
    /// isolated partitions applied with `tame apply`, else the CPUs isolated at boot, else
    /// every online CPU but the first.
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// Print the report as JSON (schema tame.check/1).
    #[arg(long)]
    pub json: bool,
    /// Exit with status 1 when any finding fails.
    #[arg(long)]
    pub strict: bool,
}

/// What `--cpus` asked for, validated as far as possible before reading the host.
enum Asked {
    Default,
    All,
    List(CpuList),
}

fn parse_cpus(arg: Option<&str>) -> anyhow::Result<Asked> {
    let Some(text) = arg else {
        return Ok(Asked::Default);
    };
    if text == "all" {
        return Ok(Asked::All);
    }
    let cpus = CpuList::parse(text).map_err(|e| {
        crate::bad_input(format!(
            "--cpus {text:?}: {} — a CPU list looks like 2-7 or 1,3,5 — fix the list",
            e.reason
        ))
    })?;
    if cpus.is_empty() {
        return Err(crate::bad_input(
            "--cpus names no CPU — the check needs at least one — give e.g. --cpus 1",
        ));
    }
    Ok(Asked::List(cpus))
}

pub fn run(ctx: &Context, args: CheckArgs) -> anyhow::Result<i32> {
    ctx.require_root_dir()?;
    let asked = parse_cpus(args.cpus.as_deref())?;
    let model = HostModel::read(&ctx.root);
    let target = match asked {
        Asked::Default => {
            let applied = tame_partition::Applied::read(&ctx.root, &ctx.journal_dir(None))?;
            default_target(&model, applied.as_ref())
        }
        Asked::All => Target::asked(&model, model.cpus.online.clone()),
        Asked::List(cpus) => {
            let offline = cpus.difference(&model.cpus.online);
            if !offline.is_empty() {
                return Err(crate::bad_input(format!(
                    "--cpus {cpus}: {} {} not online (online: {}) — choose online CPUs",
                    offline.named(),
                    tame_rt::plural::word(offline.len() as u64, "is", "are"),
                    model.cpus.online
                )));
            }
            Target::asked(&model, cpus)
        }
    };
    let mut report = tame_check::check(&model, &target);
    report.enabled = enabled_at_boot(ctx, &model)?;
    if args.json {
        print_json(&report)?;
    } else {
        print_out(&human(&report))?;
    }
    Ok(if args.strict && report.has_failures() {
        1
    } else {
        0
    })
}

/// Without --cpus: the isolated partitions of the applied spec (so `check` and `status`
/// agree on what is isolated), else the host's own default.
/// The partition `tame enable` keeps at boot. Its journal is root's: a user who cannot
/// read it gets the check without this part rather than no check (any other failure to
/// read it is an error, as for the applied partitions).
fn enabled_at_boot(
    ctx: &Context,
    model: &HostModel,
) -> anyhow::Result<Option<tame_check::EnabledAtBoot>> {
    let dir = ctx.journal_dir(None);
    let e = match tame_partition::enable::enabled(&ctx.root, &dir, &model.kernel.cmdline) {
        Ok(Some(e)) => e,
        Ok(None) => return Ok(None),
        Err(tame_host::journal::JournalError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::PermissionDenied =>
        {
            return Ok(None)
        }
        Err(e) => return Err(e.into()),
    };
    Ok(Some(tame_check::EnabledAtBoot {
        spec_file: e.spec_file.clone(),
        pending: e.missing_from_running_kernel.clone(),
        boot: e.boot_line(),
    }))
}

fn default_target(model: &HostModel, applied: Option<&Applied>) -> Target {
    let isolated = applied
        .map(|a| a.spec.isolated_cpus().intersection(&model.cpus.online))
        .unwrap_or_default();
    if isolated.is_empty() {
        Target::default_for(model)
    } else {
        Target::applied(model, isolated)
    }
}

/// The human view: findings grouped by category, worst first, then the scores.
pub fn human(r: &CheckReport) -> String {
    let mut s = String::new();
    let housekeeping = if r.housekeeping.is_empty() {
        "none — every online CPU is checked (see cpus.housekeeping)".to_string()
    } else {
        r.housekeeping.to_string()
    };
    let _ = writeln!(
        s,
        "tame check — CPUs {} ({}); housekeeping {housekeeping}",
        r.cpus, r.cpus_reason
    );
    for cat in Category::ALL {
        let mut fs: Vec<_> = r.findings.iter().filter(|f| f.category == cat).collect();
        if fs.is_empty() {
            continue;
        }
        fs.sort_by_key(|f| std::cmp::Reverse(f.severity));
        let _ = writeln!(s, "\n{}", cat.label());
        for f in fs {
            let _ = writeln!(s, "  [{:>4}] {:<24} {}", f.severity.label(), f.id, f.found);
            if f.severity >= Severity::Warn {
                let _ = writeln!(s, "         why: {}", f.why);
                if let Some(fix) = &f.fix {
                    let reboot = if f.needs_reboot {
                        " (needs reboot)"
                    } else {
                        ""
                    };
                    let _ = writeln!(s, "         fix{reboot}: {fix}");
                }
            }
        }
    }
    let _ = writeln!(s, "\nscores");
    for sc in &r.scores {
        let _ = writeln!(
            s,
            "  {:<15} {:>3}/100  ({} ok, {} info, {} warn, {} fail)",
            sc.category.label(),
            sc.score,
            sc.ok,
            sc.info,
            sc.warn,
            sc.fail
        );
    }
    let reboots = r
        .findings
        .iter()
        .filter(|f| f.severity >= Severity::Warn && f.needs_reboot)
        .count();
    if reboots > 0 {
        let _ = writeln!(s, "\n{reboots} of the fixes need a reboot.");
    }
    if let Some(e) = &r.enabled {
        let _ = writeln!(
            s,
            "\nEnabled at boot ({}, tame enable): {}",
            e.spec_file, e.boot
        );
    }
    if !r.next.is_empty() {
        let _ = writeln!(s, "\nnext: {}", r.next);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use tame_partition::{PartitionSpec, Role, Spec};

    fn report(fixture: &str) -> CheckReport {
        let dir = tame_testing::committed_fixture(fixture);
        let model = HostModel::read(&tame_host::Root::new(dir));
        tame_check::check(&model, &Target::default_for(&model))
    }

    #[test]
    fn cpus_argument_is_validated_before_reading_the_host() {
        assert!(matches!(parse_cpus(None), Ok(Asked::Default)));
        assert!(matches!(parse_cpus(Some("all")), Ok(Asked::All)));
        assert!(matches!(parse_cpus(Some("1-2")), Ok(Asked::List(l)) if l.to_string() == "1-2"));
        for bad in ["", "x", "3-1"] {
            let e = parse_cpus(Some(bad)).err().expect(bad);
            assert!(e.downcast_ref::<crate::BadInput>().is_some(), "{bad}: {e}");
        }
    }

    #[test]
    fn the_default_target_is_the_applied_isolated_partitions() {
        let model = HostModel::read(&tame_host::Root::new(tame_testing::committed_fixture(
            "dev-vm",
        )));
        let cpu = |c| CpuList::from_cpus([c]);
        let spec = Spec::builder()
            .partition(PartitionSpec::new("system", cpu(1), Role::System))
            .partition(PartitionSpec::new("rt", cpu(0), Role::Isolated))
            .build();
        let applied = Applied {
            spec,
            ..Applied::default()
        };
        let t = default_target(&model, Some(&applied));
        assert_eq!(
            (t.cpus.to_string(), t.housekeeping.to_string()),
            ("0".into(), "1".into())
        );
        assert!(t.reason.contains("applied with tame apply"), "{}", t.reason);
        // Nothing applied: the host's default (every CPU but the first on this VM).
        let t = default_target(&model, None);
        assert_eq!(t.cpus.to_string(), "1");
    }

    /// A synthetic 8-CPU host without boot isolation, written below a scratch directory,
    /// with a spec (system 0-1, isolated `rt` on 2-7) applied through the journal as
    /// `tame apply` does: what `check` and `tame status` both see afterwards.
    fn applied(cgroups: tame_testing::synthetic::CgroupLayout) -> (tempfile::TempDir, CheckReport) {
        let mut h = tame_testing::synthetic::SyntheticHost::rt_8cpu();
        h.cgroups = cgroups.clone();
        h.isolated = CpuList::new();
        h.nohz_full = None;
        h.managed_avoid = None;
        h.irqbalance = None;
        h.cmdline = "root=/dev/sda2 ro".into();
        let dir = tame_testing::scratch_dir("check-applied-");
        let base = dir.path().join("root");
        h.write(&base).unwrap();
        let root = tame_testing::fixture_root(&base);
        if cgroups == tame_testing::synthetic::CgroupLayout::V1 {
            // What a live v1 cpuset root holds that the synthetic tree leaves out.
            let mut tids: Vec<u32> = root
                .list_dir("/proc")
                .unwrap()
                .iter()
                .filter_map(|p| p.parse().ok())
                .collect();
            tids.sort_unstable();
            let list: String = tids.iter().map(|t| format!("{t}\n")).collect();
            for (path, text) in [
                ("/sys/fs/cgroup/cpuset/tasks", list.as_str()),
                ("/sys/fs/cgroup/cpuset/cpuset.sched_load_balance", "1\n"),
            ] {
                std::fs::write(root.path(path), text).unwrap();
            }
        }
        let text = "[[partition]]\nname = \"system\"\ncpus = \"0-1\"\nrole = \"system\"\n[[partition]]\nname = \"rt\"\ncpus = \"2-7\"\nrole = \"isolated\"\n";
        let spec = Spec::parse("t", text).unwrap();
        let journal = dir.path().join("journal");
        let applied = tame_partition::apply(&root, &spec, text, &journal, None)
            .unwrap()
            .applied;
        assert_eq!(
            tame_partition::Applied::read(&root, &journal).unwrap(),
            Some(applied.clone())
        );
        let applied = Some(applied);
        let model = HostModel::read(&root);
        let report = tame_check::check(&model, &default_target(&model, applied.as_ref()));
        let status = tame_partition::status::status(&root, &journal).unwrap();
        assert_eq!(
            status.audit.isolated_cpus, report.cpus,
            "check and status disagree"
        );
        (dir, report)
    }

    #[test]
    fn check_and_status_agree_on_an_applied_v1_partition() {
        let (_dir, r) = applied(tame_testing::synthetic::CgroupLayout::V1);
        let f = r.findings.iter().find(|f| f.id == "cpus.isolcpus").unwrap();
        assert_eq!(f.severity, Severity::Ok, "{f:?}");
        assert!(
            f.found.contains("CPUs 2-7 at run time by partition \"rt\" (tame apply: cgroup v1 cpuset with cpu_exclusive on and sched_load_balance off)"),
            "{}",
            f.found
        );
        assert!(
            f.found.contains("only boot parameters stop the tick"),
            "{}",
            f.found
        );
        let text = human(&r);
        assert!(
            text.ends_with("\nnext: measure in the applied partition: `tame bench cycle -p rt`, then run the work there with `tame run -p rt -- CMD` (`tame assess` compares with a partition of its own: `tame revert` first)\n"),
            "{text}"
        );
    }

    #[test]
    fn check_and_status_agree_on_an_applied_v2_partition() {
        let (_dir, r) = applied(tame_testing::synthetic::CgroupLayout::V2 {
            partitions: Vec::new(),
        });
        let f = r.findings.iter().find(|f| f.id == "cpus.isolcpus").unwrap();
        assert_eq!(f.severity, Severity::Ok, "{f:?}");
        assert!(
            f.found.contains("CPUs 2-7 at run time by partition \"rt\" (tame apply: isolated cgroup v2 cpuset partition)"),
            "{}",
            f.found
        );
        assert!(r.next.contains("`tame bench cycle -p rt`"), "{}", r.next);
    }

    #[test]
    fn the_human_view_ends_with_the_next_step() {
        let text = human(&report("dev-vm"));
        let last = text.lines().last().unwrap();
        assert!(
            last.starts_with("next: isolate CPU 1: write a spec"),
            "{text}"
        );
    }

    #[test]
    fn human_view_shows_failures_with_why_and_fix() {
        let text = human(&report("dev-vm"));
        assert!(text.contains("[FAIL] irqs.managed"), "{text}");
        assert!(text.contains("fix (needs reboot): boot with isolcpus=managed_irq,domain,1"));
        assert!(text.contains("\nscores\n"));
    }

    #[test]
    fn human_view_says_when_no_housekeeping_cpu_is_left() {
        let dir = tame_testing::committed_fixture("dev-vm");
        let model = HostModel::read(&tame_host::Root::new(dir));
        let all = model.cpus.online.clone();
        let text = human(&tame_check::check(&model, &Target::asked(&model, all)));
        assert!(
            text.contains("housekeeping none — every online CPU is checked"),
            "{text}"
        );
    }

    #[test]
    fn human_view_of_a_tuned_host_has_nothing_to_fix() {
        let text = human(&report("rt-8cpu"));
        assert!(!text.contains("why:"), "{text}");
        assert!(!text.contains("need a reboot"));
        assert!(text.contains("virtualisation  100/100"), "{text}");
    }
}
