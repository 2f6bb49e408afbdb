//! The huge page pools the host's kernel command line reserves at boot
//! (`default_hugepagesz=`, `hugepagesz=`, `hugepages=`): what a PerformanceProfile's
//! `hugepages` section reproduces on every node (it writes the same parameters).

use tame_host::kernel::Cmdline;

/// One pool: `count` pages of `size` (`2M`, `1G`), on one NUMA node or spread evenly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pool {
    pub size: String,
    pub count: u64,
    pub node: Option<u32>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BootHugepages {
    pub default_size: Option<String>,
    pub pools: Vec<Pool>,
    /// Parameters that could not be read, with the reason.
    pub unreadable: Vec<String>,
}

/// The size as the PerformanceProfile spells it (`2M` or `1G`), from the kernel's
/// spellings (`2M`, `2m`, `2048k`, `1G`, `1g`).
fn profile_size(value: &str) -> Option<String> {
    let v = value.trim().to_ascii_uppercase();
    let (number, unit) = v.split_at(v.find(|c: char| !c.is_ascii_digit())?);
    let n: u64 = number.parse().ok()?;
    let kib = match unit {
        "K" => n,
        "M" => n.checked_mul(1024)?,
        "G" => n.checked_mul(1024 * 1024)?,
        _ => return None,
    };
    match kib {
        2048 => Some("2M".into()),
        1_048_576 => Some("1G".into()),
        _ => None,
    }
}

/// Read the pools in command-line order: `hugepages=` applies to the `hugepagesz=` before
/// it, or to the default size; the per-node form `hugepages=0:2,1:4` gives one pool each.
pub fn from_cmdline(cmdline: &Cmdline) -> BootHugepages {
    let mut out = BootHugepages::default();
    // The default size first, wherever it stands: the kernel gives a bare `hugepages=N`
    // (before any `hugepagesz=`) to the default size once all parameters are read, so
    // `hugepages=4 default_hugepagesz=1G` is four 1G pages. It keeps the first one given.
    for value in cmdline
        .params
        .iter()
        .filter(|p| p.key == "default_hugepagesz")
        .map(|p| p.value.as_deref().unwrap_or(""))
    {
        match (&out.default_size, profile_size(value)) {
            (None, Some(s)) => out.default_size = Some(s),
            (None, None) => out.unreadable.push(format!(
                "default_hugepagesz={value}: a PerformanceProfile takes 2M or 1G"
            )),
            (Some(first), _) => out.unreadable.push(format!(
                "default_hugepagesz={value}: given again; the kernel keeps the first ({first})"
            )),
        }
    }
    // The last `hugepagesz=`: `Some(None)` when it was unreadable (its counts are skipped).
    let mut size: Option<Option<String>> = None;
    for p in &cmdline.params {
        let value = p.value.as_deref().unwrap_or("");
        match p.key.as_str() {
            "hugepagesz" => {
                size = Some(profile_size(value));
                if size == Some(None) {
                    out.unreadable.push(format!(
                        "hugepagesz={value}: a PerformanceProfile takes 2M or 1G"
                    ));
                }
            }
            "hugepages" => {
                let s = match &size {
                    Some(Some(s)) => s.clone(),
                    Some(None) => continue,
                    // The kernel's default huge page size on x86 and arm64 (4K pages).
                    None => out.default_size.clone().unwrap_or_else(|| "2M".into()),
                };
                match parse_counts(value) {
                    Some(counts) => {
                        out.pools
                            .extend(counts.into_iter().map(|(node, count)| Pool {
                                size: s.clone(),
                                count,
                                node,
                            }))
                    }
                    None => out
                        .unreadable
                        .push(format!("hugepages={value}: not a count or NODE:COUNT list")),
                }
            }
            _ => {}
        }
    }
    out.pools.retain(|p| p.count > 0);
    // The profile's count is an int32: a larger one (no machine holds that many pages) is
    // named and left out rather than wrapped or clamped to a different reservation.
    let (fit, too_many): (Vec<Pool>, Vec<Pool>) = out
        .pools
        .into_iter()
        .partition(|p| i32::try_from(p.count).is_ok());
    out.pools = fit;
    out.unreadable.extend(too_many.iter().map(|p| {
        format!(
            "{} pages of {}: more than a PerformanceProfile's count holds ({}, an int32)",
            p.count,
            p.size,
            i32::MAX
        )
    }));
    out
}

/// `512` → one pool spread over the nodes; `0:2,1:4` → one per node.
fn parse_counts(value: &str) -> Option<Vec<(Option<u32>, u64)>> {
    if !value.contains(':') {
        return Some(vec![(None, value.trim().parse().ok()?)]);
    }
    value
        .split(',')
        .map(|part| {
            let (node, count) = part.split_once(':')?;
            Some((Some(node.trim().parse().ok()?), count.trim().parse().ok()?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tame_host::kernel::parse_cmdline;

    #[test]
    fn pools_follow_their_size_and_nodes() {
        let h = from_cmdline(&parse_cmdline(
            "ro default_hugepagesz=1G hugepagesz=2M hugepages=512 hugepagesz=1G hugepages=0:2,1:4",
        ));
        assert_eq!(h.default_size.as_deref(), Some("1G"));
        assert_eq!(
            h.pools,
            vec![
                Pool {
                    size: "2M".into(),
                    count: 512,
                    node: None
                },
                Pool {
                    size: "1G".into(),
                    count: 2,
                    node: Some(0)
                },
                Pool {
                    size: "1G".into(),
                    count: 4,
                    node: Some(1)
                },
            ]
        );
        assert!(h.unreadable.is_empty());
    }

    #[test]
    fn a_bare_count_takes_the_default_size_and_bad_values_are_named() {
        let h = from_cmdline(&parse_cmdline(
            "hugepages=16 hugepagesz=16K hugepages=4 hugepagesz=2M hugepages=x",
        ));
        assert_eq!(
            h.pools,
            vec![Pool {
                size: "2M".into(),
                count: 16,
                node: None
            }]
        );
        assert_eq!(h.unreadable.len(), 2, "{:?}", h.unreadable);
        assert!(h.unreadable[0].starts_with("hugepagesz=16K"));
        assert!(h.unreadable[1].starts_with("hugepages=x"));
        assert_eq!(profile_size("2048k").as_deref(), Some("2M"));
        assert_eq!(profile_size("1g").as_deref(), Some("1G"));
        assert!(from_cmdline(&parse_cmdline("quiet")).pools.is_empty());
    }

    #[test]
    fn the_default_size_counts_wherever_it_stands_and_counts_fit_an_int32() {
        let h = from_cmdline(&parse_cmdline(
            "hugepages=4 default_hugepagesz=1G default_hugepagesz=2M hugepagesz=2M hugepages=4294967296",
        ));
        assert_eq!(h.default_size.as_deref(), Some("1G"));
        assert_eq!(
            h.pools,
            vec![Pool {
                size: "1G".into(),
                count: 4,
                node: None
            }]
        );
        assert_eq!(h.unreadable.len(), 2, "{:?}", h.unreadable);
        assert!(h.unreadable[0].contains("the kernel keeps the first (1G)"));
        assert!(h.unreadable[1].starts_with("4294967296 pages of 2M: more than"));
    }
}
