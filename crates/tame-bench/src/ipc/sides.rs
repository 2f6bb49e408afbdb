//! Where the two threads of `tame bench ipc` run: the timing (sending) side and the echo
//! (receiving) side, each on a CPU and either in an applied partition's cgroup (`-p`) or in
//! tame's own. A pure choice from the arguments, the partition and the system partition.

use serde::{Deserialize, Serialize};
use tame_host::CpuList;

use crate::error::{invalid, Result};
use crate::placement::Placement;

/// The CPUs without `-p` and without `--cpus`.
pub const DEFAULT_CPUS: [u32; 2] = [0, 1];

/// One thread of the bench: its CPU, and whether it joins the partition's cgroup before it
/// pins itself (else it stays in tame's cgroup).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Side {
    pub cpu: u32,
    pub in_partition: bool,
}

/// Both threads: the timing one sends and reads the clock, the echo one answers (latency)
/// or receives (throughput).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sides {
    pub timing: Side,
    pub echo: Side,
}

impl Sides {
    /// Both sides in tame's cgroup, on `cpus` (timing, echo).
    pub fn unplaced(cpus: [u32; 2]) -> Self {
        Sides {
            timing: Side {
                cpu: cpus[0],
                in_partition: false,
            },
            echo: Side {
                cpu: cpus[1],
                in_partition: false,
            },
        }
    }

    /// The CPUs, timing side first.
    pub fn cpus(&self) -> [u32; 2] {
        [self.timing.cpu, self.echo.cpu]
    }

    /// Whether any side joins a partition.
    pub fn placed(&self) -> bool {
        self.timing.in_partition || self.echo.in_partition
    }
}

/// Where the sides run. Without a partition: `asked` (`--cpus A,B`), else [`DEFAULT_CPUS`].
/// With one: the timing side on `asked`'s A, which must be a CPU of the partition, else on
/// the partition's first CPU; the echo side on `asked`'s B, else on the partition's second
/// CPU, else on the first CPU of the system partition that is not the partition's — an
/// isolated task talking to an ordinary process. The echo side joins the partition exactly
/// when its CPU is one of the partition's.
pub fn choose(
    asked: Option<[u32; 2]>,
    partition: Option<&Placement>,
    system: Option<&CpuList>,
) -> Result<Sides> {
    let Some(p) = partition else {
        return Ok(Sides::unplaced(asked.unwrap_or(DEFAULT_CPUS)));
    };
    let [timing, echo] = match asked {
        Some([a, b]) => {
            if !p.cpus.contains(a) {
                return Err(invalid(format!(
                    "--cpus {a},{b}: the timing CPU {a} is not in partition {:?} (its CPUs: {}) — with -p the first CPU must be one of the partition's; leave out --cpus to let tame choose",
                    p.partition, p.cpus
                )));
            }
            [a, b]
        }
        None => {
            let mut own = p.cpus.iter();
            let Some(a) = own.next() else {
                return Err(invalid(format!(
                    "partition {:?} has no CPUs — check the applied spec with `tame status`",
                    p.partition
                )));
            };
            let b = own
                .next()
                .or_else(|| system.and_then(|s| s.difference(&p.cpus).first()))
                .ok_or_else(|| {
                    invalid(format!(
                        "partition {:?} has one CPU ({a}) and no CPU of a system partition is known for the echo thread — name it with --cpus {a},B",
                        p.partition
                    ))
                })?;
            [a, b]
        }
    };
    Ok(Sides {
        timing: Side {
            cpu: timing,
            in_partition: true,
        },
        echo: Side {
            cpu: echo,
            in_partition: p.cpus.contains(echo),
        },
    })
}

/// The load's CPUs with `-p` and no `--load-cpus`: the system partition's CPUs other than
/// the bench's two (so the echo thread is not loaded), or all of them when that leaves none.
pub fn default_load_cpus(system: &CpuList, sides: &Sides) -> CpuList {
    let rest = system.difference(&CpuList::from_cpus(sides.cpus()));
    if rest.is_empty() {
        system.clone()
    } else {
        rest
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tame_host::cgroup::{CgroupVersion, Group};

    fn partition(cpus: &str) -> Placement {
        Placement {
            partition: "rt".into(),
            cpus: CpuList::parse(cpus).unwrap(),
            group: Group::new(CgroupVersion::V1, "/sys/fs/cgroup/cpuset", "/tame-rt"),
        }
    }

    fn list(text: &str) -> CpuList {
        CpuList::parse(text).unwrap()
    }

    fn side(cpu: u32, in_partition: bool) -> Side {
        Side { cpu, in_partition }
    }

    #[test]
    fn without_a_partition_the_cpus_are_asked_or_the_default() {
        assert_eq!(choose(None, None, None).unwrap(), Sides::unplaced([0, 1]));
        assert_eq!(
            choose(Some([3, 2]), None, Some(&list("0-1"))).unwrap(),
            Sides::unplaced([3, 2])
        );
        assert!(!Sides::unplaced([0, 1]).placed());
    }

    #[test]
    fn a_partition_of_two_cpus_holds_both_sides() {
        let sides = choose(None, Some(&partition("2-3")), Some(&list("0-1"))).unwrap();
        assert_eq!(sides.timing, side(2, true));
        assert_eq!(sides.echo, side(3, true));
    }

    #[test]
    fn a_partition_of_one_cpu_talks_to_the_system_partition() {
        let sides = choose(None, Some(&partition("3")), Some(&list("0-2"))).unwrap();
        assert_eq!(sides.timing, side(3, true));
        assert_eq!(sides.echo, side(0, false));
        // The system partition's CPUs that are the partition's own do not count.
        let sides = choose(None, Some(&partition("0")), Some(&list("0-1"))).unwrap();
        assert_eq!(sides.echo, side(1, false));
    }

    #[test]
    fn a_partition_of_one_cpu_and_no_other_cpu_is_bad_input() {
        for system in [None, Some(list("3"))] {
            let e = choose(None, Some(&partition("3")), system.as_ref()).unwrap_err();
            assert!(e.is_bad_input(), "{e}");
            assert_eq!(
                e.to_string(),
                "partition \"rt\" has one CPU (3) and no CPU of a system partition is known for the echo thread — name it with --cpus 3,B"
            );
        }
    }

    #[test]
    fn asked_cpus_override_and_the_timing_cpu_must_be_the_partitions() {
        let p = partition("2-3");
        let sides = choose(Some([3, 0]), Some(&p), Some(&list("0-1"))).unwrap();
        assert_eq!((sides.timing, sides.echo), (side(3, true), side(0, false)));
        let sides = choose(Some([3, 2]), Some(&p), None).unwrap();
        assert_eq!(sides.echo, side(2, true));
        let e = choose(Some([0, 2]), Some(&p), Some(&list("0-1"))).unwrap_err();
        assert!(e.is_bad_input(), "{e}");
        assert_eq!(
            e.to_string(),
            "--cpus 0,2: the timing CPU 0 is not in partition \"rt\" (its CPUs: 2-3) — with -p the first CPU must be one of the partition's; leave out --cpus to let tame choose"
        );
    }

    #[test]
    fn the_load_defaults_to_system_cpus_off_the_echo_cpu() {
        let one = choose(None, Some(&partition("3")), Some(&list("0-2"))).unwrap();
        assert_eq!(default_load_cpus(&list("0-2"), &one).to_string(), "1-2");
        // Only the echo CPU in the system partition: the load shares it.
        let two_cpu_machine = choose(None, Some(&partition("1")), Some(&list("0"))).unwrap();
        assert_eq!(two_cpu_machine.echo, side(0, false));
        assert_eq!(
            default_load_cpus(&list("0"), &two_cpu_machine).to_string(),
            "0"
        );
        let both_inside = choose(None, Some(&partition("2-3")), Some(&list("0-1"))).unwrap();
        assert_eq!(
            default_load_cpus(&list("0-1"), &both_inside).to_string(),
            "0-1"
        );
    }
}
