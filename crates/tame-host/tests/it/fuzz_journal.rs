//! Fuzzing the journal reader: a journal file holds whatever a crash, an editor or
//! another user left there, and `tame revert` reads it as root. Any bytes must load
//! as records or fail as a journal error naming a line of the file — never a panic.
//! The field escaping round-trips any bytes.
//!
//! Revert itself is not fuzzed here: on a crafted journal it would write outside the
//! fixture tree until the journal refuses such paths (issue 12 §2).
//!
//! `TAME_FUZZ_CASES` cases each (default 2000, about a second in `make test`);
//! `make fuzz` runs a million each in release mode (docs/testing.md).

use proptest::prelude::*;
use tame_host::journal::{escape, journal_path, load, unescape, JournalError};
use tame_testing::fuzz::{regex, run as fuzz, Verdict};

const HEADERS: &[&str] = &[
    "tame-journal 1 /",
    "tame-journal 1 /tmp/fixture%20root",
    "tame-journal 1",
    "tame-journal 2 /",
    "tame-journal 1 %ZZ",
    "tame-journal 1 %FF",
    "tame-journa 1 /",
    "",
];

const KINDS: &[&str] = &[
    "note", "write", "mkdir", "move", "owner", "place", "done", "failed", "unknown", "",
];

/// Fields of every kind: sequence numbers and ids, paths (escaped, badly escaped,
/// outside the allowed prefixes), values, ownerships, placements.
const FIELDS: &[&str] = &[
    "0",
    "1",
    "7",
    "-1",
    "18446744073709551615",
    "18446744073709551616",
    "4294967296",
    "x",
    "",
    "-",
    "=",
    "=0-3",
    "=ff",
    "=%00",
    "=%0",
    "=%",
    "=%C3%28",
    "%",
    "%4",
    "%ZZ",
    "%2F",
    "%C3%28",
    "%E2%82%AC",
    "/sys/fs/cgroup/cpuset/tame-rt",
    "/sys/fs/cgroup/cpuset/tame-rt/tasks",
    "/sys/fs/cgroup/cpuset/tasks",
    "/proc/irq/1/smp_affinity",
    "/proc/sys/kernel/timer_migration",
    "/sys/devices/system/cpu/cpu2/power/pm_qos_resume_latency_us",
    "../../etc/passwd",
    "/etc/shadow",
    "/sys/../etc/passwd",
    "relative/path",
    "0:0:644",
    "0:0:4777",
    "0:0:7777777777777",
    "1:2",
    "a:b:c",
    "0:0:8",
    "0:0:644:1",
    "=0-3:1/2",
    "=0-8192",
    "=3-1",
    "=1:50:0:0:0:0:0",
    "=6:0:0:0:1000:2000:3000",
    "=0:0:-20:1:0:0:0",
    "=1:50:0:0:0:0",
    "=x:y:z:0:0:0:0",
    "=/tame-rt",
    "spec",
    "ENOENT",
];

/// One record line: a kind and up to ten fields (sometimes doubled separators).
fn record() -> impl Strategy<Value = String> {
    (
        prop::sample::select(KINDS),
        prop::collection::vec(
            prop_oneof![
                8 => prop::sample::select(FIELDS).prop_map(str::to_string),
                1 => regex("[ -~]{0,12}"),
                1 => regex("\\PC{0,6}"),
            ],
            0..11,
        ),
        prop::sample::select(&[" ", " ", " ", "  ", "\t"][..]),
    )
        .prop_map(|(kind, fields, sep)| {
            let mut line = kind.to_string();
            for f in fields {
                line.push_str(sep);
                line.push_str(&f);
            }
            line
        })
}

/// A field as the journal writes it: mostly text, sometimes any bytes, escaped.
fn escaped() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => prop::sample::select(FIELDS).prop_map(|f| escape(f.as_bytes())),
        2 => regex("\\PC{0,12}").prop_map(|t| escape(t.as_bytes())),
        1 => prop::collection::vec(any::<u8>(), 0..12).prop_map(|b| escape(&b)),
    ]
}

/// A process or thread id: mostly one that fits.
fn id() -> impl Strategy<Value = String> {
    prop_oneof![8 => (0u32..100_000).prop_map(|n| n.to_string()), 1 => number()]
}

/// `-` or `=` and an escaped value.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![1 => Just("-".to_string()), 4 => escaped().prop_map(|v| format!("={v}"))]
}

fn number() -> impl Strategy<Value = String> {
    prop_oneof![4 => (0u64..64).prop_map(|n| n.to_string()), 1 => any::<u64>().prop_map(|n| n.to_string())]
}

fn ownership() -> impl Strategy<Value = String> {
    (any::<u32>(), any::<u32>(), 0u32..0o10000).prop_map(|(u, g, m)| format!("{u}:{g}:{m:o}"))
}

/// A placement: affinity, scheduling attributes, cgroup, each `-` or a value.
fn placement() -> impl Strategy<Value = String> {
    let affinity = prop_oneof![Just("-".to_string()), regex("=[0-9]{1,2}(-[0-9]{1,2})?")];
    let sched = prop_oneof![
        Just("-".to_string()),
        (
            0u32..8,
            0u32..100,
            -20i32..20,
            0u32..2,
            any::<u32>(),
            any::<u32>(),
            any::<u32>()
        )
            .prop_map(|(p, pr, n, r, a, b, c)| format!("={p}:{pr}:{n}:{r}:{a}:{b}:{c}")),
    ];
    (affinity, sched, value()).prop_map(|(a, s, c)| format!("{a} {s} {c}"))
}

/// A record as the journal writes it (each kind with fields of the right shape).
fn well_formed() -> impl Strategy<Value = String> {
    prop_oneof![
        (escaped(), escaped()).prop_map(|(k, v)| format!("note {k} {v}")),
        (
            number(),
            escaped(),
            value(),
            value(),
            prop::option::of(value())
        )
            .prop_map(|(s, p, o, n, r)| format!(
                "write {s} {p} {o} {n}{}",
                r.map(|r| format!(" {r}")).unwrap_or_default()
            )),
        (
            number(),
            escaped(),
            prop::option::of((escaped(), escaped()))
        )
            .prop_map(|(s, p, m)| {
                format!(
                    "mkdir {s} {p}{}",
                    m.map(|(a, b)| format!(" {a} {b}")).unwrap_or_default()
                )
            }),
        (number(), id(), escaped(), escaped())
            .prop_map(|(s, t, f, to)| format!("move {s} {t} {f} {to}")),
        (number(), escaped(), ownership(), ownership())
            .prop_map(|(s, p, o, n)| format!("owner {s} {p} {o} {n}")),
        (number(), id(), id(), placement(), placement())
            .prop_map(|(s, p, t, o, n)| format!("place {s} {p} {t} {o} {n}")),
        number().prop_map(|s| format!("done {s}")),
        (number(), escaped()).prop_map(|(s, r)| format!("failed {s} {r}")),
    ]
}

/// A header and records, the last line complete or torn; `noisy`: a quarter of the
/// records of any kind and fields.
fn journal(noisy: bool) -> impl Strategy<Value = Vec<u8>> {
    let noise = if noisy { 1 } else { 0 };
    (
        prop_oneof![
            6 => Just(HEADERS[0]),
            2 => prop::sample::select(HEADERS),
        ],
        prop::collection::vec(prop_oneof![3 => well_formed(), noise => record()], 0..16),
        prop::sample::select(&["\n", "", "\r\n", "\n\n"][..]),
    )
        .prop_map(|(header, records, end)| {
            let mut text = header.to_string();
            for r in records {
                text.push('\n');
                text.push_str(&r);
            }
            text.push_str(end);
            text.into_bytes()
        })
}

/// `bytes` with up to four bytes replaced, removed or inserted (any byte value, so
/// also invalid UTF-8 and NULs).
fn mutated(bytes: impl Strategy<Value = Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    let edits = prop::collection::vec((any::<prop::sample::Index>(), 0u8..3, any::<u8>()), 0..5);
    (bytes, edits).prop_map(|(mut bytes, edits)| {
        for (at, op, b) in edits {
            if bytes.is_empty() {
                bytes.push(b);
                continue;
            }
            let i = at.index(bytes.len());
            match op {
                0 => bytes[i] = b,
                1 => {
                    bytes.remove(i);
                }
                _ => bytes.insert(i, b),
            }
        }
        bytes
    })
}

fn journal_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => journal(false),
        2 => journal(true),
        3 => mutated(journal(true)),
        1 => prop::collection::vec(any::<u8>(), 0..300),
    ]
}

#[test]
fn fuzz_journal_load() {
    let dir = tame_testing::scratch_dir("fuzz-journal");
    let file = journal_path(dir.path());
    fuzz("journal load", 0.05, journal_bytes(), |bytes| {
        std::fs::write(&file, &bytes).unwrap();
        Ok(match load(dir.path()) {
            Ok(Some(_)) => Verdict::Accepted,
            Ok(None) => return Err(TestCaseError::fail("a journal file was read as none")),
            Err(e @ JournalError::Io { .. }) => {
                return Err(TestCaseError::fail(format!("not a read error: {e}")))
            }
            Err(JournalError::Corrupt { line, reason, .. }) => {
                let lines = bytes.split(|&b| b == b'\n').count();
                prop_assert!(line >= 1 && line <= lines, "line {line} of {lines}");
                prop_assert!(!reason.trim().is_empty());
                Verdict::Refused
            }
            Err(e) => {
                prop_assert!(!e.to_string().trim().is_empty());
                Verdict::Refused
            }
        })
    });
}

#[test]
fn fuzz_journal_escaping() {
    let fields = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..40).prop_map(|b| (b, String::new())),
        regex("\\PC{0,20}").prop_map(|s| (Vec::new(), s)),
        prop::collection::vec(
            prop::sample::select(&["%", "%4", "%ZZ", "%41", "a", "é", " "][..]),
            0..8
        )
        .prop_map(|parts| (Vec::new(), parts.concat())),
    ];
    fuzz("journal escaping", 0.5, fields, |(bytes, text)| {
        // Any bytes round-trip, and their field holds no separator.
        let field = escape(&bytes);
        prop_assert!(field.bytes().all(|b| b.is_ascii_graphic()), "{field:?}");
        prop_assert_eq!(unescape(&field), Some(bytes));
        // Any text unescapes to bytes or is refused; what it gives escapes back to
        // a field that unescapes to the same bytes.
        Ok(match unescape(&text) {
            Some(b) => {
                prop_assert_eq!(unescape(&escape(&b)), Some(b));
                Verdict::Accepted
            }
            None => Verdict::Refused,
        })
    });
}
