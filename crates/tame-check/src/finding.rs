use serde::{Deserialize, Serialize};
use tame_host::CpuList;

use crate::Target;

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Checked and fine.
    Ok,
    /// Worth knowing; nothing to change.
    Info,
    /// Adds latency or noise on the checked CPUs; fixable.
    Warn,
    /// Certain to disturb the checked CPUs as configured.
    Fail,
}

impl Severity {
    pub fn label(self) -> &'static str {
        match self {
            Severity::Ok => "ok",
            Severity::Info => "info",
            Severity::Warn => "warn",
            Severity::Fail => "FAIL",
        }
    }
}

/// The score categories.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    Kernel,
    Cpus,
    Irqs,
    Power,
    Memory,
    Timers,
    Virtualisation,
}

impl Category {
    pub const ALL: [Category; 7] = [
        Category::Kernel,
        Category::Cpus,
        Category::Irqs,
        Category::Power,
        Category::Memory,
        Category::Timers,
        Category::Virtualisation,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Category::Kernel => "kernel",
            Category::Cpus => "cpus",
            Category::Irqs => "irqs",
            Category::Power => "power",
            Category::Memory => "memory",
            Category::Timers => "timers",
            Category::Virtualisation => "virtualisation",
        }
    }
}

/// One result of one check.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// Stable identifier (`irqs.managed`), documented in docs/check.md.
    pub id: String,
    pub category: Category,
    pub severity: Severity,
    /// What was found, with the numbers.
    pub found: String,
    /// Why it matters, in one sentence.
    pub why: String,
    /// The exact command or boot parameter that fixes it (None when ok or unfixable).
    pub fix: Option<String>,
    /// The fix only takes effect after a reboot.
    pub needs_reboot: bool,
}

impl Finding {
    pub fn new(
        id: &str,
        category: Category,
        severity: Severity,
        found: impl Into<String>,
        why: &str,
    ) -> Self {
        Finding {
            id: id.to_string(),
            category,
            severity,
            found: found.into(),
            why: why.to_string(),
            fix: None,
            needs_reboot: false,
        }
    }

    /// A fix applied at run time.
    pub fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }

    /// A fix that needs a reboot (a boot parameter, another kernel).
    pub fn boot_fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self.needs_reboot = true;
        self
    }

    /// A fix that needs housekeeping CPUs (moving work there, or isolating the
    /// checked CPUs from them): `fix(housekeeping)`, needing a reboot when `boot`.
    /// With none left, the advice of `cpus.housekeeping` instead, so no fix names a
    /// checked CPU as the place to move work to.
    pub fn housekeeping_fix(
        self,
        t: &Target,
        boot: bool,
        fix: impl FnOnce(&CpuList) -> String,
    ) -> Self {
        if t.housekeeping.is_empty() {
            return self.fix(
                "fix cpus.housekeeping first: this needs a CPU left for housekeeping, and none is",
            );
        }
        let text = fix(&t.housekeeping);
        if boot {
            self.boot_fix(text)
        } else {
            self.fix(text)
        }
    }

    pub fn as_vec(self) -> Vec<Finding> {
        vec![self]
    }
}
