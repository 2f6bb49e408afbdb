//! CPU lists as the kubelet reads them (`k8s.io/utils/cpuset.Parse`): `N` and `N-M`
//! joined by `,`, nothing else. The kernel's list format (tame's own parser) also takes
//! spaces and strides (`0-7:2/4`), which would make the kubelet refuse its config.

use tame_host::cpulist::MAX_CPU;
use tame_host::CpuList;

/// The CPUs of a kubelet CPU list, or why the kubelet cannot read it (or why tame will
/// not: a CPU beyond the kernel's ceiling). Work is bounded by the text's length: ranges
/// are merged before their CPUs are listed, so `0-8191,0-8191,…` costs no more than once.
pub fn parse(text: &str) -> Result<CpuList, String> {
    if text.is_empty() {
        return Ok(CpuList::new());
    }
    let mut ranges = Vec::new();
    for element in text.split(',') {
        let (lo, hi) = match element.split_once('-') {
            Some((a, b)) => (number(a)?, number(b)?),
            None => {
                let n = number(element)?;
                (n, n)
            }
        };
        if lo > hi {
            return Err(format!("{element:?} is a range that runs backwards"));
        }
        ranges.push((lo, hi));
    }
    ranges.sort_unstable();
    let mut cpus = CpuList::new();
    let mut next = 0u32;
    for (lo, hi) in ranges {
        for cpu in lo.max(next)..=hi {
            cpus.insert(cpu);
        }
        next = next.max(hi + 1);
    }
    Ok(cpus)
}

/// One CPU number as Go's strconv.Atoi takes it (digits, an optional `+`), at most MAX_CPU.
fn number(text: &str) -> Result<u32, String> {
    let digits = text.strip_prefix('+').unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "{text:?} is not a CPU number (the kubelet takes N and N-M joined by commas: no spaces, strides or other signs)"
        ));
    }
    match digits.parse::<u32>() {
        Ok(n) if n <= MAX_CPU => Ok(n),
        _ => Err(format!(
            "CPU {digits} is beyond {MAX_CPU}, the kernel's ceiling"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::parse;
    use tame_host::CpuList;

    #[test]
    fn numbers_and_ranges_joined_by_commas() {
        let list = |s: &str| CpuList::parse(s).unwrap();
        assert_eq!(parse("0-1,4,6-7"), Ok(list("0,1,4,6,7")));
        assert_eq!(parse("3,0-1,1-2"), Ok(list("0-3")));
        assert_eq!(parse("2-2"), Ok(list("2")));
        assert_eq!(parse("+1"), Ok(list("1")));
        assert_eq!(parse(""), Ok(CpuList::new()));
    }

    #[test]
    fn what_the_kernel_takes_and_the_kubelet_refuses() {
        for bad in [
            "0, 1", " 0", "0-7:2/4", "0,,1", "0-", "-1", "a", "0x1", "1,",
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains("is not a CPU number"), "{bad}: {e}");
        }
        // …of which the kernel's format reads these.
        for kernel in ["0, 1", " 0", "0-7:2/4"] {
            assert!(CpuList::parse(kernel).is_ok(), "{kernel}");
        }
        assert!(parse("3-1").unwrap_err().contains("runs backwards"));
        assert!(parse("0-4294967295").unwrap_err().contains("beyond 8191"));
        assert!(parse("99999999999999999999")
            .unwrap_err()
            .contains("beyond"));
    }

    #[test]
    fn repeated_wide_ranges_cost_one_pass() {
        let text = vec!["0-8191"; 100_000].join(",");
        let start = std::time::Instant::now();
        assert_eq!(parse(&text).map(|l| l.len()), Ok(8192));
        // Listing 8192 CPUs 100 000 times would take seconds; merged it is milliseconds.
        assert!(start.elapsed() < std::time::Duration::from_secs(2));
    }
}
