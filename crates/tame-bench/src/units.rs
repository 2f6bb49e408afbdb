//! Durations as people type them: `200us`, `1ms`, `10s`, `2m`.

use crate::error::{invalid, Result};

/// Parse a duration with a unit (ns, us/µs, ms, s, m) into nanoseconds.
pub fn parse_duration_ns(text: &str) -> Result<u64> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let scale: u64 = match unit.trim() {
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        "" => {
            return Err(invalid(format!(
                "duration {text:?} has no unit — write it with one of ns, us, ms, s, m (e.g. 200us, 10s)"
            )))
        }
        other => {
            return Err(invalid(format!(
                "duration {text:?} has an unknown unit {other:?} — use ns, us, ms, s or m"
            )))
        }
    };
    // Split integer and fraction so "1.5ms" stays exact in integer arithmetic.
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    let bad = || {
        invalid(format!(
            "duration {text:?} is not a number with a unit (e.g. 1.5ms)"
        ))
    };
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
        let d = digit.to_digit(10).ok_or_else(bad)? as u64;
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
        assert_eq!(parse_duration_ns("200us").unwrap(), 200_000);
        assert_eq!(parse_duration_ns("50µs").unwrap(), 50_000);
        assert_eq!(parse_duration_ns("1ms").unwrap(), 1_000_000);
        assert_eq!(parse_duration_ns("1.5ms").unwrap(), 1_500_000);
        assert_eq!(parse_duration_ns("10s").unwrap(), 10_000_000_000);
        assert_eq!(parse_duration_ns("2m").unwrap(), 120_000_000_000);
        assert_eq!(parse_duration_ns("750ns").unwrap(), 750);
    }

    #[test]
    fn refuses_missing_or_unknown_units() {
        assert!(parse_duration_ns("100")
            .unwrap_err()
            .to_string()
            .contains("no unit"));
        assert!(parse_duration_ns("3h")
            .unwrap_err()
            .to_string()
            .contains("unknown unit"));
        assert!(parse_duration_ns("ms").is_err());
        assert!(parse_duration_ns("1.2.3ms").is_err());
        assert!(parse_duration_ns("99999999999999999999s").is_err());
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,16}") {
            let _ = parse_duration_ns(&s);
        }

        #[test]
        fn integer_microseconds_round_trip(us in 0u64..10_000_000_000) {
            prop_assert_eq!(parse_duration_ns(&format!("{us}us")).unwrap(), us * 1000);
        }
    }
}
