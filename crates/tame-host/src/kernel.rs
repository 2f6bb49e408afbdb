//! The kernel: release, build configuration, command line (and the isolation
//! parameters in it), preemption model and lockdown state.

use std::collections::BTreeMap;
use std::io::Read;

use serde::{Deserialize, Serialize};

use crate::error::ParseError;
use crate::reader::{bracketed, Reader};
use crate::{CpuList, HostError, Root};

pub const OSRELEASE: &str = "/proc/sys/kernel/osrelease";
pub const VERSION: &str = "/proc/sys/kernel/version";
pub const CMDLINE: &str = "/proc/cmdline";
/// The kernel's file system types (`nodev\ttracefs`).
const FILESYSTEMS: &str = "/proc/filesystems";
/// Where tracefs is mounted on current kernels.
pub const TRACEFS_MOUNT: &str = "/sys/kernel/tracing";
pub const CONFIG_GZ: &str = "/proc/config.gz";
pub const LOCKDOWN: &str = "/sys/kernel/security/lockdown";
/// Readable only with debugfs mounted and not locked down.
pub const DEBUGFS_PREEMPT: &str = "/sys/kernel/debug/sched/preempt";

// ---------------------------------------------------------------- command line

/// One word of the kernel command line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Param {
    pub key: String,
    /// None for a bare flag (`quiet`); Some("") for `key=`.
    pub value: Option<String>,
}

/// The kernel command line, split into parameters. Words after `--` go to init.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cmdline {
    pub raw: String,
    pub params: Vec<Param>,
    pub init_args: Vec<String>,
}

impl Cmdline {
    /// The last value given for `key` (the kernel honours the last one).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.params
            .iter()
            .rev()
            .find(|p| p.key == key)
            .map(|p| p.value.as_deref().unwrap_or(""))
    }

    pub fn has(&self, key: &str) -> bool {
        self.params.iter().any(|p| p.key == key)
    }
}

/// Split a command line as the kernel does: whitespace separates words,
/// double quotes group (`dyndbg="file x +p"`), `--` ends kernel parameters.
pub fn parse_cmdline(text: &str) -> Cmdline {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_quotes = false;
    let mut started = false;
    for ch in text.chars() {
        match ch {
            '"' => {
                in_quotes = !in_quotes;
                started = true;
            }
            c if c.is_whitespace() && !in_quotes => {
                if started {
                    words.push(std::mem::take(&mut cur));
                    started = false;
                }
            }
            c => {
                cur.push(c);
                started = true;
            }
        }
    }
    if started {
        words.push(cur);
    }
    let mut out = Cmdline {
        raw: text.trim().to_string(),
        ..Default::default()
    };
    let mut iter = words.into_iter();
    for w in iter.by_ref() {
        if w == "--" {
            break;
        }
        let (key, value) = match w.split_once('=') {
            Some((k, v)) => (k.to_string(), Some(v.to_string())),
            None => (w, None),
        };
        out.params.push(Param { key, value });
    }
    out.init_args = iter.collect();
    out
}

/// `isolcpus=[flag,…,]cpus`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Isolcpus {
    /// `domain`, `nohz`, `managed_irq`; `domain` is implied when none is given.
    pub flags: Vec<String>,
    pub cpus: CpuList,
}

impl Isolcpus {
    pub fn has(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }
}

/// The boot parameters that shape how isolated CPUs behave.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootIsolation {
    pub isolcpus: Option<Isolcpus>,
    pub nohz_full: Option<CpuList>,
    /// `rcu_nocbs` alone (no list) offloads every CPU: `Some(None)`.
    pub rcu_nocbs: Option<Option<CpuList>>,
    pub irqaffinity: Option<CpuList>,
    /// `idle=poll|halt|nomwait`.
    pub idle: Option<String>,
    pub processor_max_cstate: Option<u32>,
    pub intel_idle_max_cstate: Option<u32>,
    pub skew_tick: Option<bool>,
    /// `tsc=reliable|nowatchdog|…`.
    pub tsc: Option<String>,
    pub mitigations: Option<String>,
    pub nosoftlockup: bool,
    pub nmi_watchdog: Option<String>,
    pub threadirqs: bool,
    /// `preempt=none|voluntary|full|lazy` (dynamic preemption).
    pub preempt: Option<String>,
    pub nosmt: bool,
    /// Values that could not be read, with the reason.
    pub errors: Vec<String>,
}

/// Parse a CPU list as given on the command line, where `N` is the last CPU.
pub fn parse_boot_cpus(value: &str, last_cpu: Option<u32>) -> Result<CpuList, String> {
    let v = match last_cpu {
        Some(n) if value.contains('N') => value.replace('N', &n.to_string()),
        _ => value.to_string(),
    };
    CpuList::parse(&v).map_err(|e| e.reason)
}

impl BootIsolation {
    pub fn from_cmdline(c: &Cmdline, last_cpu: Option<u32>) -> Self {
        let mut b = BootIsolation::default();
        let cpus = |key: &str, b: &mut BootIsolation| -> Option<CpuList> {
            let v = c.get(key)?;
            match parse_boot_cpus(v, last_cpu) {
                Ok(l) => Some(l),
                Err(e) => {
                    b.errors.push(format!("{key}={v}: {e}"));
                    None
                }
            }
        };
        if let Some(v) = c.get("isolcpus") {
            match parse_isolcpus(v, last_cpu) {
                Ok(i) => b.isolcpus = Some(i),
                Err(e) => b.errors.push(format!("isolcpus={v}: {e}")),
            }
        }
        b.nohz_full = cpus("nohz_full", &mut b);
        b.irqaffinity = cpus("irqaffinity", &mut b);
        if let Some(v) = c.get("rcu_nocbs") {
            b.rcu_nocbs = if v.is_empty() {
                Some(None)
            } else {
                cpus("rcu_nocbs", &mut b).map(Some)
            };
        }
        let num = |key: &str| c.get(key).and_then(|v| v.parse().ok());
        b.idle = c.get("idle").map(str::to_string);
        b.processor_max_cstate = num("processor.max_cstate");
        b.intel_idle_max_cstate = num("intel_idle.max_cstate");
        b.skew_tick = c.get("skew_tick").map(|v| v != "0");
        b.tsc = c.get("tsc").map(str::to_string);
        b.mitigations = c.get("mitigations").map(str::to_string);
        b.nosoftlockup = c.has("nosoftlockup");
        b.nmi_watchdog = c.get("nmi_watchdog").map(str::to_string);
        b.threadirqs = c.has("threadirqs");
        b.preempt = c.get("preempt").map(str::to_string);
        b.nosmt = c.has("nosmt");
        b
    }
}

/// `isolcpus=` value: leading flag words, then a CPU list.
pub fn parse_isolcpus(value: &str, last_cpu: Option<u32>) -> Result<Isolcpus, String> {
    const FLAGS: &[&str] = &["domain", "nohz", "managed_irq"];
    let mut flags = Vec::new();
    let mut rest = value;
    while let Some(first) = rest.split(',').next() {
        if first
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic())
            && first != "N"
        {
            if !FLAGS.contains(&first) {
                return Err(format!(
                    "unknown flag {first:?} (known: domain, nohz, managed_irq)"
                ));
            }
            flags.push(first.to_string());
            rest = rest.get(first.len() + 1..).unwrap_or("");
        } else {
            break;
        }
    }
    if flags.is_empty() {
        flags.push("domain".into());
    }
    Ok(Isolcpus {
        flags,
        cpus: parse_boot_cpus(rest, last_cpu)?,
    })
}

// ---------------------------------------------------------------- config

/// A kernel build configuration (`CONFIG_…` lines), keys without the prefix.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelConfig {
    /// Where it was read from (`/proc/config.gz`, `/boot/config-6.18.0`).
    pub source: String,
    /// `y`, `m`, a number or a quoted string (quotes kept); "is not set" entries are `n`.
    pub options: BTreeMap<String, String>,
}

impl KernelConfig {
    /// `y` or `m`.
    pub fn enabled(&self, name: &str) -> bool {
        matches!(self.get(name), Some("y") | Some("m"))
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        let key = name.strip_prefix("CONFIG_").unwrap_or(name);
        self.options.get(key).map(String::as_str)
    }
}

/// Parse a `.config`.
pub fn parse_config(text: &str) -> Result<BTreeMap<String, String>, ParseError> {
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() {
            continue;
        }
        if let Some(c) = l.strip_prefix('#') {
            if let Some(name) = c
                .trim()
                .strip_prefix("CONFIG_")
                .and_then(|r| r.strip_suffix(" is not set"))
            {
                check_name(name, i + 1)?;
                out.insert(name.to_string(), "n".to_string());
            }
            continue;
        }
        let Some((k, v)) = l.split_once('=') else {
            return Err(ParseError::new(
                i + 1,
                format!("expected CONFIG_NAME=value, found {l:?}"),
            ));
        };
        let Some(name) = k.strip_prefix("CONFIG_") else {
            return Err(ParseError::new(
                i + 1,
                format!("{k:?} does not start with CONFIG_"),
            ));
        };
        check_name(name, i + 1)?;
        out.insert(name.to_string(), v.to_string());
    }
    Ok(out)
}

fn check_name(name: &str, line: usize) -> Result<(), ParseError> {
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(ParseError::new(line, format!("bad option name {name:?}")));
    }
    Ok(())
}

/// Render options back to `.config` text (fixtures, tests).
pub fn render_config(options: &BTreeMap<String, String>) -> String {
    let mut s = String::new();
    for (k, v) in options {
        if v == "n" {
            s.push_str(&format!("# CONFIG_{k} is not set\n"));
        } else {
            s.push_str(&format!("CONFIG_{k}={v}\n"));
        }
    }
    s
}

// ---------------------------------------------------------------- preemption, lockdown

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PreemptModel {
    None,
    Voluntary,
    Full,
    Lazy,
    Rt,
    /// PREEMPT_DYNAMIC: one of the above chosen at boot (or at run time via debugfs).
    Dynamic,
    /// `uname -v` names no preemption and the config is unknown: none or voluntary.
    NoneOrVoluntary,
    Unknown,
}

/// How the kernel preempts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Preemption {
    pub model: PreemptModel,
    /// For dynamic kernels: the mode in effect, from debugfs when readable.
    pub dynamic_current: Option<String>,
    /// For dynamic kernels: the boot mode (`preempt=` or the config default).
    pub dynamic_boot: Option<String>,
}

impl Preemption {
    pub fn derive(
        version: &str,
        config: Option<&KernelConfig>,
        cmdline_preempt: Option<&str>,
        debugfs_preempt: Option<&str>,
    ) -> Self {
        let words: Vec<&str> = version.split_whitespace().collect();
        let cfg = |n: &str| config.is_some_and(|c| c.enabled(n));
        let model = if words.contains(&"PREEMPT_RT") || cfg("PREEMPT_RT") {
            PreemptModel::Rt
        } else if words.contains(&"PREEMPT_DYNAMIC") || cfg("PREEMPT_DYNAMIC") {
            PreemptModel::Dynamic
        } else if words.contains(&"PREEMPT_LAZY") || cfg("PREEMPT_LAZY") {
            PreemptModel::Lazy
        } else if words.contains(&"PREEMPT") || cfg("PREEMPT") {
            PreemptModel::Full
        } else if cfg("PREEMPT_VOLUNTARY") {
            PreemptModel::Voluntary
        } else if cfg("PREEMPT_NONE") {
            PreemptModel::None
        } else if !version.trim().is_empty() {
            PreemptModel::NoneOrVoluntary
        } else {
            PreemptModel::Unknown
        };
        let (mut current, mut boot) = (None, None);
        if model == PreemptModel::Dynamic {
            current = debugfs_preempt.and_then(bracketed_paren);
            boot = cmdline_preempt.map(str::to_string).or_else(|| {
                ["NONE", "VOLUNTARY", "PREEMPT", "LAZY"]
                    .iter()
                    .find(|m| {
                        let name = if **m == "PREEMPT" {
                            "PREEMPT".to_string()
                        } else {
                            format!("PREEMPT_{m}")
                        };
                        cfg(&name)
                    })
                    .map(|m| match *m {
                        "PREEMPT" => "full".to_string(),
                        other => other.to_lowercase(),
                    })
            });
        }
        Preemption {
            model,
            dynamic_current: current,
            dynamic_boot: boot,
        }
    }

    /// `rt`, `full`, `dynamic(full)`, … (the spelling results record).
    pub fn summary(&self) -> String {
        match self.model {
            PreemptModel::Dynamic => match (&self.dynamic_current, &self.dynamic_boot) {
                (Some(m), _) => format!("dynamic({m})"),
                (None, Some(b)) => format!("dynamic(boot {b})"),
                _ => "dynamic".into(),
            },
            PreemptModel::Rt => "rt".into(),
            PreemptModel::Full => "full".into(),
            PreemptModel::Lazy => "lazy".into(),
            PreemptModel::Voluntary => "voluntary".into(),
            PreemptModel::None => "none".into(),
            PreemptModel::NoneOrVoluntary => "none or voluntary".into(),
            PreemptModel::Unknown => "unknown".into(),
        }
    }
}

/// The word in parentheses (`none voluntary (full) lazy` → `full`).
fn bracketed_paren(text: &str) -> Option<String> {
    text.split_whitespace()
        .find(|w| w.starts_with('(') && w.ends_with(')'))
        .map(|w| w.trim_matches(|c| c == '(' || c == ')').to_string())
}

/// Kernel lockdown (which, at `integrity` and above, refuses writes through debugfs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lockdown {
    /// none | integrity | confidentiality; None when nothing tells.
    pub state: Option<String>,
    /// securityfs, cmdline (`lockdown=`), config (LOCK_DOWN_KERNEL_FORCE_*) or debugfs (EPERM on a knob).
    pub source: Option<String>,
}

impl Lockdown {
    pub fn derive(
        securityfs: Option<&str>,
        cmdline: &Cmdline,
        config: Option<&KernelConfig>,
        debugfs_knob_refused: bool,
    ) -> Self {
        let found = |state: String, source: &str| Lockdown {
            state: Some(state),
            source: Some(source.into()),
        };
        if let Some(s) = securityfs.and_then(bracketed) {
            return found(s, "securityfs");
        }
        if let Some(c) = config {
            for (opt, state) in [
                ("LOCK_DOWN_KERNEL_FORCE_CONFIDENTIALITY", "confidentiality"),
                ("LOCK_DOWN_KERNEL_FORCE_INTEGRITY", "integrity"),
            ] {
                if c.enabled(opt) {
                    return found(state.into(), "config");
                }
            }
        }
        if let Some(v) = cmdline.get("lockdown") {
            return found(v.to_string(), "cmdline");
        }
        if debugfs_knob_refused {
            return found("integrity".into(), "debugfs");
        }
        Lockdown {
            state: None,
            source: None,
        }
    }

    /// Lockdown at integrity or above: debugfs knobs cannot be written.
    pub fn blocks_debugfs(&self) -> bool {
        matches!(
            self.state.as_deref(),
            Some("integrity") | Some("confidentiality")
        )
    }
}

/// A release number (`6.18.44-fc-v669` → 6.18.44).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ReleaseNumber {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

pub fn parse_release(release: &str) -> Option<ReleaseNumber> {
    let head: String = release
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let mut it = head.split('.').filter(|s| !s.is_empty());
    Some(ReleaseNumber {
        major: it.next()?.parse().ok()?,
        minor: it.next()?.parse().ok()?,
        patch: it.next().and_then(|p| p.parse().ok()).unwrap_or(0),
    })
}

/// The kernel as a whole.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelInfo {
    pub release: String,
    pub version: String,
    pub cmdline: Cmdline,
    pub boot: BootIsolation,
    pub config: Option<KernelConfig>,
    pub preemption: Preemption,
    pub lockdown: Lockdown,
    /// CONFIG_HZ.
    pub hz: Option<u32>,
    /// debugfs mounted at /sys/kernel/debug.
    pub debugfs_mounted: bool,
    /// A debugfs scheduler knob (sched/preempt) exists but reading it was refused.
    pub debugfs_knobs_refused: bool,
}

impl KernelInfo {
    pub fn release_number(&self) -> Option<ReleaseNumber> {
        parse_release(&self.release)
    }

    /// Whether this kernel can stop the tick on busy CPUs (NO_HZ_FULL),
    /// None when the configuration is unknown.
    pub fn supports_nohz_full(&self) -> Option<bool> {
        self.config.as_ref().map(|c| c.enabled("NO_HZ_FULL"))
    }

    /// `last_cpu` resolves `N` in command-line CPU lists.
    pub fn read(r: &mut Reader, last_cpu: Option<u32>, debugfs_mounted: bool) -> Self {
        let release = r.required(OSRELEASE).unwrap_or_default().trim().to_string();
        let version = r.required(VERSION).unwrap_or_default().trim().to_string();
        let cmdline = parse_cmdline(&r.required(CMDLINE).unwrap_or_default());
        let config = read_config(r, &release);
        let mut refused = false;
        let mut preempt_text = None;
        if debugfs_mounted {
            match r.root().read(DEBUGFS_PREEMPT) {
                Ok(t) => preempt_text = Some(t),
                Err(e) if e.is_not_found() => {}
                Err(_) => refused = true,
            }
        }
        let boot = BootIsolation::from_cmdline(&cmdline, last_cpu);
        let preemption = Preemption::derive(
            &version,
            config.as_ref(),
            boot.preempt.as_deref(),
            preempt_text.as_deref(),
        );
        let security = r.optional(LOCKDOWN);
        let lockdown = Lockdown::derive(security.as_deref(), &cmdline, config.as_ref(), refused);
        KernelInfo {
            hz: config
                .as_ref()
                .and_then(|c| c.get("HZ"))
                .and_then(|h| h.parse().ok()),
            release,
            version,
            cmdline,
            boot,
            config,
            preemption,
            lockdown,
            debugfs_mounted,
            debugfs_knobs_refused: refused,
        }
    }
}

fn read_config(r: &mut Reader, release: &str) -> Option<KernelConfig> {
    let text_and_source = match r.root().read_bytes(CONFIG_GZ) {
        Ok(bytes) => {
            let mut s = String::new();
            match flate2::read::GzDecoder::new(&bytes[..]).read_to_string(&mut s) {
                Ok(_) => Some((s, CONFIG_GZ.to_string())),
                Err(e) => {
                    r.parse_problem(CONFIG_GZ, ParseError::new(1, format!("not gzip text: {e}")));
                    None
                }
            }
        }
        Err(e) if e.is_not_found() => None,
        Err(e) => {
            r.problem(CONFIG_GZ, &e);
            None
        }
    };
    let (text, source) = match text_and_source {
        Some(t) => t,
        None => {
            let path = format!("/boot/config-{release}");
            (r.optional(&path)?, path)
        }
    };
    match parse_config(&text) {
        Ok(options) => Some(KernelConfig { source, options }),
        Err(e) => {
            r.parse_problem(&source, e);
            None
        }
    }
}

/// One line of /proc/filesystems.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Filesystem {
    pub name: String,
    /// Needs no block device (procfs, tracefs, cgroup2, …).
    pub nodev: bool,
}

pub fn parse_filesystems(text: &str) -> Vec<Filesystem> {
    text.lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let (first, second) = (words.next()?, words.next());
            Some(match second {
                Some(name) => Filesystem {
                    name: name.to_string(),
                    nodev: first == "nodev",
                },
                None => Filesystem {
                    name: first.to_string(),
                    nodev: false,
                },
            })
        })
        .collect()
}

impl Root {
    /// The kernel command line, parsed (quotes kept together, the last value of a key wins).
    pub fn kernel_cmdline(&self) -> Result<Cmdline, HostError> {
        self.read(CMDLINE).map(|t| parse_cmdline(&t))
    }

    /// The kernel release (`uname -r`).
    pub fn kernel_release(&self) -> Result<String, HostError> {
        self.read_trimmed(OSRELEASE)
    }

    /// The file system types this kernel offers.
    pub fn filesystems(&self) -> Result<Vec<Filesystem>, HostError> {
        self.read(FILESYSTEMS).map(|t| parse_filesystems(&t))
    }
}

/// Where the kernel says which boot this is (a random UUID per boot).
const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";

/// This boot's id, `None` where it cannot be read (a fixture tree without it): tells a
/// record written before the last reboot from one written since.
pub fn boot_id(root: &crate::Root) -> Option<String> {
    root.read(BOOT_ID)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn cmdline_isolation() {
        let c = parse_cmdline("BOOT_IMAGE=/vmlinuz isolcpus=managed_irq,domain,2-7 nohz_full=2-N rcu_nocbs quiet processor.max_cstate=1 skew_tick=1 dyndbg=\"file a.c +p\" -- --init-arg x");
        assert_eq!(c.get("dyndbg"), Some("file a.c +p"));
        assert_eq!(c.init_args, vec!["--init-arg", "x"]);
        let b = BootIsolation::from_cmdline(&c, Some(7));
        let iso = b.isolcpus.unwrap();
        assert_eq!(iso.flags, vec!["managed_irq", "domain"]);
        assert_eq!(iso.cpus.to_string(), "2-7");
        assert_eq!(b.nohz_full.unwrap().to_string(), "2-7");
        assert_eq!(b.rcu_nocbs, Some(None));
        assert_eq!(b.processor_max_cstate, Some(1));
        assert_eq!(b.skew_tick, Some(true));
        assert!(b.errors.is_empty());
    }

    #[test]
    fn isolcpus_without_flags_means_domain() {
        let i = parse_isolcpus("1,3-4", None).unwrap();
        assert_eq!(i.flags, vec!["domain"]);
        assert_eq!(i.cpus.to_string(), "1,3-4");
        assert!(parse_isolcpus("bogus,1", None).is_err());
        let b = BootIsolation::from_cmdline(&parse_cmdline("nohz_full=x"), None);
        assert_eq!(b.nohz_full, None);
        assert_eq!(b.errors.len(), 1);
    }

    #[test]
    fn config_lines() {
        let m = parse_config(
            "#\n# comment\nCONFIG_HZ=250\n# CONFIG_NO_HZ_FULL is not set\nCONFIG_LSM=\"a,b\"\n\n",
        )
        .unwrap();
        let c = KernelConfig {
            source: "x".into(),
            options: m,
        };
        assert_eq!(c.get("CONFIG_HZ"), Some("250"));
        assert!(!c.enabled("NO_HZ_FULL"));
        assert_eq!(c.get("NO_HZ_FULL"), Some("n"));
        assert_eq!(c.get("LSM"), Some("\"a,b\""));
        assert_eq!(
            parse_config("CONFIG_A=y\nnot a line\n").unwrap_err().line,
            2
        );
        assert_eq!(parse_config("FOO=y\n").unwrap_err().line, 1);
    }

    #[test]
    fn preemption_models() {
        let cfg = |s: &str| KernelConfig {
            source: String::new(),
            options: parse_config(s).unwrap(),
        };
        let dynamic_none = cfg("CONFIG_PREEMPT_DYNAMIC=y\nCONFIG_PREEMPT_NONE=y\n");
        let p = Preemption::derive("#1 SMP PREEMPT_DYNAMIC @0", Some(&dynamic_none), None, None);
        assert_eq!(p.model, PreemptModel::Dynamic);
        assert_eq!(p.summary(), "dynamic(boot none)");
        let p = Preemption::derive(
            "#1 SMP PREEMPT_DYNAMIC",
            None,
            Some("full"),
            Some("none voluntary (full) lazy\n"),
        );
        assert_eq!(p.summary(), "dynamic(full)");
        let p = Preemption::derive("#1 SMP PREEMPT_RT Tue", None, None, None);
        assert_eq!(p.model, PreemptModel::Rt);
        assert_eq!(
            Preemption::derive("#1 SMP", None, None, None).model,
            PreemptModel::NoneOrVoluntary
        );
        assert_eq!(
            Preemption::derive("", None, None, None).model,
            PreemptModel::Unknown
        );
    }

    #[test]
    fn lockdown_sources() {
        let c = parse_cmdline("quiet");
        let l = Lockdown::derive(Some("none [integrity] confidentiality\n"), &c, None, false);
        assert_eq!(l.state.as_deref(), Some("integrity"));
        assert!(l.blocks_debugfs());
        let cfg = KernelConfig {
            source: String::new(),
            options: parse_config("CONFIG_LOCK_DOWN_KERNEL_FORCE_INTEGRITY=y\n").unwrap(),
        };
        let l = Lockdown::derive(None, &c, Some(&cfg), false);
        assert_eq!(l.source.as_deref(), Some("config"));
        assert!(!Lockdown::derive(None, &c, None, false).blocks_debugfs());
    }

    #[test]
    fn release_numbers() {
        let r = parse_release("6.18.44-fc-v669").unwrap();
        assert_eq!((r.major, r.minor, r.patch), (6, 18, 44));
        assert_eq!(parse_release("6.12").unwrap().minor, 12);
        assert!(parse_release("x").is_none());
    }

    fn word() -> impl Strategy<Value = String> {
        "[a-z_.]{1,10}(=[a-zA-Z0-9,:/.-]{0,12})?"
    }

    proptest! {
        #[test]
        fn cmdline_words_round_trip(words in proptest::collection::vec(word(), 0..12)) {
            let c = parse_cmdline(&words.join(" "));
            let back: Vec<String> = c.params.iter().map(|p| match &p.value {
                Some(v) => format!("{}={v}", p.key),
                None => p.key.clone(),
            }).collect();
            prop_assert_eq!(back, words);
        }

        #[test]
        fn cmdline_never_panics(s in "\\PC{0,80}") {
            let c = parse_cmdline(&s);
            let _ = BootIsolation::from_cmdline(&c, Some(63));
        }

        #[test]
        fn isolcpus_lists_round_trip(
            flags in proptest::sample::subsequence(vec!["domain", "nohz", "managed_irq"], 0..=3),
            cpus in proptest::collection::btree_set(0u32..256, 1..16),
        ) {
            let list = CpuList::from_cpus(cpus);
            let value = flags.iter().map(|f| format!("{f},")).collect::<String>() + &list.to_string();
            let got = parse_isolcpus(&value, None).unwrap();
            prop_assert_eq!(got.cpus, list);
            if !flags.is_empty() {
                prop_assert_eq!(got.flags, flags);
            }
        }

        #[test]
        fn config_round_trip(opts in proptest::collection::btree_map(
            "[A-Z][A-Z0-9_]{0,20}",
            prop_oneof![Just("y".to_string()), Just("m".to_string()), Just("n".to_string()),
                        "[0-9]{1,6}", "\"[a-z ,]{0,10}\""],
            0..30)) {
            prop_assert_eq!(parse_config(&render_config(&opts)).unwrap(), opts);
        }

        #[test]
        fn config_never_panics(s in "(\\PC{0,40}\n){0,8}") {
            if let Err(e) = parse_config(&s) {
                prop_assert!(e.line >= 1);
            }
        }
    }
}
