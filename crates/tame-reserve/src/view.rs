//! The views of `tame reserve`'s reports: the `--json` documents of a reservation made,
//! released and listed (their [`Document`]s), and the text of each, the admission
//! analysis's included (its document is [`Analysis`] itself). The CLI only prints them.

use std::fmt::Write as _;

use serde::Serialize;
use tame_host::{Document, Schema};
use tame_rt::duration::format_ns;

use crate::admission::Analysis;
use crate::backend::Reservation;
use crate::reservation::Made;
use crate::spec::percent;

/// `tame reserve … --json`: a reservation made.
#[derive(Serialize)]
pub struct MadeDoc<'a> {
    schema: Schema,
    #[serde(flatten)]
    made: &'a Made,
}

impl Document for MadeDoc<'_> {
    const SCHEMA: Schema = tame_host::schema!(Tagged "tame.reserve", 1);
}

impl<'a> MadeDoc<'a> {
    pub fn new(made: &'a Made) -> Self {
        MadeDoc {
            schema: Self::SCHEMA,
            made,
        }
    }
}

/// `tame reserve --release PID --json`: the backends that held the process's reservation.
/// Its fields in the order they were first written (by name).
#[derive(Serialize)]
pub struct ReleasedDoc {
    pid: u32,
    released: Vec<String>,
    schema: Schema,
}

impl Document for ReleasedDoc {
    const SCHEMA: Schema = tame_host::schema!(Tagged "tame.reserve.release", 1);
}

impl ReleasedDoc {
    pub fn new(pid: u32, released: Vec<String>) -> Self {
        ReleasedDoc {
            pid,
            released,
            schema: Self::SCHEMA,
        }
    }
}

/// `--list --json`: the reservations, and what could not be looked at (the text form's notes).
#[derive(Serialize)]
pub struct ListDoc<'a> {
    schema: Schema,
    reservations: &'a [Reservation],
    notes: &'a [String],
}

impl Document for ListDoc<'_> {
    const SCHEMA: Schema = tame_host::schema!(Tagged "tame.reserve.list", 1);
}

impl<'a> ListDoc<'a> {
    pub fn new(reservations: &'a [Reservation], notes: &'a [String]) -> Self {
        ListDoc {
            schema: Self::SCHEMA,
            reservations,
            notes,
        }
    }
}

/// What a reservation made says (stderr: stdout is the program's).
pub fn made_text(made: &Made) -> String {
    let place = made
        .cpu
        .map_or("any CPU".to_string(), |c| format!("CPU {c}"));
    let mut s = format!(
        "reserved {} of every {} ({} per period) for process {} on {place} ({} backend)\n",
        percent(made.share_ppm),
        format_ns(made.period_ns),
        format_ns(made.runtime_ns),
        made.pid,
        made.backend
    );
    for n in &made.notes {
        let _ = writeln!(s, "  note: {n}");
    }
    s
}

/// The `--list` table; "none" when nothing is reserved.
pub fn list_text(reservations: &[Reservation]) -> String {
    if reservations.is_empty() {
        return "reservations: none\n".into();
    }
    let mut s = format!(
        "{:<9} {:>8} {:>8} {:>10} {:>4}  detail\n",
        "backend", "pid", "share", "period", "cpu"
    );
    for r in reservations {
        let _ = writeln!(
            s,
            "{:<9} {:>8} {:>8} {:>10} {:>4}  {}",
            r.backend,
            r.pid,
            percent(r.share_ppm),
            format_ns(r.period_ns),
            r.cpu.map_or("any".to_string(), |c| c.to_string()),
            r.detail
        );
    }
    s
}

fn verdict(schedulable: bool) -> &'static str {
    if schedulable {
        "schedulable"
    } else {
        "NOT schedulable"
    }
}

/// The `--check` report: the EDF test, then fixed priorities in deadline-monotonic
/// order (shortest deadline first; rate-monotonic when deadlines are the periods).
pub fn analysis_text(a: &Analysis) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "utilisation {} (cap {}), density {}; Liu–Layland bound for {} tasks {}",
        percent(a.utilisation_ppm),
        percent(a.cap_ppm),
        percent(a.density_ppm),
        a.tasks.len(),
        percent(a.liu_layland_ppm)
    );
    let _ = writeln!(s, "EDF: {}", verdict(a.edf_schedulable));
    let _ = writeln!(
        s,
        "deadline-monotonic fixed priorities (response-time analysis): {}",
        verdict(a.fixed_priority_schedulable)
    );
    let _ = writeln!(
        s,
        "{:>4} {:<16} {:>12} {:>12} {:>12} {:>12}",
        "rank", "task", "runtime", "period", "deadline", "response"
    );
    for t in &a.tasks {
        let _ = writeln!(
            s,
            "{:>4} {:<16} {:>12} {:>12} {:>12} {:>12}",
            t.rank,
            t.name,
            format_ns(t.runtime_ns),
            format_ns(t.period_ns),
            format_ns(t.deadline_ns),
            t.response_ns.map_or("MISS".to_string(), format_ns)
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_release_is_written_as_before() {
        // As the CLI wrote it with `json!` (keys in name order), byte for byte.
        let before = serde_json::json!({
            "schema": "tame.reserve.release/1", "pid": 42, "released": ["server", "cgroup"],
        });
        let doc = ReleasedDoc::new(42, vec!["server".into(), "cgroup".into()]);
        assert_eq!(
            serde_json::to_string_pretty(&doc).unwrap(),
            serde_json::to_string_pretty(&before).unwrap()
        );
    }
}
