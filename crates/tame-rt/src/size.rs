//! Sizes as people type them (`64M`, `512K`, `16KiB`, `1 GiB`, `4096`), read into bytes:
//! the one size parser behind every command-line option that takes one (`tame run
//! --prefault`, `tame bench mem --sizes`). K, M and G are powers of 1024.

/// Bytes of `text`: a whole number, optionally followed by a unit — B, K/KiB/KB, M/MiB/MB
/// or G/GiB/GB, in any case, with or without a space. `None` when it is not such a size or
/// does not fit in 64 bits; the caller says what it wanted.
pub fn parse_bytes(text: &str) -> Option<u64> {
    let t = text.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(digits);
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" | "kb" => 1 << 10,
        "m" | "mib" | "mb" => 1 << 20,
        "g" | "gib" | "gb" => 1 << 30,
        _ => return None,
    };
    number.parse::<u64>().ok()?.checked_mul(mult)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_in_every_spelling_tame_took() {
        assert_eq!(parse_bytes("512K"), Some(512 << 10));
        assert_eq!(parse_bytes("64m"), Some(64 << 20));
        assert_eq!(parse_bytes("1G"), Some(1 << 30));
        assert_eq!(parse_bytes("16KiB"), Some(16 << 10));
        assert_eq!(parse_bytes(" 2 MiB "), Some(2 << 20));
        assert_eq!(parse_bytes("4096"), Some(4096));
        assert_eq!(parse_bytes("4096b"), Some(4096));
        assert_eq!(parse_bytes("1.5M"), None);
        assert_eq!(parse_bytes("M"), None);
        assert_eq!(parse_bytes("-1K"), None);
        assert_eq!(parse_bytes("10T"), None);
        assert_eq!(parse_bytes("99999999999999999999G"), None);
        assert_eq!(parse_bytes("18014398509481984K"), None);
    }
}
