//! Civil UTC time from seconds since the Unix epoch (proleptic Gregorian, civil-from-days):
//! the one conversion behind the journal lock's `since` and `tame guard`'s RFC 3339 stamps.

/// (year, month, day, hour, minute, second) of `secs` since the epoch, in UTC.
pub fn civil(secs: u64) -> (i64, i64, i64, u64, u64, u64) {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day, rem / 3600, rem % 3600 / 60, rem % 60)
}

/// `2026-11-29T11:09:00.123Z` for `unix_ns` nanoseconds since the epoch (RFC 3339, UTC,
/// milliseconds).
pub fn rfc3339(unix_ns: u64) -> String {
    let (y, mo, d, h, mi, s) = civil(unix_ns / 1_000_000_000);
    let ms = unix_ns % 1_000_000_000 / 1_000_000;
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{ms:03}Z")
}

/// Nanoseconds since the Unix epoch now (0 before it).
pub fn now_unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_of_known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        // 2024-02-29 12:34:56.789 UTC (a leap day).
        assert_eq!(
            rfc3339(1_709_210_096_789_000_000),
            "2024-02-29T12:34:56.789Z"
        );
    }
}
