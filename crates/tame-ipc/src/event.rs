//! Event counter for simple signalling: any number of signallers increment a 32-bit
//! counter; each listener remembers the value it last saw and learns how many events
//! arrived since (modulo 2^32).
//!
//! [`Signaller::signal`] is one atomic increment — no system call, so a real-time task
//! can use it. A listener on the ordinary side may sleep in [`Listener::wait`] (a
//! futex on the counter); it is woken by [`Signaller::signal_and_wake`], or notices a
//! plain `signal` when its timeout expires.

use std::os::fd::OwnedFd;
use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::layout::{ChannelSpec, Kind};
use crate::segment::{Expect, Segment, SegmentName, DEFAULT_MODE};

/// Offset of the sleeping-listener count from the counter (its own cache line).
const WAITERS_OFFSET: u64 = 64;
/// How often a read-only listener's wait re-checks the counter.
const READ_ONLY_RECHECK: Duration = Duration::from_millis(1);

/// An event segment.
#[derive(Clone, Debug)]
pub struct Event {
    segment: Segment,
}

impl Event {
    pub fn create(name: &str) -> Result<Event> {
        Event::create_with_mode(name, DEFAULT_MODE)
    }

    pub fn create_with_mode(name: &str, mode: u32) -> Result<Event> {
        let name = SegmentName::new(name)?;
        Segment::create(&name, ChannelSpec::event(), mode).map(|segment| Event { segment })
    }

    pub fn open(name: &str) -> Result<Event> {
        let name = SegmentName::new(name)?;
        Segment::open(&name, Expect::Exact(ChannelSpec::event())).map(|segment| Event { segment })
    }

    /// Opens an existing named event counter read-only (mapped `PROT_READ`; read
    /// permission suffices). Listeners work; [`Event::signaller`] is refused.
    pub fn open_read_only(name: &str) -> Result<Event> {
        let name = SegmentName::new(name)?;
        Segment::open_read_only(&name, Expect::Exact(ChannelSpec::event()))
            .map(|segment| Event { segment })
    }

    pub fn open_or_create(name: &str) -> Result<Event> {
        let name = SegmentName::new(name)?;
        Segment::open_or_create(&name, ChannelSpec::event(), DEFAULT_MODE)
            .map(|segment| Event { segment })
    }

    pub fn create_anonymous() -> Result<Event> {
        Segment::create_anonymous(ChannelSpec::event()).map(|segment| Event { segment })
    }

    /// Maps an event counter received as a descriptor (sealed against shrinking,
    /// else `Untrusted`).
    pub fn from_fd(fd: OwnedFd) -> Result<Event> {
        Segment::from_fd(fd, Expect::Exact(ChannelSpec::event())).map(|segment| Event { segment })
    }

    pub fn from_segment(segment: Segment) -> Result<Event> {
        if segment.spec().kind != Kind::Event {
            return Err(Error::InvalidSpec(crate::layout::SpecError(format!(
                "an event needs an event segment, got {}",
                segment.spec()
            ))));
        }
        Ok(Event { segment })
    }

    pub fn segment(&self) -> &Segment {
        &self.segment
    }

    /// A signaller; refused (`ReadOnly`) for an event opened read-only.
    pub fn signaller(&self) -> Result<Signaller> {
        if self.segment.is_read_only() {
            return Err(Error::ReadOnly {
                what: self.segment.describe().to_string(),
                op: "signaller",
            });
        }
        Ok(Signaller {
            segment: self.segment.clone(),
        })
    }

    /// A listener that counts events from now on.
    pub fn listener(&self) -> Listener {
        let segment = self.segment.clone();
        let last = counter(&segment).load(Ordering::Acquire);
        Listener { segment, last }
    }
}

fn counter(segment: &Segment) -> &AtomicU32 {
    segment.map.atomic_u32(segment.layout().control_offset)
}

fn waiters(segment: &Segment) -> &AtomicU32 {
    segment
        .map
        .atomic_u32(segment.layout().control_offset + WAITERS_OFFSET)
}

/// Raises events.
#[derive(Clone, Debug)]
pub struct Signaller {
    segment: Segment,
}

impl Signaller {
    /// Counts one event. Wait-free, no system call.
    #[inline]
    pub fn signal(&self) {
        counter(&self.segment).fetch_add(1, Ordering::SeqCst);
    }

    /// Counts one event and wakes sleeping listeners (a futex system call, only when
    /// a listener sleeps). For the ordinary side; real-time code should use `signal`.
    pub fn signal_and_wake(&self) {
        self.signal();
        if waiters(&self.segment).load(Ordering::SeqCst) > 0 {
            futex_wake(counter(&self.segment));
        }
    }
}

/// Observes events.
#[derive(Debug)]
pub struct Listener {
    segment: Segment,
    last: u32,
}

impl Listener {
    /// Events since the previous poll or wait (wait-free, no system call).
    #[inline]
    pub fn poll(&mut self) -> u32 {
        // Relaxed + acquire fence: works on a read-only mapping (see the register).
        let now = counter(&self.segment).load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        let new = now.wrapping_sub(self.last);
        self.last = now;
        new
    }

    /// Sleeps until at least one event arrives or `timeout` passes; returns the number
    /// of new events (0 on timeout). Makes system calls: not for real-time code.
    /// A listener of an event opened read-only cannot announce itself as a sleeper,
    /// so it is not woken: it re-checks the counter every millisecond instead.
    pub fn wait(&mut self, timeout: Duration) -> u32 {
        let deadline = Instant::now() + timeout;
        let segment = self.segment.clone();
        let counter = counter(&segment);
        let waiters = waiters(&segment);
        loop {
            let new = self.poll();
            if new > 0 {
                return new;
            }
            let now = Instant::now();
            if now >= deadline {
                return 0;
            }
            if segment.is_read_only() {
                futex_wait(counter, self.last, (deadline - now).min(READ_ONLY_RECHECK));
                continue;
            }
            // Announce ourselves, then re-check, so a signal between the check and the
            // sleep is either seen here or wakes the futex (SeqCst on both sides).
            waiters.fetch_add(1, Ordering::SeqCst);
            let current = counter.load(Ordering::SeqCst);
            if current == self.last {
                futex_wait(counter, current, deadline - now);
            }
            waiters.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: word is a valid, aligned u32 in shared memory; a shared (not private)
    // futex so that other processes' wakes reach us. EAGAIN/EINTR/ETIMEDOUT are
    // handled by the caller's loop.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

fn futex_wake(word: &AtomicU32) {
    // SAFETY: `word` is a live, 4-aligned u32 (a reference) in shared memory;
    // FUTEX_WAKE only reads its address and touches no user memory besides it.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            i32::MAX,
            0usize,
            0usize,
            0u32,
        );
    }
}
