//! Kubernetes resource quantities (`1124Mi`, `1Gi`, `100M`, `1073741824`) in bytes, for
//! checking that memory reservations add up.

/// Bytes of a quantity; `None` for a percentage, a fraction of a byte or anything else.
pub fn bytes(text: &str) -> Option<u128> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, suffix) = t.split_at(split);
    let multiplier: u128 = match suffix {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        "Ei" => 1 << 60,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        "E" => 1_000_000_000_000_000_000,
        _ => return None,
    };
    // Decimal digits exactly: `1.5Gi` is 3 × 2^29 bytes, no float rounding.
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && frac.is_empty() {
        return None;
    }
    let scale = 10u128.checked_pow(u32::try_from(frac.len()).ok()?)?;
    let digits: u128 = format!("{whole}{frac}").parse().ok()?;
    let scaled = digits.checked_mul(multiplier)?;
    (scaled % scale == 0).then(|| scaled / scale)
}

#[cfg(test)]
mod tests {
    use super::bytes;

    #[test]
    fn binary_and_decimal_suffixes() {
        assert_eq!(bytes("1124Mi"), Some(1124 << 20));
        assert_eq!(bytes("1Gi"), Some(1 << 30));
        assert_eq!(bytes("100M"), Some(100_000_000));
        assert_eq!(bytes("1.5Gi"), Some(3 << 29));
        assert_eq!(bytes("4096"), Some(4096));
        assert_eq!(bytes("10%"), None);
        assert_eq!(bytes("Mi"), None);
        assert_eq!(bytes("0.5"), None);
    }
}
