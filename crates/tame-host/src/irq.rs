//! Interrupts: /proc/interrupts (per-CPU counts of device IRQs and of the
//! per-CPU vectors LOC, CAL, RES, TLB, …), each IRQ's requested and effective
//! affinity, whether the kernel manages its affinity, and the default affinity.

use serde::{Deserialize, Serialize};

use crate::error::ParseError;
use crate::reader::Reader;
use crate::{CpuList, HostError, Root};

pub const PROC_INTERRUPTS: &str = "/proc/interrupts";
/// One directory per IRQ, plus the default affinity.
pub const PROC_IRQ: &str = "/proc/irq";
pub const DEFAULT_AFFINITY: &str = "/proc/irq/default_smp_affinity";
/// Present only with CONFIG_GENERIC_IRQ_DEBUGFS and debugfs mounted; the one
/// place that states the managed flag outright.
pub const DEBUGFS_IRQS: &str = "/sys/kernel/debug/irq/irqs";

/// Where an IRQ may fire, as a CPU list (writable, unless the kernel manages the IRQ).
pub fn affinity_list_path(irq: u32) -> String {
    format!("{PROC_IRQ}/{irq}/smp_affinity_list")
}

/// /proc/interrupts as text: the CPU columns and every line.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterruptsTable {
    /// The CPU of each count column (only online CPUs have a column).
    pub cpus: Vec<u32>,
    pub lines: Vec<InterruptLine>,
}

/// One line of /proc/interrupts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterruptLine {
    /// `36` for a device IRQ, `LOC` for a per-CPU vector.
    pub label: String,
    /// Counts in column order; summary lines such as `ERR:` have a single count.
    pub counts: Vec<u64>,
    /// Everything after the counts, whitespace-normalised
    /// (`PCI-MSIX-0000:00:02.0 1-edge virtio1-req.0`, `Local timer interrupts`).
    pub text: String,
}

impl InterruptLine {
    /// The IRQ number, for device IRQs.
    pub fn number(&self) -> Option<u32> {
        self.label.parse().ok()
    }
}

/// Parse /proc/interrupts.
pub fn parse_interrupts(text: &str) -> Result<InterruptsTable, ParseError> {
    let mut lines = text.lines().enumerate();
    let (_, header) = lines
        .find(|(_, l)| !l.trim().is_empty())
        .ok_or_else(|| ParseError::new(1, "empty file: no CPU header"))?;
    let mut cpus = Vec::new();
    for word in header.split_whitespace() {
        let n = word
            .strip_prefix("CPU")
            .and_then(|n| n.parse::<u32>().ok())
            .ok_or_else(|| ParseError::new(1, format!("header word {word:?} is not CPUn")))?;
        cpus.push(n);
    }
    if cpus.is_empty() {
        return Err(ParseError::new(1, "header names no CPUs"));
    }
    let mut out = Vec::new();
    for (i, line) in lines {
        let lineno = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let (label, rest) = line
            .split_once(':')
            .ok_or_else(|| ParseError::new(lineno, "no \"LABEL:\" at the start of the line"))?;
        let label = label.trim();
        if label.is_empty() || label.contains(char::is_whitespace) {
            return Err(ParseError::new(lineno, format!("bad label {label:?}")));
        }
        let mut counts = Vec::with_capacity(cpus.len());
        // The counts are most of the file (1024 CPUs × thousands of IRQs is tens of MB):
        // read them byte by byte; `words` is what follows them.
        let rest = leading_counts(rest, cpus.len(), &mut counts)
            .map_err(|w| ParseError::new(lineno, format!("count {w:?} does not fit 64 bits")))?;
        let mut words = rest.split_whitespace().peekable();
        while counts.len() < cpus.len() {
            match words.peek() {
                Some(w) if w.bytes().all(|b| b.is_ascii_digit()) => {
                    let n = w.parse::<u64>().map_err(|_| {
                        ParseError::new(lineno, format!("count {w:?} does not fit 64 bits"))
                    })?;
                    counts.push(n);
                    words.next();
                }
                _ => break,
            }
        }
        if counts.is_empty() {
            return Err(ParseError::new(
                lineno,
                format!("IRQ {label} has no counts"),
            ));
        }
        let text = words.collect::<Vec<_>>().join(" ");
        out.push(InterruptLine {
            label: label.to_string(),
            counts,
            text,
        });
    }
    Ok(InterruptsTable { cpus, lines: out })
}

/// Push to `counts` the leading words of `rest` that are counts (ASCII digits between
/// whitespace), up to `max` in all, as `split_whitespace` would find them; return what
/// follows them, for the word-by-word reading to go on with (where a count ends at a
/// byte that is not ASCII, it starts there). Err: the digits of a count beyond 64 bits.
///
/// Written for the unoptimised test build too: plain indexing, and a zero count (most
/// of them) taken as one 11-byte column.
fn leading_counts<'a>(
    rest: &'a str,
    max: usize,
    counts: &mut Vec<u64>,
) -> Result<&'a str, &'a str> {
    // The kernel's column for a count of zero (" %10u"), most of the counts of a big
    // machine: taken whole when a space follows, as the loops below would take it.
    const ZERO: &[u8; 11] = b"          0";
    let bytes = rest.as_bytes();
    let len = bytes.len();
    let mut i = 0;
    while counts.len() < max {
        if i + 11 < len
            && bytes[i + 11] == b' '
            && bytes[i + 10] == b'0'
            && bytes[i..i + 11] == *ZERO
        {
            counts.push(0);
            i += 11;
            continue;
        }
        // ASCII whitespace as `char::is_whitespace` has it: space, \t \n \x0b \x0c \r.
        while i < len && matches!(bytes[i], b' ' | b'\t'..=b'\r') {
            i += 1;
        }
        let start = i;
        let mut n: u64 = 0;
        while i < len && bytes[i].is_ascii_digit() {
            // 19 digits always fit in 64 bits; longer counts are parsed below.
            if i - start < 19 {
                n = n * 10 + (bytes[i] - b'0') as u64;
            }
            i += 1;
        }
        // A count is digits up to whitespace or the end; anything else is left to the
        // word-by-word reading, from the start of this word.
        if i == start || (i < len && !matches!(bytes[i], b' ' | b'\t'..=b'\r')) {
            return Ok(&rest[start..]);
        }
        if i - start > 19 {
            let word = &rest[start..i];
            n = word.parse().map_err(|_| word)?;
        }
        counts.push(n);
    }
    Ok(&rest[i..])
}

/// The chip, hardware IRQ and action names of a device IRQ line's text.
/// x86: `IO-APIC 4-edge ttyS0`; ARM: `GICv3 30 Level arch_timer`.
pub fn split_device_text(text: &str) -> (Option<String>, Option<String>, String) {
    let mut words = text.split_whitespace().peekable();
    let chip = words.next().map(str::to_string);
    let mut hwirq = None;
    if let Some(w) = words.peek() {
        // `5-edge`, `9-fasteoi`, `16-level`, or a bare number (ARM, with the trigger next).
        let looks_hw = w.contains("-edge")
            || w.contains("-level")
            || w.contains("-fasteoi")
            || w.bytes().all(|b| b.is_ascii_digit());
        if looks_hw {
            let mut h = w.to_string();
            words.next();
            if let Some(t) = words.peek() {
                if *t == "Edge" || *t == "Level" {
                    h = format!("{h} {t}");
                    words.next();
                }
            }
            hwirq = Some(h);
        }
    }
    (chip, hwirq, words.collect::<Vec<_>>().join(" "))
}

/// How we know whether an IRQ's affinity is managed by the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ManagedSource {
    /// /sys/kernel/debug/irq/irqs/N lists IRQD_AFFINITY_MANAGED (or does not).
    Debugfs,
    /// Inferred from the action name: multi-queue block drivers (virtio-blk
    /// `virtioN-req.Q`, virtio-scsi `virtioN-request.Q`, NVMe I/O queues
    /// `nvmeNqM`, M>0) spread their queues with managed affinity.
    NameHeuristic,
}

/// A device IRQ.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Irq {
    pub number: u32,
    /// Counts per CPU, in the order of [`IrqModel::cpus`].
    pub counts: Vec<u64>,
    pub chip: Option<String>,
    pub hwirq: Option<String>,
    /// The action (device) names, e.g. `virtio1-req.0`.
    pub name: String,
    /// /proc/irq/N/smp_affinity_list: where it is allowed to go.
    pub affinity: Option<CpuList>,
    /// /proc/irq/N/effective_affinity_list: where it actually fires.
    pub effective_affinity: Option<CpuList>,
    /// /proc/irq/N/node (-1: none).
    pub node: Option<i32>,
    /// The kernel manages the affinity: writing smp_affinity fails (EIO) and
    /// only `isolcpus=managed_irq,…` at boot keeps it off isolated CPUs.
    pub managed: bool,
    pub managed_source: ManagedSource,
}

impl Irq {
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Where the IRQ fires: the effective affinity, else the requested one.
    pub fn fires_on(&self) -> Option<&CpuList> {
        self.effective_affinity.as_ref().or(self.affinity.as_ref())
    }

    /// Whether tame (or anyone) may move it.
    pub fn can_move(&self) -> bool {
        !self.managed
    }
}

/// A per-CPU interrupt vector (LOC, RES, CAL, TLB, NMI, …) or a summary line (ERR, MIS).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuVector {
    pub name: String,
    pub description: String,
    /// Per CPU in the order of [`IrqModel::cpus`]; one value for summary lines.
    pub counts: Vec<u64>,
}

/// All interrupts of the machine.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IrqModel {
    /// The CPU of each count column.
    pub cpus: Vec<u32>,
    /// /proc/irq/default_smp_affinity: where new IRQs start.
    pub default_affinity: Option<CpuList>,
    pub irqs: Vec<Irq>,
    pub vectors: Vec<CpuVector>,
}

impl IrqModel {
    /// The column of a CPU in the count vectors.
    pub fn column(&self, cpu: u32) -> Option<usize> {
        self.cpus.iter().position(|&c| c == cpu)
    }

    pub fn irq(&self, number: u32) -> Option<&Irq> {
        self.irqs.iter().find(|i| i.number == number)
    }

    pub fn vector(&self, name: &str) -> Option<&CpuVector> {
        self.vectors.iter().find(|v| v.name == name)
    }

    /// Device IRQs that fire on any of `cpus`.
    pub fn firing_on<'a>(&'a self, cpus: &'a CpuList) -> impl Iterator<Item = &'a Irq> + 'a {
        self.irqs.iter().filter(move |i| {
            i.fires_on()
                .is_some_and(|f| !f.intersection(cpus).is_empty())
        })
    }

    /// Read the whole model. A missing /proc/interrupts is a problem; a missing
    /// per-IRQ file leaves that field `None`.
    pub fn read(r: &mut Reader) -> Self {
        let mut model = IrqModel {
            default_affinity: r.knob(DEFAULT_AFFINITY).and_then(|t| {
                CpuList::parse_mask(&t)
                    .map_err(|e| r.parse_problem(DEFAULT_AFFINITY, ParseError::new(1, e.reason)))
                    .ok()
            }),
            ..Default::default()
        };
        let Some(text) = r.required(PROC_INTERRUPTS) else {
            return model;
        };
        let table = match parse_interrupts(&text) {
            Ok(t) => t,
            Err(e) => {
                r.parse_problem(PROC_INTERRUPTS, e);
                return model;
            }
        };
        let mut debugfs = r.is_dir(DEBUGFS_IRQS);
        model.cpus = table.cpus;
        for line in table.lines {
            let Some(number) = line.number() else {
                model.vectors.push(CpuVector {
                    name: line.label,
                    description: line.text,
                    counts: line.counts,
                });
                continue;
            };
            let (chip, hwirq, name) = split_device_text(&line.text);
            let dir = format!("{PROC_IRQ}/{number}");
            let debug_text = if debugfs {
                let path = format!("{DEBUGFS_IRQS}/{number}");
                match r.root().read(&path) {
                    Ok(t) => Some(t),
                    Err(e) if e.is_not_found() => None,
                    Err(e) => {
                        // Locked down (EPERM): say so once, then use the name rule for all.
                        r.problem(&path, &e);
                        debugfs = false;
                        None
                    }
                }
            } else {
                None
            };
            let (managed, managed_source) = match debug_text {
                Some(t) => (debugfs_says_managed(&t), ManagedSource::Debugfs),
                None => (name_looks_managed(&name), ManagedSource::NameHeuristic),
            };
            model.irqs.push(Irq {
                number,
                counts: line.counts,
                chip,
                hwirq,
                affinity: r.knob_cpu_list(&affinity_list_path(number)),
                effective_affinity: r.cpu_list(&format!("{dir}/effective_affinity_list")),
                node: r.number(&format!("{dir}/node")),
                name,
                managed,
                managed_source,
            });
        }
        model
    }
}

/// Whether a debugfs IRQ description lists the managed-affinity state.
pub fn debugfs_says_managed(text: &str) -> bool {
    text.split_whitespace()
        .any(|w| w == "IRQD_AFFINITY_MANAGED" || w == "AFFINITY_MANAGED")
}

/// Whether an action name belongs to a driver known to request managed
/// affinity for its queues (see [`ManagedSource::NameHeuristic`]).
pub fn name_looks_managed(name: &str) -> bool {
    name.split(", ").any(|action| {
        let queue_of = |dev_prefix: &str, sep: &str| -> bool {
            let Some(rest) = action.strip_prefix(dev_prefix) else {
                return false;
            };
            let Some((dev, queue)) = rest.split_once(sep) else {
                return false;
            };
            !dev.is_empty()
                && dev.bytes().all(|b| b.is_ascii_digit())
                && !queue.is_empty()
                && queue.bytes().all(|b| b.is_ascii_digit())
        };
        if queue_of("virtio", "-req.") || queue_of("virtio", "-request.") {
            return true;
        }
        // nvme0q1 … : I/O queues are managed, the admin queue q0 is not.
        if let Some(rest) = action.strip_prefix("nvme") {
            if let Some((dev, q)) = rest.split_once('q') {
                return !dev.is_empty()
                    && dev.bytes().all(|b| b.is_ascii_digit())
                    && q.parse::<u32>().is_ok_and(|q| q > 0);
            }
        }
        false
    })
}

/// Render a table in the kernel's layout (used by the fixture generator and tests).
pub fn render_interrupts(table: &InterruptsTable) -> String {
    use std::fmt::Write as _;
    let mut s = String::from("    ");
    for c in &table.cpus {
        s.push_str(&format!("{:>11}", format!("CPU{c}")));
    }
    s.push('\n');
    for l in &table.lines {
        s.push_str(&format!("{:>4}:", l.label));
        for n in &l.counts {
            // Into the string: a synthetic host of 1024 CPUs has millions of counts.
            let _ = write!(s, " {n:>10}");
        }
        if !l.text.is_empty() {
            s.push_str("   ");
            s.push_str(&l.text);
        }
        s.push('\n');
    }
    s
}

impl Root {
    /// `/proc/interrupts`, parsed.
    pub fn interrupts(&self) -> Result<InterruptsTable, HostError> {
        let text = self.read(PROC_INTERRUPTS)?;
        parse_interrupts(&text).map_err(|e| e.at(PROC_INTERRUPTS))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const THIS_VM: &str = "           CPU0       CPU1       
 24:          1          0  IO-APIC   5-edge      ACPI:Ged
 26:          0         14  IO-APIC   4-edge      ttyS0
 36:          0      33340 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0
 38:          0       1301 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0
NMI:          0          0   Non-maskable interrupts
LOC:      16417      19028   Local timer interrupts
CAL:      31863      28576   Function call interrupts
ERR:          0
";

    #[test]
    fn parses_device_lines_and_vectors() {
        let t = parse_interrupts(THIS_VM).unwrap();
        assert_eq!(t.cpus, vec![0, 1]);
        assert_eq!(t.lines.len(), 8);
        let irq36 = &t.lines[2];
        assert_eq!(irq36.number(), Some(36));
        assert_eq!(irq36.counts, vec![0, 33340]);
        let (chip, hw, name) = split_device_text(&irq36.text);
        assert_eq!(chip.as_deref(), Some("PCI-MSIX-0000:00:02.0"));
        assert_eq!(hw.as_deref(), Some("1-edge"));
        assert_eq!(name, "virtio1-req.0");
        assert_eq!(t.lines[5].label, "LOC");
        assert_eq!(t.lines[5].text, "Local timer interrupts");
        assert_eq!(t.lines[7].counts, vec![0]);
    }

    #[test]
    fn arm_lines_keep_the_trigger_with_the_hardware_irq() {
        let (chip, hw, name) = split_device_text("GICv3  30 Level     arch_timer");
        assert_eq!(chip.as_deref(), Some("GICv3"));
        assert_eq!(hw.as_deref(), Some("30 Level"));
        assert_eq!(name, "arch_timer");
    }

    #[test]
    fn offline_cpus_have_no_column() {
        let t = parse_interrupts("  CPU0 CPU2\n  5:  1  2  IO-APIC 5-edge x\n").unwrap();
        assert_eq!(t.cpus, vec![0, 2]);
        assert_eq!(t.lines[0].counts, vec![1, 2]);
    }

    #[test]
    fn malformed_files_name_the_line() {
        let e = parse_interrupts("CPU0\n 1: 5 x\nnonsense line\n").unwrap_err();
        assert_eq!(e.line, 3);
        let e = parse_interrupts("CPU0 bogus\n").unwrap_err();
        assert_eq!(e.line, 1);
        let e = parse_interrupts("CPU0\n 7: IO-APIC\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(parse_interrupts("").is_err());
    }

    #[test]
    fn managed_queue_names() {
        assert!(name_looks_managed("virtio1-req.0"));
        assert!(name_looks_managed("virtio0-request.3"));
        assert!(name_looks_managed("nvme0q4"));
        assert!(!name_looks_managed("nvme0q0"));
        assert!(!name_looks_managed("virtio2-input.0"));
        assert!(!name_looks_managed("virtio1-config"));
        assert!(!name_looks_managed("eth0-TxRx-0"));
        assert!(debugfs_says_managed(
            "handler:  handle_edge_irq\nstate:    0x00000000\nflags:    0x0\n             IRQD_AFFINITY_MANAGED\n"
        ));
    }

    fn line_strategy(ncpus: usize) -> impl Strategy<Value = InterruptLine> {
        let device = (
            0u32..5000,
            proptest::collection::vec(any::<u64>(), ncpus),
            "[A-Za-z][A-Za-z0-9:._-]{0,12}",
            "[a-z][a-z0-9._-]{0,10}",
        )
            .prop_map(|(n, counts, chip, name)| InterruptLine {
                label: n.to_string(),
                counts,
                text: format!("{chip} 3-edge {name}"),
            });
        let vector = (
            "[A-Z]{3}",
            proptest::collection::vec(any::<u64>(), ncpus),
            "[A-Z][a-z]{1,8}( [a-z]{1,8}){0,3}",
        )
            .prop_map(|(name, counts, text)| InterruptLine {
                label: name,
                counts,
                text,
            });
        prop_oneof![device, vector]
    }

    fn table_strategy() -> impl Strategy<Value = InterruptsTable> {
        (1usize..9).prop_flat_map(|n| {
            (
                proptest::collection::btree_set(0u32..512, n..=n),
                proptest::collection::vec(line_strategy(n), 0..20),
            )
                .prop_map(|(cpus, lines)| InterruptsTable {
                    cpus: cpus.into_iter().collect(),
                    lines,
                })
        })
    }

    /// Up to `max` counts read word by word from `rest`, and the text after them.
    fn by_word_from(rest: &str, max: usize) -> Result<(Vec<u64>, String), String> {
        let mut words = rest.split_whitespace().peekable();
        let mut counts = Vec::new();
        while counts.len() < max {
            match words.peek() {
                Some(w) if w.bytes().all(|b| b.is_ascii_digit()) => {
                    counts.push(w.parse::<u64>().map_err(|_| w.to_string())?);
                    words.next();
                }
                _ => break,
            }
        }
        Ok((counts, words.collect::<Vec<_>>().join(" ")))
    }

    proptest! {
        #[test]
        fn render_then_parse_is_identity(table in table_strategy()) {
            let text = render_interrupts(&table);
            prop_assert_eq!(parse_interrupts(&text).unwrap(), table);
        }

        #[test]
        fn parse_never_panics(s in "(\\PC{0,30}\n){0,6}") {
            let _ = parse_interrupts(&s);
        }

        /// The byte-by-byte reading of the counts finds what reading word by word (as
        /// before it) found: counts, where they stop, the text, and each error.
        #[test]
        fn counts_are_read_as_word_by_word(
            rest in "([ \t\u{a0}\u{2003}\u{b}]{0,3}(0|7|[0-9]{1,3}|0{20}[1-9]|[0-9]{20,21}|x|[0-9]+x|ab|\u{e9}| {9,10}0| {10}0[x ]| {10}00)){0,8}[ \u{a0}]{0,2}",
            max in 1usize..6,
        ) {
            let by_byte = |rest: &str| -> Result<(Vec<u64>, String), String> {
                let mut counts = Vec::new();
                let after = leading_counts(rest, max, &mut counts).map_err(str::to_string)?;
                let mut tail = by_word_from(after, max - counts.len())?;
                counts.append(&mut tail.0);
                Ok((counts, tail.1))
            };
            prop_assert_eq!(by_byte(&rest), by_word_from(&rest, max));
        }

        #[test]
        fn errors_point_inside_the_file(s in "CPU0 CPU1\n(( *[0-9A-Z]{1,3}:)? *[0-9a-z ]{0,20}\n){1,6}") {
            if let Err(e) = parse_interrupts(&s) {
                prop_assert!(e.line >= 1 && e.line <= s.lines().count());
            }
        }
    }
}
