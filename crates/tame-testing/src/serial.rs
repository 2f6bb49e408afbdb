//! One test binary per crate (`tests/it/main.rs`, its former files as modules) links
//! once instead of once per file, but its modules now share a process and run at the
//! same time. Most modules do not care; a module whose tests change the machine (apply
//! a partition, move IRQs, start tracing, fill SCHED_DEADLINE bandwidth) or need it
//! quiet once ran in a binary of its own, one file after another. [`module`] gives such
//! tests that again: tests of one module run together (as within a file before), tests
//! of two such modules never overlap. Modules that take no guard run beside anything.
//!
//! ```
//! # fn main() {
//! let _machine = tame_testing::serial::module(module_path!());
//! # }
//! ```

use std::sync::{Condvar, Mutex, MutexGuard};

/// Which module holds the machine, and how many of its tests are running.
struct Holder {
    module: Option<&'static str>,
    running: usize,
}

static HOLDER: Mutex<Holder> = Mutex::new(Holder {
    module: None,
    running: 0,
});
static RELEASED: Condvar = Condvar::new();

fn holder() -> MutexGuard<'static, Holder> {
    // A test that panicked while holding the lock leaves consistent counts (the guard's
    // drop runs on unwinding): the poison says nothing about them.
    HOLDER.lock().unwrap_or_else(|p| p.into_inner())
}

/// Held for a test's duration: while any test of `module` holds one, tests of other
/// modules wait in [`module`].
#[must_use = "the machine is held only while the guard lives"]
pub struct ModuleGuard {
    module: &'static str,
}

/// Waits until no test of another module holds the machine, then holds it for `module`
/// (pass `module_path!()`). Tests of the same module share it.
pub fn module(module: &'static str) -> ModuleGuard {
    let mut h = holder();
    while h.module.is_some_and(|m| m != module) {
        h = RELEASED.wait(h).unwrap_or_else(|p| p.into_inner());
    }
    h.module = Some(module);
    h.running += 1;
    ModuleGuard { module }
}

impl Drop for ModuleGuard {
    fn drop(&mut self) {
        let mut h = holder();
        debug_assert_eq!(h.module, Some(self.module));
        h.running -= 1;
        if h.running == 0 {
            h.module = None;
            RELEASED.notify_all();
        }
    }
}

/// The name libtest gives test `name` of the module `module_path` (`module_path!()` in a
/// test binary is `CRATE::MODULE…`, a test's name is `MODULE…::NAME`): what
/// [`crate::child::child_test`] needs to run it alone.
pub fn test_name(module_path: &str, name: &str) -> String {
    match module_path.split_once("::") {
        Some((_, inner)) => format!("{inner}::{name}"),
        None => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn tests_of_two_modules_never_overlap_and_of_one_module_do() {
        let inside = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
        let overlap_a = Arc::new(AtomicUsize::new(0));
        let crossed = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..6)
            .map(|i| {
                let (inside, overlap_a, crossed) =
                    (inside.clone(), overlap_a.clone(), crossed.clone());
                std::thread::spawn(move || {
                    let (me, other) = (i % 2, 1 - i % 2);
                    let _g = module(["serial::a", "serial::b"][me]);
                    let was = inside[me].fetch_add(1, Ordering::SeqCst);
                    if me == 0 && was > 0 {
                        overlap_a.fetch_add(1, Ordering::SeqCst);
                    }
                    std::thread::sleep(Duration::from_millis(30));
                    if inside[other].load(Ordering::SeqCst) > 0 {
                        crossed.fetch_add(1, Ordering::SeqCst);
                    }
                    inside[me].fetch_sub(1, Ordering::SeqCst);
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(crossed.load(Ordering::SeqCst), 0, "two modules overlapped");
        assert!(
            overlap_a.load(Ordering::SeqCst) > 0,
            "tests of one module never ran together"
        );
    }

    #[test]
    fn a_test_name_drops_the_binary_s_crate() {
        assert_eq!(test_name("it::kill", "child"), "kill::child");
        assert_eq!(test_name("it::a::b", "c"), "a::b::c");
        assert_eq!(test_name("kill", "child"), "child");
    }
}
