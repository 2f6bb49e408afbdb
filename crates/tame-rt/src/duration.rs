//! Durations as people type them (`200us`, `1.5ms`, `10s`, `2m`), read into integer
//! nanoseconds: the one parser behind every command-line option and config file.

/// Parse a duration with a unit (ns, us/µs, ms, s, m/min) into nanoseconds. The
/// error says what is wrong and how to write it.
pub fn parse_ns(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let scale: u64 = match unit.trim() {
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => crate::NS_PER_SEC,
        "m" | "min" => 60 * crate::NS_PER_SEC,
        "" => {
            return Err(format!(
                "duration {text:?} has no unit — write it with one of ns, us, ms, s, m (e.g. 200us, 10s)"
            ))
        }
        other => {
            return Err(format!(
                "duration {text:?} has an unknown unit {other:?} — use ns, us, ms, s or m"
            ))
        }
    };
    // Split integer and fraction so "1.5ms" stays exact in integer arithmetic.
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    let bad = || format!("duration {text:?} is not a number with a unit (e.g. 1.5ms)");
    if whole.is_empty() && frac.is_empty() {
        return Err(bad());
    }
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| bad())?
    };
    let mut ns = whole.checked_mul(scale).ok_or_else(bad)?;
    let mut place = scale;
    for digit in frac.chars() {
        place /= 10;
        let d = u64::from(digit.to_digit(10).ok_or_else(bad)?);
        ns = ns.checked_add(d * place).ok_or_else(bad)?;
    }
    Ok(ns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse_ns("200us"), Ok(200_000));
        assert_eq!(parse_ns("50µs"), Ok(50_000));
        assert_eq!(parse_ns("1ms"), Ok(1_000_000));
        assert_eq!(parse_ns("1.5ms"), Ok(1_500_000));
        assert_eq!(parse_ns(".5ms"), Ok(500_000));
        assert_eq!(parse_ns("10s"), Ok(10_000_000_000));
        assert_eq!(parse_ns("2m"), Ok(120_000_000_000));
        assert_eq!(parse_ns("750ns"), Ok(750));
    }

    #[test]
    fn refuses_missing_or_unknown_units() {
        assert!(parse_ns("100").unwrap_err().contains("no unit"));
        assert!(parse_ns("3h").unwrap_err().contains("unknown unit"));
        assert!(parse_ns("ms").is_err());
        assert!(parse_ns("1.2.3ms").is_err());
        assert!(parse_ns("99999999999999999999s").is_err());
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,16}") {
            let _ = parse_ns(&s);
        }

        #[test]
        fn integer_microseconds_round_trip(us in 0u64..10_000_000_000) {
            prop_assert_eq!(parse_ns(&format!("{us}us")), Ok(us * 1000));
        }
    }
}
