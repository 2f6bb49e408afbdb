//! Counted nouns for messages: `1 thread`, `2 threads`, `CPU 3 is` / `CPUs 3-5 are` — one
//! rule instead of `thread(s)` spelled at every message.

/// `one` for a count of 1, `many` otherwise: `plural::word(n, "fires", "fire")`.
pub fn word<'a>(n: u64, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}

/// The count with its noun: `1 period`, `0 periods`, `12 figures`.
pub fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", word(n, one, many))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_is_singular_and_everything_else_plural() {
        assert_eq!(count(1, "period", "periods"), "1 period");
        assert_eq!(count(0, "period", "periods"), "0 periods");
        assert_eq!(count(2, "thread", "threads"), "2 threads");
        assert_eq!(word(1, "fires", "fire"), "fires");
        assert_eq!(word(3, "fires", "fire"), "fire");
    }
}
