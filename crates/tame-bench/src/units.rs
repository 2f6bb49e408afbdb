//! Durations as people type them: `200us`, `1ms`, `10s`, `2m` (`tame_rt::duration`).

use crate::error::{invalid, Result};

/// Parse a duration with a unit (ns, us/µs, ms, s, m) into nanoseconds.
pub fn parse_duration_ns(text: &str) -> Result<u64> {
    tame_rt::duration::parse_ns(text).map_err(invalid)
}
