//! Admission analysis of periodic reservations, pure logic: the EDF utilisation
//! bound and fixed-priority (rate/deadline-monotonic) response-time analysis.
//!
//! A set file (`tame reserve --check SET.toml`):
//! ```toml
//! cap = "90%"            # optional: the most the set may use per CPU (default 100 %)
//! [[task]]
//! name = "player"
//! runtime = "10ms"
//! period = "40ms"
//! deadline = "40ms"      # optional, defaults to the period
//! ```

use serde::{Deserialize, Serialize};

use crate::error::{invalid, Result};
use crate::spec::{parse_share_ppm, percent, PPM};

/// One periodic task, integer nanoseconds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    pub name: String,
    pub runtime_ns: u64,
    pub period_ns: u64,
    pub deadline_ns: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SetFile {
    cap: Option<String>,
    #[serde(default)]
    task: Vec<TaskFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskFile {
    name: String,
    runtime: String,
    period: String,
    deadline: Option<String>,
}

/// A parsed set: its tasks and cap (ppm).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskSet {
    pub cap_ppm: u64,
    pub tasks: Vec<Task>,
}

/// Parse and validate a set file's text. `parse_duration` turns `10ms` into nanoseconds
/// (the CLI passes tame-bench's parser, so durations are read one way everywhere).
pub fn parse_set(
    text: &str,
    parse_duration: impl Fn(&str) -> std::result::Result<u64, String>,
) -> Result<TaskSet> {
    let duration = |task: &str, field: &str, text: &str| {
        parse_duration(text).map_err(|e| invalid(format!("task {task:?}, {field}: {e}")))
    };
    let file: SetFile = toml::from_str(text).map_err(|e| {
        let e = tame_partition::SpecError::from_toml("", text, &e);
        let errors: Vec<String> = std::iter::once((e.line, e.column, e.message))
            .chain(e.more)
            .map(|(line, column, what)| format!("line {line}, column {column}: {what}"))
            .collect();
        invalid(format!(
            "not a reservation set: {} — expected [[task]] tables with name, runtime, period (and optional deadline)",
            errors.join("; ")
        ))
    })?;
    let cap_ppm = match &file.cap {
        Some(c) => parse_share_ppm(c)?,
        None => PPM,
    };
    if cap_ppm == 0 || cap_ppm > PPM {
        return Err(invalid(format!(
            "cap {} must be above 0 % and at most 100 %",
            percent(cap_ppm)
        )));
    }
    if file.task.is_empty() {
        return Err(invalid(
            "the set has no [[task]] — add at least one with name, runtime and period",
        ));
    }
    let mut tasks = Vec::with_capacity(file.task.len());
    for t in &file.task {
        let runtime_ns = duration(&t.name, "runtime", &t.runtime)?;
        let period_ns = duration(&t.name, "period", &t.period)?;
        let deadline_ns = match &t.deadline {
            Some(d) => duration(&t.name, "deadline", d)?,
            None => period_ns,
        };
        if runtime_ns == 0 || runtime_ns > deadline_ns || deadline_ns > period_ns {
            return Err(invalid(format!(
                "task {:?}: need 0 < runtime ≤ deadline ≤ period (got {} / {} / {})",
                t.name,
                tame_rt::duration::format_ns(runtime_ns),
                tame_rt::duration::format_ns(deadline_ns),
                tame_rt::duration::format_ns(period_ns)
            )));
        }
        if tasks.iter().any(|x: &Task| x.name == t.name) {
            return Err(invalid(format!(
                "task {:?} is listed twice — names must be unique",
                t.name
            )));
        }
        tasks.push(Task {
            name: t.name.clone(),
            runtime_ns,
            period_ns,
            deadline_ns,
        });
    }
    Ok(TaskSet { cap_ppm, tasks })
}

/// Utilisation Σ C/T in parts per million (rounded up: never optimistic).
pub fn utilisation_ppm(tasks: &[Task]) -> u64 {
    tasks
        .iter()
        .map(|t| div_ceil(u128::from(t.runtime_ns) * u128::from(PPM), t.period_ns))
        .sum()
}

/// Density Σ C/min(D,T) in ppm: EDF's sufficient test for constrained deadlines.
pub fn density_ppm(tasks: &[Task]) -> u64 {
    tasks
        .iter()
        .map(|t| {
            div_ceil(
                u128::from(t.runtime_ns) * u128::from(PPM),
                t.deadline_ns.min(t.period_ns),
            )
        })
        .sum()
}

fn div_ceil(num: u128, den: u64) -> u64 {
    num.div_ceil(u128::from(den)) as u64
}

/// Liu & Layland's bound n(2^{1/n} − 1) in ppm (rounded down: never optimistic).
pub fn liu_layland_ppm(n: usize) -> u64 {
    if n == 0 {
        return PPM;
    }
    let bound = n as f64 * (2f64.powf(1.0 / n as f64) - 1.0);
    (bound * PPM as f64).floor() as u64
}

/// Worst-case response time of each task under fixed priorities (index 0 highest),
/// synchronous release; None where it exceeds the deadline.
pub fn response_times(tasks_by_priority: &[Task]) -> Vec<Option<u64>> {
    tasks_by_priority
        .iter()
        .enumerate()
        .map(|(i, task)| {
            let higher = &tasks_by_priority[..i];
            let mut r = u128::from(task.runtime_ns);
            loop {
                let next = u128::from(task.runtime_ns)
                    + higher
                        .iter()
                        .map(|h| r.div_ceil(u128::from(h.period_ns)) * u128::from(h.runtime_ns))
                        .sum::<u128>();
                if next > u128::from(task.deadline_ns) {
                    return None;
                }
                if next == r {
                    return Some(r as u64);
                }
                r = next;
            }
        })
        .collect()
}

/// Deadline-monotonic order (rate-monotonic for implicit deadlines); ties by name.
pub fn monotonic_order(tasks: &[Task]) -> Vec<Task> {
    let mut sorted = tasks.to_vec();
    sorted.sort_by(|a, b| {
        (a.deadline_ns, a.period_ns, &a.name).cmp(&(b.deadline_ns, b.period_ns, &b.name))
    });
    sorted
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskVerdict {
    pub name: String,
    /// Priority rank under deadline-monotonic order (1 = highest).
    pub rank: usize,
    pub runtime_ns: u64,
    pub period_ns: u64,
    pub deadline_ns: u64,
    /// Worst-case response time under fixed priorities; None: misses its deadline.
    pub response_ns: Option<u64>,
}

/// The result of `--check`, versioned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Analysis {
    pub schema: u32,
    pub cap_ppm: u64,
    pub utilisation_ppm: u64,
    pub density_ppm: u64,
    /// EDF: utilisation ≤ cap (implicit deadlines, exact) or density ≤ cap (constrained, sufficient).
    pub edf_schedulable: bool,
    pub liu_layland_ppm: u64,
    /// Every response time within its deadline and utilisation within the cap.
    pub fixed_priority_schedulable: bool,
    pub tasks: Vec<TaskVerdict>,
}

impl tame_host::Document for Analysis {
    const SCHEMA: tame_host::Schema = tame_host::schema!(Number "tame.reserve.check", 1);
}

pub fn analyse(set: &TaskSet) -> Analysis {
    let utilisation = utilisation_ppm(&set.tasks);
    let density = density_ppm(&set.tasks);
    let implicit = set.tasks.iter().all(|t| t.deadline_ns == t.period_ns);
    let edf_schedulable = if implicit {
        utilisation <= set.cap_ppm
    } else {
        density <= set.cap_ppm
    };
    let ordered = monotonic_order(&set.tasks);
    let responses = response_times(&ordered);
    let tasks: Vec<TaskVerdict> = ordered
        .iter()
        .zip(&responses)
        .enumerate()
        .map(|(i, (t, r))| TaskVerdict {
            name: t.name.clone(),
            rank: i + 1,
            runtime_ns: t.runtime_ns,
            period_ns: t.period_ns,
            deadline_ns: t.deadline_ns,
            response_ns: *r,
        })
        .collect();
    Analysis {
        schema: <Analysis as tame_host::Document>::SCHEMA.version,
        cap_ppm: set.cap_ppm,
        utilisation_ppm: utilisation,
        density_ppm: density,
        edf_schedulable,
        liu_layland_ppm: liu_layland_ppm(set.tasks.len()),
        fixed_priority_schedulable: utilisation <= set.cap_ppm
            && responses.iter().all(Option::is_some),
        tasks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn task(name: &str, c: u64, t: u64) -> Task {
        Task {
            name: name.into(),
            runtime_ns: c,
            period_ns: t,
            deadline_ns: t,
        }
    }

    #[test]
    fn textbook_response_times() {
        // Buttazzo's example: (1,4), (2,6), (3,12) → R = 1, 3, 10.
        let set = [task("a", 1, 4), task("b", 2, 6), task("c", 3, 12)];
        assert_eq!(response_times(&set), vec![Some(1), Some(3), Some(10)]);
        // U = 1 with harmonic-free periods: EDF yes, RM no.
        let set = TaskSet {
            cap_ppm: PPM,
            tasks: vec![task("a", 2, 5), task("b", 4, 7)],
        };
        let a = analyse(&set);
        assert!(a.edf_schedulable);
        assert!(!a.fixed_priority_schedulable);
        assert_eq!(a.tasks[1].response_ns, None);
    }

    /// A stand-in for tame-bench's parser: whole ms only.
    fn ms(text: &str) -> std::result::Result<u64, String> {
        let n = text
            .strip_suffix("ms")
            .ok_or_else(|| format!("{text:?} has no unit"))?;
        n.parse::<u64>()
            .map(|v| v * 1_000_000)
            .map_err(|e| e.to_string())
    }

    fn parse_set(text: &str) -> Result<TaskSet> {
        super::parse_set(text, ms)
    }

    #[test]
    fn parses_a_set_file_and_rejects_bad_ones() {
        let set = parse_set(
            "cap = \"90%\"\n[[task]]\nname = \"p\"\nruntime = \"10ms\"\nperiod = \"40ms\"\n",
        )
        .unwrap();
        assert_eq!(set.cap_ppm, 900_000);
        assert_eq!(set.tasks[0].deadline_ns, 40_000_000);
        assert!(parse_set("")
            .unwrap_err()
            .to_string()
            .contains("no [[task]]"));
        assert!(
            parse_set("[[task]]\nname=\"a\"\nruntime=\"50ms\"\nperiod=\"40ms\"\n")
                .unwrap_err()
                .to_string()
                .contains("runtime ≤ deadline")
        );
        assert!(
            parse_set("[[task]]\nname=\"a\"\nruntime=\"5\"\nperiod=\"40ms\"\n")
                .unwrap_err()
                .to_string()
                .contains("no unit")
        );
        let e = parse_set("[[task]]\nname=\"a\"\nruntme=\"5ms\"\nperiod=\"40ms\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("line 3, column 1: unknown field `runtme`"),
            "{e}"
        );
        assert!(e.contains("did you mean `runtime`?"), "{e}");
    }

    /// Exact fixed-priority simulation in unit steps over the hyperperiod
    /// (synchronous release, implicit deadlines): true when no job misses.
    fn simulate_fixed_priority(tasks: &[Task]) -> bool {
        let hyper = tasks.iter().fold(1u64, |acc, t| lcm(acc, t.period_ns));
        let mut left: Vec<u64> = vec![0; tasks.len()];
        for now in 0..hyper {
            for (i, t) in tasks.iter().enumerate() {
                if now % t.period_ns == 0 {
                    if left[i] > 0 {
                        return false;
                    }
                    left[i] = t.runtime_ns;
                }
            }
            if let Some(i) = left.iter().position(|&l| l > 0) {
                left[i] -= 1;
            }
        }
        left.iter().all(|&l| l == 0)
    }

    fn gcd(a: u64, b: u64) -> u64 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }

    fn lcm(a: u64, b: u64) -> u64 {
        a / gcd(a, b) * b
    }

    fn small_set() -> impl Strategy<Value = Vec<Task>> {
        prop::collection::vec((1u64..=12, 1u64..=12), 1..=4).prop_map(|pairs| {
            pairs
                .into_iter()
                .enumerate()
                .map(|(i, (t, c))| task(&format!("t{i}"), c.min(t), t))
                .collect()
        })
    }

    proptest! {
        /// Response-time analysis is exact for synchronous periodic tasks: it agrees with simulation.
        #[test]
        fn response_time_analysis_matches_simulation(tasks in small_set()) {
            let ordered = monotonic_order(&tasks);
            let rta_ok = response_times(&ordered).iter().all(Option::is_some);
            prop_assert_eq!(rta_ok, simulate_fixed_priority(&ordered));
        }

        /// Below Liu & Layland's bound, rate-monotonic always passes; and it never passes above U = 1.
        #[test]
        fn bounds_are_consistent(tasks in small_set()) {
            let set = TaskSet { cap_ppm: PPM, tasks: tasks.clone() };
            let a = analyse(&set);
            if a.utilisation_ppm <= a.liu_layland_ppm {
                prop_assert!(a.fixed_priority_schedulable);
            }
            if a.fixed_priority_schedulable {
                prop_assert!(a.edf_schedulable);
            }
            prop_assert_eq!(a.edf_schedulable, a.utilisation_ppm <= PPM);
            for v in &a.tasks {
                if let Some(r) = v.response_ns {
                    prop_assert!(r >= v.runtime_ns && r <= v.deadline_ns);
                }
            }
        }
    }
}
