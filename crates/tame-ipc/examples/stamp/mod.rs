//! What `stamp_producer` and `stamp_consumer` (and the Python side's
//! `crates/tame-ipc-py/examples/stamps.py`) share: the message, its checks, the clock
//! and the command line.
//!
//! A stamp is four little-endian u64 words (32 B, align 8: one 64-byte slot):
//! `seq` (the index of the attempt, counting the ones the full ring refused), `sent_ns`
//! (CLOCK_MONOTONIC when it was pushed), `full` (attempts refused before this one) and
//! `check` (`seq ^ CHECK`). So a consumer knows of every message whether it was lost:
//! between two stamps, `seq` may skip exactly as many as `full` grew.

#![allow(dead_code)] // each example uses its part

use std::os::fd::{FromRawFd, OwnedFd};
use std::process::exit;

use tame_ipc::{ChannelSpec, Pod, Ring, Zeroable};

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, Pod, Zeroable)]
pub struct Stamp {
    pub seq: u64,
    pub sent_ns: u64,
    pub full: u64,
    pub check: u64,
}

pub const CHECK: u64 = 0x7a3e_5eed_0bad_cafe;

impl Stamp {
    pub fn new(seq: u64, sent_ns: u64, full: u64) -> Stamp {
        Stamp {
            seq,
            sent_ns,
            full,
            check: seq ^ CHECK,
        }
    }
}

/// Follows the stamps of one producer: every one must be intact, in order, and any
/// gap must be one the producer reported (its `full` count grew by the gap).
#[derive(Debug, Default)]
pub struct Tracker {
    pub received: u64,
    /// Attempts the producer reported refused, as of the last stamp.
    pub reported_full: u64,
    next_seq: u64,
}

impl Tracker {
    /// Checks one stamp; the error says what was wrong.
    pub fn accept(&mut self, stamp: &Stamp) -> Result<(), String> {
        if stamp.check != stamp.seq ^ CHECK {
            return Err(format!("stamp {} is damaged: {stamp:?}", self.received));
        }
        let gap = stamp.seq.checked_sub(self.next_seq).ok_or_else(|| {
            format!(
                "stamp {} went back from {} to {}",
                self.received, self.next_seq, stamp.seq
            )
        })?;
        let reported = stamp.full.checked_sub(self.reported_full).ok_or_else(|| {
            format!(
                "the full count went back from {} to {}",
                self.reported_full, stamp.full
            )
        })?;
        if gap != reported {
            return Err(format!(
                "{gap} message(s) missing before seq {} but the producer reported {reported} refused",
                stamp.seq
            ));
        }
        self.received += 1;
        self.reported_full = stamp.full;
        self.next_seq = stamp.seq + 1;
        Ok(())
    }

    /// Every attempt up to seq `count - 1` accounted for (received or reported).
    pub fn accounted(&self) -> u64 {
        self.next_seq
    }
}

pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to fill; CLOCK_MONOTONIC always exists (vDSO).
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Command-line options `--key value` and flags; bad input exits 2 with a message.
pub struct Args {
    pairs: Vec<(String, Option<String>)>,
    usage: &'static str,
}

impl Args {
    pub fn parse(usage: &'static str, flags: &[&str]) -> Args {
        let mut pairs = Vec::new();
        let mut args = std::env::args().skip(1);
        while let Some(key) = args.next() {
            let Some(name) = key.strip_prefix("--") else {
                fail(usage, &format!("unexpected argument {key:?}"));
            };
            if flags.contains(&name) {
                pairs.push((name.to_string(), None));
            } else {
                match args.next() {
                    Some(value) => pairs.push((name.to_string(), Some(value))),
                    None => fail(usage, &format!("--{name} needs a value")),
                }
            }
        }
        Args { pairs, usage }
    }

    pub fn flag(&self, name: &str) -> bool {
        self.pairs.iter().any(|(key, _)| key == name)
    }

    pub fn value(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(key, _)| key == name)
            .and_then(|(_, value)| value.as_deref())
    }

    pub fn number(&self, name: &str, default: u64) -> u64 {
        match self.value(name) {
            None => default,
            Some(text) => text.parse().unwrap_or_else(|_| {
                fail(
                    self.usage,
                    &format!("--{name} {text:?} is not a whole number"),
                )
            }),
        }
    }

    /// The descriptor `--fd N` names, checked to be one this process has open before
    /// it is owned (an OwnedFd of a closed or out-of-range number is undefined).
    fn inherited_fd(&self) -> OwnedFd {
        let number = self.number("fd", 0);
        let fd = match i32::try_from(number) {
            Ok(fd) if fd >= 0 => fd,
            _ => fail(
                self.usage,
                &format!("--fd {number} is not a descriptor number"),
            ),
        };
        // SAFETY: F_GETFD reads only the descriptor's flags; on a number that is not
        // open it fails with EBADF.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
            let err = std::io::Error::last_os_error();
            fail(
                self.usage,
                &format!(
                    "--fd {fd} is not open here ({err}) — pass a descriptor the parent left open"
                ),
            )
        }
        // SAFETY: `fd` is open (checked above) and was handed to us (inherited) to
        // own; from_fd validates what it refers to.
        unsafe { OwnedFd::from_raw_fd(fd) }
    }

    /// The ring named by `--name NAME` or inherited as `--fd N`, with `--capacity`.
    pub fn ring(&self) -> Ring {
        let spec = ChannelSpec::ring::<Stamp>(self.number("capacity", 1024));
        let ring = match (self.value("name"), self.value("fd")) {
            (Some(name), None) => Ring::open(name, spec),
            (None, Some(_)) => Ring::from_fd(self.inherited_fd(), spec),
            _ => fail(self.usage, "give exactly one of --name NAME and --fd N"),
        };
        ring.unwrap_or_else(|e| {
            eprintln!("error: {e}");
            exit(2)
        })
    }
}

pub fn fail(usage: &str, why: &str) -> ! {
    eprintln!("error: {why}\nusage: {usage}");
    exit(2)
}
