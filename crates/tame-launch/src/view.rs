//! The `--json` views of `tame ps`, `tame detach` and `tame attach`: versioned documents
//! (docs/launch.md) made from what this library reports; the CLI only prints them.

use serde::Serialize;
use tame_host::{Document, Schema};
use tame_rt::sched::SchedSpec;

use crate::detach::{AttachReport, PlacementRecord};
use crate::ps::{policy_name, Gone, Ps, PsRow};

impl Document for PsView<'_> {
    const SCHEMA: Schema = tame_host::schema!(Tagged "tame.ps", 1);
}

impl Document for DetachView {
    const SCHEMA: Schema = tame_host::schema!(Tagged "tame.detach", 1);
}

impl Document for AttachView<'_> {
    const SCHEMA: Schema = tame_host::schema!(Tagged "tame.attach", 1);
}

#[derive(Serialize)]
pub struct PsView<'a> {
    schema: Schema,
    /// Every thread of the placed processes still running.
    threads: &'a [PsRow],
    /// Placed processes found gone (their records removed unless `kept` says why not).
    gone: &'a [Gone],
}

pub fn ps(found: &Ps) -> PsView<'_> {
    PsView {
        schema: PsView::SCHEMA,
        threads: &found.rows,
        gone: &found.gone,
    }
}

#[derive(Serialize)]
pub struct DetachView {
    schema: Schema,
    pid: u32,
    comm: String,
    /// The CPUs the threads were moved onto.
    cpus: String,
    /// The partition's cpuset group the threads joined, if any.
    cpuset: Option<String>,
    /// The policy set (`None`: unchanged).
    policy: Option<String>,
    priority: Option<i32>,
    /// Each moved thread and its state before: what `tame attach` puts back.
    threads: Vec<ThreadBefore>,
}

#[derive(Serialize)]
struct ThreadBefore {
    tid: u32,
    affinity: String,
    policy: &'static str,
    priority: i32,
    cpuset: Option<String>,
}

pub fn detached(record: &PlacementRecord, sched: Option<SchedSpec>) -> DetachView {
    let placed = &record.placed;
    DetachView {
        schema: DetachView::SCHEMA,
        pid: placed.pid,
        comm: placed.comm.clone(),
        cpus: placed.cpus.to_string(),
        cpuset: placed.cpuset.clone(),
        policy: sched.map(|s| s.policy.to_string()),
        priority: sched.map(|s| s.priority),
        threads: record
            .threads
            .iter()
            .map(|t| ThreadBefore {
                tid: t.tid,
                affinity: t.affinity.to_string(),
                policy: policy_name(t.sched.policy),
                priority: t.sched.priority,
                cpuset: t.cpuset.clone(),
            })
            .collect(),
    }
}

#[derive(Serialize)]
pub struct AttachView<'a> {
    schema: Schema,
    pid: u32,
    /// The process had exited: nothing restored, its journal removed.
    exited: bool,
    restored: &'a [u32],
    adopted: &'a [u32],
    failed: Vec<Failed<'a>>,
}

#[derive(Serialize)]
struct Failed<'a> {
    tid: u32,
    reason: &'a str,
}

pub fn attached(report: &AttachReport, pid: u32) -> AttachView<'_> {
    AttachView {
        schema: AttachView::SCHEMA,
        pid,
        exited: report.exited,
        restored: &report.restored,
        adopted: &report.adopted,
        failed: report
            .failed
            .iter()
            .map(|(tid, reason)| Failed { tid: *tid, reason })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attach_failure_names_its_thread_and_reason() {
        let report = AttachReport {
            pid: 7,
            restored: vec![7],
            adopted: vec![],
            failed: vec![(8, "gone".into())],
            exited: false,
        };
        let v = serde_json::to_value(attached(&report, 7)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"schema": "tame.attach/1", "pid": 7, "exited": false,
                "restored": [7], "adopted": [], "failed": [{"tid": 8, "reason": "gone"}]})
        );
    }

    #[test]
    fn ps_is_a_versioned_document_with_threads_and_gone() {
        let v = serde_json::to_value(ps(&Ps::default())).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"schema": "tame.ps/1", "threads": [], "gone": []})
        );
    }
}
