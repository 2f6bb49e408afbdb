//! Runs the IPC bench: rounds × sizes × transports, each segment on two freshly
//! created endpoints and two threads pinned to the two CPUs.
//!
//! The timed loops allocate nothing: recorders are built before the run, messages
//! are stack arrays, and the only system calls are the ones the transport itself
//! makes (none for the shared-memory transports).

use std::collections::BTreeMap;
use std::io;
use std::sync::Barrier;
use std::time::Duration;

use tame_host::environment::RunEnvironment;
use tame_host::Root;
use tame_rt::Clock;

use super::endpoint::{self, Endpoint};
use super::goals::{self, GoalCheck};
use super::{IpcSettings, Transport, BLOCK};
use crate::engine::{self, RunControl};
use crate::error::io_failed;
use crate::result::{unix_now_ns, BenchResult, GroupResult, Metric, SCHEMA_VERSION};
use crate::stats::Recorder;

/// Generous time per message for a message-queue segment's deadline: a blocked
/// receive cannot notice a vanished peer, so each segment gets a deadline.
const MQ_TIME_PER_MESSAGE: Duration = Duration::from_micros(200);

fn mq_segment_bound(messages: u64) -> Duration {
    MQ_TIME_PER_MESSAGE.saturating_mul(u32::try_from(messages).unwrap_or(u32::MAX))
}

/// A finished run: the versioned result and the goal verdicts (also inside the
/// result's `merged` group).
pub struct IpcRun {
    pub result: BenchResult<IpcSettings>,
    pub goals: Vec<GoalCheck>,
}

/// Where the two threads run and how they read time.
#[derive(Clone, Copy)]
struct Plan {
    timed_cpu: u32,
    echo_cpu: u32,
    clock: Clock,
    warmup: u64,
}

/// What one transport and size accumulated over the rounds.
pub(super) struct Tally {
    pub(super) latency: Recorder,
    pub(super) throughput: Recorder,
    pub(super) messages: u64,
    pub(super) throughput_ns: u64,
}

impl Tally {
    pub(super) fn new() -> Tally {
        Tally {
            latency: Recorder::new(),
            throughput: Recorder::new(),
            messages: 0,
            throughput_ns: 0,
        }
    }
}

/// Everything that can refuse `settings` on this host before anything starts: the settings'
/// own rules, and both CPUs online and allowed to this process. Returns the environment read.
pub fn check(root: &Root, settings: &IpcSettings) -> crate::Result<RunEnvironment> {
    let environment = RunEnvironment::capture(root);
    settings.validate(&environment.online_cpus)?;
    let allowed = tame_rt::sched::allowed_cpus();
    if let Some(cpu) = settings.cpus.iter().find(|cpu| !allowed.contains(cpu)) {
        return Err(crate::error::invalid(format!(
            "CPU {cpu} is online but outside this process's allowed CPUs {allowed:?} (a cpuset confines it) — pick allowed CPUs with --cpus, or run tame outside that cpuset"
        )));
    }
    Ok(environment)
}

/// Validates, measures and assembles the result. Stops between segments when
/// `control` is stopped (the result then says `interrupted`).
pub fn run(
    root: &Root,
    settings: IpcSettings,
    command_line: Vec<String>,
    control: &RunControl,
) -> crate::Result<IpcRun> {
    let environment = check(root, &settings)?;
    let clock = engine::make_clock(settings.clock, environment.invariant_tsc)?;
    let calibration = engine::calibrate(&clock);
    let plan = Plan {
        timed_cpu: settings.cpus[0],
        echo_cpu: settings.cpus[1],
        clock,
        warmup: settings.warmup_round_trips,
    };

    let mut tallies = empty_tallies(&settings);
    let started_unix_ns = unix_now_ns();
    let started = clock.raw();
    let interrupted = measure_rounds(&plan, &settings, control, &mut tallies)?;
    let elapsed_ns = clock.raw_delta_ns(clock.raw().wrapping_sub(started));

    let groups = build_groups(&settings, &tallies);
    let goals = goals::evaluate(&groups, &settings.sizes);
    let merged = goals_group(&goals);
    let result = BenchResult {
        schema_version: SCHEMA_VERSION,
        bench: "ipc".into(),
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        command_line,
        started_unix_ns,
        elapsed_ns,
        interrupted,
        environment,
        calibration,
        load: None,
        partition: None,
        settings,
        groups,
        merged,
    };
    Ok(IpcRun { result, goals })
}

/// An empty tally for every size and transport.
fn empty_tallies(settings: &IpcSettings) -> BTreeMap<(usize, Transport), Tally> {
    let mut tallies = BTreeMap::new();
    for &size in &settings.sizes {
        for &transport in &settings.transports {
            tallies.insert((size, transport), Tally::new());
        }
    }
    tallies
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
) -> crate::Result<bool> {
    for round in 0..u64::from(settings.rounds) {
        let share = RoundShare::of(settings, round);
        for &size in &settings.sizes {
            for &transport in &settings.transports {
                if control.stopped() {
                    return Ok(true);
                }
                let tally = tallies
                    .get_mut(&(size, transport))
                    .expect("tally for every pair");
                measure_segment(size, transport, plan, settings, &share, tally)?;
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
    tally: &mut Tally,
) -> crate::Result<()> {
    let failed = |what: &str, e: io::Error| {
        io_failed(format!("{} {size} B {what} failed", transport.name()), e)
    };
    measure_latency(
        size,
        transport,
        plan,
        settings,
        share.round_trips,
        &mut tally.latency,
    )
    .map_err(|e| failed("latency", e))?;
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
    }
    Ok(())
}

/// The merged group of an IPC result: each goal's ratio (derived) and verdict (counter,
/// 1 met / 0 not).
fn goals_group(goals: &[GoalCheck]) -> GroupResult {
    GroupResult {
        label: "goals".into(),
        cpu: None,
        metrics: Vec::new(),
        counters: goals
            .iter()
            .map(|g| (g.name.clone(), u64::from(g.met)))
            .collect(),
        derived: goals.iter().map(|g| (g.name.clone(), g.value)).collect(),
    }
}

pub(super) fn build_groups(
    settings: &IpcSettings,
    tallies: &BTreeMap<(usize, Transport), Tally>,
) -> Vec<GroupResult> {
    let mut groups = Vec::new();
    for &size in &settings.sizes {
        let floor_p50 = tallies
            .get(&(size, Transport::Floor))
            .map(|t| t.latency.summary().p50)
            .filter(|&p| p > 0);
        for &transport in &settings.transports {
            let tally = &tallies[&(size, transport)];
            let latency = tally.latency.summary();
            let mut group = GroupResult {
                label: goals::label(transport, size),
                cpu: Some(settings.cpus[0]),
                metrics: vec![Metric {
                    name: "one_way_latency".into(),
                    unit: "ns".into(),
                    summary: latency,
                }],
                counters: [("round_trips".to_string(), tally.latency.count())]
                    .into_iter()
                    .collect(),
                derived: BTreeMap::new(),
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

fn measure_latency(
    size: usize,
    transport: Transport,
    plan: &Plan,
    settings: &IpcSettings,
    round_trips: u64,
    recorder: &mut Recorder,
) -> io::Result<()> {
    match size {
        8 => latency_for::<8>(transport, plan, settings, round_trips, recorder),
        64 => latency_for::<64>(transport, plan, settings, round_trips, recorder),
        other => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("size {other}"),
        )),
    }
}

fn measure_throughput(
    size: usize,
    transport: Transport,
    plan: &Plan,
    settings: &IpcSettings,
    messages: u64,
    recorder: &mut Recorder,
) -> io::Result<u64> {
    match size {
        8 => throughput_for::<8>(transport, plan, settings, messages, recorder),
        64 => throughput_for::<64>(transport, plan, settings, messages, recorder),
        other => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("size {other}"),
        )),
    }
}

fn latency_for<const N: usize>(
    transport: Transport,
    plan: &Plan,
    settings: &IpcSettings,
    round_trips: u64,
    recorder: &mut Recorder,
) -> io::Result<()> {
    let capacity = settings.ring_capacity;
    match transport {
        Transport::Floor => ping_pong::<N, _>(endpoint::floor_pair(), plan, round_trips, recorder),
        Transport::TameRing => ping_pong::<N, _>(
            endpoint::tame_ring_pair::<N>(capacity)?,
            plan,
            round_trips,
            recorder,
        ),
        Transport::TameRegister => ping_pong::<N, _>(
            endpoint::tame_register_pair::<N>()?,
            plan,
            round_trips,
            recorder,
        ),
        Transport::Rtrb => ping_pong::<N, _>(
            endpoint::rtrb_pair::<N>(capacity as usize),
            plan,
            round_trips,
            recorder,
        ),
        Transport::Pipe => ping_pong::<N, _>(endpoint::pipe_pair()?, plan, round_trips, recorder),
        Transport::UnixSocket => {
            ping_pong::<N, _>(endpoint::unix_pair()?, plan, round_trips, recorder)
        }
        Transport::Mq => ping_pong::<N, _>(
            endpoint::mq_pair(N, mq_segment_bound(plan.warmup + round_trips))?,
            plan,
            round_trips,
            recorder,
        ),
    }
}

fn throughput_for<const N: usize>(
    transport: Transport,
    plan: &Plan,
    settings: &IpcSettings,
    messages: u64,
    recorder: &mut Recorder,
) -> io::Result<u64> {
    let capacity = settings.ring_capacity;
    match transport {
        Transport::TameRing => stream::<N, _>(
            endpoint::tame_ring_pair::<N>(capacity)?,
            plan,
            messages,
            recorder,
        ),
        Transport::Rtrb => stream::<N, _>(
            endpoint::rtrb_pair::<N>(capacity as usize),
            plan,
            messages,
            recorder,
        ),
        Transport::Pipe => stream::<N, _>(endpoint::pipe_pair()?, plan, messages, recorder),
        Transport::UnixSocket => stream::<N, _>(endpoint::unix_pair()?, plan, messages, recorder),
        Transport::Mq => stream::<N, _>(
            endpoint::mq_pair(N, mq_segment_bound(messages))?,
            plan,
            messages,
            recorder,
        ),
        Transport::Floor | Transport::TameRegister => Ok(0),
    }
}

/// Pins the calling thread, then meets the other thread at the barrier whatever
/// happened, so a failed pin never leaves the peer waiting at the barrier.
fn pin_and_meet(cpu: u32, barrier: &Barrier) -> io::Result<()> {
    let pinned = tame_rt::sched::pin_current_thread(cpu);
    barrier.wait();
    pinned.map_err(|e| io::Error::other(format!("cannot pin to CPU {cpu}: {e}")))
}

fn join(handle: std::thread::ScopedJoinHandle<'_, io::Result<()>>) -> io::Result<()> {
    handle
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("a bench thread panicked")))
}

fn write_seq<const N: usize>(msg: &mut [u8; N], seq: u64) {
    msg[..8].copy_from_slice(&seq.to_le_bytes());
}

fn read_seq<const N: usize>(msg: &[u8; N]) -> u64 {
    u64::from_le_bytes(msg[..8].try_into().expect("messages are at least 8 bytes"))
}

/// Timed thread: send, wait for the echo, record half the round trip. Echo thread:
/// receive, send back.
fn ping_pong<const N: usize, E: Endpoint<N>>(
    (timed, echo): (E, E),
    plan: &Plan,
    round_trips: u64,
    recorder: &mut Recorder,
) -> io::Result<()> {
    let barrier = &Barrier::new(2);
    let total = plan.warmup + round_trips;
    // Each thread owns its end (move), so an end that stops early is dropped and its
    // peer sees EOF instead of waiting forever.
    std::thread::scope(|scope| {
        let echoing = scope.spawn(move || -> io::Result<()> {
            pin_and_meet(plan.echo_cpu, barrier)?;
            // On this thread's own stack: the two ends' private indices must not share
            // a cache line (closures live side by side on the heap).
            let mut echo = echo;
            let mut msg = [0u8; N];
            for _ in 0..total {
                echo.recv(&mut msg)?;
                echo.send(&msg)?;
            }
            Ok(())
        });
        let timing = scope.spawn(move || -> io::Result<()> {
            pin_and_meet(plan.timed_cpu, barrier)?;
            let mut timed = timed;
            let clock = plan.clock;
            let mut msg = [0u8; N];
            let mut reply = [0u8; N];
            for i in 0..total {
                write_seq(&mut msg, i);
                let t0 = clock.raw();
                timed.send(&msg)?;
                timed.recv(&mut reply)?;
                let t1 = clock.raw();
                if read_seq(&reply) != i {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("reply {} arrived for message {i}", read_seq(&reply)),
                    ));
                }
                if i >= plan.warmup {
                    recorder.record(clock.raw_delta_ns(t1.wrapping_sub(t0)) / 2);
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
fn stream<const N: usize, E: Endpoint<N>>(
    (sender, receiver): (E, E),
    plan: &Plan,
    messages: u64,
    recorder: &mut Recorder,
) -> io::Result<u64> {
    let barrier = &Barrier::new(2);
    std::thread::scope(|scope| {
        let sending = scope.spawn(move || -> io::Result<()> {
            pin_and_meet(plan.timed_cpu, barrier)?;
            let mut sender = sender;
            let mut msg = [0u8; N];
            for i in 0..messages {
                write_seq(&mut msg, i);
                sender.send(&msg)?;
            }
            Ok(())
        });
        let receiving = scope.spawn(move || -> io::Result<u64> {
            pin_and_meet(plan.echo_cpu, barrier)?;
            let mut receiver = receiver;
            let clock = plan.clock;
            let mut msg = [0u8; N];
            let start = clock.raw();
            let mut block_start = start;
            for i in 0..messages {
                receiver.recv(&mut msg)?;
                if read_seq(&msg) != i {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("message {} arrived in place of {i}", read_seq(&msg)),
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
    use tame_rt::ClockKind;

    #[test]
    fn rounds_share_the_totals_exactly() {
        let settings = IpcSettings {
            cpus: [0, 1],
            sizes: vec![8],
            transports: vec![Transport::Pipe],
            round_trips: 1_001,
            warmup_round_trips: 0,
            throughput_messages: 7 * BLOCK + 5,
            rounds: 3,
            ring_capacity: 256,
            clock: ClockKind::Monotonic,
        };
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
    fn the_goals_group_holds_ratios_and_verdicts() {
        let check = |name: &str, value: f64, met: bool| GoalCheck {
            name: name.into(),
            value,
            threshold: 1.0,
            met,
        };
        let group = goals_group(&[check("a", 0.5, true), check("b", 2.0, false)]);
        assert_eq!(group.label, "goals");
        assert_eq!(group.counters["a"], 1);
        assert_eq!(group.counters["b"], 0);
        assert_eq!(group.derived["b"], 2.0);
        assert!(group.metrics.is_empty() && group.cpu.is_none());
    }

    /// A short real run over every transport: each produces its distributions, the
    /// shared-memory ones beat the kernel ones, and the goals are evaluated.
    #[test]
    fn short_run_measures_every_transport() {
        let allowed = tame_rt::sched::allowed_cpus();
        if !tame_testing::require::require(
            allowed.len() >= 2,
            "two CPUs this process may run on (the IPC bench)",
        ) {
            return;
        }
        let cpus = &allowed[..2];
        let settings = IpcSettings {
            cpus: [cpus[0], cpus[1]],
            sizes: vec![8, 64],
            transports: Transport::ALL.to_vec(),
            round_trips: 2_000,
            warmup_round_trips: 100,
            throughput_messages: 4 * BLOCK,
            rounds: 2,
            ring_capacity: 256,
            clock: ClockKind::Monotonic,
        };
        let run = run(
            &Root::system(),
            settings,
            vec!["test".into()],
            &RunControl::new(),
        )
        .unwrap();
        let result = &run.result;
        assert_eq!(result.bench, "ipc");
        assert_eq!(result.groups.len(), 2 * Transport::ALL.len());
        for group in &result.groups {
            let latency = group.metric("one_way_latency").unwrap().summary;
            assert_eq!(latency.count, 2_000, "{}", group.label);
            assert!(latency.min > 0 && latency.min <= latency.p50 && latency.p50 <= latency.max);
            let is_queue =
                !group.label.starts_with("floor") && !group.label.starts_with("tame-register");
            assert_eq!(
                group.metric("throughput_ns_per_msg").is_some(),
                is_queue,
                "{}",
                group.label
            );
            if is_queue {
                assert_eq!(group.counters["throughput_messages"], 4 * BLOCK);
                assert_eq!(
                    group.metric("throughput_ns_per_msg").unwrap().summary.count,
                    4
                );
                assert!(group.derived["throughput_msgs_per_s"] > 0.0);
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
        // Every goal the issue names is checked for both sizes (2 tame channels × (floor + 3
        // kernel transports) + throughput, per size).
        assert_eq!(run.goals.len(), 2 * (2 * 4 + 1));
        assert_eq!(result.merged.label, "goals");
        assert_eq!(result.merged.counters.len(), run.goals.len());
        let text = crate::ipc::summary_text(&run);
        assert!(
            text.contains("tame-ring/64B") && text.contains("goals"),
            "{text}"
        );
    }
}
