//! A reserve study (`tame bench reserve`, or the kit's older report) as series: per
//! backend, load and share the share granted and the share received (the client's rate
//! over G, the kernel's rate alone on the CPU), its stability S, and Table 1's overheads.

use tame_results::ReserveDoc;

use crate::writer::{Exposition, Kind, Labels, WriteError};

fn share(ppm: u64) -> String {
    crate::writer::format_value(ppm as f64 / 1e6)
}

pub fn add(e: &mut Exposition, doc: &ReserveDoc) -> Result<(), WriteError> {
    let r = &doc.report;
    let cpu = r.cpu.to_string();
    e.declare(
        "tame_reserve_granted_ratio",
        Kind::Gauge,
        "The CPU share a stability series of the reserve study reserved, 0-1.",
    )?;
    e.declare(
        "tame_reserve_received_ratio",
        Kind::Gauge,
        "The CPU share the client received in that series (its mean rate over G, the kernel's rate alone on the CPU), 0-1.",
    )?;
    e.declare(
        "tame_reserve_stability_cv",
        Kind::Gauge,
        "The coefficient of variation of the client's rate over the windows of the series (the paper's S; lower is steadier).",
    )?;
    for row in &r.stability {
        let l: Labels = vec![
            ("backend".into(), row.backend.to_string()),
            ("load".into(), row.load.clone()),
            ("share".into(), share(row.share_ppm)),
            ("cpu".into(), cpu.clone()),
        ];
        e.sample("tame_reserve_granted_ratio", &l, row.share_ppm as f64 / 1e6)?;
        if r.g_before > 0.0 {
            e.sample(
                "tame_reserve_received_ratio",
                &l,
                row.mean_rate / r.g_before,
            )?;
        }
        e.sample("tame_reserve_stability_cv", &l, row.cv)?;
    }
    e.declare(
        "tame_reserve_overhead_internal_ratio",
        Kind::Gauge,
        "O_I of the reserve study's Table 1: what the client lost of its reserved share to the reservation's mechanism, 0-1.",
    )?;
    e.declare(
        "tame_reserve_overhead_external_ratio",
        Kind::Gauge,
        "O_E of the reserve study's Table 1: what the rest of the CPU lost, 0-1.",
    )?;
    for row in &r.overhead {
        let l: Labels = vec![
            ("backend".into(), row.backend.to_string()),
            ("share".into(), share(row.share_ppm)),
            ("cpu".into(), cpu.clone()),
        ];
        e.sample("tame_reserve_overhead_internal_ratio", &l, row.o_i)?;
        e.sample("tame_reserve_overhead_external_ratio", &l, row.o_e)?;
    }
    e.declare(
        "tame_reserve_frame_distance_max_seconds",
        Kind::Gauge,
        "The longest distance between two frames' completions in the periodic-client study (a frame is due every 100 ms), in seconds.",
    )?;
    for row in &r.periodic {
        let l: Labels = vec![
            ("config".into(), row.config.clone()),
            ("background".into(), row.background.to_string()),
        ];
        e.sample(
            "tame_reserve_frame_distance_max_seconds",
            &l,
            row.max_ms / 1e3,
        )?;
    }
    Ok(())
}
