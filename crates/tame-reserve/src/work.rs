//! The work kernel of the proof: a small dense matrix multiply (standing in for linpack),
//! repeated forever, its progress counted in a shared-memory counter that a harness reads
//! by wall clock — never by rusage, which is what the scheduler itself reports.

use std::fs::OpenOptions;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Matrix order: 3 × 48² doubles = 54 KiB, beyond L1, within L2; one round ≈ 0.1 ms here.
pub const ORDER: usize = 48;

/// A u64 counter in a shared file mapping.
pub struct Counter {
    ptr: *mut AtomicU64,
}

// SAFETY: the mapping lives as long as the Counter and is only used through atomics.
unsafe impl Send for Counter {}
// SAFETY: shared use only ever goes through `&AtomicU64` into the mapping, never `&mut`.
unsafe impl Sync for Counter {}

impl Counter {
    /// Create (or truncate) the counter file and map it.
    pub fn create(path: &Path) -> io::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        file.set_len(4096)?;
        Self::map(&file)
    }

    pub fn open(path: &Path) -> io::Result<Self> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        Self::map(&file)
    }

    fn map(file: &std::fs::File) -> io::Result<Self> {
        // SAFETY: mapping 4 KiB of a file we hold open; the mapping outlives the fd.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Self { ptr: ptr.cast() })
    }

    pub fn get(&self) -> u64 {
        // SAFETY: ptr points into a live, aligned mapping.
        unsafe { (*self.ptr).load(Ordering::Relaxed) }
    }

    fn bump(&self) {
        // SAFETY: ptr points into a live, aligned mapping (as in get), used only atomically.
        unsafe { (*self.ptr).fetch_add(1, Ordering::Relaxed) };
    }

    /// Slot `i` (1 … FRAME_SLOTS) of the mapping after the counter: frame completion times.
    fn slot(&self, i: usize) -> &AtomicU64 {
        assert!((1..=FRAME_SLOTS).contains(&i));
        // SAFETY: the mapping is 4096 bytes = 512 aligned u64 slots; i is within it.
        unsafe { &*self.ptr.add(i) }
    }

    /// Completion times (monotonic ns) of the last frames written by [`run_frames`], oldest first.
    pub fn frame_times(&self) -> Vec<u64> {
        let count = self.get() as usize;
        let first = count.saturating_sub(FRAME_SLOTS);
        (first..count)
            .map(|n| self.slot(n % FRAME_SLOTS + 1).load(Ordering::Acquire))
            .collect()
    }
}

impl Drop for Counter {
    fn drop(&mut self) {
        // SAFETY: unmapping what map() mapped.
        unsafe { libc::munmap(self.ptr.cast(), 4096) };
    }
}

/// One round of the kernel: c = a × b (+ feedback so the compiler cannot drop it).
pub fn round(a: &mut [f64], b: &[f64], c: &mut [f64]) {
    let n = ORDER;
    for i in 0..n {
        for j in 0..n {
            let mut sum = 0.0;
            for k in 0..n {
                sum += a[i * n + k] * b[k * n + j];
            }
            c[i * n + j] = sum;
        }
    }
    // Keep values bounded and dependent on the result.
    a[0] = c[n * n - 1] * 1e-9 + 1.0;
}

/// Frame completion times kept in the counter's mapping (a ring).
pub const FRAME_SLOTS: usize = 500;

/// The periodic client: every `frame_ns` a frame of `rounds` kernel rounds is due; its
/// completion time is recorded (the counter counts frames). A late frame starts the next one
/// at once; an early one sleeps until the next frame is due (absolute time).
pub fn run_frames(counter: &Counter, rounds: u64, frame_ns: u64) -> ! {
    let n = ORDER * ORDER;
    let mut a: Vec<f64> = (0..n).map(|i| 1.0 + (i % 7) as f64 * 0.01).collect();
    let b: Vec<f64> = (0..n).map(|i| 1.0 - (i % 5) as f64 * 0.01).collect();
    let mut c = vec![0.0; n];
    let mut due = tame_rt::clock::monotonic_ns();
    loop {
        for _ in 0..rounds {
            round(&mut a, &b, &mut c);
        }
        std::hint::black_box(&c);
        let done = tame_rt::clock::monotonic_ns();
        let k = counter.get() as usize;
        counter
            .slot(k % FRAME_SLOTS + 1)
            .store(done, Ordering::Release);
        counter.bump();
        due += frame_ns;
        if done < due {
            tame_rt::clock::sleep_until(due);
        } else {
            due = done;
        }
    }
}

/// Run rounds forever, counting each.
pub fn run_forever(counter: &Counter) -> ! {
    let n = ORDER * ORDER;
    let mut a: Vec<f64> = (0..n).map(|i| 1.0 + (i % 7) as f64 * 0.01).collect();
    let b: Vec<f64> = (0..n).map(|i| 1.0 - (i % 5) as f64 * 0.01).collect();
    let mut c = vec![0.0; n];
    loop {
        round(&mut a, &b, &mut c);
        std::hint::black_box(&c);
        counter.bump();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_is_shared_between_mappings() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c");
        let a = Counter::create(&path).unwrap();
        let b = Counter::open(&path).unwrap();
        a.bump();
        a.bump();
        assert_eq!(b.get(), 2);
    }

    #[test]
    fn round_computes_a_product() {
        let n = ORDER * ORDER;
        let mut a = vec![0.0; n];
        let mut b = vec![0.0; n];
        for i in 0..ORDER {
            a[i * ORDER + i] = 2.0;
            b[i * ORDER + i] = 3.0;
        }
        let mut c = vec![0.0; n];
        round(&mut a, &b, &mut c);
        assert_eq!(c[0], 6.0);
        assert_eq!(c[1], 0.0);
    }
}
