//! Surviving a named segment that a peer shrinks under our mapping.
//!
//! A named segment is a tmpfs file that cannot be sealed: anyone who may write it can
//! `ftruncate` it, the kernel then removes the pages beyond the new end from every
//! mapping, and the next access to them raises SIGBUS, which kills the process. No
//! check before an access can prevent that (the shrink can happen between the check
//! and the access), so the fault itself is handled: named mappings are registered
//! here, and a SIGBUS handler that finds the faulting address in one of them replaces
//! the whole mapping, in place, by private zero-filled memory of the same size and
//! protection (`MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS`) and returns, so the faulting
//! instruction runs again on that memory. The channel is then disconnected on this
//! side (what it reads is zeros or its own writes: a wrong value, never a crash) and
//! [`Region::lost`] says so. Faults outside registered mappings go to the handler that
//! was installed before ours (Rust's stack-overflow handler, an application's, or the
//! default action), so other faults still behave as they did.
//!
//! Anonymous (memfd) segments are sealed against shrinking instead and are not
//! registered. Everything the handler touches is a static table of atomics and two
//! system calls (mmap, sigaction): async-signal-safe, no allocation, no lock.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::OnceLock;

use nix::errno::Errno;

/// How many named mappings a process can hold at once.
pub const MAX_REGIONS: usize = 1024;

const FREE: u8 = 0;
/// Being filled in by `register`; not yet matched by the handler.
const SETUP: u8 = 1;
const ACTIVE: u8 = 2;
/// The handler of one faulting thread is replacing it; other faulting threads retry.
const REPLACING: u8 = 3;
/// Replaced by private zero-filled memory.
const LOST: u8 = 4;

struct Slot {
    state: AtomicU8,
    start: AtomicUsize,
    len: AtomicUsize,
    writable: AtomicBool,
}

#[allow(clippy::declare_interior_mutable_const)] // a template for the array below
const EMPTY: Slot = Slot {
    state: AtomicU8::new(FREE),
    start: AtomicUsize::new(0),
    len: AtomicUsize::new(0),
    writable: AtomicBool::new(false),
};

static SLOTS: [Slot; MAX_REGIONS] = [EMPTY; MAX_REGIONS];

/// The SIGBUS disposition found when ours was installed (to chain to).
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();
/// Whether our handler is installed (or why it could not be).
static INSTALLED: OnceLock<Result<(), Errno>> = OnceLock::new();

/// A registered mapping; unregister it (drop) before unmapping.
#[derive(Debug)]
pub(crate) struct Region {
    index: usize,
}

/// Why a mapping could not be guarded.
#[derive(Debug)]
pub(crate) enum GuardError {
    /// sigaction failed.
    Install(Errno),
    /// All [`MAX_REGIONS`] slots are in use.
    Full,
}

impl Region {
    /// Registers `[start, start + len)` (a mapping that nothing has accessed yet).
    pub(crate) fn register(
        start: *mut u8,
        len: usize,
        writable: bool,
    ) -> Result<Region, GuardError> {
        install().map_err(GuardError::Install)?;
        for (index, slot) in SLOTS.iter().enumerate() {
            if slot
                .state
                .compare_exchange(FREE, SETUP, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                slot.start.store(start as usize, Ordering::Relaxed);
                slot.len.store(len, Ordering::Relaxed);
                slot.writable.store(writable, Ordering::Relaxed);
                slot.state.store(ACTIVE, Ordering::Release);
                return Ok(Region { index });
            }
        }
        Err(GuardError::Full)
    }

    /// True once a SIGBUS replaced the mapping by private memory: the segment was
    /// shrunk by someone, and this side no longer shares anything with its peers.
    pub(crate) fn lost(&self) -> bool {
        SLOTS[self.index].state.load(Ordering::Acquire) == LOST
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        SLOTS[self.index].state.store(FREE, Ordering::Release);
    }
}

fn install() -> Result<(), Errno> {
    *INSTALLED.get_or_init(|| {
        // SAFETY: an all-zero sigaction is a valid value (SIG_DFL, empty mask, no
        // flags) that sigaction(2) overwrites.
        let mut previous: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: reads the current disposition into a local; a NULL new action
        // changes nothing.
        if unsafe { libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut previous) } != 0 {
            return Err(Errno::last());
        }
        // Recorded before ours is installed, so the handler always finds it.
        let _ = PREVIOUS.set(previous);
        // SAFETY: as above, a valid starting value that is filled in below.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_sigbus as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        // SAFETY: sigemptyset initialises the mask of our local action; sigaction
        // installs it (on_sigbus has the SA_SIGINFO signature) and reads nothing else.
        let installed = unsafe {
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut())
        };
        if installed != 0 {
            return Err(Errno::last());
        }
        Ok(())
    })
}

extern "C" fn on_sigbus(signal: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers; si_addr is
    // the faulting address for SIGBUS (meaningless, and never inside a registered
    // mapping by more than chance, when the signal was sent with kill).
    let address = unsafe { (*info).si_addr() } as usize;
    // A shrunk file (or a full tmpfs) faults with BUS_ADRERR; anything else (a signal
    // sent with kill, a hardware memory error) is not ours to handle.
    // SAFETY: as above, a valid siginfo.
    let beyond_end = unsafe { (*info).si_code } == libc::BUS_ADRERR;
    if beyond_end {
        for slot in &SLOTS {
            let state = slot.state.load(Ordering::Acquire);
            if state < ACTIVE {
                continue;
            }
            let start = slot.start.load(Ordering::Relaxed);
            let len = slot.len.load(Ordering::Relaxed);
            if address < start || address - start >= len {
                continue;
            }
            match state {
                ACTIVE if replace(slot, start, len) => return,
                // Another thread is replacing it, or has just done so (our fault hit the
                // old mapping): run the access again, on the new memory.
                REPLACING | LOST => return,
                // The replacement failed.
                _ => break,
            }
        }
    }
    // SAFETY: the arguments are exactly the ones the kernel gave this handler.
    unsafe { chain(signal, info, context) };
}

/// Replaces a registered mapping by private zero-filled memory of the same size and
/// protection; false if another thread got there first or mmap failed.
fn replace(slot: &Slot, start: usize, len: usize) -> bool {
    if slot
        .state
        .compare_exchange(ACTIVE, REPLACING, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        // Someone else is replacing it (or just did): the retried access will tell.
        return true;
    }
    let prot = if slot.writable.load(Ordering::Relaxed) {
        libc::PROT_READ | libc::PROT_WRITE
    } else {
        libc::PROT_READ
    };
    // SAFETY: [start, start + len) is a mapping of ours that a thread of this process
    // was accessing when it faulted, so it is still mapped (a Mapping is unregistered
    // before it is unmapped, and nothing unmaps it while it is being accessed);
    // MAP_FIXED replaces exactly that range and nothing else.
    let mapped = unsafe {
        libc::mmap(
            start as *mut c_void,
            len,
            prot,
            libc::MAP_FIXED | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if mapped == libc::MAP_FAILED {
        slot.state.store(ACTIVE, Ordering::Release);
        return false;
    }
    slot.state.store(LOST, Ordering::Release);
    true
}

/// Hands a SIGBUS that is not ours to the disposition installed before ours.
///
/// # Safety
/// Called only from `on_sigbus`, with the arguments it received.
unsafe fn chain(signal: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    let previous = PREVIOUS.get().map_or(libc::SIG_DFL, |p| p.sa_sigaction);
    if previous == libc::SIG_DFL || previous == libc::SIG_IGN {
        // Restore the default action: a fault happens again when this handler
        // returns and kills the process as it would have without us; a signal sent
        // with kill is raised again (it is delivered once this handler returns).
        // SAFETY: signal(2) and raise(3) are async-signal-safe and touch no memory
        // of ours.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            if (*info).si_code <= 0 {
                libc::raise(signal);
            }
        }
        return;
    }
    let flags = PREVIOUS.get().map_or(0, |p| p.sa_flags);
    if flags & libc::SA_SIGINFO != 0 {
        // SAFETY: with SA_SIGINFO the previous disposition is a three-argument
        // handler, installed by whoever set it; it gets the kernel's arguments.
        unsafe {
            let handler: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) =
                std::mem::transmute(previous);
            handler(signal, info, context);
        }
    } else {
        // SAFETY: without SA_SIGINFO the previous disposition is a one-argument
        // handler.
        unsafe {
            let handler: extern "C" fn(c_int) = std::mem::transmute(previous);
            handler(signal);
        }
    }
}
