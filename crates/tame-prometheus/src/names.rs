//! Metric names after https://prometheus.io/docs/practices/naming/ : `tame_` then the
//! bench (the subsystem), what is measured, and the base unit last (`_seconds`, `_ratio`,
//! `_total` for counters).

/// Lower case, every character outside `[a-z0-9_]` made `_`, no `_` twice in a row or at
/// either end.
pub fn sanitise(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        let c = if c.is_ascii_alphanumeric() {
            c.to_ascii_lowercase()
        } else {
            '_'
        };
        if c == '_' && (out.is_empty() || out.ends_with('_')) {
            continue;
        }
        out.push(c);
    }
    while out.ends_with('_') {
        out.pop();
    }
    out
}

/// Words of a result's names that are abbreviated units (`throughput_ns_per_msg`): the
/// unit is the family's suffix, in base units, so they are left out; `msg` is spelled out.
fn spell(name: &str) -> String {
    name.split('_')
        .filter(|w| !matches!(*w, "ns" | "ps" | "us" | "ms" | "ppm"))
        .map(|w| if w == "msg" { "message" } else { w })
        .collect::<Vec<_>>()
        .join("_")
}

/// `tame_<bench>_<name>_<unit>`, the bench said once (`noise` + `noise_share` → `tame_noise_share_ratio`).
pub fn family(bench: &str, name: &str, unit: &str) -> String {
    let bench = sanitise(bench);
    let name = spell(&sanitise(name));
    let name = if name == bench {
        ""
    } else {
        name.strip_prefix(&format!("{bench}_")).unwrap_or(&name)
    };
    [format!("tame_{bench}"), name.to_string(), unit.to_string()]
        .iter()
        .filter(|p| !p.is_empty())
        .cloned()
        .collect::<Vec<_>>()
        .join("_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_conventions() {
        assert_eq!(
            family("cycle", "latency", "seconds"),
            "tame_cycle_latency_seconds"
        );
        assert_eq!(
            family("noise", "noise_share", "ratio"),
            "tame_noise_share_ratio"
        );
        assert_eq!(family("cost", "cost", "ratio"), "tame_cost_ratio");
        assert_eq!(
            family("ipc", "one_way_latency", "seconds"),
            "tame_ipc_one_way_latency_seconds"
        );
        assert_eq!(
            family("fwq", "missed_periods", ""),
            "tame_fwq_missed_periods"
        );
        assert_eq!(
            family("ipc", "throughput_ns_per_msg", "seconds"),
            "tame_ipc_throughput_per_message_seconds"
        );
        assert_eq!(sanitise("Tame-Ring/8B"), "tame_ring_8b");
        assert_eq!(sanitise("__a  b__"), "a_b");
    }
}
