//! /proc/loadavg: how busy the machine was while something was measured.

use crate::error::ParseError;
use crate::{HostError, Root};

const LOADAVG: &str = "/proc/loadavg";

/// The load averages over 1, 5 and 15 minutes (runnable tasks, a ratio), and the line itself.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadAvg {
    pub one: f64,
    pub five: f64,
    pub fifteen: f64,
    /// The whole line, trimmed (`0.52 0.58 0.59 1/467 12345`).
    pub line: String,
}

pub fn parse_loadavg(text: &str) -> Result<LoadAvg, ParseError> {
    let line = text.trim();
    let mut it = line.split_whitespace().map(|v| v.parse::<f64>());
    let mut next = || {
        it.next().and_then(Result::ok).ok_or_else(|| {
            ParseError::new(
                1,
                format!("{line:?} does not start with three load averages"),
            )
        })
    };
    Ok(LoadAvg {
        one: next()?,
        five: next()?,
        fifteen: next()?,
        line: line.to_string(),
    })
}

impl Root {
    pub fn loadavg(&self) -> Result<LoadAvg, HostError> {
        parse_loadavg(&self.read(LOADAVG)?).map_err(|e| e.at(LOADAVG))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_averages() {
        let l = parse_loadavg("0.52 0.58 1.50 1/467 12345\n").unwrap();
        assert_eq!((l.one, l.fifteen), (0.52, 1.5));
        assert_eq!(l.line, "0.52 0.58 1.50 1/467 12345");
        assert!(parse_loadavg("x").is_err());
    }
}
