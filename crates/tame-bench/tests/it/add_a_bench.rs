//! docs/architecture.md, "Where to add things — a bench", done once from outside the crate:
//! a settings struct that implements `session::Bench`, a loop built on `engine::measure`, a
//! `report::GroupSource` for its per-thread output, and `session::run` for the whole
//! sequence. If a step of the recipe needs something tame-bench does not offer, this stops
//! compiling; if the session stops treating a new bench like its own, the asserts fail.

use serde::Serialize;
use tame_bench::engine::{self, RunControl, ThreadSettings};
use tame_bench::error::Result;
use tame_bench::measure::{Measured, Sample, SampleBuffer};
use tame_bench::report::GroupSource;
use tame_bench::session::{self, Bench, Conditions, Prepared};
use tame_bench::stats::Recorder;
use tame_host::{CpuList, Root};
use tame_rt::{ClockKind, Policy};

/// The smallest bench: each thread reads the clock `reads` times and records the gaps.
#[derive(Serialize)]
struct ClockGapSettings {
    cpus: CpuList,
    reads: u64,
    threads: ThreadSettings,
}

struct ClockGapOutput {
    cpu: Option<u32>,
    gap: Recorder,
    samples: SampleBuffer,
}

impl GroupSource for ClockGapOutput {
    fn cpu(&self) -> Option<u32> {
        self.cpu
    }
    fn recorders(&self) -> Vec<(&'static str, &'static str, &Recorder)> {
        vec![("gap", "ns", &self.gap)]
    }
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
    fn samples(&self) -> &SampleBuffer {
        &self.samples
    }
}

impl Bench for ClockGapSettings {
    type Output = ClockGapOutput;
    const NAME: &'static str = "clock-gap";
    const LABEL_BY_CPU: bool = true;

    fn threads(&self) -> &ThreadSettings {
        &self.threads
    }
    fn cpus(&self) -> Option<&CpuList> {
        Some(&self.cpus)
    }
    fn deadline_period_ns(&self) -> u64 {
        1_000_000
    }
    fn expected_ns(&self) -> u64 {
        1_000_000
    }
    fn thread_count(&self) -> usize {
        self.cpus.len()
    }
    fn per_thread(&self) -> u64 {
        self.reads
    }
    fn title(&self) -> String {
        format!("clock gaps on CPUs {}", self.cpus)
    }
    fn measure(
        &self,
        prepared: &Prepared,
        control: &RunControl,
        sample_capacity: usize,
        tick: impl FnMut(u64),
    ) -> Result<Measured<ClockGapOutput>> {
        let assigned = engine::assign_cpus(self.cpus.len(), Some(&self.cpus));
        let plans = engine::plans(&assigned, &prepared.setup, self.threads.mlock);
        let (clock, reads) = (prepared.clock, self.reads);
        // Sized before the start gate: the loop allocates nothing.
        engine::measure(&plans, control, tick, move |index, gate, progress| {
            let mut out = ClockGapOutput {
                cpu: assigned[index],
                gap: Recorder::new(),
                samples: SampleBuffer::with_capacity(sample_capacity),
            };
            if gate.wait().is_none() {
                return out;
            }
            let mut last = clock.raw();
            for i in 0..reads {
                let now = clock.raw();
                let gap = clock.raw_delta_ns(now.wrapping_sub(last));
                out.gap.record(gap);
                out.samples.push(Sample {
                    t_ns: now,
                    value_ns: gap,
                });
                last = now;
                progress.set(index, i + 1);
            }
            out
        })
    }
}

#[test]
fn a_bench_added_by_the_recipe_runs_through_the_session_like_tame_s_own() {
    // It pins a thread to a CPU of the machine and measures: one module at a time.
    let _machine = tame_testing::serial::module(module_path!());
    let settings = ClockGapSettings {
        cpus: CpuList::parse("0").unwrap(),
        reads: 1_000,
        threads: ThreadSettings {
            policy: Policy::Other,
            priority: 0,
            mlock: false,
            clock: ClockKind::Monotonic,
        },
    };
    let wanted = settings.sample_capacity(true).unwrap();
    let finished = session::run(
        &Root::system(),
        settings,
        Conditions::default(),
        &RunControl::new(),
        wanted,
        |_| {},
        vec!["add_a_bench".into()],
    )
    .unwrap();
    let result = &finished.result;
    assert_eq!(result.bench, "clock-gap");
    assert!(!result.interrupted);
    assert_eq!(result.groups.len(), 1, "one group per CPU");
    let gap = &finished.measured.outputs[0];
    assert_eq!(gap.cpu, Some(0));
    assert_eq!(gap.gap.count(), 1_000, "every read recorded");
    assert_eq!(gap.samples.len(), 1_000, "every sample kept");
    // The common table view works for it, titled by the bench.
    let table = ClockGapSettings::view(result);
    assert!(table.contains("clock gaps on CPUs 0"), "{table}");
}
