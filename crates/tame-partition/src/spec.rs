//! The partition spec: TOML, strictly read (unknown keys are errors with the
//! closest valid key suggested; syntax errors name line and column).

use serde::{Deserialize, Serialize};
use tame_host::CpuList;

/// A whole spec file: read with [`Spec::parse`], built in code with [`Spec::builder`]
/// (no code writes spec TOML to talk to itself; [`Spec::to_toml`] is its text).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    #[serde(rename = "partition", default)]
    pub partitions: Vec<PartitionSpec>,
    /// kernel.sched_rt_runtime_us: -1 turns RT throttling off; absent leaves it as it is.
    pub rt_runtime_us: Option<i64>,
    /// kernel.timer_migration; absent: off when there is an isolated partition
    /// (so timers are not pulled onto an isolated CPU), else unchanged.
    pub timer_migration: Option<bool>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Where ordinary tasks, movable IRQs, unbound kernel threads and workqueues go.
    System,
    /// Exclusive CPUs without load balancing, IRQs or other tasks.
    Isolated,
    /// Exclusive CPUs for the partition's own work, load-balanced among themselves.
    Shared,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartitionSpec {
    /// Letters, digits, `-` and `_`: it names the cgroup (`tame-NAME`).
    pub name: String,
    pub cpus: CpuList,
    pub role: Role,
    /// NUMA memory nodes; default: all nodes with memory.
    pub mems: Option<CpuList>,
    /// Whether movable device IRQs may fire here; default: only on the system partition.
    pub irqs: Option<bool>,
    /// Idle limit: "poll" (never leave the poll loop), "any" (no limit), or a maximum
    /// exit latency such as "10us".
    pub idle: Option<String>,
    /// cpufreq governor for these CPUs (e.g. "performance").
    pub governor: Option<String>,
    /// `false`: the lockup watchdogs (soft and hard/NMI) stop running on these CPUs
    /// (they leave kernel.watchdog_cpumask); `true`: they run here; absent: unchanged.
    pub watchdog: Option<bool>,
    /// L3 cache ways reserved for this partition (resctrl).
    pub cache_ways: Option<u32>,
    /// Memory bandwidth limit in percent (resctrl MB).
    pub mem_bandwidth: Option<u32>,
    /// The user who may put their own tasks into the partition (owns its cgroup task list).
    pub user: Option<String>,
    /// The group whose members may put their own tasks into the partition
    /// (the task list becomes group-writable).
    pub group: Option<String>,
}

/// The idle limit of a partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdleLimit {
    /// Only the poll state: the lowest wake-up latency, the CPU never sleeps.
    Poll,
    /// No deeper state than this exit latency.
    MaxLatencyUs(u32),
}

impl PartitionSpec {
    /// A partition with nothing but its name, CPUs and role set.
    pub fn new(name: &str, cpus: CpuList, role: Role) -> Self {
        Self {
            name: name.to_string(),
            cpus,
            role,
            mems: None,
            irqs: None,
            idle: None,
            governor: None,
            watchdog: None,
            cache_ways: None,
            mem_bandwidth: None,
            user: None,
            group: None,
        }
    }

    /// Bind its memory to these NUMA nodes.
    pub fn with_mems(mut self, mems: CpuList) -> Self {
        self.mems = Some(mems);
        self
    }

    /// Limit its idle states (`"poll"`, `"any"`, `"10us"`).
    pub fn with_idle(mut self, idle: &str) -> Self {
        self.idle = Some(idle.to_string());
        self
    }

    /// Set its cpufreq governor (`"performance"`).
    pub fn with_governor(mut self, governor: &str) -> Self {
        self.governor = Some(governor.to_string());
        self
    }

    /// Keep the lockup watchdogs off (`false`) or on (`true`) its CPUs.
    pub fn with_watchdog(mut self, on: bool) -> Self {
        self.watchdog = Some(on);
        self
    }

    pub fn accepts_irqs(&self) -> bool {
        self.irqs.unwrap_or(self.role == Role::System)
    }

    /// The idle limit, `Ok(None)` for none.
    pub fn idle_limit(&self) -> Result<Option<IdleLimit>, String> {
        let Some(text) = self.idle.as_deref() else {
            return Ok(None);
        };
        match text.trim() {
            "poll" => Ok(Some(IdleLimit::Poll)),
            "any" => Ok(None),
            t => {
                let number = t.strip_suffix("us").unwrap_or(t).trim();
                match number.parse::<u32>() {
                    Ok(0) => Ok(Some(IdleLimit::Poll)),
                    Ok(n) => Ok(Some(IdleLimit::MaxLatencyUs(n))),
                    Err(_) => Err(format!(
                        "idle = {text:?} is not an idle limit — use \"poll\", \"any\" or a maximum exit latency like \"10us\""
                    )),
                }
            }
        }
    }
}

/// A spec that could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{origin}:{line}:{column}: {message}{}", more_lines(origin, .more))]
pub struct SpecError {
    pub origin: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
    /// Further syntax errors after the first, each as (line, column, message): one run
    /// names them all.
    pub more: Vec<(usize, usize, String)>,
}

impl SpecError {
    /// toml's error for `text` (read from `origin`) as tame says it: where, what, the
    /// closest valid name for an unknown one, and every later syntax error too. Any TOML
    /// file tame reads is reported this way.
    pub fn from_toml(origin: &str, text: &str, e: &toml::de::Error) -> Self {
        let (line, column) = e
            .span()
            .map(|s| tame_host::error::line_column(text, s.start))
            .unwrap_or((1, 1));
        // The syntax errors on later lines than the first one reported.
        let more = syntax_errors(text)
            .into_iter()
            .filter(|(l, _, _)| *l > line)
            .collect();
        SpecError {
            origin: origin.to_string(),
            line,
            column,
            message: with_suggestion(&reason(e.message(), text, e.span())),
            more,
        }
    }
}

fn more_lines(origin: &str, more: &[(usize, usize, String)]) -> String {
    more.iter()
        .map(|(l, c, m)| format!("\n{origin}:{l}:{c}: {m}"))
        .collect()
}

/// Every TOML syntax error in `text` (toml's own parser stops at the first), as (line,
/// column, message), from toml_parser's error-recovering parser.
fn syntax_errors(text: &str) -> Vec<(usize, usize, String)> {
    use toml_parser::parser::{Event, EventKind};
    let source = toml_parser::Source::new(text);
    let tokens = source.lex().into_vec();
    let mut events: Vec<Event> = Vec::new();
    let mut errors: Vec<toml_parser::ParseError> = Vec::new();
    toml_parser::parser::parse_document(&tokens, &mut events, &mut errors);
    // The structure is checked while parsing; keys and values only when decoded.
    for event in &events {
        let Some(raw) = source.get(event) else {
            continue;
        };
        match event.kind() {
            EventKind::SimpleKey => raw.decode_key(&mut (), &mut errors),
            // Only its errors matter here, not what kind of value it is.
            EventKind::Scalar => {
                let _kind = raw.decode_scalar(&mut (), &mut errors);
            }
            _ => {}
        }
    }
    errors.sort_by_key(|e| e.unexpected().or(e.context()).map_or(0, |s| s.start()));
    errors
        .iter()
        .map(|e| {
            let at = e.unexpected().or(e.context()).map_or(0, |s| s.start());
            let (line, column) = tame_host::error::line_column(text, at);
            (line, column, e.description().to_string())
        })
        .collect()
}

/// Builds a [`Spec`] in code: partitions in the order added.
#[derive(Clone, Debug, Default)]
pub struct SpecBuilder {
    spec: Spec,
}

impl SpecBuilder {
    pub fn partition(mut self, p: PartitionSpec) -> Self {
        self.spec.partitions.push(p);
        self
    }

    pub fn build(self) -> Spec {
        self.spec
    }
}

impl Spec {
    pub fn builder() -> SpecBuilder {
        SpecBuilder::default()
    }

    /// Parse spec text; `origin` (the file name) prefixes errors.
    pub fn parse(origin: &str, text: &str) -> Result<Self, SpecError> {
        toml::from_str(text).map_err(|e| SpecError::from_toml(origin, text, &e))
    }

    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_default()
    }

    pub fn isolated_cpus(&self) -> CpuList {
        self.cpus_of(Role::Isolated)
    }

    pub fn cpus_of(&self, role: Role) -> CpuList {
        self.partitions
            .iter()
            .filter(|p| p.role == role)
            .fold(CpuList::new(), |acc, p| acc.union(&p.cpus))
    }

    pub fn system(&self) -> Option<&PartitionSpec> {
        self.partitions.iter().find(|p| p.role == Role::System)
    }
}

/// serde names the unknown key and the valid ones (`unknown field `cpu`, expected one of
/// `name`, `cpus`, …`); add the closest valid one and a sentence on what to do.
/// toml's reason for a syntax error, or, where it gives none (a control character, a
/// lone carriage return), one built from the character it stopped at.
fn reason(message: &str, text: &str, span: Option<std::ops::Range<usize>>) -> String {
    if !message.trim().is_empty() {
        return message.to_string();
    }
    let found = span
        .and_then(|s| text.get(s.start..))
        .and_then(|t| t.chars().next());
    match found {
        Some(c) if c.is_control() => format!(
            "unexpected control character U+{:04X} — TOML allows only tab, and newline between lines; remove it or write it escaped in a quoted string",
            u32::from(c)
        ),
        Some(c) => format!("unexpected character {c:?} — check the TOML syntax here"),
        None => "unexpected end of the text — check the TOML syntax at its end".to_string(),
    }
}

fn with_suggestion(message: &str) -> String {
    let message = message.trim();
    let quoted: Vec<&str> = message.split('`').skip(1).step_by(2).collect();
    let is_unknown = message.starts_with("unknown field") || message.starts_with("unknown variant");
    if !is_unknown || quoted.len() < 2 {
        return message.to_string();
    }
    let (given, valid) = (quoted[0], &quoted[1..]);
    let best = valid
        .iter()
        .map(|v| (strsim::jaro_winkler(given, v), *v))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    match best {
        Some((score, v)) if score > 0.7 => format!("{message} — did you mean `{v}`?"),
        _ => format!("{message} — use one of the listed names"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_syntax_error_is_named_in_one_go() {
        let text = "[[partition]]\nname = \"system\"\ncpus = \"0\"\nrole = system\n\n[[partition]]\nname = \"rt\"\ncpus = \"1\"\nrole = \"isolated\"\nidle = \n";
        let err = Spec::parse("x.toml", text).unwrap_err();
        assert_eq!((err.line, err.column), (4, 8));
        assert_eq!(err.more.len(), 1, "{err}");
        let shown = err.to_string();
        assert!(shown.contains("\nx.toml:10:8: "), "{shown}");
    }

    #[test]
    fn a_control_character_is_named() {
        let err = Spec::parse("x.toml", "# x\u{1}\n").unwrap_err();
        assert_eq!((err.line, err.column), (1, 4));
        assert!(err.message.contains("control character U+0001"), "{err}");
    }

    const MINIMAL: &str = r#"
[[partition]]
name = "system"
cpus = "0"
role = "system"

[[partition]]
name = "rt"
cpus = "1"
role = "isolated"
idle = "poll"
"#;

    #[test]
    fn minimal_spec_reads() {
        let spec = Spec::parse("s.toml", MINIMAL).unwrap();
        assert_eq!(spec.partitions.len(), 2);
        assert_eq!(spec.isolated_cpus().to_string(), "1");
        assert_eq!(spec.system().unwrap().cpus.to_string(), "0");
        assert_eq!(
            spec.partitions[1].idle_limit().unwrap(),
            Some(IdleLimit::Poll)
        );
        assert!(spec.partitions[0].accepts_irqs());
        assert!(!spec.partitions[1].accepts_irqs());
        // Round trip through TOML.
        assert_eq!(Spec::parse("x", &spec.to_toml()).unwrap(), spec);
    }

    #[test]
    fn unknown_key_names_the_closest_valid_one_and_its_place() {
        let text = MINIMAL.replace("idle = \"poll\"", "idel = \"poll\"");
        let e = Spec::parse("s.toml", &text).unwrap_err();
        assert_eq!(e.line, 11, "{e}");
        assert!(e.message.contains("did you mean `idle`?"), "{e}");
        let e = Spec::parse("s.toml", &MINIMAL.replace("\"isolated\"", "\"isolate\"")).unwrap_err();
        assert!(e.message.contains("did you mean `isolated`?"), "{e}");
        assert!(e.to_string().starts_with("s.toml:10:"), "{e}");
    }

    #[test]
    fn syntax_and_cpu_list_errors_have_line_and_column() {
        let e = Spec::parse("s.toml", "[[partition]]\nname = \"a\ncpus = \"0\"\n").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        let e =
            Spec::parse("s.toml", &MINIMAL.replace("cpus = \"1\"", "cpus = \"1-x\"")).unwrap_err();
        assert_eq!((e.line, e.column), (9, 8), "{e}");
        assert!(e.message.contains("1-x"), "{e}");
    }

    #[test]
    fn idle_limits() {
        let mut p = Spec::parse("s", MINIMAL).unwrap().partitions[1].clone();
        for (text, want) in [
            ("10us", Some(IdleLimit::MaxLatencyUs(10))),
            ("any", None),
            ("0", Some(IdleLimit::Poll)),
        ] {
            p.idle = Some(text.into());
            assert_eq!(p.idle_limit().unwrap(), want);
        }
        p.idle = Some("deep".into());
        assert!(p.idle_limit().unwrap_err().contains("\"poll\""));
    }
}
