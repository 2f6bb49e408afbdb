//! Runs the IPC bench: rounds × sizes × transports, each segment on two freshly
//! created endpoints and two threads placed on their sides' CPUs (joining an applied
//! partition's cgroup first where the side is in it).
//!
//! The timed loops allocate nothing: recorders and sample buffers are built before the
//! run, messages are stack arrays, and the only system calls are the ones the transport
//! itself makes (none for the shared-memory transports).

use std::collections::BTreeMap;
use std::io;
use std::sync::Barrier;
use std::time::Duration;

use tame_host::cgroup::CgroupVersion;
use tame_host::environment::RunEnvironment;
use tame_host::Root;
use tame_rt::Clock;

use super::endpoint::{self, handed, Endpoint, Make, STALL_TIMEOUT};
use super::message::{seq, set_seq, with_words, Message};
use super::ratios::{self, Ratio};
use super::{IpcSettings, Side, Sides, Transport, BLOCK, SCHEMA};
use crate::distribution::Distribution;
use crate::engine::{self, RunControl};
use crate::error::{invalid, io_failed};
use crate::load::{LoadSpec, RunningLoad};
use crate::measure::{Sample, SampleBuffer};
use crate::placement::{JoinGroup, Joined, Placement};
use crate::result::{unix_now_ns, BenchResult, GroupResult, Metric, Spread};
use crate::session::{self, Conditions};
use crate::stats::Recorder;

/// Generous time per message for a message-queue segment's deadline: a blocked
/// receive cannot notice a vanished peer, so each segment gets a deadline.
const MQ_TIME_PER_MESSAGE: Duration = Duration::from_micros(200);

fn mq_segment_bound(messages: u64) -> Duration {
    MQ_TIME_PER_MESSAGE.saturating_mul(u32::try_from(messages).unwrap_or(u32::MAX))
}

/// The longest a load may have to run: every message of every segment at the mq bound
/// (a safety limit for stress-ng should tame die; the load is stopped when the run ends).
fn load_bound_ns(settings: &IpcSettings) -> u64 {
    let per_pair = settings
        .round_trips
        .saturating_add(settings.warmup_round_trips * u64::from(settings.rounds))
        .saturating_add(settings.throughput_messages);
    let pairs = (settings.sizes.len() * settings.transports.len()) as u64;
    (MQ_TIME_PER_MESSAGE.as_nanos() as u64)
        .saturating_mul(per_pair)
        .saturating_mul(pairs)
        .saturating_add(STALL_TIMEOUT.as_nanos() as u64)
        .min(30 * 86_400 * 1_000_000_000)
}

/// A finished run: the versioned result, the ratios (also inside the result's `merged`
/// group) and the raw round trips if they were asked for.
pub struct IpcRun {
    pub result: BenchResult<IpcSettings>,
    pub ratios: Vec<Ratio>,
    pub samples: Samples,
}

/// Raw round trips, per group (`tame-ring/8B`): when each was sent (CLOCK_MONOTONIC ns)
/// and how long it took (ns), all timed on `cpu`. Empty unless asked for.
pub struct Samples {
    pub cpu: u32,
    pub groups: Vec<(String, SampleBuffer)>,
}

/// Where the two threads run, how they join the partition and read time.
struct Plan {
    sides: Sides,
    join: Option<std::sync::Arc<JoinGroup>>,
    clock: Clock,
    warmup: u64,
    /// A raw clock reading and CLOCK_MONOTONIC ns taken together: turns a raw reading into
    /// a sample's timestamp.
    origin: (u64, u64),
}

impl Plan {
    #[inline(always)]
    fn timestamp_ns(&self, raw: u64) -> u64 {
        self.origin.1 + self.clock.raw_delta_ns(raw.wrapping_sub(self.origin.0))
    }
}

/// The figures whose spread over the rounds a group records.
const LATENCY_SPREAD: [&str; 3] = ["mean", "p50", "p99"];

/// What one transport and size accumulated over the rounds.
pub(super) struct Tally {
    pub(super) latency: Recorder,
    pub(super) throughput: Recorder,
    pub(super) messages: u64,
    pub(super) throughput_ns: u64,
    pub(super) samples: SampleBuffer,
    /// Each figure's smallest and largest value over the rounds measured.
    pub(super) spread: BTreeMap<String, Spread>,
    pub(super) rounds: u32,
}

impl Tally {
    pub(super) fn new(sample_capacity: usize) -> Tally {
        Tally {
            latency: Recorder::new(),
            throughput: Recorder::new(),
            messages: 0,
            throughput_ns: 0,
            samples: SampleBuffer::with_capacity(sample_capacity),
            spread: BTreeMap::new(),
            rounds: 0,
        }
    }

    /// Widen the spread of figure `name` to cover this round's `value`.
    pub(super) fn note(&mut self, name: String, value: f64) {
        self.spread
            .entry(name)
            .and_modify(|s| s.include(value))
            .or_insert_with(|| Spread::of(value));
    }
}

impl IpcSettings {
    /// Segments in all (each size and transport once per round): what the `tick` of [`run`]
    /// counts up to.
    pub fn progress_total(&self) -> u64 {
        u64::from(self.rounds) * (self.sizes.len() * self.transports.len()) as u64
    }

    /// Raw samples kept per transport and size for `--samples` (every measured round trip),
    /// within [`session::MAX_SAMPLES_TOTAL`]; 0 when none are wanted.
    pub fn sample_capacity(&self, wanted: bool) -> crate::Result<usize> {
        session::sample_capacity(
            wanted,
            self.round_trips,
            self.sizes.len() * self.transports.len(),
        )
    }
}

/// Everything that can refuse `settings` under `conditions` on this host before anything
/// starts: the settings' own rules, each side's CPU (in the partition, or allowed to this
/// process), the partition's cgroup, the load's CPUs and tools. Returns the environment read.
pub fn check(
    root: &Root,
    settings: &IpcSettings,
    conditions: Conditions,
) -> crate::Result<RunEnvironment> {
    Ok(prepare(root, settings, conditions)?.0)
}

fn prepare(
    root: &Root,
    settings: &IpcSettings,
    conditions: Conditions,
) -> crate::Result<(RunEnvironment, Option<Joined>)> {
    let environment = RunEnvironment::capture(root);
    settings.validate(&environment.online_cpus)?;
    let joined = check_sides(root, &settings.sides, conditions.placement)?;
    if let Some(load) = conditions.load {
        engine::validate_cpus(&load.cpus, &environment.online_cpus)?;
        load.check_tools()?;
    }
    Ok((environment, joined))
}

/// A side outside the partition must run where this process may; a side inside it must be
/// on one of its CPUs, and it must be possible to keep the other side outside.
fn check_sides(
    root: &Root,
    sides: &Sides,
    placement: Option<&Placement>,
) -> crate::Result<Option<Joined>> {
    let allowed = tame_rt::sched::allowed_cpus();
    for (what, side) in [("timing", sides.timing), ("echo", sides.echo)] {
        if side.in_partition || allowed.contains(&side.cpu) {
            continue;
        }
        let cpu = side.cpu;
        return Err(invalid(match placement {
            None => format!(
                "CPU {cpu} is online but outside this process's allowed CPUs {allowed:?} (a cpuset confines it) — pick allowed CPUs with --cpus, or run tame outside that cpuset"
            ),
            Some(p) => format!(
                "the {what} CPU {cpu} is neither in partition {:?} (its CPUs: {}) nor one tame may run on {allowed:?} — give --cpus A,B with B in the partition or in the system partition",
                p.partition, p.cpus
            ),
        }));
    }
    let Some(placement) = placement else {
        if sides.placed() {
            return Err(invalid(
                "a side of the bench is placed in a partition but no partition was given — pass -p NAME",
            ));
        }
        return Ok(None);
    };
    if !sides.timing.in_partition {
        return Err(invalid(format!(
            "with -p {:?} the timing side runs in the partition — place it there",
            placement.partition
        )));
    }
    for (what, side) in [("timing", sides.timing), ("echo", sides.echo)] {
        if side.in_partition && !placement.cpus.contains(side.cpu) {
            return Err(invalid(format!(
                "the {what} CPU {} is not in partition {:?} (its CPUs: {}) — pick CPUs of the partition with --cpus A,B",
                side.cpu, placement.partition, placement.cpus
            )));
        }
    }
    if placement.group.version() == CgroupVersion::V2 && !sides.echo.in_partition {
        return Err(invalid(format!(
            "partition {:?} is a cgroup v2 group, which holds whole processes: tame's echo thread cannot stay on CPU {} outside it while its timing thread joins — give the partition two CPUs, or name two of its CPUs with --cpus A,B",
            placement.partition, sides.echo.cpu
        )));
    }
    Joined::prepare(root, placement).map(Some)
}

/// Validates, starts the load, measures, stops the load and assembles the result. Stops
/// between segments when `control` is stopped (the result then says `interrupted`).
/// `sample_capacity` round trips are kept per transport and size (see
/// [`IpcSettings::sample_capacity`]).
pub fn run(
    root: &Root,
    settings: IpcSettings,
    conditions: Conditions,
    control: &RunControl,
    sample_capacity: usize,
    mut tick: impl FnMut(u64),
    command_line: Vec<String>,
) -> crate::Result<IpcRun> {
    let (environment, joined) = prepare(root, &settings, conditions)?;
    let clock = engine::make_clock(settings.clock, environment.invariant_tsc)?;
    let calibration = engine::calibrate(&clock);
    let plan = Plan {
        sides: settings.sides,
        join: joined.as_ref().map(|j| j.join.clone()),
        clock,
        warmup: settings.warmup_round_trips,
        origin: (clock.raw(), clock.now()),
    };

    let mut tallies = empty_tallies(&settings, sample_capacity);
    let running = start_load(conditions.load, &settings)?;
    let started_unix_ns = unix_now_ns();
    let started = clock.raw();
    let interrupted = measure_rounds(&plan, &settings, control, &mut tallies, &mut tick);
    let elapsed_ns = clock.raw_delta_ns(clock.raw().wrapping_sub(started));
    // On v2 the whole process joined with its first thread: back out, even after a failure.
    let left = joined.as_ref().map_or(Ok(()), Joined::leave);
    let interrupted = interrupted?;
    left?;
    let load = running.map(RunningLoad::stop);

    let groups = build_groups(&settings, &tallies);
    let ratios = ratios::ratios(&groups, &settings.sizes);
    let merged = ratios::ratios_group(&ratios);
    let samples = Samples {
        cpu: settings.sides.timing.cpu,
        groups: take_samples(&settings, &mut tallies),
    };
    let result = BenchResult {
        schema_version: SCHEMA.version,
        bench: "ipc".into(),
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        command_line,
        started_unix_ns,
        elapsed_ns,
        interrupted,
        environment,
        calibration,
        load,
        partition: conditions.placement.map(|p| p.partition.clone()),
        settings,
        groups,
        merged,
    };
    Ok(IpcRun {
        result,
        ratios,
        samples,
    })
}

fn start_load(
    load: Option<&LoadSpec>,
    settings: &IpcSettings,
) -> crate::Result<Option<RunningLoad>> {
    session::start_load(load, load_bound_ns(settings))
}

/// An empty tally for every size and transport.
fn empty_tallies(
    settings: &IpcSettings,
    sample_capacity: usize,
) -> BTreeMap<(usize, Transport), Tally> {
    let mut tallies = BTreeMap::new();
    for &size in &settings.sizes {
        for &transport in &settings.transports {
            tallies.insert((size, transport), Tally::new(sample_capacity));
        }
    }
    tallies
}

/// The kept round trips of each group, in the groups' order (nothing when none were kept).
fn take_samples(
    settings: &IpcSettings,
    tallies: &mut BTreeMap<(usize, Transport), Tally>,
) -> Vec<(String, SampleBuffer)> {
    let mut out = Vec::new();
    for &size in &settings.sizes {
        for &transport in &settings.transports {
            if let Some(tally) = tallies.get_mut(&(size, transport)) {
                if !tally.samples.is_empty() {
                    out.push((
                        ratios::label(transport, size),
                        std::mem::take(&mut tally.samples),
                    ));
                }
            }
        }
    }
    out
}

/// What one round measures of each size and transport.
struct RoundShare {
    round_trips: u64,
    messages: u64,
}

impl RoundShare {
    fn of(settings: &IpcSettings, round: u64) -> Self {
        let rounds = u64::from(settings.rounds);
        // The first round takes the remainder so the totals are exact.
        let share = |total: u64| total / rounds + if round == 0 { total % rounds } else { 0 };
        RoundShare {
            round_trips: share(settings.round_trips),
            messages: share(settings.throughput_messages / BLOCK) * BLOCK,
        }
    }
}

/// Each round measures every size and transport once, in turn, so that machine noise
/// hits them alike. Returns whether `control` stopped the run before its end.
fn measure_rounds(
    plan: &Plan,
    settings: &IpcSettings,
    control: &RunControl,
    tallies: &mut BTreeMap<(usize, Transport), Tally>,
    tick: &mut impl FnMut(u64),
) -> crate::Result<bool> {
    // One round's latencies, merged into the tally afterwards: its figures give the spread.
    let mut round = Recorder::new();
    let mut done = 0;
    for round_index in 0..u64::from(settings.rounds) {
        let share = RoundShare::of(settings, round_index);
        for &size in &settings.sizes {
            for &transport in &settings.transports {
                if control.stopped() {
                    return Ok(true);
                }
                let tally = tallies
                    .get_mut(&(size, transport))
                    .expect("tally for every pair");
                measure_segment(size, transport, plan, settings, &share, &mut round, tally)?;
                // Between segments, never inside one: the progress costs the timing nothing.
                done += 1;
                tick(done);
            }
        }
    }
    Ok(false)
}

/// One round's segment of one size and transport: latency, then throughput for queues.
fn measure_segment(
    size: usize,
    transport: Transport,
    plan: &Plan,
    settings: &IpcSettings,
    share: &RoundShare,
    round: &mut Recorder,
    tally: &mut Tally,
) -> crate::Result<()> {
    let failed = |what: &str, e: io::Error| {
        io_failed(format!("{} {size} B {what} failed", transport.name()), e)
    };
    round.reset();
    measure_latency(
        size,
        transport,
        plan,
        settings,
        share.round_trips,
        round,
        &mut tally.samples,
    )
    .map_err(|e| failed("latency", e))?;
    let summary = round.summary();
    for figure in LATENCY_SPREAD {
        let value = match figure {
            "mean" => summary.mean,
            "p50" => summary.p50,
            _ => summary.p99,
        };
        tally.note(format!("one_way_latency {figure}"), value as f64);
    }
    tally.latency.merge(round);
    if transport.is_queue() {
        let ns = measure_throughput(
            size,
            transport,
            plan,
            settings,
            share.messages,
            &mut tally.throughput,
        )
        .map_err(|e| failed("throughput", e))?;
        tally.messages += share.messages;
        tally.throughput_ns += ns;
        if ns > 0 {
            tally.note(
                "throughput_msgs_per_s".into(),
                share.messages as f64 * 1e9 / ns as f64,
            );
        }
    }
    tally.rounds += 1;
    Ok(())
}

pub(super) fn build_groups(
    settings: &IpcSettings,
    tallies: &BTreeMap<(usize, Transport), Tally>,
) -> Vec<GroupResult> {
    let mut groups = Vec::new();
    for &size in &settings.sizes {
        let floor_p50 = tallies
            .get(&(size, Transport::Floor))
            .filter(|t| t.rounds > 0)
            .map(|t| t.latency.summary().p50)
            .filter(|&p| p > 0);
        for &transport in &settings.transports {
            let tally = &tallies[&(size, transport)];
            if tally.rounds == 0 {
                groups.push(not_measured(settings, transport, size));
                continue;
            }
            let latency = tally.latency.summary();
            let mut group = GroupResult {
                label: ratios::label(transport, size),
                cpu: Some(settings.sides.timing.cpu),
                metrics: vec![Metric {
                    name: "one_way_latency".into(),
                    unit: "ns".into(),
                    summary: latency,
                    distribution: Some(Distribution::of(&tally.latency)),
                }],
                counters: [("round_trips".to_string(), tally.latency.count())]
                    .into_iter()
                    .collect(),
                derived: BTreeMap::new(),
                // A spread needs two rounds at least.
                spread: if tally.rounds >= 2 {
                    tally.spread.clone()
                } else {
                    BTreeMap::new()
                },
                timeline: None,
                not_measured: None,
            };
            if let Some(floor) = floor_p50 {
                group.derived.insert(
                    "median_over_floor".into(),
                    latency.p50 as f64 / floor as f64,
                );
            }
            if transport.is_queue() && tally.messages > 0 {
                group.metrics.push(Metric {
                    name: "throughput_ns_per_msg".into(),
                    unit: "ns".into(),
                    summary: tally.throughput.summary(),
                    distribution: Some(Distribution::of(&tally.throughput)),
                });
                group
                    .counters
                    .insert("throughput_messages".into(), tally.messages);
                if tally.throughput_ns > 0 {
                    let rate = tally.messages as f64 * 1e9 / tally.throughput_ns as f64;
                    group.derived.insert("throughput_msgs_per_s".into(), rate);
                }
            }
            groups.push(group);
        }
    }
    groups
}

/// Why a group has no figures: Ctrl-C stopped the run before its first segment.
pub const NOT_MEASURED: &str =
    "the run was stopped (Ctrl-C) before it reached this transport and size";

/// The group of a transport and size the run never reached: no figures, marked as such.
fn not_measured(settings: &IpcSettings, transport: Transport, size: usize) -> GroupResult {
    GroupResult {
        label: ratios::label(transport, size),
        cpu: Some(settings.sides.timing.cpu),
        not_measured: Some(NOT_MEASURED.to_string()),
        ..GroupResult::default()
    }
}

fn measure_latency(
    size: usize,
    transport: Transport,
    plan: &Plan,
    settings: &IpcSettings,
    round_trips: u64,
    recorder: &mut Recorder,
    samples: &mut SampleBuffer,
) -> io::Result<()> {
    let out = Timed { recorder, samples };
    with_words!(size, W => latency_for::<W>(transport, plan, settings, round_trips, out))
}

fn measure_throughput(
    size: usize,
    transport: Transport,
    plan: &Plan,
    settings: &IpcSettings,
    messages: u64,
    recorder: &mut Recorder,
) -> io::Result<u64> {
    with_words!(size, W => throughput_for::<W>(transport, plan, settings, messages, recorder))
}

/// Where the timing thread puts what it measures.
struct Timed<'a> {
    recorder: &'a mut Recorder,
    samples: &'a mut SampleBuffer,
}

fn latency_for<const W: usize>(
    transport: Transport,
    plan: &Plan,
    settings: &IpcSettings,
    round_trips: u64,
    out: Timed<'_>,
) -> io::Result<()> {
    let capacity = settings.ring_capacity;
    match transport {
        Transport::Floor => {
            ping_pong::<W, _>(handed(endpoint::floor_pair()), plan, round_trips, out)
        }
        Transport::TameRing => ping_pong::<W, _>(
            handed(endpoint::tame_ring_pair::<W>(capacity)?),
            plan,
            round_trips,
            out,
        ),
        Transport::TameRegister => ping_pong::<W, _>(
            handed(endpoint::tame_register_pair::<W>()?),
            plan,
            round_trips,
            out,
        ),
        Transport::Rtrb => ping_pong::<W, _>(
            handed(endpoint::rtrb_pair::<W>(capacity as usize)),
            plan,
            round_trips,
            out,
        ),
        Transport::Pipe => {
            ping_pong::<W, _>(handed(endpoint::pipe_pair()?), plan, round_trips, out)
        }
        Transport::UnixSocket => {
            ping_pong::<W, _>(handed(endpoint::unix_pair()?), plan, round_trips, out)
        }
        Transport::Mq => ping_pong::<W, _>(
            handed(endpoint::mq_pair(
                std::mem::size_of::<Message<W>>(),
                mq_segment_bound(plan.warmup + round_trips),
            )?),
            plan,
            round_trips,
            out,
        ),
        #[cfg(feature = "iceoryx2")]
        Transport::Iceoryx2 => ping_pong::<W, _>(
            super::iox2::pair::<W>(capacity as usize)?,
            plan,
            round_trips,
            out,
        ),
        #[cfg(not(feature = "iceoryx2"))]
        Transport::Iceoryx2 => Err(unbuilt()),
    }
}

fn throughput_for<const W: usize>(
    transport: Transport,
    plan: &Plan,
    settings: &IpcSettings,
    messages: u64,
    recorder: &mut Recorder,
) -> io::Result<u64> {
    let capacity = settings.ring_capacity;
    match transport {
        Transport::TameRing => stream::<W, _>(
            handed(endpoint::tame_ring_pair::<W>(capacity)?),
            plan,
            messages,
            recorder,
        ),
        Transport::Rtrb => stream::<W, _>(
            handed(endpoint::rtrb_pair::<W>(capacity as usize)),
            plan,
            messages,
            recorder,
        ),
        Transport::Pipe => stream::<W, _>(handed(endpoint::pipe_pair()?), plan, messages, recorder),
        Transport::UnixSocket => {
            stream::<W, _>(handed(endpoint::unix_pair()?), plan, messages, recorder)
        }
        Transport::Mq => stream::<W, _>(
            handed(endpoint::mq_pair(
                std::mem::size_of::<Message<W>>(),
                mq_segment_bound(messages),
            )?),
            plan,
            messages,
            recorder,
        ),
        #[cfg(feature = "iceoryx2")]
        Transport::Iceoryx2 => stream::<W, _>(
            super::iox2::pair::<W>(capacity as usize)?,
            plan,
            messages,
            recorder,
        ),
        #[cfg(not(feature = "iceoryx2"))]
        Transport::Iceoryx2 => Err(unbuilt()),
        Transport::Floor | Transport::TameRegister => Ok(0),
    }
}

/// Settings validation refuses iceoryx2 in a build without it; this is the last guard.
#[cfg(not(feature = "iceoryx2"))]
fn unbuilt() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        "iceoryx2 is not built into this tame (cargo feature iceoryx2)",
    )
}

/// Places the calling thread on its side (joins the partition's cgroup first where the
/// side is in it, then pins), makes its end, then meets the other thread at the barrier
/// whatever happened, so a failure never leaves the peer waiting at the barrier.
fn place_and_meet<E>(
    side: Side,
    plan: &Plan,
    barrier: &Barrier,
    make: impl FnOnce() -> io::Result<E>,
) -> io::Result<E> {
    // Made after placing: an end made here (iceoryx2's ports) lives on this thread, and
    // before the barrier, so both ends exist before the first message.
    let end = place(side, plan).and_then(|()| make());
    barrier.wait();
    end
}

fn place(side: Side, plan: &Plan) -> io::Result<()> {
    if side.in_partition {
        let join = plan
            .join
            .as_ref()
            .ok_or_else(|| io::Error::other("the side is in a partition, but none was prepared"))?;
        join.join().map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot join the partition's cgroup (is it still applied? see tame status): {e}"),
            )
        })?;
    }
    tame_rt::sched::pin_current_thread(side.cpu)
        .map(|_| ())
        .map_err(|e| io::Error::other(format!("cannot pin to CPU {}: {e}", side.cpu)))
}

fn join(handle: std::thread::ScopedJoinHandle<'_, io::Result<()>>) -> io::Result<()> {
    handle
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("a bench thread panicked")))
}

/// Timed thread: send, wait for the echo, record half the round trip. Echo thread:
/// receive, send back.
fn ping_pong<const W: usize, E: Endpoint<W>>(
    (timed, echo): (impl Make<E>, impl Make<E>),
    plan: &Plan,
    round_trips: u64,
    out: Timed<'_>,
) -> io::Result<()> {
    let Timed { recorder, samples } = out;
    let barrier = &Barrier::new(2);
    let total = plan.warmup + round_trips;
    // Each thread owns its end (move), so an end that stops early is dropped and its
    // peer sees EOF instead of waiting forever.
    std::thread::scope(|scope| {
        let echoing = scope.spawn(move || -> io::Result<()> {
            // On this thread's own stack: the two ends' private indices must not share
            // a cache line (closures live side by side on the heap).
            let mut echo = place_and_meet(plan.sides.echo, plan, barrier, echo)?;
            let mut msg = [0u64; W];
            for _ in 0..total {
                echo.recv(&mut msg)?;
                echo.send(&msg)?;
            }
            Ok(())
        });
        let timing = scope.spawn(move || -> io::Result<()> {
            let mut timed = place_and_meet(plan.sides.timing, plan, barrier, timed)?;
            let clock = plan.clock;
            let mut msg = [0u64; W];
            let mut reply = [0u64; W];
            for i in 0..total {
                set_seq(&mut msg, i);
                let t0 = clock.raw();
                timed.send(&msg)?;
                timed.recv(&mut reply)?;
                let t1 = clock.raw();
                if seq(&reply) != i {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("reply {} arrived for message {i}", seq(&reply)),
                    ));
                }
                if i >= plan.warmup {
                    let round_trip = clock.raw_delta_ns(t1.wrapping_sub(t0));
                    recorder.record(round_trip / 2);
                    // Into a buffer sized before the start (nothing when none is wanted).
                    samples.push(Sample {
                        t_ns: plan.timestamp_ns(t0),
                        value_ns: round_trip,
                    });
                }
            }
            Ok(())
        });
        let timed_result = join(timing);
        let echo_result = join(echoing);
        timed_result.and(echo_result)
    })
}

/// Sender streams `messages` as fast as it can; the receiver checks their order and
/// records the time per message of each block of [`BLOCK`]. Returns the receiver's
/// total time, ns.
fn stream<const W: usize, E: Endpoint<W>>(
    (sender, receiver): (impl Make<E>, impl Make<E>),
    plan: &Plan,
    messages: u64,
    recorder: &mut Recorder,
) -> io::Result<u64> {
    let barrier = &Barrier::new(2);
    std::thread::scope(|scope| {
        let sending = scope.spawn(move || -> io::Result<()> {
            let mut sender = place_and_meet(plan.sides.timing, plan, barrier, sender)?;
            let mut msg = [0u64; W];
            for i in 0..messages {
                set_seq(&mut msg, i);
                sender.send(&msg)?;
            }
            Ok(())
        });
        let receiving = scope.spawn(move || -> io::Result<u64> {
            let mut receiver = place_and_meet(plan.sides.echo, plan, barrier, receiver)?;
            let clock = plan.clock;
            let mut msg = [0u64; W];
            let start = clock.raw();
            let mut block_start = start;
            for i in 0..messages {
                receiver.recv(&mut msg)?;
                if seq(&msg) != i {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("message {} arrived in place of {i}", seq(&msg)),
                    ));
                }
                if (i + 1) % BLOCK == 0 {
                    let now = clock.raw();
                    recorder.record(clock.raw_delta_ns(now.wrapping_sub(block_start)) / BLOCK);
                    block_start = now;
                }
            }
            Ok(clock.raw_delta_ns(clock.raw().wrapping_sub(start)))
        });
        let received = receiving
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("a bench thread panicked")));
        let sent = join(sending);
        let total = received?;
        sent?;
        Ok(total)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tame_host::cgroup::Group;
    use tame_host::CpuList;
    use tame_rt::ClockKind;

    fn settings(cpus: [u32; 2]) -> IpcSettings {
        IpcSettings {
            sides: Sides::unplaced(cpus),
            sizes: vec![8],
            transports: vec![Transport::Pipe],
            round_trips: 1_001,
            warmup_round_trips: 0,
            throughput_messages: 7 * BLOCK + 5,
            rounds: 3,
            ring_capacity: 256,
            clock: ClockKind::Monotonic,
        }
    }

    #[test]
    fn rounds_share_the_totals_exactly() {
        let settings = settings([0, 1]);
        let shares: Vec<(u64, u64)> = (0..3)
            .map(|round| RoundShare::of(&settings, round))
            .map(|s| (s.round_trips, s.messages))
            .collect();
        // The first round takes the remainders; messages go in whole blocks.
        assert_eq!(
            shares,
            vec![(335, 3 * BLOCK), (333, 2 * BLOCK), (333, 2 * BLOCK)]
        );
    }

    #[test]
    fn the_load_may_run_as_long_as_the_slowest_run() {
        // 1 pair × (1001 round trips + 7173 messages) × 200 µs, plus the stall timeout.
        let s = settings([0, 1]);
        let messages = 1_001 + 7 * BLOCK + 5;
        assert_eq!(
            load_bound_ns(&s),
            messages * 200_000 + STALL_TIMEOUT.as_nanos() as u64
        );
        let huge = IpcSettings {
            round_trips: u64::MAX,
            ..settings([0, 1])
        };
        assert_eq!(load_bound_ns(&huge), 30 * 86_400 * 1_000_000_000);
    }

    #[test]
    fn raw_samples_are_bounded_per_run() {
        let s = IpcSettings {
            round_trips: 1_000,
            sizes: vec![8, 64],
            transports: Transport::ALL.to_vec(),
            ..settings([0, 1])
        };
        assert_eq!(s.sample_capacity(false).unwrap(), 0);
        assert_eq!(s.sample_capacity(true).unwrap(), 1_000);
        let too_many = IpcSettings {
            round_trips: session::MAX_SAMPLES_TOTAL,
            ..s
        };
        let e = too_many.sample_capacity(true).unwrap_err();
        assert!(e.is_bad_input() && e.to_string().contains("1.6 GB"), "{e}");
    }

    fn placement(cpus: &str, version: CgroupVersion) -> Placement {
        Placement {
            partition: "rt".into(),
            cpus: CpuList::parse(cpus).unwrap(),
            group: Group::new(version, "/sys/fs/cgroup/cpuset", "/tame-rt"),
        }
    }

    fn refusal(sides: Sides, p: Option<&Placement>) -> String {
        let dir = tempfile::tempdir().unwrap();
        let e = check_sides(&Root::new(dir.path()), &sides, p).unwrap_err();
        assert!(e.is_bad_input(), "{e}");
        e.to_string()
    }

    fn allowed() -> Vec<u32> {
        tame_rt::sched::allowed_cpus()
    }

    #[test]
    fn sides_that_cannot_be_placed_are_bad_input() {
        let mine = allowed()[0];
        let in_rt = |cpu| Side {
            cpu,
            in_partition: true,
        };
        let out = |cpu| Side {
            cpu,
            in_partition: false,
        };
        // v2 holds whole processes: the echo thread cannot stay outside.
        let v2 = placement("4000", CgroupVersion::V2);
        let e = refusal(
            Sides {
                timing: in_rt(4000),
                echo: out(mine),
            },
            Some(&v2),
        );
        assert!(
            e.starts_with("partition \"rt\" is a cgroup v2 group, which holds whole processes"),
            "{e}"
        );
        // The echo CPU neither in the partition nor one tame may use.
        let v1 = placement("4000", CgroupVersion::V1);
        let e = refusal(
            Sides {
                timing: in_rt(4000),
                echo: out(4001),
            },
            Some(&v1),
        );
        assert!(
            e.starts_with("the echo CPU 4001 is neither in partition \"rt\" (its CPUs: 4000) nor one tame may run on"),
            "{e}"
        );
        // A side said to be in the partition on a CPU that is not the partition's.
        let e = refusal(
            Sides {
                timing: in_rt(4002),
                echo: out(mine),
            },
            Some(&v1),
        );
        assert!(
            e.starts_with("the timing CPU 4002 is not in partition \"rt\""),
            "{e}"
        );
        // The timing side outside the partition it names.
        let e = refusal(
            Sides {
                timing: out(mine),
                echo: in_rt(4000),
            },
            Some(&v1),
        );
        assert!(e.contains("the timing side runs in the partition"), "{e}");
        // A side in a partition without one.
        let e = refusal(
            Sides {
                timing: in_rt(mine),
                echo: out(mine),
            },
            None,
        );
        assert!(e.contains("no partition was given"), "{e}");
        // Without -p, a CPU tame may not use.
        let e = refusal(Sides::unplaced([mine, 4001]), None);
        assert!(
            e.starts_with("CPU 4001 is online but outside this process's allowed CPUs"),
            "{e}"
        );
        // v1, the partition's cgroup is missing: refused too, after the sides passed.
        let e = refusal(
            Sides {
                timing: in_rt(4000),
                echo: out(mine),
            },
            Some(&v1),
        );
        assert!(
            e.contains("its cgroup /sys/fs/cgroup/cpuset/tame-rt does not exist"),
            "{e}"
        );
    }

    /// A short real run over every transport this build has (iceoryx2 with its feature) and
    /// every size: each produces its distributions and its spread over the rounds, the
    /// shared-memory ones beat the kernel ones, the ratios are computed and the raw round
    /// trips kept.
    #[test]
    fn short_run_measures_every_transport() {
        let allowed = allowed();
        if !tame_testing::require::require(
            allowed.len() >= 2,
            "two CPUs this process may run on (the IPC bench)",
        ) {
            return;
        }
        let settings = IpcSettings {
            sides: Sides::unplaced([allowed[0], allowed[1]]),
            sizes: super::super::SIZES.to_vec(),
            transports: Transport::available(),
            round_trips: 2_000,
            warmup_round_trips: 100,
            throughput_messages: 4 * BLOCK,
            rounds: 2,
            ring_capacity: 256,
            clock: ClockKind::Monotonic,
        };
        let capacity = settings.sample_capacity(true).unwrap();
        let total = settings.progress_total();
        let mut ticks = Vec::new();
        let run = run(
            &Root::system(),
            settings,
            Conditions::default(),
            &RunControl::new(),
            capacity,
            |done| ticks.push(done),
            vec!["test".into()],
        )
        .unwrap();
        // One tick after each segment, up to the total.
        assert_eq!(ticks, (1..=total).collect::<Vec<_>>());
        let result = &run.result;
        assert_eq!(result.bench, "ipc");
        assert_eq!(result.schema_version, SCHEMA.version);
        assert_eq!(
            (result.partition.as_deref(), result.load.as_ref()),
            (None, None)
        );
        let transports = Transport::available().len();
        assert_eq!(result.groups.len(), 5 * transports);
        for group in &result.groups {
            let latency = group.metric("one_way_latency").unwrap().summary;
            assert_eq!(latency.count, 2_000, "{}", group.label);
            assert!(latency.min > 0 && latency.min <= latency.p50 && latency.p50 <= latency.max);
            assert_eq!(group.cpu, Some(allowed[0]));
            let is_queue =
                !group.label.starts_with("floor") && !group.label.starts_with("tame-register");
            assert_eq!(
                group.metric("throughput_ns_per_msg").is_some(),
                is_queue,
                "{}",
                group.label
            );
            // Two rounds: each figure's spread covers the merged value's neighbourhood.
            let p50 = group.spread["one_way_latency p50"];
            assert!(p50.min > 0.0 && p50.min <= p50.max, "{}", group.label);
            assert!(group.spread.contains_key("one_way_latency p99"));
            if is_queue {
                assert_eq!(group.counters["throughput_messages"], 4 * BLOCK);
                assert_eq!(
                    group.metric("throughput_ns_per_msg").unwrap().summary.count,
                    4
                );
                let rate = group.derived["throughput_msgs_per_s"];
                let spread = group.spread["throughput_msgs_per_s"];
                assert!(spread.min <= rate && rate <= spread.max, "{}", group.label);
            }
        }
        let p50 = |label: &str| {
            let group = result.groups.iter().find(|g| g.label == label).unwrap();
            group.metric("one_way_latency").unwrap().summary.p50
        };
        assert!(
            p50("tame-ring/8B") < p50("pipe/8B"),
            "shared memory beats a pipe"
        );
        // Per size: 2 tame channels × (median over the floor + 3 kernel transports) + ring
        // over rtrb; with iceoryx2, the ring's median and msgs/s over its. No p99.9 ratio:
        // 2 000 round trips cannot support a p99.9 (it needs 10 000).
        let per_size = 2 * (1 + 3) + 1 + if cfg!(feature = "iceoryx2") { 2 } else { 0 };
        assert_eq!(run.ratios.len(), 5 * per_size);
        assert!(run.ratios.iter().all(|r| !r.name.starts_with("p99_9_")));
        assert_eq!(result.merged.label, "ratios");
        assert_eq!(result.merged.derived.len(), run.ratios.len());
        assert!(result.merged.counters.is_empty());
        // Every measured round trip kept, timed on the timing CPU, in time order.
        assert_eq!(run.samples.cpu, allowed[0]);
        assert_eq!(run.samples.groups.len(), result.groups.len());
        for ((label, buffer), group) in run.samples.groups.iter().zip(&result.groups) {
            assert_eq!(label, &group.label);
            assert_eq!(buffer.len(), 2_000);
            assert!(buffer.samples().windows(2).all(|w| w[0].t_ns <= w[1].t_ns));
            let one_way = group.metric("one_way_latency").unwrap().summary;
            let shortest = buffer.samples().iter().map(|s| s.value_ns).min().unwrap();
            assert_eq!(shortest / 2, one_way.min, "{label}");
        }
        let text = crate::ipc::summary_text(&run);
        assert!(
            text.contains("tame-ring/64B") && text.contains("ratios"),
            "{text}"
        );
    }

    /// With a partition (a v1 cpuset in a scratch tree standing in for the machine's), the
    /// timing thread joins its cgroup before it pins itself; the result names the partition.
    #[test]
    fn a_run_in_a_partition_joins_its_cgroup_from_the_timing_side() {
        let allowed = allowed();
        if !tame_testing::require::require(
            allowed.len() >= 2,
            "two CPUs this process may run on (the IPC bench)",
        ) {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path();
        let group = base.join("sys/fs/cgroup/cpuset/tame-rt");
        std::fs::create_dir_all(&group).unwrap();
        std::fs::write(group.join("tasks"), "").unwrap();
        let proc_dir = base.join(format!("proc/{}", std::process::id()));
        std::fs::create_dir_all(&proc_dir).unwrap();
        std::fs::write(proc_dir.join("cgroup"), "3:cpuset:/\n").unwrap();
        let online = Root::system().cpus_online().unwrap();
        let cpu_dir = base.join(&tame_host::cpu::SYS_CPU[1..]);
        std::fs::create_dir_all(&cpu_dir).unwrap();
        std::fs::write(cpu_dir.join("online"), format!("{online}\n")).unwrap();
        let root = Root::new(base);
        let partition = Placement {
            partition: "rt".into(),
            cpus: CpuList::from_cpus([allowed[1]]),
            group: Group::new(CgroupVersion::V1, "/sys/fs/cgroup/cpuset", "/tame-rt"),
        };
        let system = CpuList::from_cpus([allowed[0]]);
        let sides = super::super::sides::choose(None, Some(&partition), Some(&system)).unwrap();
        let settings = IpcSettings {
            sides,
            sizes: vec![8],
            transports: vec![Transport::Floor],
            round_trips: 500,
            warmup_round_trips: 10,
            throughput_messages: BLOCK,
            rounds: 1,
            ring_capacity: 256,
            clock: ClockKind::Monotonic,
        };
        let conditions = Conditions {
            load: None,
            placement: Some(&partition),
        };
        let run = run(
            &root,
            settings,
            conditions,
            &RunControl::new(),
            0,
            |_| {},
            vec![],
        )
        .unwrap();
        let result = &run.result;
        assert_eq!(result.partition.as_deref(), Some("rt"));
        assert_eq!(
            result.settings.sides,
            Sides {
                timing: Side {
                    cpu: allowed[1],
                    in_partition: true
                },
                echo: Side {
                    cpu: allowed[0],
                    in_partition: false
                },
            }
        );
        // The timing thread wrote its thread id (not this thread's) into the task list.
        let joined: u32 = std::fs::read_to_string(group.join("tasks"))
            .unwrap()
            .trim()
            .parse()
            .expect("a thread joined the partition");
        // SAFETY: gettid takes no arguments and cannot fail.
        let this_thread = unsafe { libc::gettid() };
        assert_ne!(joined, this_thread as u32);
        assert_eq!(result.groups[0].cpu, Some(allowed[1]));
        // One round: no spread.
        assert!(result.groups[0].spread.is_empty());
        assert!(run.samples.groups.is_empty());
    }
}
