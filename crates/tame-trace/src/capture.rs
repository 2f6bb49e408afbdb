//! Reading the per-CPU event pipes while the detector runs.
//!
//! One reader thread, kept off the measured CPUs, polls each CPU's
//! `per_cpu/cpuN/trace_pipe` (opened non-blocking) and parses complete lines
//! as they come, so the ring buffers never fill however long the run. Text
//! rather than `trace_pipe_raw`: with the `x86-tsc` clock the text carries
//! full-resolution timestamps, its format is stable across kernels without
//! reading each event's `format` file, and at the few thousand events per
//! second a measured CPU produces, parsing costs the reader CPU well under 1 %.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::event::{parse_line, Event, Line, Timestamp};
use crate::idle::IdleExits;

/// Everything read, per CPU.
#[derive(Debug, Default)]
pub struct Captured {
    pub events: BTreeMap<u32, Vec<Event>>,
    /// Events the kernel dropped because the buffer filled before it was read.
    pub lost: BTreeMap<u32, u64>,
    pub bytes: u64,
    /// Read errors other than "no data yet".
    pub errors: Vec<String>,
    /// Switches out of idle the trace lacked, put back ([`crate::idle`]), per CPU.
    pub idle_exits_inferred: BTreeMap<u32, u64>,
}

/// Where the reader puts what it reads: [`Captured`] keeps everything; a consumer that
/// runs for hours (`tame watch`) hands events on as they come instead.
pub trait Sink: Send + 'static {
    fn event(&mut self, event: Event);
    /// `n` events of `cpu` the kernel dropped before they were read.
    fn lost(&mut self, cpu: u32, n: u64);
    fn bytes(&mut self, n: u64);
    /// A read error other than "no data yet".
    fn error(&mut self, error: String);
    /// At the end: how many switches out of idle `cpu`'s trace lacked ([`crate::idle`]).
    fn idle_exits_inferred(&mut self, cpu: u32, n: u64);
    /// How long the reader sleeps when every pipe is empty. Reading close behind the
    /// kernel's writer costs the traced CPUs (their buffer pages bounce between caches);
    /// a consumer that can lag reads less often.
    fn poll_interval(&self) -> Duration {
        POLL
    }
    /// After each pass over the pipes (and at the end): a sink that hands events to
    /// another thread hands over what it gathered, under one lock for the pass.
    fn flush(&mut self) {}
}

impl Sink for Captured {
    fn event(&mut self, event: Event) {
        self.events.entry(event.cpu).or_default().push(event);
    }
    fn lost(&mut self, cpu: u32, n: u64) {
        *self.lost.entry(cpu).or_default() += n;
    }
    fn bytes(&mut self, n: u64) {
        self.bytes += n;
    }
    fn error(&mut self, error: String) {
        self.errors.push(error);
    }
    fn idle_exits_inferred(&mut self, cpu: u32, n: u64) {
        if n > 0 {
            self.idle_exits_inferred.insert(cpu, n);
        }
    }
}

/// A running reader; [`Capture::finish`] drains and returns what it read.
pub struct Capture<S: Sink = Captured> {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<S>,
    /// The reader thread's id once it runs (0 before), to move it later.
    reader_tid: Arc<AtomicU32>,
}

struct Pipe {
    cpu: u32,
    file: File,
    pending: Vec<u8>,
    idle: IdleExits,
}

const POLL: Duration = Duration::from_millis(5);

impl Capture<Captured> {
    /// Open every pipe (so a failure is reported before anything runs) and
    /// start the reader, pinned to `reader_cpus` when that is not empty.
    pub fn start(
        pipes: &[(u32, PathBuf)],
        stamp: Timestamp,
        reader_cpus: &[u32],
    ) -> std::io::Result<Self> {
        Self::start_into(pipes, stamp, reader_cpus, Captured::default())
    }

    /// Stop after draining what is buffered (turn tracing off first), and return it.
    pub fn finish(self) -> Captured {
        self.finish_sink().unwrap_or_else(|| Captured {
            errors: vec!["the trace reader panicked".into()],
            ..Default::default()
        })
    }
}

impl<S: Sink> Capture<S> {
    /// [`Capture::start`] into `sink`.
    pub fn start_into(
        pipes: &[(u32, PathBuf)],
        stamp: Timestamp,
        reader_cpus: &[u32],
        sink: S,
    ) -> std::io::Result<Self> {
        let mut open = Vec::with_capacity(pipes.len());
        for (cpu, path) in pipes {
            let file = OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(path)
                .map_err(|e| {
                    std::io::Error::new(e.kind(), format!("cannot open {}: {e}", path.display()))
                })?;
            open.push(Pipe {
                cpu: *cpu,
                file,
                pending: Vec::with_capacity(1 << 16),
                idle: IdleExits::new(),
            });
        }
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let reader_cpus = reader_cpus.to_vec();
        let reader_tid = Arc::new(AtomicU32::new(0));
        let tid = reader_tid.clone();
        let handle = std::thread::Builder::new()
            .name("tame-trace-reader".into())
            .spawn(move || {
                // SAFETY: gettid has no preconditions and cannot fail.
                tid.store(unsafe { libc::gettid() } as u32, Ordering::Release);
                if !reader_cpus.is_empty() {
                    // Best effort: where it cannot move, it is noise the report shows.
                    let _ = tame_rt::sched::set_affinity(0, reader_cpus);
                }
                read_loop(open, stamp, &flag, sink)
            })?;
        Ok(Self {
            stop,
            handle,
            reader_tid,
        })
    }

    /// The reader thread's id once it runs: for a caller that learns later where the
    /// reader should run, and how (a watched program pins itself after exec).
    pub fn reader_tid(&self) -> Option<u32> {
        Some(self.reader_tid.load(Ordering::Acquire)).filter(|&t| t != 0)
    }

    /// Stop after draining what is buffered, and return the sink (`None` if the reader panicked).
    pub fn finish_sink(self) -> Option<S> {
        self.stop.store(true, Ordering::Release);
        self.handle.join().ok()
    }
}

fn read_loop<S: Sink>(mut pipes: Vec<Pipe>, stamp: Timestamp, stop: &AtomicBool, mut out: S) -> S {
    let mut buf = vec![0u8; 1 << 16];
    loop {
        // Read the flag before the pass: a pass that starts after stop and finds
        // nothing means every buffer is drained.
        let stopping = stop.load(Ordering::Acquire);
        let mut got = false;
        for pipe in pipes.iter_mut() {
            loop {
                match pipe.file.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        got = true;
                        out.bytes(n as u64);
                        pipe.pending.extend_from_slice(&buf[..n]);
                        consume_lines(pipe, stamp, &mut out);
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) => {
                        out.error(format!("cpu{}: {e}", pipe.cpu));
                        break;
                    }
                }
            }
        }
        out.flush();
        if stopping && !got {
            break;
        }
        if !got {
            std::thread::sleep(out.poll_interval());
        }
    }
    for pipe in pipes.iter_mut() {
        // A last line without its newline.
        if !pipe.pending.is_empty() {
            pipe.pending.push(b'\n');
            consume_lines(pipe, stamp, &mut out);
        }
        out.idle_exits_inferred(pipe.cpu, pipe.idle.inferred);
    }
    out.flush();
    out
}

fn consume_lines<S: Sink>(pipe: &mut Pipe, stamp: Timestamp, out: &mut S) {
    let Some(last_nl) = pipe.pending.iter().rposition(|&b| b == b'\n') else {
        return;
    };
    let complete = &pipe.pending[..=last_nl];
    for raw in complete.split(|&b| b == b'\n') {
        let line = String::from_utf8_lossy(raw);
        match parse_line(&line, stamp) {
            Line::Event(e) => pipe.idle.push(e, |e| out.event(e)),
            Line::Lost(n) => out.lost(pipe.cpu, n),
            Line::Other => {}
        }
    }
    pipe.pending.drain(..=last_nl);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_file_to_the_end_and_parses_every_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("trace_pipe");
        std::fs::write(
            &p,
            "  x-5  [001] d.h.. 100: local_timer_entry: vector=236\n  x-5  [001] d.h.. 180: local_timer_exit: vector=236\nCPU:1 [LOST 3 EVENTS]\n  x-5  [001] d.h.. 200: reschedule_entry: vector=253",
        )
        .unwrap();
        let c = Capture::start(&[(1, p)], Timestamp::Counter, &[]).unwrap();
        let got = c.finish();
        let ev = &got.events[&1];
        assert_eq!(
            ev.iter().map(|e| e.ts).collect::<Vec<_>>(),
            vec![100, 180, 200]
        );
        assert_eq!(got.lost[&1], 3);
        assert!(got.errors.is_empty());
    }

    #[test]
    fn a_missing_pipe_is_an_error_before_reading() {
        let err = Capture::start(
            &[(0, "/nonexistent/trace_pipe".into())],
            Timestamp::Counter,
            &[],
        )
        .err()
        .unwrap();
        assert!(err.to_string().contains("/nonexistent/trace_pipe"));
    }
}
