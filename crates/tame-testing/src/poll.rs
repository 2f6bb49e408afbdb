//! Waiting in a test for something another process or the kernel does.

use std::time::{Duration, Instant};

/// Whether `done` holds within `limit`, asking every 5 ms (and once more at the end,
/// so a slow machine's last moment counts).
pub fn until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    done()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn says_whether_it_came_in_time() {
        let mut calls = 0;
        assert!(until(Duration::from_secs(5), || {
            calls += 1;
            calls == 3
        }));
        assert_eq!(calls, 3);
        let start = Instant::now();
        assert!(!until(Duration::from_millis(30), || false));
        assert!(start.elapsed() >= Duration::from_millis(30));
    }
}
