//! Property: for random valid specs, apply then revert on a fixture copy gives back
//! the identical tree (cgroup v1 and v2 with resctrl).

use crate::common::*;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use tame_partition::{apply, revert, Spec};
use tame_testing::synthetic::SyntheticHost;

/// A random valid spec over CPUs 0..n: the system partition gets a non-empty set,
/// every other CPU is isolated, shared or left out.
fn spec_strategy(n: u32, resctrl: bool) -> impl Strategy<Value = String> {
    (
        1..n,
        proptest::collection::vec(0u8..4, n as usize),
        proptest::option::of(prop_oneof![Just(-1i64), 1i64..1_000_000]),
        proptest::option::of(any::<bool>()),
        proptest::collection::vec(prop_oneof![Just("poll"), Just("any"), Just("5us")], n as usize),
        0u32..4,
    )
        .prop_map(move |(system_len, roles, rt, tm, idles, ways)| {
            let mut text = String::new();
            if let Some(rt) = rt {
                text += &format!("rt_runtime_us = {rt}\n");
            }
            if let Some(tm) = tm {
                text += &format!("timer_migration = {tm}\n");
            }
            text += &format!("[[partition]]\nname = \"system\"\ncpus = \"0-{}\"\nrole = \"system\"\n", system_len - 1);
            for cpu in system_len..n {
                let (role, extra) = match roles[cpu as usize] {
                    0 => continue,
                    1 | 2 => ("isolated", format!("idle = \"{}\"\n", idles[cpu as usize])),
                    _ => ("shared", "irqs = true\n".to_string()),
                };
                let cache = if resctrl && cpu == n - 1 && ways > 0 {
                    format!("cache_ways = {ways}\n")
                } else {
                    String::new()
                };
                text += &format!("[[partition]]\nname = \"p{cpu}\"\ncpus = \"{cpu}\"\nrole = \"{role}\"\n{extra}{cache}");
            }
            text
        })
}

fn round_trip(f: &Fixture, strategy: impl Strategy<Value = String>, cases: u32) {
    let before = snapshot(&f.root);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&strategy, |text| {
            let spec = Spec::parse("random.toml", &text).unwrap();
            apply(&f.root, &spec, &text, &f.journal, None).unwrap();
            let rep = revert(&f.root, &f.journal).unwrap();
            prop_assert!(rep.not_restored.is_empty(), "{:?}", rep);
            let d = differences(&before, &snapshot(&f.root));
            prop_assert!(d.is_empty(), "spec:\n{}\nchanged:\n{:#?}", text, d);
            Ok(())
        })
        .unwrap();
}

#[test]
fn apply_then_revert_is_identity_on_cgroup_v1() {
    // One tree for all cases: each case must leave it exactly as it found it.
    round_trip(&v1_fixture(), spec_strategy(8, false), 32);
}

#[test]
fn apply_then_revert_is_identity_on_cgroup_v2_with_resctrl() {
    let f = fixture(&SyntheticHost::two_socket_smt());
    round_trip(&f, spec_strategy(12, true), 16);
}
