//! `tame bench ipc`: one-way latency (ping-pong round trip / 2) and throughput of
//! 8- to 1024-byte messages ([`SIZES`]) between two pinned threads, for a raw cache-line
//! ping-pong (the floor), tame-ipc's SPSC ring and register, a pipe, a Unix socket,
//! a POSIX message queue and the rtrb crate — in one run, interleaved round by round
//! so that machine noise hits every transport alike.
//!
//! The tame channels run over anonymous (memfd) shared mappings, exactly what two
//! processes would map; both ends live in one process here so that every transport
//! is measured the same way (two threads: the timing side and the echo side, see
//! [`sides`]). With `-p` the timing side runs in an applied partition and the echo side
//! in it too or, when it has one CPU, on the system partition.
//!
//! Result layout (schema of [`crate::result::BenchResult`], `schema_version`
//! [`SCHEMA`]): one group per transport and size, labelled `"<transport>/<size>B"`,
//! with the metric `one_way_latency` (ns) and, for queues, `throughput_ns_per_msg` (ns per
//! message, one sample per block of [`BLOCK`] messages); counters `round_trips`,
//! `throughput_messages`; derived `throughput_msgs_per_s`, `median_over_floor`; `spread`
//! over the rounds. The `merged` group, labelled `"ratios"`, holds the ratios between
//! transports ([`ratios`]) as derived figures.

mod endpoint;
#[cfg(feature = "iceoryx2")]
mod iox2;
mod message;
mod ratios;
mod run;
mod samples;
pub mod sides;
mod view;

pub use endpoint::STALL_TIMEOUT;
pub use message::SIZES;
pub use ratios::{ratios, Quantity, Ratio};
pub use run::{check, run, IpcRun, Samples, NOT_MEASURED};
pub use samples::write_samples_csv;
pub use sides::{Side, Sides};
pub use view::summary_text;

use serde::{Deserialize, Serialize};
use tame_rt::ClockKind;

/// The schema of an ipc result (its `schema_version`; the common result schema, bumped for
/// ipc alone, so a constant beside [`BenchResult`](crate::BenchResult)'s `Document`). 2: `settings.sides` replaced `settings.cpus`,
/// the merged group holds ratios (label `ratios`) instead of goal verdicts, groups carry
/// their spread over the rounds. 3: a transport and size an interrupted run never reached
/// is a group without figures that says `not_measured` (it held zeros before). See
/// docs/results.md.
pub const SCHEMA: tame_host::Schema = tame_host::schema!(BenchVersion "tame.bench.ipc", 3);

/// Messages per throughput sample.
pub const BLOCK: u64 = 1024;

/// A way to move a message from one thread to another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    /// Two cache lines, one counter each way: the hardware floor.
    Floor,
    TameRing,
    TameRegister,
    Rtrb,
    Pipe,
    UnixSocket,
    Mq,
    /// The iceoryx2 crate's publish-subscribe over shared memory (zero-copy loans), one
    /// service per direction: a well-known transport a user would pick. Only in a tame
    /// built with the `iceoryx2` feature ([`Transport::built`]).
    Iceoryx2,
}

impl Transport {
    pub const ALL: [Transport; 8] = [
        Transport::Floor,
        Transport::TameRing,
        Transport::TameRegister,
        Transport::Rtrb,
        Transport::Pipe,
        Transport::UnixSocket,
        Transport::Mq,
        Transport::Iceoryx2,
    ];

    /// Whether this build of tame can measure it (iceoryx2 needs the `iceoryx2` feature).
    pub fn built(self) -> bool {
        self.built_with(cfg!(feature = "iceoryx2"))
    }

    /// Whether a build with (`true`) or without the `iceoryx2` feature can measure it: both
    /// answers are tested in one build (`make test` builds with the feature).
    fn built_with(self, iceoryx2: bool) -> bool {
        self != Transport::Iceoryx2 || iceoryx2
    }

    /// Every transport this build can measure: what `--transports all` means.
    pub fn available() -> Vec<Transport> {
        Transport::ALL.into_iter().filter(|t| t.built()).collect()
    }

    /// Why `self` cannot be measured by this build, when it cannot.
    fn unbuilt(self) -> Option<String> {
        self.unbuilt_with(cfg!(feature = "iceoryx2"))
    }

    fn unbuilt_with(self, iceoryx2: bool) -> Option<String> {
        (!self.built_with(iceoryx2)).then(|| {
            format!(
                "{} is not built into this tame — rebuild with `cargo build --release -p tame-cli --features iceoryx2` (bench/ipc.sh does), or leave it out of --transports",
                self.name()
            )
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Transport::Floor => "floor",
            Transport::TameRing => "tame-ring",
            Transport::TameRegister => "tame-register",
            Transport::Rtrb => "rtrb",
            Transport::Pipe => "pipe",
            Transport::UnixSocket => "unix-socket",
            Transport::Mq => "mq",
            Transport::Iceoryx2 => "iceoryx2",
        }
    }

    pub fn parse(name: &str) -> Option<Transport> {
        Transport::ALL.into_iter().find(|t| t.name() == name)
    }

    /// `all`, or a comma-separated list of names (repeats count once).
    pub fn parse_list(text: &str) -> crate::Result<Vec<Transport>> {
        if text.trim() == "all" {
            return Ok(Transport::available());
        }
        let mut transports = Vec::new();
        for name in text.split(',').map(str::trim) {
            let transport = Transport::parse(name).ok_or_else(|| {
                let known: Vec<&str> = Transport::ALL.iter().map(|t| t.name()).collect();
                crate::error::invalid(format!(
                    "--transports: unknown transport {name:?} — use all or any of {}",
                    known.join(", ")
                ))
            })?;
            if let Some(why) = transport.unbuilt() {
                return Err(crate::error::invalid(format!("--transports: {why}")));
            }
            if !transports.contains(&transport) {
                transports.push(transport);
            }
        }
        Ok(transports)
    }

    /// Whether it queues messages (throughput is measured only for queues; the floor
    /// and the register hold one value).
    pub fn is_queue(self) -> bool {
        !matches!(self, Transport::Floor | Transport::TameRegister)
    }
}

/// `8, 56, 64, 256, 1024`: the sizes a message may have, for error messages.
fn sizes_text() -> String {
    SIZES.map(|s| s.to_string()).join(", ")
}

/// Message sizes from a comma-separated list (repeats count once); only [`SIZES`].
pub fn parse_sizes(text: &str) -> crate::Result<Vec<usize>> {
    let mut sizes = Vec::new();
    for part in text.split(',').map(str::trim) {
        let size = part
            .parse()
            .ok()
            .filter(|s| SIZES.contains(s))
            .ok_or_else(|| {
                crate::error::invalid(format!(
                    "--sizes: {part:?} is not a supported size — use any of {}",
                    sizes_text()
                ))
            })?;
        if !sizes.contains(&size) {
            sizes.push(size);
        }
    }
    Ok(sizes)
}

/// The two CPUs `A,B`: the timing (sending) thread's, then the echoing thread's.
pub fn parse_cpu_pair(text: &str) -> crate::Result<[u32; 2]> {
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    let cpus: Option<Vec<u32>> = parts.iter().map(|p| p.parse().ok()).collect();
    match cpus.as_deref() {
        Some([a, b]) => Ok([*a, *b]),
        _ => Err(crate::error::invalid(format!(
            "--cpus {text:?}: expected two CPU numbers A,B (e.g. 0,1) — the bench runs one thread on each"
        ))),
    }
}

/// What `tame bench ipc` was asked to do; recorded in the result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpcSettings {
    /// Where the sending (and timing) thread and the echoing thread ran.
    pub sides: Sides,
    pub sizes: Vec<usize>,
    pub transports: Vec<Transport>,
    /// Measured round trips per transport and size, over all rounds.
    pub round_trips: u64,
    /// Unmeasured round trips before each measured segment.
    pub warmup_round_trips: u64,
    /// Messages per transport and size for throughput, over all rounds.
    pub throughput_messages: u64,
    /// Rounds: each round measures every transport once, in turn.
    pub rounds: u32,
    /// Slots of the tame and rtrb rings.
    pub ring_capacity: u64,
    pub clock: ClockKind,
}

impl IpcSettings {
    /// Checks everything a run relies on; the message says what to change.
    pub fn validate(&self, online: &tame_host::CpuList) -> crate::Result<()> {
        use crate::error::invalid;
        let cpus = self.sides.cpus();
        if cpus[0] == cpus[1] {
            return Err(invalid(format!(
                "--cpus needs two different CPUs (got {0},{0}) — the bench measures between two CPUs",
                cpus[0]
            )));
        }
        for cpu in cpus {
            if !online.contains(cpu) {
                return Err(invalid(format!(
                    "CPU {cpu} is not online (online: {online}) — pick two online CPUs with --cpus A,B"
                )));
            }
        }
        if self.sizes.is_empty() || self.sizes.iter().any(|s| !SIZES.contains(s)) {
            return Err(invalid(format!(
                "message sizes {:?} — supported sizes are {} bytes",
                self.sizes,
                sizes_text()
            )));
        }
        if self.transports.is_empty() {
            return Err(invalid(
                "no transport selected — name at least one with --transports",
            ));
        }
        if let Some(why) = self.transports.iter().find_map(|t| t.unbuilt()) {
            return Err(invalid(why));
        }
        if self.rounds == 0 || self.round_trips < u64::from(self.rounds) {
            return Err(invalid(format!(
                "--round-trips {} must be at least --rounds {} (each round measures every transport)",
                self.round_trips, self.rounds
            )));
        }
        if self.throughput_messages < BLOCK * u64::from(self.rounds) {
            return Err(invalid(format!(
                "--messages {} must be at least {} ({BLOCK} per round)",
                self.throughput_messages,
                BLOCK * u64::from(self.rounds)
            )));
        }
        if !self.ring_capacity.is_power_of_two() || !(2..=1 << 20).contains(&self.ring_capacity) {
            return Err(invalid(format!(
                "ring capacity {} must be a power of two between 2 and 1048576",
                self.ring_capacity
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> IpcSettings {
        IpcSettings {
            sides: Sides::unplaced([0, 1]),
            sizes: vec![8, 64],
            transports: Transport::available(),
            round_trips: 1000,
            warmup_round_trips: 100,
            throughput_messages: 10 * BLOCK,
            rounds: 2,
            ring_capacity: 1024,
            clock: ClockKind::Monotonic,
        }
    }

    #[test]
    fn validation_refuses_what_cannot_run() {
        let online = tame_host::CpuList::parse("0-1").unwrap();
        assert!(settings().validate(&online).is_ok());
        let cases = [
            (
                IpcSettings {
                    sides: Sides::unplaced([1, 1]),
                    ..settings()
                },
                "two different",
            ),
            (
                IpcSettings {
                    sides: Sides::unplaced([0, 5]),
                    ..settings()
                },
                "not online",
            ),
            (
                IpcSettings {
                    sizes: vec![16],
                    ..settings()
                },
                "8, 56, 64, 256, 1024 bytes",
            ),
            (
                IpcSettings {
                    transports: vec![],
                    ..settings()
                },
                "no transport",
            ),
            (
                IpcSettings {
                    rounds: 0,
                    ..settings()
                },
                "--rounds",
            ),
            (
                IpcSettings {
                    throughput_messages: 10,
                    ..settings()
                },
                "--messages",
            ),
            (
                IpcSettings {
                    ring_capacity: 1000,
                    ..settings()
                },
                "power of two",
            ),
        ];
        for (bad, needle) in cases {
            let e = bad.validate(&online).unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
        }
    }

    #[test]
    fn transport_names_round_trip() {
        for t in Transport::ALL {
            assert_eq!(Transport::parse(t.name()), Some(t));
        }
        assert_eq!(Transport::parse("carrier-pigeon"), None);
    }

    #[test]
    fn a_build_without_iceoryx2_names_the_feature_to_build_it_with() {
        let why = Transport::Iceoryx2.unbuilt_with(false).unwrap();
        assert!(why.contains("--features iceoryx2"), "{why}");
        assert_eq!(Transport::Iceoryx2.unbuilt_with(true), None);
        for t in Transport::ALL {
            assert_eq!(t.built_with(false), t != Transport::Iceoryx2, "{t:?}");
            assert!(t.built_with(true), "{t:?}");
        }
    }

    #[test]
    fn argument_lists_parse_and_refuse_with_the_flag_named() {
        assert_eq!(
            Transport::parse_list("all").unwrap(),
            Transport::available()
        );
        // iceoryx2 is known by name in every build, measured only with its feature.
        assert_eq!(
            Transport::available().contains(&Transport::Iceoryx2),
            cfg!(feature = "iceoryx2")
        );
        let named = Transport::parse_list("iceoryx2");
        if cfg!(feature = "iceoryx2") {
            assert_eq!(named.unwrap(), vec![Transport::Iceoryx2]);
        } else {
            let e = named.unwrap_err();
            assert!(
                e.is_bad_input() && e.to_string().contains("--features iceoryx2"),
                "{e}"
            );
            let e = IpcSettings {
                transports: vec![Transport::Iceoryx2],
                ..settings()
            }
            .validate(&tame_host::CpuList::parse("0-1").unwrap())
            .unwrap_err();
            assert!(e.to_string().contains("not built into this tame"), "{e}");
        }
        assert_eq!(
            Transport::parse_list("pipe, mq,pipe").unwrap(),
            vec![Transport::Pipe, Transport::Mq]
        );
        let e = Transport::parse_list("pipe,smoke").unwrap_err();
        assert!(
            e.is_bad_input() && e.to_string().contains("--transports"),
            "{e}"
        );
        assert_eq!(parse_sizes("64,8,64").unwrap(), vec![64, 8]);
        assert_eq!(
            parse_sizes("8,56,64,256,1024").unwrap(),
            vec![8, 56, 64, 256, 1024]
        );
        let e = parse_sizes("16").unwrap_err().to_string();
        assert!(
            e.contains("--sizes") && e.contains("8, 56, 64, 256, 1024"),
            "{e}"
        );
        assert_eq!(parse_cpu_pair("2, 3").unwrap(), [2, 3]);
        for bad in ["1", "1,2,3", "a,b"] {
            assert!(parse_cpu_pair(bad).unwrap_err().is_bad_input(), "{bad}");
        }
    }
}
