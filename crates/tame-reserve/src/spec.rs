//! A reservation request and its validation: share, period, CPU, backend.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use tame_rt::duration::format_ns;

use crate::error::{invalid, Result};

/// Shares are integer parts per million (25 % = 250 000): exact, no float drift.
pub const PPM: u64 = 1_000_000;
/// Shorter periods cost more in switches than they give (and HZ=250 ticks are 4 ms).
pub const MIN_PERIOD_NS: u64 = 1_000_000;
pub const MAX_PERIOD_NS: u64 = 10_000_000_000;
/// Default admission cap per CPU for the server backend: 90 %.
pub const DEFAULT_CAP_PPM: u64 = 900_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Server,
    Deadline,
    Cgroup,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Server => "server",
            Backend::Deadline => "deadline",
            Backend::Cgroup => "cgroup",
        })
    }
}

impl FromStr for Backend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "server" => Ok(Backend::Server),
            "deadline" | "dl" => Ok(Backend::Deadline),
            "cgroup" => Ok(Backend::Cgroup),
            _ => Err(format!(
                "unknown backend {s:?} — use server (tame serve), deadline (SCHED_DEADLINE) or cgroup (a bandwidth cap)"
            )),
        }
    }
}

/// Parse `25%` or `25.5 %` into parts per million. The `%` is required: a bare `25` or
/// `0.25` could be a fraction or a percentage, and a share read the other way is off a
/// hundredfold.
pub fn parse_share_ppm(text: &str) -> Result<u64> {
    let t = text.trim();
    let bad = || {
        invalid(format!(
            "share {text:?} is not a percentage — write it like 25%"
        ))
    };
    if t.starts_with('-') {
        return Err(invalid(format!(
            "share {text:?} is negative — a share must be above 0, e.g. 25%"
        )));
    }
    let Some(number) = t.strip_suffix('%').map(str::trim) else {
        return Err(no_percent_sign(text, t).unwrap_or_else(bad));
    };
    parse_percent_ppm(number).ok_or_else(bad)
}

/// A bare number given as a share: how to write it, both ways it could have been meant.
fn no_percent_sign(text: &str, number: &str) -> Option<crate::error::ReserveError> {
    let ppm = parse_percent_ppm(number)?;
    // Below 1 it may have been meant as a fraction of the CPU.
    let fraction = if ppm > 0 && ppm < 10_000 {
        format!(
            " (or {} for the fraction {number})",
            percent(ppm * 100).replace(' ', "")
        )
    } else {
        String::new()
    };
    Some(invalid(format!(
        "share {text:?} has no % — write it as {number}%{fraction}"
    )))
}

/// `25` or `12.5` (percent, digits and one point only) in parts per million; `None` when
/// it is not such a number or too large.
fn parse_percent_ppm(number: &str) -> Option<u64> {
    const SCALE: u64 = 10_000;
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    if (whole.is_empty() && frac.is_empty())
        || !whole.chars().all(|c| c.is_ascii_digit())
        || !frac.chars().all(|c| c.is_ascii_digit())
    {
        return None;
    }
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    // Keep the fractional digits a part per million can hold, exact in integers.
    let mut frac_value = 0u64;
    let mut unit = SCALE;
    for c in frac.chars().take(6) {
        unit /= 10;
        frac_value += u64::from(c as u8 - b'0') * unit;
    }
    whole.checked_mul(SCALE)?.checked_add(frac_value)
}

/// Render parts per million as a percentage (`25 %`, `12.5 %`); any u64, a hostile one too.
pub fn percent(ppm: u64) -> String {
    // Rounded to hundredths without adding first: ppm may be u64::MAX.
    let hundredths = ppm / 100 + u64::from(ppm % 100 >= 50);
    let (whole, frac) = (hundredths / 100, hundredths % 100);
    match frac {
        0 => format!("{whole} %"),
        f if f % 10 == 0 => format!("{whole}.{} %", f / 10),
        f => format!("{whole}.{f:02} %"),
    }
}

/// What the user asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    pub share_ppm: u64,
    pub period_ns: u64,
    /// None: any CPU (the deadline and cgroup backends); the server backend needs one.
    pub cpu: Option<u32>,
    pub backend: Backend,
}

impl Request {
    /// CPU time per period the share stands for.
    pub fn runtime_ns(&self) -> u64 {
        runtime_ns(self.share_ppm, self.period_ns)
    }

    /// Check everything that can be checked without touching the system.
    /// `cap_ppm` is the most one reservation may ask; `online` the online CPUs.
    pub fn validate(&self, cap_ppm: u64, online: &[u32]) -> Result<()> {
        check_numbers(self.share_ppm, self.period_ns)?;
        if self.share_ppm > cap_ppm {
            return Err(invalid(format!(
                "share {} is above the admission cap of {} — the rest of the system must keep some CPU; ask for at most {}",
                percent(self.share_ppm),
                percent(cap_ppm),
                percent(cap_ppm)
            )));
        }
        if self.runtime_ns() < 100_000 {
            return Err(invalid(format!(
                "{} of {} is a slice of {}, below 100 µs — the kernel cannot hand out slices that short reliably; raise the share or the period",
                percent(self.share_ppm),
                format_ns(self.period_ns),
                format_ns(self.runtime_ns())
            )));
        }
        if let Some(cpu) = self.cpu {
            if !online.contains(&cpu) {
                return Err(invalid(format!(
                    "CPU {cpu} is not online (online: {}) — choose an online CPU",
                    join(online)
                )));
            }
        }
        Ok(())
    }
}

/// What every share and period must be whatever the cap and the CPU: checked first, before
/// any arithmetic on a number a client or a command line gave (the server checks a
/// request with it before it takes its lock).
pub fn check_numbers(share_ppm: u64, period_ns: u64) -> Result<()> {
    if share_ppm == 0 {
        return Err(invalid(
            "share must be above 0 % — give the CPU share to guarantee, e.g. --share 25%",
        ));
    }
    if share_ppm > PPM {
        return Err(invalid(format!(
            "share {} is above 100 % — a CPU has no more; ask for at most the admission cap ({} by default)",
            percent(share_ppm),
            percent(DEFAULT_CAP_PPM)
        )));
    }
    if !(MIN_PERIOD_NS..=MAX_PERIOD_NS).contains(&period_ns) {
        return Err(invalid(format!(
            "period {} is outside 1 ms … 10 s — shorter periods cost more in switches than they give, longer ones are not a rate; choose e.g. --period 40ms",
            format_ns(period_ns)
        )));
    }
    Ok(())
}

pub fn runtime_ns(share_ppm: u64, period_ns: u64) -> u64 {
    ((u128::from(period_ns) * u128::from(share_ppm)) / u128::from(PPM)) as u64
}

pub(crate) fn join(cpus: &[u32]) -> String {
    cpus.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(share: &str, period_ns: u64, cpu: Option<u32>) -> Request {
        Request {
            share_ppm: parse_share_ppm(share).unwrap(),
            period_ns,
            cpu,
            backend: Backend::Server,
        }
    }

    #[test]
    fn parses_shares_exactly() {
        assert_eq!(parse_share_ppm("25%").unwrap(), 250_000);
        assert_eq!(parse_share_ppm("12.5 %").unwrap(), 125_000);
        assert_eq!(parse_share_ppm("100%").unwrap(), 1_000_000);
        for bad in ["", "%", "x%", "-5%", "1e3%", "25%%", "25", "0.25"] {
            assert!(parse_share_ppm(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn a_share_without_a_percent_sign_is_refused_with_how_to_write_it() {
        // Read as a fraction, `25` was 2500 %; now neither reading is guessed.
        let e = |share: &str| parse_share_ppm(share).unwrap_err().to_string();
        assert_eq!(e("25"), "share \"25\" has no % — write it as 25%");
        assert_eq!(
            e("0.25"),
            "share \"0.25\" has no % — write it as 0.25% (or 25% for the fraction 0.25)"
        );
        assert_eq!(
            e("-5%"),
            "share \"-5%\" is negative — a share must be above 0, e.g. 25%"
        );
        assert_eq!(
            e("lots"),
            "share \"lots\" is not a percentage — write it like 25%"
        );
    }

    #[test]
    fn renders_percentages() {
        assert_eq!(percent(250_000), "25 %");
        assert_eq!(percent(125_000), "12.5 %");
        assert_eq!(percent(149), "0.01 %");
        assert_eq!(percent(150), "0.02 %");
        // A hostile share: no overflow (it panicked in the server, under its lock).
        assert_eq!(percent(u64::MAX), "1844674407370955.16 %");
    }

    #[test]
    fn hostile_numbers_are_refused_before_any_arithmetic() {
        let e = |share, period| check_numbers(share, period).unwrap_err().to_string();
        assert!(e(u64::MAX, 40_000_000).starts_with("share 1844674407370955.16 % is above 100 %"));
        assert!(e(250_000, u64::MAX).starts_with("period 18446744073709551.615 µs is outside"));
        assert!(e(0, 40_000_000).contains("above 0"));
        let big = parse_share_ppm("1844674407370955.1614%").unwrap();
        assert!(req("1%", 40_000_000, Some(1))
            .validate(DEFAULT_CAP_PPM, &[0, 1])
            .is_ok());
        let r = Request {
            share_ppm: big,
            ..req("1%", 40_000_000, Some(1))
        };
        assert!(r
            .validate(DEFAULT_CAP_PPM, &[0, 1])
            .unwrap_err()
            .to_string()
            .contains("above 100 %"));
    }

    #[test]
    fn validates_share_period_and_cpu() {
        let online = [0, 1];
        assert!(req("25%", 40_000_000, Some(1))
            .validate(DEFAULT_CAP_PPM, &online)
            .is_ok());
        let msg = |r: Request| {
            r.validate(DEFAULT_CAP_PPM, &online)
                .unwrap_err()
                .to_string()
        };
        assert!(msg(req("0%", 40_000_000, None)).contains("above 0"));
        assert!(msg(req("95%", 40_000_000, None)).contains("cap of 90 %"));
        assert_eq!(
            msg(req("25%", 999_999, None)),
            "period 999.999 µs is outside 1 ms … 10 s — shorter periods cost more in switches than they give, longer ones are not a rate; choose e.g. --period 40ms"
        );
        assert!(msg(req("25%", 10_000_000_001, None)).contains("10 s"));
        assert!(msg(req("25%", 40_000_000, Some(7))).contains("not online"));
        assert!(
            msg(req("1%", 2_000_000, None))
                .starts_with("1 % of 2 ms is a slice of 20 µs, below 100 µs"),
            "{}",
            msg(req("1%", 2_000_000, None))
        );
    }

    #[test]
    fn backend_names() {
        assert_eq!("DL".parse::<Backend>().unwrap(), Backend::Deadline);
        assert!("cfs".parse::<Backend>().unwrap_err().contains("server"));
    }
}
