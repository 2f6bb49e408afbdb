//! Which CPUs to isolate, and the partition spec that does it. The choice uses what the
//! planner warns about: a kernel-managed IRQ cannot leave its CPU at run time (it would
//! keep interrupting the work), CPU 0 carries housekeeping the kernel cannot move, and
//! SMT siblings split between partitions compete for one core.

use serde::{Deserialize, Serialize};
use tame_host::{CpuList, HostModel};
use tame_partition::spec::Role;
use tame_partition::Spec;

use crate::error::{invalid, AssessError};

/// The name of the isolated partition assess generates.
pub const PARTITION: &str = "rt";
/// First line of every spec text assess applies: `tame status` shows it, and the next
/// assess knows a journal it finds is its own (left by a killed run) and reverts it.
pub const MARKER: &str = "# applied by tame assess";

/// The partitions to measure in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Layout {
    /// The isolated partition measured in, and its CPUs.
    pub partition: String,
    pub isolated: CpuList,
    /// Where the system (and the load) runs.
    pub system: CpuList,
    /// Why these CPUs, one line each.
    pub reasons: Vec<String>,
    /// The spec text (without the marker line).
    pub spec_text: String,
    /// What the planner warns about this spec.
    pub warnings: Vec<String>,
}

/// The cpuidle driver, if there is one (the kernel prints `none` when there is not): without
/// one, idle is the architecture's halt and `idle = "poll"` changes nothing.
pub fn cpuidle_driver(model: &HostModel) -> Option<String> {
    model
        .power
        .cpuidle_driver
        .clone()
        .filter(|d| !d.is_empty() && d != "none")
}

/// Why a CPU is a poor choice to isolate, worst first.
fn penalties(model: &HostModel, cpu: u32) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    let managed: Vec<String> = model
        .irqs
        .irqs
        .iter()
        .filter(|i| i.managed && i.fires_on().is_some_and(|c| c.contains(cpu)))
        .map(|i| format!("IRQ {} ({})", i.number, i.name))
        .collect();
    if !managed.is_empty() {
        found.push((
            4,
            format!(
                "CPU {cpu} stays with the system: kernel-managed {} fire(s) there and cannot move at run time",
                managed.join(", ")
            ),
        ));
    }
    if cpu == 0 {
        found.push((
            2,
            "CPU 0 stays with the system where it can: it carries housekeeping the kernel cannot move".to_string(),
        ));
    }
    found
}

/// Choose `count` CPUs to isolate: the least disturbed first (then the highest, keeping
/// low CPUs for housekeeping), whole cores together where the count allows.
pub fn choose(model: &HostModel, count: u32) -> Result<Layout, AssessError> {
    let online = &model.cpus.online;
    let available = online.len().saturating_sub(1);
    if count as usize > available {
        return Err(invalid(format!(
            "--cpus {count}: this machine has {} online CPU(s) and the system partition needs at least one, so at most {available} can be isolated — ask for fewer",
            online.len()
        )));
    }
    let mut ranked: Vec<(u32, u32)> = online
        .iter()
        .map(|cpu| (penalties(model, cpu).iter().map(|p| p.0).sum(), cpu))
        .collect();
    ranked.sort_by_key(|&(penalty, cpu)| (penalty, std::cmp::Reverse(cpu)));
    let mut chosen = CpuList::new();
    for &(_, cpu) in &ranked {
        if chosen.len() >= count as usize {
            break;
        }
        if chosen.contains(cpu) {
            continue;
        }
        let core = model
            .cpus
            .cpu(cpu)
            .map(|c| c.thread_siblings.intersection(online))
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| CpuList::from_cpus([cpu]));
        let with_core = chosen.union(&core);
        chosen = if with_core.len() <= count as usize {
            with_core
        } else {
            chosen.union(&CpuList::from_cpus([cpu]))
        };
    }
    let system = online.difference(&chosen);
    let reasons = system
        .iter()
        .flat_map(|cpu| penalties(model, cpu))
        .map(|(_, why)| why)
        .collect();
    let idle = if cpuidle_driver(model).is_some() {
        "idle = \"poll\"\n"
    } else {
        ""
    };
    let spec_text = format!(
        "# {count} isolated CPU(s) for the time-critical work, the rest for everything else.\n[[partition]]\nname = \"system\"\ncpus = \"{system}\"\nrole = \"system\"\n\n[[partition]]\nname = \"{PARTITION}\"\ncpus = \"{chosen}\"\nrole = \"isolated\"\n{idle}"
    );
    let mut layout = Layout {
        partition: PARTITION.to_string(),
        isolated: chosen,
        system,
        reasons,
        spec_text,
        warnings: Vec::new(),
    };
    layout.warnings = planned_warnings(model, &layout.spec_text, "the generated spec")?;
    Ok(layout)
}

/// The user's own spec (`--spec FILE`): its first isolated partition is measured.
pub fn from_spec(model: &HostModel, name: &str, text: &str) -> Result<Layout, AssessError> {
    let spec = parse(name, text)?;
    let rt = spec
        .partitions
        .iter()
        .find(|p| p.role == Role::Isolated)
        .ok_or_else(|| {
            invalid(format!(
                "{name} has no isolated partition — assess measures the work on one; add a partition with role = \"isolated\""
            ))
        })?;
    Ok(Layout {
        partition: rt.name.clone(),
        isolated: rt.cpus.clone(),
        system: spec.cpus_of(Role::System),
        reasons: vec![format!("the CPUs of partition {:?} in {name}", rt.name)],
        spec_text: text.to_string(),
        warnings: planned_warnings(model, text, name)?,
    })
}

fn parse(name: &str, text: &str) -> Result<Spec, AssessError> {
    Spec::parse(name, text).map_err(|e| invalid(format!("{e} — correct the spec and run again")))
}

/// Plan the spec (which validates it against the host; nothing is written) for its warnings.
fn planned_warnings(model: &HostModel, text: &str, name: &str) -> Result<Vec<String>, AssessError> {
    let spec = parse(name, text)?;
    let plan = tame_partition::plan(&spec, model)
        .map_err(|e| invalid(format!("{name} cannot be applied here: {e}")))?;
    Ok(plan.warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(fixture: &str) -> HostModel {
        HostModel::read(&tame_host::Root::new(tame_testing::committed_fixture(
            fixture,
        )))
    }

    #[test]
    fn a_cpu_with_a_managed_irq_stays_with_the_system() {
        // dev-vm: a 2-CPU VM whose disk queue IRQ is kernel-managed on CPU 1.
        let m = model("dev-vm");
        let l = choose(&m, 1).unwrap();
        assert_eq!(
            (l.isolated.to_string(), l.system.to_string()),
            ("0".into(), "1".into())
        );
        assert!(
            l.reasons[0].starts_with("CPU 1 stays with the system: kernel-managed IRQ"),
            "{:?}",
            l.reasons
        );
        assert!(
            l.spec_text.contains("cpus = \"0\"\nrole = \"isolated\""),
            "{}",
            l.spec_text
        );
        assert!(
            l.warnings.iter().any(|w| w.contains("isolates CPU 0")),
            "{:?}",
            l.warnings
        );
    }

    #[test]
    fn cpu_0_and_low_cpus_stay_with_the_system_on_a_quiet_host() {
        let m = model("rt-8cpu");
        let l = choose(&m, 2).unwrap();
        assert!(!l.isolated.contains(0), "{}", l.isolated);
        assert_eq!(l.isolated.len(), 2);
        assert_eq!(l.system.len() + 2, m.cpus.online.len());
    }

    #[test]
    fn more_cpus_than_can_be_isolated_is_bad_input() {
        let e = choose(&model("dev-vm"), 2).unwrap_err();
        assert!(e.is_bad_input(), "{e}");
        assert!(e.to_string().contains("at most 1 can be isolated"), "{e}");
    }

    #[test]
    fn a_users_spec_must_validate_and_have_an_isolated_partition() {
        let m = model("dev-vm");
        let e = from_spec(
            &m,
            "s.toml",
            "[[partition]]\nname = \"system\"\ncpus = \"0-1\"\nrole = \"system\"\n",
        )
        .unwrap_err();
        assert!(
            e.is_bad_input() && e.to_string().contains("no isolated partition"),
            "{e}"
        );
        let e = from_spec(&m, "s.toml", "[[partition]]\nname = \"system\"\ncpus = \"0-7\"\nrole = \"system\"\n[[partition]]\nname = \"x\"\ncpus = \"9\"\nrole = \"isolated\"\n").unwrap_err();
        assert!(
            e.is_bad_input() && e.to_string().contains("cannot be applied here"),
            "{e}"
        );
        let l = from_spec(&m, "s.toml", "[[partition]]\nname = \"system\"\ncpus = \"0\"\nrole = \"system\"\n[[partition]]\nname = \"loop\"\ncpus = \"1\"\nrole = \"isolated\"\n").unwrap();
        assert_eq!(
            (l.partition.as_str(), l.isolated.to_string()),
            ("loop", "1".into())
        );
    }
}
