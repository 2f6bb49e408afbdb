//! Durations as people type them (`200us`, `1.5ms`, `10s`, `2m`), read into integer
//! nanoseconds: the one parser behind every command-line option and config file, and
//! the one formatter of nanoseconds for people, in the three styles tame shows them in
//! ([`NsStyle`]: exact for messages, fixed for statistics, rounded for captions).

/// Parse a duration with a unit (ns, us/µs, ms, s, m/min) into nanoseconds; a bare `0`
/// needs none (it is zero in every unit), so the caller's range check says what zero
/// means for its option. The error says what is wrong and how to write it.
pub fn parse_ns(text: &str) -> Result<u64, String> {
    let t = text.trim();
    if !t.is_empty() && t.chars().all(|c| c == '0' || c == '.') && t.contains('0') {
        return Ok(0);
    }
    if let Some(magnitude) = t.strip_prefix('-') {
        return Err(format!(
            "duration {text:?} is negative — time runs forward: write it like {}",
            magnitude.trim()
        ));
    }
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
                "duration {text:?} has no unit — write it like {}ms (units: ns, us, ms, s, m)",
                number.trim()
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

/// How nanoseconds are shown. Each style keeps the spelling its users always had.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NsStyle {
    /// For messages, exact and in the unit people think in: `40 ms`, `1.5 s`, `250 µs`,
    /// `1234.567 µs`, `850 ns` — the largest unit that shows the value with at most three
    /// decimals. [`parse_ns`] reads it back to the same value.
    Exact,
    /// For statistics, a fixed precision per unit, no space: `850ns`, `15.23µs`,
    /// `3.401ms`, `1.200s` (bench tables).
    Fixed,
    /// For captions, rounded to a few digits: `1.05 ms`, `250 µs`, `2 s` (report figures).
    Rounded,
}

/// Nanoseconds for messages: [`NsStyle::Exact`], the style most messages use.
pub fn format_ns(ns: u64) -> String {
    format_ns_as(ns, NsStyle::Exact)
}

/// Nanoseconds for people, in `style`.
pub fn format_ns_as(ns: u64, style: NsStyle) -> String {
    match style {
        NsStyle::Exact => exact(ns),
        NsStyle::Fixed => match ns {
            0..=9_999 => format!("{ns}ns"),
            10_000..=999_999 => format!("{:.2}µs", ns as f64 / 1e3),
            1_000_000..=999_999_999 => format!("{:.3}ms", ns as f64 / 1e6),
            _ => format!("{:.3}s", ns as f64 / 1e9),
        },
        NsStyle::Rounded => {
            let v = ns as f64;
            if ns >= crate::NS_PER_SEC {
                format!("{} s", figure(v / 1e9))
            } else if ns >= 1_000_000 {
                format!("{} ms", figure(v / 1e6))
            } else if ns >= 1_000 {
                format!("{} µs", figure(v / 1e3))
            } else {
                format!("{ns} ns")
            }
        }
    }
}

fn exact(ns: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(crate::NS_PER_SEC, "s"), (1_000_000, "ms"), (1_000, "µs")];
    for (scale, unit) in UNITS {
        let step = scale / 1_000;
        if ns >= scale && ns.is_multiple_of(step) {
            let whole = ns / scale;
            let thousandths = (ns % scale) / step;
            if thousandths == 0 {
                return format!("{whole} {unit}");
            }
            let digits = format!("{thousandths:03}");
            return format!("{whole}.{} {unit}", digits.trim_end_matches('0'));
        }
    }
    format!("{ns} ns")
}

/// A figure rounded for reading, trailing zeros dropped: `1.05`, `250`, `0.0012`, `3e-5`
/// (the number of [`NsStyle::Rounded`], and tame report's axis ticks).
pub fn figure(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let a = v.abs();
    let s = if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else if a >= 0.001 {
        format!("{v:.4}")
    } else {
        return format!("{v:.0e}");
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn each_style_spells_as_its_users_did() {
        assert_eq!(format_ns_as(850, NsStyle::Fixed), "850ns");
        assert_eq!(format_ns_as(15_234, NsStyle::Fixed), "15.23µs");
        assert_eq!(format_ns_as(3_401_000, NsStyle::Fixed), "3.401ms");
        assert_eq!(format_ns_as(1_200_000_000, NsStyle::Fixed), "1.200s");
        assert_eq!(format_ns_as(1_050_000, NsStyle::Rounded), "1.05 ms");
        assert_eq!(format_ns_as(250_000, NsStyle::Rounded), "250 µs");
        assert_eq!(format_ns_as(2_000_000_000, NsStyle::Rounded), "2 s");
        assert_eq!(format_ns_as(999, NsStyle::Rounded), "999 ns");
        assert_eq!(format_ns_as(1_500_000_000, NsStyle::Exact), "1.5 s");
        assert_eq!(figure(0.0), "0");
        assert_eq!(figure(0.00001), "1e-5");
    }

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
        assert_eq!(
            parse_ns("100").unwrap_err(),
            "duration \"100\" has no unit — write it like 100ms (units: ns, us, ms, s, m)"
        );
        // Zero is zero in any unit: the option's own range check speaks for it.
        assert_eq!(parse_ns("0"), Ok(0));
        assert_eq!(parse_ns("0.0"), Ok(0));
        assert!(parse_ns(".").is_err());
        assert_eq!(
            parse_ns("-5ms").unwrap_err(),
            "duration \"-5ms\" is negative — time runs forward: write it like 5ms"
        );
        assert!(parse_ns("3h").unwrap_err().contains("unknown unit"));
        assert!(parse_ns("ms").is_err());
        assert!(parse_ns("1.2.3ms").is_err());
        assert!(parse_ns("99999999999999999999s").is_err());
    }

    #[test]
    fn formats_in_the_largest_exact_unit() {
        assert_eq!(format_ns(0), "0 ns");
        assert_eq!(format_ns(850), "850 ns");
        assert_eq!(format_ns(250_000), "250 µs");
        assert_eq!(format_ns(1_234_567), "1234.567 µs");
        assert_eq!(format_ns(2_000_000), "2 ms");
        assert_eq!(format_ns(8_500_000), "8.5 ms");
        assert_eq!(format_ns(20_000_000), "20 ms");
        assert_eq!(format_ns(1_000_000_000), "1 s");
        assert_eq!(format_ns(1_500_000_000), "1.5 s");
        assert_eq!(format_ns(1_000_500_000), "1000.5 ms");
    }

    proptest! {
        #[test]
        fn formatted_durations_parse_back(ns in any::<u64>()) {
            prop_assert_eq!(parse_ns(&format_ns(ns)), Ok(ns));
        }

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
