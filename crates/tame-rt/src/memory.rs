//! Locking and prefaulting memory so a measuring thread takes no page faults.

use std::hint::black_box;

/// Lock all current and future pages of the process (mlockall).
pub fn lock_all() -> std::io::Result<()> {
    // SAFETY: mlockall takes flags only and touches no memory of ours.
    if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Undo `lock_all`.
pub fn unlock_all() {
    // SAFETY: takes no arguments and touches no memory of ours.
    unsafe { libc::munlockall() };
}

/// How much stack `prefault_stack` touches; measuring threads get at least
/// twice this as their stack size.
pub const PREFAULT_STACK_BYTES: usize = 256 * 1024;

/// Touch the next `PREFAULT_STACK_BYTES` of the calling thread's stack, page by
/// page, so that (with memory locked) later calls find it mapped.
#[inline(never)]
pub fn prefault_stack() {
    let mut area = [0u8; PREFAULT_STACK_BYTES];
    for i in (0..PREFAULT_STACK_BYTES).step_by(4096) {
        // SAFETY: i < PREFAULT_STACK_BYTES, so the byte written lies inside `area`;
        // volatile keeps the otherwise dead store.
        unsafe { std::ptr::write_volatile(area.as_mut_ptr().add(i), 1) };
    }
    black_box(&area);
}

/// Holds /dev/cpu_dma_latency open with a target latency: the kernel keeps idle
/// states with a longer exit latency off for as long as the file is open.
pub struct DmaLatencyGuard {
    _file: std::fs::File,
}

impl DmaLatencyGuard {
    pub fn open(max_latency_us: u32) -> std::io::Result<Self> {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/cpu_dma_latency")?;
        file.write_all(&(max_latency_us as i32).to_ne_bytes())?;
        Ok(Self { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefaulting_a_deep_stack_does_not_crash() {
        std::thread::Builder::new()
            .stack_size(2 * PREFAULT_STACK_BYTES)
            .spawn(prefault_stack)
            .unwrap()
            .join()
            .unwrap();
    }
}
