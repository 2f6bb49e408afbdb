use serde::{Deserialize, Serialize};
use tame_host::CpuList;

use crate::{Category, Finding, Severity, Target};

/// Bumped when a field changes meaning or is removed.
impl tame_host::Document for CheckReport {
    const SCHEMA: tame_host::Schema = tame_host::schema!(Tagged "tame.check", 1);
}

/// Score of one category: 100 when every finding is ok or info; a warning
/// counts half, a failure nothing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CategoryScore {
    pub category: Category,
    pub score: u32,
    pub ok: usize,
    pub info: usize,
    pub warn: usize,
    pub fail: usize,
}

/// The result of `tame check`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckReport {
    pub schema: String,
    pub cpus: CpuList,
    pub housekeeping: CpuList,
    pub cpus_reason: String,
    pub findings: Vec<Finding>,
    pub scores: Vec<CategoryScore>,
    /// The one next step, from the findings (the report's last line). Empty in a
    /// report written before it existed.
    #[serde(default)]
    pub next: String,
    /// The partition `tame enable` keeps at boot and the state of its boot parameters
    /// (written, pending a reboot, or carried by the running kernel); set by the caller,
    /// which reads the enable journal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<EnabledAtBoot>,
}

/// What `tame check` says about a partition enabled at boot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnabledAtBoot {
    pub spec_file: String,
    /// The boot parameters the running kernel does not carry yet.
    pub pending: Vec<String>,
    /// One line: written and active after a reboot, active, or not written.
    pub boot: String,
}

impl CheckReport {
    pub fn new(target: &Target, findings: Vec<Finding>, next: String) -> Self {
        let scores = Category::ALL.iter().map(|&c| score(c, &findings)).collect();
        CheckReport {
            schema: <CheckReport as tame_host::Document>::SCHEMA.tag.to_string(),
            cpus: target.cpus.clone(),
            housekeeping: target.housekeeping.clone(),
            cpus_reason: target.reason.clone(),
            findings,
            scores,
            next,
            enabled: None,
        }
    }

    pub fn has_failures(&self) -> bool {
        self.findings.iter().any(|f| f.severity == Severity::Fail)
    }

    pub fn worst(&self) -> Severity {
        self.findings
            .iter()
            .map(|f| f.severity)
            .max()
            .unwrap_or(Severity::Ok)
    }
}

/// Score a category (see [`CategoryScore`]).
pub fn score(category: Category, findings: &[Finding]) -> CategoryScore {
    let mut s = CategoryScore {
        category,
        score: 100,
        ok: 0,
        info: 0,
        warn: 0,
        fail: 0,
    };
    for f in findings.iter().filter(|f| f.category == category) {
        match f.severity {
            Severity::Ok => s.ok += 1,
            Severity::Info => s.info += 1,
            Severity::Warn => s.warn += 1,
            Severity::Fail => s.fail += 1,
        }
    }
    let total = s.ok + s.info + s.warn + s.fail;
    if total > 0 {
        // Halves, in integers: ok/info count 2, warn 1, fail 0.
        let points = 2 * (s.ok + s.info) + s.warn;
        s.score = (100 * points / (2 * total)) as u32;
    }
    s
}
