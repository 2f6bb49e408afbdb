//! Wait-free shared-memory channels between isolated real-time tasks and ordinary
//! processes, usable from Rust and C (see `include/tame_ipc.h` and the README).
//!
//! - [`Ring`]: single-producer single-consumer ring of fixed-size slots.
//! - [`Register`]: latest-value register, one writer, many readers.
//! - [`Event`]: event counter for simple signalling.
//!
//! Each lives in a [`Segment`]: named (`/dev/shm/tame.NAME`) or anonymous (memfd,
//! sealed, passed with [`fdpass`]). Opening validates the header; hot-path operations
//! make no system calls and never wait; garbage written by a peer is reported as
//! `Corrupted`, never followed out of bounds; a peer that shrinks a segment cannot
//! crash this side (sealed memfd: impossible; named: SIGBUS guard, see the README);
//! a peer certainly gone is reported as [`PeerState::Dead`], an undecidable one as
//! [`PeerState::Unknown`].

pub mod error;
pub mod event;
pub mod fdpass;
pub mod ffi;
pub mod inspect;
pub mod layout;
pub mod listing;
pub mod liveness;
pub mod register;
pub mod ring;
pub mod segment;
mod sigbus;
mod slots;

pub use bytemuck::{Pod, Zeroable};
pub use error::{Error, Result};
pub use event::{Event, Listener, Signaller};
pub use layout::{ChannelSpec, Kind, Layout, LAYOUT_MAJOR, LAYOUT_MINOR};
pub use liveness::{Liveness, ProcFs};
pub use register::{RawReader, RawWriter, ReadError, Reader, Register, Sample, Writer};
pub use ring::{
    Consumer, Corrupted, OutOfBounds, PopError, Producer, PushError, RawConsumer, RawProducer,
    Ring, SlotReader, SlotWriter,
};
pub use segment::{
    unlink, Access, Expect, PeerState, Segment, SegmentName, DEFAULT_MODE, SHM_DIR, SHM_PREFIX,
};
