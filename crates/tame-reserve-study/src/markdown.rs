//! The study's report as markdown tables laid out like the paper's.

use crate::Report;
use tame_reserve::spec::Backend;

/// The report as markdown tables laid out like the paper's.
pub fn markdown(r: &Report, command: &str) -> String {
    let mut s = circumstances(r, command);
    if r.interrupted {
        s.push_str("Interrupted (Ctrl-C): the tables hold what was measured before.\n\n");
    }
    s.push_str(&overhead_tables(r));
    s.push_str(&stability_table(r));
    s.push_str(&load_steps_table(r));
    if !r.periodic.is_empty() {
        s.push_str(&periodic_table(r));
    }
    if !r.skipped.is_empty() {
        s.push_str("\nNot measured:\n");
        for k in &r.skipped {
            s.push_str(&format!("- {k}\n"));
        }
    }
    s
}

/// The command, the machine, the load and G: what every table stands on.
fn circumstances(r: &Report, command: &str) -> String {
    format!(
        "Command: `{command}` — kernel {}, {} CPUs, client CPU {}, period {} ms; load average before/after: {} / {}; G = {:.0} / {:.0} rounds/s (before/after; at SCHED_FIFO 1, median of 100 ms windows); the same kernel as an ordinary process alone: {:.0} rounds/s ({:.0} % of G: the rest went to other jobs on the machine).\n\n",
        r.kernel, r.online_cpus, r.cpu, r.period_ns / 1_000_000, r.loadavg_before, r.loadavg_after, r.g_before, r.g_after, r.shared_rate_before, 100.0 * r.shared_rate_before / r.g_before
    )
}

/// Table 1, one per backend: a row per share.
fn overhead_tables(r: &Report) -> String {
    let mut s = String::new();
    let mut backends: Vec<Backend> = r.overhead.iter().map(|x| x.backend).collect();
    backends.dedup();
    for b in backends {
        s.push_str(&format!("Table 1 ({b}): overhead\n\n| CPU perc. | G | client rate (rounds/s) | meas. CPU perc. (int.) | int. overh. O_I | rest rate (rounds/s) | meas. CPU perc. (ext.) | ext. overh. O_E | O_E vs shared CPU |\n|---|---|---|---|---|---|---|---|---|\n"));
        for x in r.overhead.iter().filter(|x| x.backend == b) {
            s.push_str(&format!(
                "| {} | {:.0} | {:.0} | {:.2} | {:.3} | {:.0} | {:.2} | {:.3} | {:.3} |\n",
                tame_reserve::spec::percent(x.share_ppm),
                x.g,
                x.client_rate,
                x.client_cpu * 100.0,
                x.o_i,
                x.rest_rate,
                x.rest_cpu * 100.0,
                x.o_e,
                x.o_e_shared
            ));
        }
        s.push('\n');
    }
    s
}

/// Table 2: the floor, then S per backend unloaded and under each kind of load.
fn stability_table(r: &Report) -> String {
    let mut s = format!("Table 2: stability S (coefficient of variation of the client's rate over {} ms windows)\n\n| backend | CPU perc. | unloaded | comp. load (0…10) | disk-I/O load (0…10) | windows |\n|---|---|---|---|---|---|\n| (floor: the kernel alone at SCHED_FIFO 1) | 100 % | {:.4} | — | — | {} |\n", r.stability_window_ns / 1_000_000, r.floor_cv, r.floor_windows);
    let mut seen: Vec<Backend> = r.stability.iter().map(|x| x.backend).collect();
    seen.dedup();
    for b in seen {
        let get = |l: &str| r.stability.iter().find(|x| x.backend == b && x.load == l);
        let cell = |l: &str| get(l).map_or("—".to_string(), |x| format!("{:.4}", x.cv));
        let windows: Vec<String> = ["none", "cpu", "io"]
            .iter()
            .filter_map(|l| get(l))
            .map(|x| x.windows.to_string())
            .collect();
        let share = get("none").or(get("cpu")).map_or(0, |x| x.share_ppm);
        s.push_str(&format!(
            "| {b} | {} | {} | {} | {} | {} |\n",
            tame_reserve::spec::percent(share),
            cell("none"),
            cell("cpu"),
            cell("io"),
            windows.join("/")
        ));
    }
    s
}

/// The client's CPU share at each step of background load, per backend and kind of load.
fn load_steps_table(r: &Report) -> String {
    let mut s = String::from("\nClient CPU share per background-load step (0…10 processes):\n\n| backend | load | share at 0, 1, … 10 background processes |\n|---|---|---|\n");
    for x in r.stability.iter().filter(|x| x.load != "none") {
        let steps: Vec<String> = x.step_cpu.iter().map(|v| format!("{:.2}", v)).collect();
        s.push_str(&format!(
            "| {} | {} | {} |\n",
            x.backend,
            x.load,
            steps.join(" ")
        ));
    }
    s
}

/// The periodic client's frame distances: a row per reservation, a column per background.
fn periodic_table(r: &Report) -> String {
    let mut s = format!(
        "\nPeriodic client: a frame due every 100 ms needing {} ms of CPU, beside 0/5/10 computational background processes on its CPU; frame distance min/avg/max (ms):\n\n| reservation | 0 | 5 | 10 |\n|---|---|---|---|\n",
        r.frame_cpu_ns / 1_000_000
    );
    let mut labels: Vec<&str> = r.periodic.iter().map(|x| x.config.as_str()).collect();
    labels.dedup();
    for label in labels {
        // Table 4's 100 ms server periods ran unloaded only: "—" under 5 and 10.
        let cells: Vec<String> = [0, 5, 10]
            .iter()
            .map(|&bg| {
                r.periodic
                    .iter()
                    .find(|x| x.config == label && x.background == bg)
                    .map_or("—".to_string(), |x| {
                        format!(
                            "{:.1} / {:.1} / {:.1} ({} frames)",
                            x.min_ms, x.avg_ms, x.max_ms, x.frames
                        )
                    })
            })
            .collect();
        s.push_str(&format!("| {label} | {} |\n", cells.join(" | ")));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FrameRow, OverheadRow, StabilityRow};

    fn overhead_row(backend: Backend, share_ppm: u64, o_i: f64) -> OverheadRow {
        OverheadRow {
            backend,
            share_ppm,
            g: 1_234_567.4,
            g_shared: 1_100_000.0,
            client_rate: 120_000.6,
            rest_rate: 1_050_000.2,
            client_cpu: 0.0972,
            rest_cpu: 0.8505,
            o_i,
            o_e: 0.0549,
            o_e_shared: -0.0123,
        }
    }

    fn stability_row(backend: Backend, share_ppm: u64, load: &str, cv: f64) -> StabilityRow {
        StabilityRow {
            backend,
            share_ppm,
            load: load.into(),
            windows: if load == "none" { 100 } else { 110 },
            mean_rate: 250_000.0,
            cv,
            step_cpu: vec![0.2, 0.19876, 0.205],
            window_rates: vec![250_000.0; 3],
        }
    }

    fn frame_row(config: &str, background: usize, max_ms: f64) -> FrameRow {
        FrameRow {
            config: config.into(),
            background,
            frames: 49,
            min_ms: 99.94,
            avg_ms: 100.0,
            max_ms,
            distances_ns: vec![100_000_000; 3],
        }
    }

    /// Two backends' overhead tables, stability rows with a load missing (and one backend
    /// with no unloaded row), the periodic study and what was skipped.
    fn full_report() -> Report {
        Report {
            schema: <super::super::Report as tame_host::Document>::SCHEMA.version,
            kernel: "6.1.0-rt".into(),
            online_cpus: 4,
            cpu: 3,
            period_ns: 10_000_000,
            stability_window_ns: 100_000_000,
            loadavg_before: "0.10 0.20 0.30 1/200 1234".into(),
            loadavg_after: "1.10 0.90 0.40 2/210 1300".into(),
            g_before: 1_234_567.4,
            g_after: 1_230_000.6,
            shared_rate_before: 987_654.3,
            floor_cv: 0.00123,
            floor_windows: 50,
            interrupted: false,
            overhead: vec![
                overhead_row(Backend::Server, 100_000, 0.287),
                overhead_row(Backend::Server, 500_000, 0.0123),
                overhead_row(Backend::Deadline, 125_000, -0.004),
            ],
            stability: vec![
                stability_row(Backend::Server, 200_000, "none", 0.0011),
                stability_row(Backend::Server, 200_000, "cpu", 0.0234),
                stability_row(Backend::Server, 200_000, "io", 0.345),
                stability_row(Backend::Cgroup, 250_000, "cpu", 0.05),
            ],
            frame_cpu_ns: 20_000_000,
            periodic: vec![
                frame_row("none", 0, 100.1),
                frame_row("none", 5, 480.25),
                frame_row("server 10/40 ms", 0, 100.04),
                frame_row("server 10/40 ms", 5, 101.5),
            ],
            skipped: vec![
                "deadline stability (cpu): no".into(),
                "periodic client: no".into(),
            ],
        }
    }

    /// The expected text was produced by `markdown` before it was split into pieces.
    #[test]
    fn markdown_of_a_full_report_is_unchanged() {
        let expected = concat!(
            "Command: `kit bench` — kernel 6.1.0-rt, 4 CPUs, client CPU 3, period 10 ms; load average before/after: 0.10 0.20 0.30 1/200 1234 / 1.10 0.90 0.40 2/210 1300; G = 1234567 / 1230001 rounds/s (before/after; at SCHED_FIFO 1, median of 100 ms windows); the same kernel as an ordinary process alone: 987654 rounds/s (80 % of G: the rest went to other jobs on the machine).\n",
            "\n",
            "Table 1 (server): overhead\n",
            "\n",
            "| CPU perc. | G | client rate (rounds/s) | meas. CPU perc. (int.) | int. overh. O_I | rest rate (rounds/s) | meas. CPU perc. (ext.) | ext. overh. O_E | O_E vs shared CPU |\n",
            "|---|---|---|---|---|---|---|---|---|\n",
            "| 10 % | 1234567 | 120001 | 9.72 | 0.287 | 1050000 | 85.05 | 0.055 | -0.012 |\n",
            "| 50 % | 1234567 | 120001 | 9.72 | 0.012 | 1050000 | 85.05 | 0.055 | -0.012 |\n",
            "\n",
            "Table 1 (deadline): overhead\n",
            "\n",
            "| CPU perc. | G | client rate (rounds/s) | meas. CPU perc. (int.) | int. overh. O_I | rest rate (rounds/s) | meas. CPU perc. (ext.) | ext. overh. O_E | O_E vs shared CPU |\n",
            "|---|---|---|---|---|---|---|---|---|\n",
            "| 12.5 % | 1234567 | 120001 | 9.72 | -0.004 | 1050000 | 85.05 | 0.055 | -0.012 |\n",
            "\n",
            "Table 2: stability S (coefficient of variation of the client's rate over 100 ms windows)\n",
            "\n",
            "| backend | CPU perc. | unloaded | comp. load (0…10) | disk-I/O load (0…10) | windows |\n",
            "|---|---|---|---|---|---|\n",
            "| (floor: the kernel alone at SCHED_FIFO 1) | 100 % | 0.0012 | — | — | 50 |\n",
            "| server | 20 % | 0.0011 | 0.0234 | 0.3450 | 100/110/110 |\n",
            "| cgroup | 25 % | — | 0.0500 | — | 110 |\n",
            "\n",
            "Client CPU share per background-load step (0…10 processes):\n",
            "\n",
            "| backend | load | share at 0, 1, … 10 background processes |\n",
            "|---|---|---|\n",
            "| server | cpu | 0.20 0.20 0.20 |\n",
            "| server | io | 0.20 0.20 0.20 |\n",
            "| cgroup | cpu | 0.20 0.20 0.20 |\n",
            "\n",
            "Periodic client: a frame due every 100 ms needing 20 ms of CPU, beside 0/5/10 computational background processes on its CPU; frame distance min/avg/max (ms):\n",
            "\n",
            "| reservation | 0 | 5 | 10 |\n",
            "|---|---|---|---|\n",
            "| none | 99.9 / 100.0 / 100.1 (49 frames) | 99.9 / 100.0 / 480.2 (49 frames) | — |\n",
            "| server 10/40 ms | 99.9 / 100.0 / 100.0 (49 frames) | 99.9 / 100.0 / 101.5 (49 frames) | — |\n",
            "\n",
            "Not measured:\n",
            "- deadline stability (cpu): no\n",
            "- periodic client: no\n",
        );
        assert_eq!(markdown(&full_report(), "kit bench"), expected);
    }

    /// Nothing measured beyond the floor: no overhead table, no periodic study, nothing skipped.
    #[test]
    fn markdown_of_an_empty_report_is_unchanged() {
        let r = Report {
            overhead: Vec::new(),
            stability: Vec::new(),
            periodic: Vec::new(),
            skipped: Vec::new(),
            ..full_report()
        };
        let expected = concat!(
            "Command: `kit bench` — kernel 6.1.0-rt, 4 CPUs, client CPU 3, period 10 ms; load average before/after: 0.10 0.20 0.30 1/200 1234 / 1.10 0.90 0.40 2/210 1300; G = 1234567 / 1230001 rounds/s (before/after; at SCHED_FIFO 1, median of 100 ms windows); the same kernel as an ordinary process alone: 987654 rounds/s (80 % of G: the rest went to other jobs on the machine).\n",
            "\n",
            "Table 2: stability S (coefficient of variation of the client's rate over 100 ms windows)\n",
            "\n",
            "| backend | CPU perc. | unloaded | comp. load (0…10) | disk-I/O load (0…10) | windows |\n",
            "|---|---|---|---|---|---|\n",
            "| (floor: the kernel alone at SCHED_FIFO 1) | 100 % | 0.0012 | — | — | 50 |\n",
            "\n",
            "Client CPU share per background-load step (0…10 processes):\n",
            "\n",
            "| backend | load | share at 0, 1, … 10 background processes |\n",
            "|---|---|---|\n",
        );
        assert_eq!(markdown(&r, "kit bench"), expected);
    }
}
