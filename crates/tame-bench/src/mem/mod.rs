//! `tame bench mem`: memory-access time per buffer size (the bare-metal tasks paper's
//! memory-access jitter). On one CPU, for each buffer size, a fixed batch of dependent
//! loads (a pointer chase through a random cycle of cache lines, which no prefetcher can
//! follow) and a batch of streaming loads (the lines in address order) are timed over and
//! over; each batch gives one sample of the time per access.
//!
//! Result layout (docs/results.md): one group per size and pattern, labelled
//! `chase 64KiB` / `stream 64KiB`, with the metrics `access` (ps per access: one cache
//! line; picoseconds because an L1 hit takes about a nanosecond, which whole nanoseconds
//! would round away) and `batch` (ns per batch), counters `buffer_bytes` and
//! `accesses_per_batch`. The merged group, labelled `sweep`, holds the ratios of the
//! largest buffer's median to the smallest's per pattern.

mod access;
mod buffer;
pub mod sweep;
mod view;

pub use access::{link_cycle, per_access_ps, Line, SplitMix64, LINE_BYTES};
pub use buffer::{Buffer, HugePages};
pub use sweep::{CacheLevel, MAX_SIZE, MIN_SIZE};

use serde::{Deserialize, Serialize};
use tame_host::cpu::CpuTopology;
use tame_host::memory::MemInfo;
use tame_host::reader::Reader;
use tame_host::{CpuList, Root};
use tame_rt::Clock;

use crate::engine::{self, RunControl, ThreadSettings};
use crate::error::{invalid, Result};
use crate::measure::{Measured, SampleBuffer};
use crate::report::GroupSource;
use crate::result::{BenchResult, GroupResult};
use crate::session::{Bench, Prepared};
use crate::stats::Recorder;

/// Accesses timed together as one sample: long enough that two clock reads (~20 ns) are
/// a small part of even an all-L1 batch (~1 µs), short enough to catch a single stall.
pub const ACCESSES_PER_BATCH: u32 = 1024;
/// The seed of the chase's shuffle: fixed, so runs chase the same cycle.
pub const SEED: u64 = 0x7A3E_5EED;
pub const MAX_BATCHES: u64 = 1_000_000;

/// The two access patterns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    Chase,
    Stream,
}

impl Pattern {
    pub fn name(self) -> &'static str {
        match self {
            Pattern::Chase => "chase",
            Pattern::Stream => "stream",
        }
    }
}

/// The group label of a pattern over a size: `chase 64KiB`.
pub fn label(pattern: Pattern, bytes: u64) -> String {
    format!("{} {}", pattern.name(), sweep::human_size(bytes))
}

/// What `tame bench mem` was asked to do, as resolved on this host; recorded in the result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemSettings {
    /// The measured CPU (one).
    pub cpus: CpuList,
    /// The NUMA node the buffers were placed on.
    pub node: u32,
    /// Whether the buffers were bound to `node` (mbind); false on a one-node machine,
    /// where the node is only recorded.
    pub node_bound: bool,
    /// Buffer sizes in bytes, smallest first.
    pub sizes: Vec<u64>,
    /// The measured CPU's data and unified caches, as tame-host read them.
    pub caches: Vec<CacheLevel>,
    /// Where the sizes came from, and any size the available memory left out.
    pub sweep: String,
    /// Samples per size and pattern.
    pub batches: u64,
    pub accesses_per_batch: u32,
    pub huge_pages: HugePages,
    /// Bytes per huge page where huge pages are used.
    pub huge_page_bytes: u64,
    pub seed: u64,
    pub threads: ThreadSettings,
}

/// What the user asked for, before it is resolved against the host.
#[derive(Clone, Debug)]
pub struct MemRequest {
    pub cpu: u32,
    pub node: Option<u32>,
    /// None: the default sweep.
    pub sizes: Option<Vec<u64>>,
    pub batches: u64,
    pub huge_pages: bool,
    pub threads: ThreadSettings,
}

/// What of the host the settings are resolved against (read by [`MemHost::read`]).
#[derive(Clone, Debug, Default)]
pub struct MemHost {
    pub topology: CpuTopology,
    pub meminfo: MemInfo,
    /// `always`, `madvise`, `never`; None without THP.
    pub thp: Option<String>,
}

impl MemHost {
    pub fn read(root: &Root) -> Result<MemHost> {
        let mut r = Reader::new(root);
        let topology = CpuTopology::read(&mut r);
        let meminfo = root.meminfo().map_err(|e| {
            crate::error::BenchError::Failed(crate::error::Failure::Host {
                what: "cannot tell how much memory is available".into(),
                source: e,
            })
        })?;
        Ok(MemHost {
            topology,
            meminfo,
            thp: root.thp_enabled(),
        })
    }
}

impl MemSettings {
    /// Resolve `req` on `host`: the node, the sizes (the default sweep from the caches),
    /// the pages. Refuses what cannot run, saying what to change.
    pub fn resolve(req: MemRequest, host: &MemHost) -> Result<MemSettings> {
        if req.batches < 10 || req.batches > MAX_BATCHES {
            return Err(invalid(format!(
                "--batches {} is out of range — use 10..{MAX_BATCHES}",
                req.batches
            )));
        }
        let topo = &host.topology;
        let nodes: Vec<u32> = topo.nodes.iter().map(|n| n.id).collect();
        let node = match req.node {
            Some(n) if !nodes.is_empty() && !nodes.contains(&n) => {
                return Err(invalid(format!(
                    "--node {n}: no such NUMA node (nodes: {nodes:?}) — pick one of them"
                )))
            }
            Some(n) if nodes.is_empty() && n != 0 => {
                return Err(invalid(format!(
                    "--node {n}: this kernel shows no NUMA nodes, so all memory is node 0 — drop --node"
                )))
            }
            Some(n) => n,
            None => topo.cpu(req.cpu).and_then(|c| c.node).unwrap_or(0),
        };
        let caches = sweep::caches_of(topo, req.cpu);
        let fitting = host.meminfo.available_kib.map(sweep::largest_fitting);
        let (sizes, sweep_text) = match req.sizes {
            Some(sizes) => {
                if let (Some(fit), Some(&largest)) = (fitting, sizes.last()) {
                    if largest > fit {
                        return Err(invalid(format!(
                            "--sizes: a {} buffer does not fit: {} may be used (3/4 of the memory available) — give smaller sizes",
                            sweep::human_size(largest),
                            sweep::human_size(fit / sweep::PAGE * sweep::PAGE)
                        )));
                    }
                }
                (sizes, "given with --sizes".to_string())
            }
            None => default_sizes(&caches, fitting)?,
        };
        let largest = *sizes.last().unwrap_or(&sweep::MIN_SIZE);
        let huge_page_bytes = host.meminfo.huge_page_kib.unwrap_or(2048) * 1024;
        let huge_pages = if req.huge_pages {
            choose_huge_pages(host, largest, huge_page_bytes)?
        } else {
            HugePages::None
        };
        Ok(MemSettings {
            cpus: CpuList::from_cpus([req.cpu]),
            node,
            node_bound: nodes.len() > 1,
            sizes,
            caches,
            sweep: sweep_text,
            batches: req.batches,
            accesses_per_batch: ACCESSES_PER_BATCH,
            huge_pages,
            huge_page_bytes,
            seed: SEED,
            threads: req.threads,
        })
    }

    pub fn cpu(&self) -> u32 {
        self.cpus.first().unwrap_or(0)
    }

    /// The last-level cache size in bytes, if known.
    pub fn llc_bytes(&self) -> Option<u64> {
        self.caches.last().map(|c| c.size_kib * sweep::KIB)
    }
}

/// The default sweep, without the sizes that do not fit in the memory available.
fn default_sizes(caches: &[CacheLevel], fitting: Option<u64>) -> Result<(Vec<u64>, String)> {
    let mut text = if caches.is_empty() {
        "default sweep (cache sizes unknown: powers of four)".to_string()
    } else {
        let levels: Vec<String> = caches
            .iter()
            .map(|c| {
                format!(
                    "L{} {}",
                    c.level,
                    sweep::human_size(c.size_kib * sweep::KIB)
                )
            })
            .collect();
        format!("default sweep from the caches ({})", levels.join(", "))
    };
    let mut sizes = sweep::default_sweep(caches);
    if let Some(fit) = fitting {
        let dropped: Vec<String> = sizes
            .iter()
            .filter(|s| **s > fit)
            .map(|s| sweep::human_size(*s))
            .collect();
        if !dropped.is_empty() {
            sizes.retain(|s| *s <= fit);
            text.push_str(&format!(
                "; left out {} (beyond 3/4 of the memory available)",
                dropped.join(", ")
            ));
        }
    }
    if sizes.is_empty() {
        return Err(invalid(
            "not even a 16 KiB buffer fits in the memory available — free memory and run again",
        ));
    }
    Ok((sizes, text))
}

/// `--hugepages`: the hugetlb pool where it has room for the largest buffer, else
/// transparent huge pages where the kernel grants them on request.
fn choose_huge_pages(host: &MemHost, largest: u64, huge_page_bytes: u64) -> Result<HugePages> {
    let free = host.meminfo.huge_pages_free.unwrap_or(0);
    let needed = largest.div_ceil(huge_page_bytes);
    if free >= needed {
        return Ok(HugePages::Hugetlb);
    }
    match host.thp.as_deref() {
        Some("always" | "madvise") => Ok(HugePages::Thp),
        thp => Err(invalid(format!(
            "--hugepages: no huge pages to be had — the hugetlb pool has {free} free pages of {} (the largest buffer needs {needed}) and transparent huge pages are {} — reserve pages (sysctl vm.nr_hugepages={needed}), enable THP (echo madvise > /sys/kernel/mm/transparent_hugepage/enabled), or drop --hugepages",
            sweep::human_size(huge_page_bytes),
            thp.map_or("not built into this kernel".to_string(), |t| format!("`{t}`"))
        ))),
    }
}

/// One size and pattern measured.
pub struct MemOutput {
    pub cpu: u32,
    pub pattern: Pattern,
    pub bytes: u64,
    /// Per-access time, ps.
    pub access: Recorder,
    /// Per-batch time, ns.
    pub batch: Recorder,
    pub accesses_per_batch: u32,
    samples: SampleBuffer,
}

impl MemOutput {
    pub fn label(&self) -> String {
        label(self.pattern, self.bytes)
    }
}

impl GroupSource for MemOutput {
    fn cpu(&self) -> Option<u32> {
        Some(self.cpu)
    }
    fn recorders(&self) -> Vec<(&'static str, &'static str, &Recorder)> {
        vec![("access", "ps", &self.access), ("batch", "ns", &self.batch)]
    }
    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("buffer_bytes", self.bytes),
            ("accesses_per_batch", u64::from(self.accesses_per_batch)),
        ]
    }
    fn samples(&self) -> &SampleBuffer {
        &self.samples
    }
}

/// Summarise one size and pattern's batch times (raw clock deltas).
pub fn summarise(
    clock: &Clock,
    cpu: u32,
    pattern: Pattern,
    bytes: u64,
    accesses: u32,
    raw: &[u64],
) -> MemOutput {
    let mut out = MemOutput {
        cpu,
        pattern,
        bytes,
        access: Recorder::new(),
        batch: Recorder::new(),
        accesses_per_batch: accesses,
        samples: SampleBuffer::with_capacity(0),
    };
    for &r in raw {
        let ns = clock.raw_delta_ns(r);
        out.batch.record(ns);
        out.access.record(per_access_ps(ns, accesses));
    }
    out
}

impl Bench for MemSettings {
    type Output = MemOutput;
    const NAME: &'static str = "mem";
    const LABEL_BY_CPU: bool = true;

    fn threads(&self) -> &ThreadSettings {
        &self.threads
    }
    fn cpus(&self) -> Option<&CpuList> {
        Some(&self.cpus)
    }
    fn deadline_period_ns(&self) -> u64 {
        10_000_000
    }
    /// A guess for the progress bar: ~100 ns per access beyond the last level, ~5 ns inside.
    fn expected_ns(&self) -> u64 {
        let llc = self.llc_bytes().unwrap_or(8 * sweep::MIB);
        self.sizes
            .iter()
            .map(|&s| {
                let per = if s > llc { 100 } else { 5 };
                let accesses = 2 * self.batches * u64::from(self.accesses_per_batch) + s / 32;
                accesses * per
            })
            .sum()
    }
    /// Building and prefaulting the buffers takes time the guess does not count.
    fn load_runtime_ns(&self) -> u64 {
        self.expected_ns() + 30_000_000_000
    }
    fn thread_count(&self) -> usize {
        1
    }
    fn per_thread(&self) -> u64 {
        2 * self.batches * self.sizes.len() as u64
    }
    fn title(&self) -> String {
        format!(
            "tame bench mem: CPU {}, node {}{}, {} sizes, {} batches of {} accesses per size and pattern, {} pages, {}",
            self.cpus,
            self.node,
            if self.node_bound { " (bound)" } else { "" },
            self.sizes.len(),
            self.batches,
            self.accesses_per_batch,
            match self.huge_pages {
                HugePages::None => "4 KiB",
                HugePages::Thp => "transparent huge",
                HugePages::Hugetlb => "hugetlb",
            },
            self.threads.label()
        )
    }
    fn measure(
        &self,
        prepared: &Prepared,
        control: &RunControl,
        _sample_capacity: usize,
        tick: impl FnMut(u64),
    ) -> Result<Measured<MemOutput>> {
        let settings = self.clone();
        let clock = prepared.clock;
        let thread_control = control.clone();
        let body = move |gate: &engine::StartGate, progress: &dyn Fn(u64)| {
            // Sized before the gate: the timed loops only store into it.
            let mut raw = vec![0u64; settings.batches as usize];
            if gate.wait().is_none() {
                return Ok(Vec::new());
            }
            let mut done = 0u64;
            let mut outputs = Vec::new();
            for &bytes in &settings.sizes {
                let timed =
                    measure_size(&settings, &clock, &thread_control, bytes, &mut raw, |n| {
                        progress(done + n)
                    })?;
                for (pattern, r) in timed {
                    done += r.len() as u64;
                    let accesses = settings.accesses_per_batch;
                    let cpu = settings.cpu();
                    outputs.push(summarise(&clock, cpu, pattern, bytes, accesses, &r));
                }
                if thread_control.stopped() {
                    break;
                }
            }
            Ok(outputs)
        };
        let (cpu, setup) = (self.cpu(), &prepared.setup);
        engine::measure_groups(cpu, setup, self.threads.mlock, control, tick, "mem", body)
    }
    fn derive(result: &mut BenchResult<Self>, measured: &Measured<MemOutput>) {
        for (group, out) in result.groups.iter_mut().zip(&measured.outputs) {
            group.label = out.label();
        }
        result.merged = sweep_group(&result.groups);
    }
    fn view(result: &BenchResult<Self>) -> String {
        view::table(result)
    }
}

/// Time one buffer size: build it, chase, stream. Returns each pattern's raw batch times
/// (copied out of `raw`, which the timed loops store into).
fn measure_size(
    settings: &MemSettings,
    clock: &Clock,
    control: &RunControl,
    bytes: u64,
    raw: &mut [u64],
    mut progress: impl FnMut(u64),
) -> std::result::Result<Vec<(Pattern, Vec<u64>)>, String> {
    let granule = settings.huge_pages.granule(settings.huge_page_bytes);
    let len = bytes.div_ceil(granule) * granule;
    let node = settings.node_bound.then_some(settings.node);
    let mut buffer = Buffer::new(
        len as usize,
        settings.huge_pages,
        node,
        settings.threads.mlock,
    )?;
    let count = (bytes as usize) / LINE_BYTES;
    // SAFETY: the mapping holds `len >= bytes` bytes, is page-aligned (so line-aligned) and
    // lives (in `buffer`) until the slice's last use at the end of this function.
    let lines: &mut [Line] =
        unsafe { std::slice::from_raw_parts_mut(buffer.as_mut_ptr().cast::<Line>(), count) };
    link_cycle(lines, settings.seed);
    let n = settings.accesses_per_batch;
    let mut out = Vec::with_capacity(2);
    // Chase: one full round first, so the timed batches find the buffer where it settles.
    let mut p = lines.as_ptr();
    // SAFETY: `lines` was linked by link_cycle and is alive.
    p = unsafe { access::chase(p, count as u32) };
    let done = time_batches(clock, control, raw, &mut progress, || {
        // SAFETY: as above.
        p = unsafe { access::chase(p, n) };
    });
    std::hint::black_box(p);
    out.push((Pattern::Chase, raw[..done].to_vec()));
    let mut at = 0usize;
    access::stream(lines, &mut at, count as u32);
    let base = done as u64;
    let done = time_batches(clock, control, raw, &mut |k| progress(base + k), || {
        access::stream(lines, &mut at, n);
    });
    out.push((Pattern::Stream, raw[..done].to_vec()));
    drop(buffer);
    Ok(out)
}

/// Time `batch` once per slot of `raw` (raw clock deltas), until done or stopped; returns
/// how many were timed. No allocation, no system call besides the clock reads.
fn time_batches(
    clock: &Clock,
    control: &RunControl,
    raw: &mut [u64],
    progress: &mut impl FnMut(u64),
    mut batch: impl FnMut(),
) -> usize {
    let mut done = 0;
    for slot in raw.iter_mut() {
        if control.stopped() {
            break;
        }
        let t0 = clock.raw();
        batch();
        *slot = clock.raw().wrapping_sub(t0);
        done += 1;
        progress(done as u64);
    }
    done
}

/// The merged group of a mem result, labelled `sweep`: for each pattern the median
/// per-access time of the largest buffer over the smallest's.
pub fn sweep_group(groups: &[GroupResult]) -> GroupResult {
    let mut merged = GroupResult {
        label: "sweep".into(),
        ..GroupResult::default()
    };
    for pattern in [Pattern::Chase, Pattern::Stream] {
        let medians: Vec<(u64, u64)> = groups
            .iter()
            .filter(|g| g.label.starts_with(&format!("{} ", pattern.name())))
            .filter_map(|g| {
                let bytes = *g.counters.get("buffer_bytes")?;
                Some((bytes, g.metric("access")?.summary.p50))
            })
            .collect();
        let smallest = medians.iter().min_by_key(|m| m.0);
        let largest = medians.iter().max_by_key(|m| m.0);
        if let (Some(s), Some(l)) = (smallest, largest) {
            if s.0 != l.0 && s.1 > 0 {
                merged.derived.insert(
                    format!("{}_p50_largest_over_smallest", pattern.name()),
                    l.1 as f64 / s.1 as f64,
                );
            }
        }
    }
    merged
}

#[cfg(test)]
mod tests;
