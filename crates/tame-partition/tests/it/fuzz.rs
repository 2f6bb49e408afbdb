//! Fuzzing the parts that read a user's spec: `Spec::parse` on arbitrary text and
//! `plan` on arbitrary specs over fixture hosts. Neither may panic (bad input is a
//! clear error, never a crash); a parsed spec reads back from its own TOML; a plan
//! writes only below /sys, /proc/irq and /proc/sys and creates only `tame-*` directories.
//!
//! `TAME_FUZZ_CASES` cases each (default 2000, a few seconds in `make test`);
//! `make fuzz` runs a million each in release mode (docs/testing.md).

use crate::common::*;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use tame_host::{CpuList, HostModel};
use tame_partition::spec::{PartitionSpec, Role};
use tame_partition::{plan, Spec, Step};
use tame_testing::fuzz::{regex, run as fuzz, Verdict};
use tame_testing::synthetic::SyntheticHost;

// ---- spec text ----------------------------------------------------------------------

const KEYS: &[&str] = &[
    "name",
    "cpus",
    "role",
    "mems",
    "irqs",
    "idle",
    "governor",
    "watchdog",
    "cache_ways",
    "mem_bandwidth",
    "user",
    "group",
    "rt_runtime_us",
    "timer_migration",
    "partition",
    "cpu",
    "Name",
    "\"name\"",
    "'cpus'",
    "",
];

const VALUES: &[&str] = &[
    "\"rt\"",
    "\"system\"",
    "\"isolated\"",
    "\"shared\"",
    "\"0-3\"",
    "\"0-7:2/4\"",
    "\"0-7:0/0\"",
    "\"0-8191\"",
    "\"0-8192\"",
    "\"3-1\"",
    "\"1,,2\"",
    "\"ff\"",
    "\"\"",
    "\"poll\"",
    "\"any\"",
    "\"10us\"",
    "\"4294967296us\"",
    "true",
    "false",
    "0",
    "-1",
    "2147483648",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "-9223372036854775808",
    "99999999999999999999",
    "1e400",
    "nan",
    "-inf",
    "0x10",
    "1_000",
    "1979-05-27T07:32:00Z",
    "[1, 2]",
    "[]",
    "{ a = 1 }",
    "'lit'",
    "\"\"\"multi\nline\"\"\"",
    "\"\\u0000\"",
    "\"\\uD800\"",
    "\"bad \\x escape\"",
    "\"unterminated",
];

const HEADERS: &[&str] = &[
    "[[partition]]",
    "[partition]",
    "[[partition.x]]",
    "[x]",
    "[[]]",
    "[",
    "]]",
    "[[partition]] # c",
];

/// One line: a table header, `key = value`, a dotted key, a comment, or anything.
fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => prop::sample::select(HEADERS).prop_map(str::to_string),
        6 => (prop::sample::select(KEYS), prop::sample::select(VALUES))
            .prop_map(|(k, v)| format!("{k} = {v}")),
        1 => (prop::sample::select(KEYS), prop::sample::select(KEYS), prop::sample::select(VALUES))
            .prop_map(|(a, b, v)| format!("{a}.{b} = {v}")),
        1 => regex("# \\PC{0,10}"),
        1 => regex("\\PC{0,30}"),
        1 => regex("(?s).{0,30}"),
    ]
}

/// Lines joined as a spec file would be.
fn shaped() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(line(), 0..24),
        prop::sample::select(&["\n", "\r\n", "\n\n", " \n"][..]),
    )
        .prop_map(|(lines, sep)| lines.join(sep))
}

/// `text` with up to three characters replaced, removed or doubled.
fn mutated(text: impl Strategy<Value = String>) -> impl Strategy<Value = String> {
    let edits = prop::collection::vec((any::<prop::sample::Index>(), 0u8..3, any::<char>()), 0..4);
    (text, edits).prop_map(|(text, edits)| {
        let mut chars: Vec<char> = text.chars().collect();
        for (at, op, c) in edits {
            if chars.is_empty() {
                chars.push(c);
                continue;
            }
            let i = at.index(chars.len());
            match op {
                0 => chars[i] = c,
                1 => {
                    chars.remove(i);
                }
                _ => chars.insert(i, chars[i]),
            }
        }
        chars.into_iter().collect()
    })
}

/// Spec-shaped lines, specs written by `to_toml`, either with a few characters
/// changed, and any text at all.
fn spec_text() -> impl Strategy<Value = String> {
    let written = || spec_for(8).prop_map(|s| s.to_toml());
    prop_oneof![
        4 => shaped(),
        2 => written(),
        2 => mutated(shaped()),
        2 => mutated(written()),
        1 => regex("\\PC{0,200}"),
        1 => regex("(?s).{0,200}"),
    ]
}

#[test]
fn fuzz_spec_parse() {
    fuzz("spec parse", 0.05, spec_text(), |text| {
        Ok(match Spec::parse("fuzz.toml", &text) {
            Ok(spec) => {
                // What apply records and status shows must read back as the same spec.
                let toml = spec.to_toml();
                let back = Spec::parse("to_toml", &toml)
                    .map_err(|e| TestCaseError::fail(format!("{e}\n--- to_toml:\n{toml}")))?;
                prop_assert_eq!(back, spec);
                Verdict::Accepted
            }
            Err(e) => {
                let lines = text.split('\n').count();
                prop_assert!(
                    e.line >= 1 && e.line <= lines,
                    "line {} of {lines}: {e}",
                    e.line
                );
                prop_assert!(e.column >= 1, "{e}");
                prop_assert!(!e.message.trim().is_empty(), "no reason given: {e:?}");
                prop_assert!(e.to_string().starts_with("fuzz.toml:"), "{e}");
                Verdict::Refused
            }
        })
    });
}

// ---- plan over arbitrary specs -------------------------------------------------------

/// The fixture hosts a spec is planned on: cgroup v1 (this VM's shape), cgroup v2
/// with an isolated partition, and a two-socket machine with resctrl and NUMA.
fn hosts() -> Vec<(u32, HostModel)> {
    let v1 = v1_fixture();
    let rt = fixture(&SyntheticHost::rt_8cpu());
    let two = fixture(&SyntheticHost::two_socket_smt());
    [(8, &v1), (8, &rt), (SyntheticHost::two_socket_smt().cpu_count(), &two)]
        .into_iter()
        .map(|(ncpus, f)| {
            put(
                &f.root,
                "/etc/passwd",
                "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\nme:x:1000:1000::/home/me:/bin/sh\n",
            );
            put(
                &f.root,
                "/etc/group",
                "root:x:0:\nnogroup:x:65534:\nteam:x:1000:me\n",
            );
            (ncpus, HostModel::read(&f.root))
        })
        .collect()
}

fn cpu_list(max: u32) -> impl Strategy<Value = CpuList> {
    prop_oneof![
        8 => prop::collection::btree_set(0..max, 0..6).prop_map(CpuList::from_cpus),
        1 => prop::collection::btree_set(0u32..=tame_host::cpulist::MAX_CPU, 0..3)
            .prop_map(CpuList::from_cpus),
    ]
}

fn valid_name() -> impl Strategy<Value = String> {
    regex("[a-z][a-z0-9_-]{0,8}")
}

fn wild_name() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => valid_name(),
        2 => prop::sample::select(
            &["system", "rt", "", "../etc", "a/b", "tame-x", ".", "..", "a b", "ä", "x\n"][..]
        )
        .prop_map(str::to_string),
        1 => regex("\\PC{0,12}"),
    ]
}

fn one_of(options: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop::sample::select(options).prop_map(str::to_string)
}

/// A value from `options` or any short text, in `share` of the cases.
fn wild_text(
    share: f64,
    options: &'static [&'static str],
) -> impl Strategy<Value = Option<String>> {
    prop::option::weighted(
        share,
        prop_oneof![5 => one_of(options), 1 => regex("\\PC{0,8}")],
    )
}

/// Everything of a partition but its name, CPUs and role.
#[derive(Clone, Debug)]
struct Extras {
    mems: Option<CpuList>,
    irqs: Option<bool>,
    idle: Option<String>,
    governor: Option<String>,
    watchdog: Option<bool>,
    cache_ways: Option<u32>,
    mem_bandwidth: Option<u32>,
    user: Option<String>,
    group: Option<String>,
}

type ExtrasTuple = (
    Option<CpuList>,
    Option<bool>,
    Option<String>,
    Option<String>,
    Option<bool>,
    Option<u32>,
    Option<u32>,
    Option<String>,
    Option<String>,
);

fn extras_of(t: ExtrasTuple) -> Extras {
    let (mems, irqs, idle, governor, watchdog, cache_ways, mem_bandwidth, user, group) = t;
    Extras {
        mems,
        irqs,
        idle,
        governor,
        watchdog,
        cache_ways,
        mem_bandwidth,
        user,
        group,
    }
}

/// Settings that mostly pass validation on the fixture hosts (which know the users
/// root, nobody and me, the groups root, nogroup and team).
fn plausible_extras() -> impl Strategy<Value = Extras> {
    use prop::option::weighted;
    (
        weighted(
            0.1,
            prop::sample::select(vec![CpuList::from_cpus([0]), CpuList::from_cpus([0, 1])]),
        ),
        weighted(0.1, any::<bool>()),
        weighted(0.3, one_of(&["poll", "any", "10us", "0", "5us"])),
        weighted(0.1, one_of(&["performance", "powersave"])),
        weighted(0.2, any::<bool>()),
        weighted(0.05, 1..4u32),
        weighted(0.05, 10..=100u32),
        weighted(0.15, one_of(&["root", "nobody", "me"])),
        weighted(0.15, one_of(&["root", "nogroup", "team"])),
    )
        .prop_map(extras_of)
}

/// Settings of any value.
fn wild_extras() -> impl Strategy<Value = Extras> {
    use prop::option::weighted;
    let number = |small: u32, big: u32| weighted(0.2, prop_oneof![4 => 0..small, 1 => 0..=big]);
    (
        weighted(0.2, cpu_list(4)),
        weighted(0.3, any::<bool>()),
        wild_text(
            0.3,
            &[
                "poll",
                "any",
                "10us",
                "0",
                "5 us",
                "4294967296us",
                "-1us",
                "us",
                "",
            ],
        ),
        wild_text(0.3, &["performance", "powersave", "schedutil", "", "nope"]),
        weighted(0.3, any::<bool>()),
        number(20, u32::MAX),
        number(120, u32::MAX),
        wild_text(
            0.3,
            &["root", "nobody", "me", "0", "65534", "no-such-user", ""],
        ),
        wild_text(0.3, &["root", "nogroup", "team", "0", "no-such-group", ""]),
    )
        .prop_map(extras_of)
}

fn extras() -> impl Strategy<Value = Extras> {
    prop_oneof![5 => plausible_extras(), 1 => wild_extras()]
}

fn role() -> impl Strategy<Value = Role> {
    prop::sample::select(&[Role::System, Role::Isolated, Role::Shared][..])
}

fn partition(name: String, cpus: CpuList, role: Role, e: Extras) -> PartitionSpec {
    PartitionSpec {
        name,
        cpus,
        role,
        mems: e.mems,
        irqs: e.irqs,
        idle: e.idle,
        governor: e.governor,
        watchdog: e.watchdog,
        cache_ways: e.cache_ways,
        mem_bandwidth: e.mem_bandwidth,
        user: e.user,
        group: e.group,
    }
}

/// Mostly specs whose partitions split the host's `ncpus` CPUs, a system partition
/// first (so planning gets past the rules and builds steps), else arbitrary partitions.
fn spec_for(ncpus: u32) -> impl Strategy<Value = Spec> {
    let later_role = prop_oneof![
        8 => prop::sample::select(&[Role::Isolated, Role::Shared][..]),
        1 => role(),
    ];
    let split = (
        prop::collection::vec(1..ncpus.max(2), 0..4),
        prop::collection::vec(
            (
                prop_oneof![9 => valid_name(), 1 => wild_name()],
                later_role,
                extras(),
            ),
            4,
        ),
        prop::bool::weighted(0.95),
    )
        .prop_map(move |(mut cuts, parts, system_first)| {
            cuts.push(0);
            cuts.push(ncpus);
            cuts.sort_unstable();
            cuts.dedup();
            cuts.windows(2)
                .zip(parts)
                .enumerate()
                .map(|(i, (w, (name, role, extras)))| {
                    let role = if i == 0 && system_first {
                        Role::System
                    } else {
                        role
                    };
                    partition(name, CpuList::from_cpus(w[0]..w[1]), role, extras)
                })
                .collect::<Vec<_>>()
        });
    let arbitrary = prop::collection::vec(
        (wild_name(), cpu_list(ncpus + 2), role(), wild_extras()),
        0..5,
    )
    .prop_map(|parts| {
        parts
            .into_iter()
            .map(|(name, cpus, role, extras)| partition(name, cpus, role, extras))
            .collect::<Vec<_>>()
    });
    (
        prop_oneof![4 => split, 1 => arbitrary],
        prop::option::weighted(
            0.3,
            prop_oneof![
                4 => prop::sample::select(&[-1i64, 0, 950_000][..]),
                1 => prop::sample::select(&[1_000_000, 1_000_001, -2, i64::MIN, i64::MAX][..]),
                1 => any::<i64>(),
            ],
        ),
        prop::option::of(any::<bool>()),
    )
        .prop_map(|(partitions, rt_runtime_us, timer_migration)| Spec {
            partitions,
            rt_runtime_us,
            timer_migration,
        })
}

/// Where a plan may write: what apply's journal may touch.
const WRITABLE: &[&str] = &["/sys/", "/proc/irq/", "/proc/sys/"];

fn check_path(path: &str) -> Result<(), TestCaseError> {
    prop_assert!(
        WRITABLE.iter().any(|p| path.starts_with(p)),
        "{path} is outside {WRITABLE:?}"
    );
    prop_assert!(
        path[1..]
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != ".."),
        "{path} is not a plain absolute path"
    );
    Ok(())
}

#[test]
fn fuzz_plan() {
    let hosts = hosts();
    // Each host's strategy is built once (a flat_map would build it, regexes and all,
    // for every case). The two-socket host costs several times the others per plan
    // (48 CPUs, 300 IRQs): drawn half as often, so `make test`'s share stays short.
    let on = |h: usize| (Just(h), spec_for(hosts[h].0));
    let strategy = prop_oneof![2 => on(0), 2 => on(1), 1 => on(2)];
    fuzz("plan", 0.05, strategy, |(h, spec)| {
        Ok(match plan(&spec, &hosts[h].1) {
            Ok(p) => {
                for step in &p.runtime {
                    match step {
                        Step::Mkdir { path, .. } => {
                            check_path(path)?;
                            let last = path.rsplit('/').next().unwrap_or_default();
                            prop_assert!(
                                last.starts_with(tame_partition::plan::DIR_PREFIX),
                                "mkdir {path}: not a tame directory"
                            );
                        }
                        Step::Write { path, .. } | Step::Owner { path, .. } => check_path(path)?,
                        Step::MoveTasks { from, to, .. } => {
                            check_path(from)?;
                            check_path(to)?;
                        }
                    }
                }
                let named = spec
                    .partitions
                    .iter()
                    .fold(CpuList::new(), |a, q| a.union(&q.cpus));
                prop_assert!(p.isolated_cpus.is_subset(&named));
                Verdict::Accepted
            }
            Err(invalid) => {
                prop_assert!(!invalid.errors.is_empty());
                prop_assert!(invalid.errors.iter().all(|e| !e.trim().is_empty()));
                Verdict::Refused
            }
        })
    });
}
