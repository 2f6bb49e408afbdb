//! One end of a bidirectional message link, for every transport the IPC bench
//! compares. `send` hands over one message; `recv` waits for the next one (spinning
//! for the shared-memory transports, blocking in the kernel for the others).
//!
//! Waiting is bounded: a spinning end gives up after [`STALL_TIMEOUT`] without a
//! message, a blocking end sees EOF or a timeout when its peer is gone, so a failed
//! peer thread never hangs the run.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::message::{bytes, bytes_mut, set_seq, Message};
use tame_ipc::{
    ChannelSpec, Consumer, PopError, Producer, PushError, Reader, Register, Ring, Writer,
};

/// How long a spinning end waits without progress before calling the run failed.
pub const STALL_TIMEOUT: Duration = Duration::from_secs(10);

/// Not `Send`: an end may have to stay on the thread that made it (iceoryx2's ports), so
/// each thread gets a [`Make`] and makes its end itself.
pub trait Endpoint<const W: usize> {
    fn send(&mut self, msg: &Message<W>) -> io::Result<()>;
    fn recv(&mut self, msg: &mut Message<W>) -> io::Result<()>;
}

/// Makes one end, on the thread that will use it.
pub trait Make<E>: FnOnce() -> io::Result<E> + Send {}
impl<E, F: FnOnce() -> io::Result<E> + Send> Make<E> for F {}

/// Two ends made here, each handed over to its thread as it is.
pub fn handed<E: Send>((a, b): (E, E)) -> (impl Make<E>, impl Make<E>) {
    (move || Ok(a), move || Ok(b))
}

/// Spins on `attempt` until it yields; checks the clock only every 2^16 spins.
#[inline(always)]
pub(super) fn spin_until<T>(mut attempt: impl FnMut() -> Option<io::Result<T>>) -> io::Result<T> {
    let mut spins: u32 = 0;
    let mut since: Option<Instant> = None;
    loop {
        if let Some(result) = attempt() {
            return result;
        }
        std::hint::spin_loop();
        spins = spins.wrapping_add(1);
        if spins & 0xffff == 0 {
            let started = *since.get_or_insert_with(Instant::now);
            if started.elapsed() > STALL_TIMEOUT {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the peer stopped responding",
                ));
            }
        }
    }
}

fn corrupted() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        "the ring reports corrupted indices",
    )
}

// ---- raw cache-line ping-pong: the floor ----------------------------------------------

#[repr(align(128))]
struct Line(AtomicU64);

/// Two counters on their own cache lines; a message is "the counter moved by one".
/// No payload is copied: this is the cost of moving one cache line each way.
pub struct FloorEnd {
    outgoing: Arc<[Line; 2]>,
    out_index: usize,
    sent: u64,
    received: u64,
}

pub fn floor_pair() -> (FloorEnd, FloorEnd) {
    let lines = Arc::new([Line(AtomicU64::new(0)), Line(AtomicU64::new(0))]);
    let end = |out_index| FloorEnd {
        outgoing: lines.clone(),
        out_index,
        sent: 0,
        received: 0,
    };
    (end(0), end(1))
}

impl<const W: usize> Endpoint<W> for FloorEnd {
    #[inline]
    fn send(&mut self, _msg: &Message<W>) -> io::Result<()> {
        self.sent += 1;
        self.outgoing[self.out_index]
            .0
            .store(self.sent, Ordering::Release);
        Ok(())
    }

    #[inline]
    fn recv(&mut self, msg: &mut Message<W>) -> io::Result<()> {
        let expected = self.received + 1;
        let line = &self.outgoing[1 - self.out_index].0;
        spin_until(|| (line.load(Ordering::Acquire) == expected).then_some(Ok(())))?;
        self.received = expected;
        set_seq(msg, expected - 1);
        Ok(())
    }
}

// ---- tame ring -----------------------------------------------------------------------

pub struct TameRingEnd<const W: usize> {
    tx: Producer<Message<W>>,
    rx: Consumer<Message<W>>,
}

/// Two anonymous (memfd) rings, one per direction: the same shared mappings two
/// processes would use.
pub fn tame_ring_pair<const W: usize>(
    capacity: u64,
) -> io::Result<(TameRingEnd<W>, TameRingEnd<W>)> {
    let spec = ChannelSpec::ring::<Message<W>>(capacity);
    let there = Ring::create_anonymous(spec).map_err(io::Error::other)?;
    let back = Ring::create_anonymous(spec).map_err(io::Error::other)?;
    let a = TameRingEnd {
        tx: there.producer().map_err(io::Error::other)?,
        rx: back.consumer().map_err(io::Error::other)?,
    };
    let b = TameRingEnd {
        tx: back.producer().map_err(io::Error::other)?,
        rx: there.consumer().map_err(io::Error::other)?,
    };
    Ok((a, b))
}

impl<const W: usize> Endpoint<W> for TameRingEnd<W> {
    #[inline]
    fn send(&mut self, msg: &Message<W>) -> io::Result<()> {
        spin_until(|| match self.tx.push(*msg) {
            Ok(()) => Some(Ok(())),
            Err(PushError::Full) => None,
            Err(_) => Some(Err(corrupted())),
        })
    }

    #[inline]
    fn recv(&mut self, msg: &mut Message<W>) -> io::Result<()> {
        *msg = spin_until(|| match self.rx.pop() {
            Ok(value) => Some(Ok(value)),
            Err(PopError::Empty) => None,
            Err(_) => Some(Err(corrupted())),
        })?;
        Ok(())
    }
}

// ---- tame register -------------------------------------------------------------------

pub struct TameRegisterEnd<const W: usize> {
    tx: Writer<Message<W>>,
    rx: Reader<Message<W>>,
}

/// Two anonymous registers, one per direction. A register keeps only the latest
/// value, so it is measured for latency only (one message in flight).
pub fn tame_register_pair<const W: usize>() -> io::Result<(TameRegisterEnd<W>, TameRegisterEnd<W>)>
{
    let spec = ChannelSpec::register::<Message<W>>();
    let there = Register::create_anonymous(spec).map_err(io::Error::other)?;
    let back = Register::create_anonymous(spec).map_err(io::Error::other)?;
    let a = TameRegisterEnd {
        tx: there.writer().map_err(io::Error::other)?,
        rx: back.reader().map_err(io::Error::other)?,
    };
    let b = TameRegisterEnd {
        tx: back.writer().map_err(io::Error::other)?,
        rx: there.reader().map_err(io::Error::other)?,
    };
    Ok((a, b))
}

impl<const W: usize> Endpoint<W> for TameRegisterEnd<W> {
    #[inline]
    fn send(&mut self, msg: &Message<W>) -> io::Result<()> {
        self.tx.write(msg);
        Ok(())
    }

    #[inline]
    fn recv(&mut self, msg: &mut Message<W>) -> io::Result<()> {
        *msg = spin_until(|| match self.rx.read() {
            Ok(sample) if sample.fresh => Some(Ok(sample.value)),
            // Not new yet, never written, or overlapping a write: keep spinning.
            _ => None,
        })?;
        Ok(())
    }
}

// ---- rtrb (in-process) ---------------------------------------------------------------

pub struct RtrbEnd<const W: usize> {
    tx: rtrb::Producer<Message<W>>,
    rx: rtrb::Consumer<Message<W>>,
}

pub fn rtrb_pair<const W: usize>(capacity: usize) -> (RtrbEnd<W>, RtrbEnd<W>) {
    let (there_tx, there_rx) = rtrb::RingBuffer::new(capacity);
    let (back_tx, back_rx) = rtrb::RingBuffer::new(capacity);
    (
        RtrbEnd {
            tx: there_tx,
            rx: back_rx,
        },
        RtrbEnd {
            tx: back_tx,
            rx: there_rx,
        },
    )
}

impl<const W: usize> Endpoint<W> for RtrbEnd<W> {
    #[inline]
    fn send(&mut self, msg: &Message<W>) -> io::Result<()> {
        spin_until(|| self.tx.push(*msg).ok().map(Ok))
    }

    #[inline]
    fn recv(&mut self, msg: &mut Message<W>) -> io::Result<()> {
        *msg = spin_until(|| self.rx.pop().ok().map(Ok))?;
        Ok(())
    }
}

// ---- pipe ----------------------------------------------------------------------------

pub struct PipeEnd {
    write: OwnedFd,
    read: OwnedFd,
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: fds has room for the two descriptors pipe2 returns.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

pub fn pipe_pair() -> io::Result<(PipeEnd, PipeEnd)> {
    let (there_read, there_write) = pipe()?;
    let (back_read, back_write) = pipe()?;
    Ok((
        PipeEnd {
            write: there_write,
            read: back_read,
        },
        PipeEnd {
            write: back_write,
            read: there_read,
        },
    ))
}

fn write_all_fd(fd: &OwnedFd, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        // SAFETY: bytes is a valid buffer of its length.
        let n = unsafe { libc::write(fd.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        bytes = &bytes[n as usize..];
    }
    Ok(())
}

fn read_exact_fd(fd: &OwnedFd, mut bytes: &mut [u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        // SAFETY: bytes is a valid writable buffer of its length.
        let n = unsafe { libc::read(fd.as_raw_fd(), bytes.as_mut_ptr().cast(), bytes.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the peer closed the pipe",
            ));
        }
        bytes = &mut bytes[n as usize..];
    }
    Ok(())
}

impl<const W: usize> Endpoint<W> for PipeEnd {
    fn send(&mut self, msg: &Message<W>) -> io::Result<()> {
        write_all_fd(&self.write, bytes(msg))
    }

    fn recv(&mut self, msg: &mut Message<W>) -> io::Result<()> {
        read_exact_fd(&self.read, bytes_mut(msg))
    }
}

// ---- Unix socket ---------------------------------------------------------------------

pub struct UnixEnd(UnixStream);

pub fn unix_pair() -> io::Result<(UnixEnd, UnixEnd)> {
    let (a, b) = UnixStream::pair()?;
    Ok((UnixEnd(a), UnixEnd(b)))
}

impl<const W: usize> Endpoint<W> for UnixEnd {
    fn send(&mut self, msg: &Message<W>) -> io::Result<()> {
        self.0.write_all(bytes(msg))
    }

    fn recv(&mut self, msg: &mut Message<W>) -> io::Result<()> {
        self.0.read_exact(bytes_mut(msg))
    }
}

// ---- POSIX message queue -------------------------------------------------------------

/// An mq descriptor, closed on drop.
struct Mq(libc::mqd_t);

impl Drop for Mq {
    fn drop(&mut self) {
        // SAFETY: closes the queue descriptor this Mq owns, exactly once (in drop).
        unsafe { libc::mq_close(self.0) };
    }
}

pub struct MqEnd {
    tx: Mq,
    rx: Mq,
    /// Absolute CLOCK_REALTIME deadline for every send and receive, set once per segment
    /// (its expected bound plus [`STALL_TIMEOUT`]) so a vanished peer cannot block
    /// forever and no per-message clock call is needed.
    deadline: libc::timespec,
}

/// Opens a fresh queue and unlinks its name at once, so nothing is left behind even
/// if the run dies (/dev/mqueue/tame.*).
fn mq_open_anonymous(tag: &str, msg_size: usize) -> io::Result<Mq> {
    static SERIAL: AtomicU64 = AtomicU64::new(0);
    let name = format!(
        "/tame.bench-{}-{tag}-{}\0",
        std::process::id(),
        SERIAL.fetch_add(1, Ordering::Relaxed)
    );
    // SAFETY: mq_attr is plain data.
    let mut attr: libc::mq_attr = unsafe { std::mem::zeroed() };
    attr.mq_maxmsg = 8;
    attr.mq_msgsize = msg_size as libc::c_long;
    // SAFETY: name is NUL-terminated; attr outlives the call.
    let mqd = unsafe {
        libc::mq_open(
            name.as_ptr().cast(),
            libc::O_CREAT | libc::O_EXCL | libc::O_RDWR | libc::O_CLOEXEC,
            0o600 as libc::mode_t,
            &attr as *const libc::mq_attr,
        )
    };
    if mqd == -1 {
        return Err(io::Error::last_os_error());
    }
    let mq = Mq(mqd);
    // SAFETY: name is NUL-terminated (as for mq_open); open descriptors stay valid.
    unsafe { libc::mq_unlink(name.as_ptr().cast()) };
    Ok(mq)
}

pub fn mq_pair(msg_size: usize, segment_bound: Duration) -> io::Result<(MqEnd, MqEnd)> {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: now is a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut now) };
    let deadline = libc::timespec {
        tv_sec: now.tv_sec
            + segment_bound.as_secs() as libc::time_t
            + STALL_TIMEOUT.as_secs() as libc::time_t,
        tv_nsec: now.tv_nsec,
    };
    let there_a = mq_open_anonymous("a", msg_size)?;
    let back_a = mq_open_anonymous("b", msg_size)?;
    // Each end needs its own descriptors: duplicate through /proc-free dup of mqd_t
    // (on Linux an mqd_t is a file descriptor).
    let dup = |mq: &Mq| -> io::Result<Mq> {
        // SAFETY: duplicating a descriptor we own.
        let fd = unsafe { libc::fcntl(mq.0, libc::F_DUPFD_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Mq(fd))
    };
    let there_b = dup(&there_a)?;
    let back_b = dup(&back_a)?;
    Ok((
        MqEnd {
            tx: there_a,
            rx: back_a,
            deadline,
        },
        MqEnd {
            tx: back_b,
            rx: there_b,
            deadline,
        },
    ))
}

impl<const W: usize> Endpoint<W> for MqEnd {
    fn send(&mut self, msg: &Message<W>) -> io::Result<()> {
        loop {
            let msg = bytes(msg);
            // SAFETY: msg is msg.len() readable bytes, the queue's message size.
            let r = unsafe {
                libc::mq_timedsend(self.tx.0, msg.as_ptr().cast(), msg.len(), 0, &self.deadline)
            };
            if r == 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    fn recv(&mut self, msg: &mut Message<W>) -> io::Result<()> {
        loop {
            let msg = bytes_mut(msg);
            // SAFETY: msg is msg.len() writable bytes, the queue's message size.
            let r = unsafe {
                libc::mq_timedreceive(
                    self.rx.0,
                    msg.as_mut_ptr().cast(),
                    msg.len(),
                    std::ptr::null_mut(),
                    &self.deadline,
                )
            };
            if r == msg.len() as isize {
                return Ok(());
            }
            if r >= 0 {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "short message"));
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}
