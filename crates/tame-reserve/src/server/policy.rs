//! Who may reserve what from `tame serve`: a TOML file beside the unit
//! (`/etc/tame/serve.toml`), read strictly (unknown keys and bad values name line and
//! column). Without a file only root may reserve, and only on reservable CPUs: those of
//! the applied spec's isolated and shared partitions and those isolated at boot — never
//! the housekeeping (system partition) CPUs.
//!
//! ```toml
//! socket_group = "tame"   # members may connect (socket root:tame 0660); absent: root only
//! cap = "90%"             # all reservations on one CPU together, every user
//! [[rule]]
//! name = "audio"
//! users = ["alice"]       # names (or numeric uids)
//! groups = ["audio"]      # members of these groups (or numeric gids)
//! cpus = "reservable"     # or a CPU list such as "2-3"
//! max_share = "30%"       # one user's reservations on one CPU together
//! max_period = "100ms"
//! max_slice = "10ms"      # share × period of one reservation
//! max_threads = 64        # one user's reserved threads together (default 64)
//! max_reservations = 16   # one user's reservations together (default 16)
//! ```
//!
//! The server raises and lowers every thread of a client for each slice, and its work for
//! a client is charged to that client's share; `max_threads` bounds what one user can make
//! the server do (and take of the server's 1024 watched threads) all the same.
//!
//! The first rule naming the asker (by uid, or by one of its groups) decides; root
//! without a rule of its own gets the built-in rule `root`.

use std::path::Path;

use serde::Deserialize;
use tame_host::accounts::Accounts;
use tame_host::{CpuList, Root};
use tame_rt::duration::format_ns;
use toml::Spanned;

use super::watchdog::MAX_WATCHED;
use crate::error::{failed, invalid, refused, Result};
use crate::spec::{self, parse_share_ppm, percent, DEFAULT_CAP_PPM, MAX_PERIOD_NS};

/// Where `tame serve` reads its policy unless told otherwise.
pub const DEFAULT_POLICY: &str = "/etc/tame/serve.toml";
/// The name of the rule root gets when no rule of the file names it.
pub const ROOT_RULE: &str = "root";
/// The name under which a caller no rule names is refused.
pub const NO_RULE: &str = "default";
/// A rule's `max_threads` unless it says otherwise: a control loop has a handful.
pub const DEFAULT_MAX_THREADS: usize = 64;
/// A rule's `max_reservations` unless it says otherwise.
pub const DEFAULT_MAX_RESERVATIONS: usize = 16;

/// Which CPUs a rule allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cpus {
    /// The isolated and shared partitions of the applied spec, and CPUs isolated at boot.
    Reservable,
    List(CpuList),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub name: String,
    pub uids: Vec<u32>,
    pub gids: Vec<u32>,
    pub cpus: Cpus,
    /// One user's reservations on one CPU together.
    pub max_share_ppm: u64,
    pub max_period_ns: u64,
    /// Share × period of one reservation.
    pub max_slice_ns: u64,
    /// One user's reserved threads together, every CPU.
    pub max_threads: usize,
    /// One user's reservations together, every CPU.
    pub max_reservations: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    /// The file it came from (`built-in` without one), for messages.
    pub origin: String,
    /// The socket's group (mode 0660); None: root's group, so only root may connect.
    pub socket_gid: Option<u32>,
    /// All reservations on one CPU together.
    pub cap_ppm: u64,
    pub rules: Vec<Rule>,
    /// Root's rule when no rule of the file names root.
    pub root_rule: Rule,
}

/// Who asks: from the socket's peer credentials.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Asker {
    pub uid: u32,
    /// Primary and supplementary groups.
    pub gids: Vec<u32>,
}

/// What is asked, and what the asker already holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ask {
    pub cpu: u32,
    pub share_ppm: u64,
    pub period_ns: u64,
    /// The threads of the process to reserve.
    pub threads: usize,
    /// The asker's reservations on `cpu` already, ppm.
    pub held_ppm: u64,
    /// Threads of the asker's reservations already, every CPU.
    pub held_threads: usize,
    /// The asker's reservations already, every CPU.
    pub held_reservations: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    socket_group: Option<Spanned<String>>,
    cap: Option<Spanned<String>>,
    #[serde(default, rename = "rule")]
    rules: Vec<RuleFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    name: Spanned<String>,
    #[serde(default)]
    users: Vec<Spanned<String>>,
    #[serde(default)]
    groups: Vec<Spanned<String>>,
    cpus: Option<Spanned<String>>,
    max_share: Spanned<String>,
    max_period: Spanned<String>,
    max_slice: Spanned<String>,
    max_threads: Option<Spanned<i64>>,
    max_reservations: Option<Spanned<i64>>,
}

impl Policy {
    /// No file: root only, reservable CPUs only.
    pub fn builtin() -> Self {
        Self::with_cap("built-in".into(), DEFAULT_CAP_PPM)
    }

    fn with_cap(origin: String, cap_ppm: u64) -> Self {
        Self {
            origin,
            socket_gid: None,
            cap_ppm,
            rules: Vec::new(),
            root_rule: Rule {
                name: ROOT_RULE.into(),
                uids: vec![0],
                gids: Vec::new(),
                cpus: Cpus::Reservable,
                // Only the cap bounds root's share: its refusal says `admission refused`.
                max_share_ppm: spec::PPM,
                max_period_ns: MAX_PERIOD_NS,
                max_slice_ns: MAX_PERIOD_NS,
                // Root's reach is the watchdog's: it is refused only there.
                max_threads: MAX_WATCHED,
                max_reservations: usize::MAX,
            },
        }
    }

    /// Root on any CPU it names (the test and benchmark kit; not what `tame serve` uses).
    pub fn root_on_every_cpu(cap_ppm: u64) -> Self {
        let mut p = Self::with_cap("built-in (root on every CPU)".into(), cap_ppm);
        p.root_rule.cpus = Cpus::List(CpuList::from_cpus(0..=tame_host::cpulist::MAX_CPU));
        p
    }

    /// Read the policy `tame serve` runs with: `given` (must exist), else the default
    /// file when there is one, else the built-in policy. The file must be root's and
    /// writable by nobody else: whoever can write it hands out real-time priority.
    pub fn load(root: &Root, given: Option<&Path>) -> Result<Self> {
        let (path, must_exist) = match given {
            Some(p) => (p.to_path_buf(), true),
            None => (root.path(DEFAULT_POLICY), false),
        };
        let text = match read_checked(&path) {
            Ok(t) => t,
            Err(Unread::Missing) if !must_exist => return Ok(Self::builtin()),
            Err(Unread::Missing) => {
                return Err(invalid(format!(
                    "cannot read the policy {}: there is no such file — give an existing file with --policy (see contrib/serve.toml)",
                    path.display()
                )))
            }
            Err(Unread::Refused(e)) => return Err(e),
        };
        let accounts = root.accounts().unwrap_or_default();
        Self::parse(&path.display().to_string(), &text, &accounts)
    }

    /// Parse policy text; `origin` prefixes errors (`FILE:LINE:COLUMN: …`).
    pub fn parse(origin: &str, text: &str, accounts: &Accounts) -> Result<Self> {
        let at = |span: std::ops::Range<usize>, message: String| {
            let (line, column) = tame_host::error::line_column(text, span.start);
            invalid(format!("{origin}:{line}:{column}: {message}"))
        };
        let file: File = toml::from_str(text).map_err(|e| {
            let (line, column) = e
                .span()
                .map(|s| tame_host::error::line_column(text, s.start))
                .unwrap_or((1, 1));
            invalid(format!(
                "{origin}:{line}:{column}: {} — see docs/reserve.md, \"The policy\"",
                e.message().trim()
            ))
        })?;
        let cap_ppm = match &file.cap {
            Some(c) => {
                let ppm = parse_share_ppm(c.get_ref()).map_err(|e| at(c.span(), e.to_string()))?;
                if ppm == 0 || ppm > spec::PPM {
                    return Err(at(
                        c.span(),
                        "cap must be above 0 % and at most 100 %".into(),
                    ));
                }
                ppm
            }
            None => DEFAULT_CAP_PPM,
        };
        let mut policy = Self::with_cap(origin.to_string(), cap_ppm);
        if let Some(g) = &file.socket_group {
            let gid = id_of(g.get_ref(), |n| accounts.gid_of(n))
                .ok_or_else(|| at(g.span(), format!("no group {:?} in /etc/group — create it (groupadd) or name an existing one", g.get_ref())))?;
            policy.socket_gid = Some(gid);
        }
        for r in &file.rules {
            let name = r.name.get_ref().trim().to_string();
            if name.is_empty() || name == NO_RULE {
                return Err(at(
                    r.name.span(),
                    format!("a rule needs a name other than {NO_RULE:?}: refusals name it"),
                ));
            }
            if policy.rules.iter().any(|k| k.name == name) {
                return Err(at(r.name.span(), format!(
                        "a second rule named {name:?}: refusals name the rule, so names must be unique — rename one"
                    )));
            }
            if r.users.is_empty() && r.groups.is_empty() {
                return Err(at(
                    r.name.span(),
                    format!("rule {name:?} names no users and no groups: it would apply to nobody — add users = [\"…\"] or groups = [\"…\"]"),
                ));
            }
            let mut uids = Vec::new();
            for u in &r.users {
                uids.push(id_of(u.get_ref(), |n| accounts.uid_of(n)).ok_or_else(|| {
                    at(
                        u.span(),
                        format!("no user {:?} in /etc/passwd", u.get_ref()),
                    )
                })?);
            }
            let mut gids = Vec::new();
            for g in &r.groups {
                gids.push(id_of(g.get_ref(), |n| accounts.gid_of(n)).ok_or_else(|| {
                    at(
                        g.span(),
                        format!("no group {:?} in /etc/group", g.get_ref()),
                    )
                })?);
            }
            let cpus = match &r.cpus {
                None => Cpus::Reservable,
                Some(c) if c.get_ref().trim() == "reservable" => Cpus::Reservable,
                Some(c) => Cpus::List(CpuList::parse(c.get_ref()).map_err(|e| {
                    at(
                        c.span(),
                        format!("{e} — write \"reservable\" or a CPU list such as \"2-3\""),
                    )
                })?),
            };
            let max_share_ppm = parse_share_ppm(r.max_share.get_ref())
                .map_err(|e| at(r.max_share.span(), e.to_string()))?;
            if max_share_ppm == 0 || max_share_ppm > spec::PPM {
                return Err(at(
                    r.max_share.span(),
                    "max_share must be above 0 % and at most 100 %".into(),
                ));
            }
            let duration = |s: &Spanned<String>| {
                tame_rt::duration::parse_ns(s.get_ref()).map_err(|m| at(s.span(), m))
            };
            let above_zero = |s: &Spanned<String>, field: &str| {
                duration(s).and_then(|ns| match ns {
                    0 => Err(at(
                        s.span(),
                        format!("{field} must be above 0 — give it a duration such as 10ms"),
                    )),
                    ns => Ok(ns),
                })
            };
            let max_period_ns = above_zero(&r.max_period, "max_period")?;
            let max_slice_ns = above_zero(&r.max_slice, "max_slice")?;
            // Both bounded by what the watchdog watches: every reservation has a thread.
            let count = |field: &Option<Spanned<i64>>, name: &str, default: usize| {
                let Some(v) = field else {
                    return Ok(default);
                };
                match usize::try_from(*v.get_ref()) {
                    Ok(n) if (1..=MAX_WATCHED).contains(&n) => Ok(n),
                    _ => Err(at(
                        v.span(),
                        format!("{name} must be a whole number from 1 to {MAX_WATCHED} (the server watches at most {MAX_WATCHED} client threads)"),
                    )),
                }
            };
            let max_threads = count(&r.max_threads, "max_threads", DEFAULT_MAX_THREADS)?;
            let max_reservations = count(
                &r.max_reservations,
                "max_reservations",
                DEFAULT_MAX_RESERVATIONS,
            )?;
            policy.rules.push(Rule {
                name,
                uids,
                gids,
                cpus,
                max_share_ppm,
                max_period_ns,
                max_slice_ns,
                max_threads,
                max_reservations,
            });
        }
        Ok(policy)
    }

    /// The rule that decides for `asker`, if any.
    pub fn rule_for(&self, asker: &Asker) -> Option<&Rule> {
        self.rules
            .iter()
            .find(|r| r.uids.contains(&asker.uid) || r.gids.iter().any(|g| asker.gids.contains(g)))
            .or((asker.uid == 0).then_some(&self.root_rule))
    }

    /// Admit `ask` for `asker` under its rule, or refuse naming the rule, the limit and
    /// what was asked. `reservable` is asked only when the rule needs it. The total per
    /// CPU (the cap) is the admission's to check, with the other users' reservations.
    pub fn check(
        &self,
        asker: &Asker,
        ask: &Ask,
        reservable: impl FnOnce() -> Result<Reservable>,
    ) -> Result<&Rule> {
        let Some(rule) = self.rule_for(asker) else {
            return Err(refused(format!(
                "refused by rule {NO_RULE:?} of the policy {}: only root may reserve, and no rule names uid {} or its groups {:?} — ask the administrator to add a [[rule]] for you",
                self.origin, asker.uid, asker.gids
            )));
        };
        let by = |limit: String, asked: String, todo: &str| {
            refused(format!(
                "refused by rule {:?} of the policy {}: {limit}, asked {asked} — {todo}",
                rule.name, self.origin
            ))
        };
        let allowed = match &rule.cpus {
            Cpus::List(l) => Allowed {
                cpus: l.clone(),
                why: String::new(),
            },
            Cpus::Reservable => {
                let r = reservable()?;
                Allowed {
                    why: format!(" ({})", r.describe()),
                    cpus: r.cpus,
                }
            }
        };
        if !allowed.cpus.contains(ask.cpu) {
            let list = if allowed.cpus.is_empty() {
                "none".to_string()
            } else {
                allowed.cpus.to_string()
            };
            return Err(by(
                format!("cpus = {list}{}", allowed.why),
                format!("CPU {}", ask.cpu),
                "ask for an allowed CPU (--cpu); housekeeping CPUs are never handed out unless the policy lists them",
            ));
        }
        if ask.period_ns > rule.max_period_ns {
            return Err(by(
                format!("max_period {}", format_ns(rule.max_period_ns)),
                format!("a period of {}", format_ns(ask.period_ns)),
                "ask for a shorter period",
            ));
        }
        let slice = spec::runtime_ns(ask.share_ppm, ask.period_ns);
        if slice > rule.max_slice_ns {
            return Err(by(
                format!("max_slice {}", format_ns(rule.max_slice_ns)),
                format!(
                    "a slice of {} ({} of {})",
                    format_ns(slice),
                    percent(ask.share_ppm),
                    format_ns(ask.period_ns)
                ),
                "ask for a smaller share or a shorter period",
            ));
        }
        let total = ask.held_ppm.saturating_add(ask.share_ppm);
        if total > rule.max_share_ppm {
            return Err(by(
                format!("max_share {} per user and CPU", percent(rule.max_share_ppm)),
                format!(
                    "{} on CPU {} ({} more beside the {} you hold there)",
                    percent(total),
                    ask.cpu,
                    percent(ask.share_ppm),
                    percent(ask.held_ppm)
                ),
                "ask for less, or release one of your reservations",
            ));
        }
        let threads = ask.held_threads.saturating_add(ask.threads);
        if threads > rule.max_threads {
            return Err(by(
                format!("max_threads {} per user", rule.max_threads),
                format!(
                    "{threads} threads ({} of this process beside the {} you hold reserved)",
                    ask.threads, ask.held_threads
                ),
                "reserve a process with fewer threads or release a reservation (the server raises and lowers each thread every slice, charged to your share)",
            ));
        }
        if ask.held_reservations >= rule.max_reservations {
            return Err(by(
                format!("max_reservations {} per user", rule.max_reservations),
                format!("one more beside the {} you hold", ask.held_reservations),
                "release one of your reservations first",
            ));
        }
        Ok(rule)
    }
}

struct Allowed {
    cpus: CpuList,
    why: String,
}

/// The reservable CPUs and where they come from, for messages.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reservable {
    pub cpus: CpuList,
    /// The applied spec's isolated and shared partitions.
    pub partitions: CpuList,
    /// `isolcpus=`/`nohz_full=` of the kernel command line.
    pub boot: CpuList,
    /// No spec is applied.
    pub no_spec: bool,
}

impl Reservable {
    fn describe(&self) -> String {
        match (self.no_spec, self.boot.is_empty()) {
            (true, true) => "reservable: no partition spec is applied and no CPU is isolated at boot — apply one with an isolated partition (tame apply), or list CPUs in the policy".into(),
            (true, false) => format!("reservable: CPUs isolated at boot {}; no partition spec is applied", self.boot),
            (false, _) => format!(
                "reservable: the applied spec's isolated and shared partitions{}{}",
                if self.partitions.is_empty() { String::new() } else { format!(" {}", self.partitions) },
                if self.boot.is_empty() { String::new() } else { format!(", CPUs isolated at boot {}", self.boot) }
            ),
        }
    }

    /// Read them: the spec applied through the journal in `journal_dir` (its note), and
    /// the kernel command line. The system partition's CPUs are never reservable.
    pub fn read(root: &Root, journal_dir: &Path, online: &CpuList) -> Result<Self> {
        use tame_partition::spec::Role;
        // The one reader of the applied partitions (the journal's note; its published copy
        // for a reader that is not root).
        let applied = tame_partition::Applied::read(root, journal_dir).map_err(|e| {
            failed(format!(
                "cannot read the applied partition spec in {}: {e}",
                journal_dir.display()
            ))
        })?;
        let boot = tame_launch::target::boot_isolated(root, online).unwrap_or_default();
        let (partitions, system) = match &applied {
            Some(s) => (s.cpus_apart_from_system(), s.cpus_of(Role::System)),
            None => (CpuList::new(), CpuList::new()),
        };
        Ok(Self {
            cpus: partitions.union(&boot).difference(&system),
            partitions,
            boot,
            no_spec: applied.is_none(),
        })
    }
}

/// A name, or a number standing for itself.
fn id_of(name: &str, lookup: impl Fn(&str) -> Option<u32>) -> Option<u32> {
    let name = name.trim();
    lookup(name).or_else(|| name.parse().ok())
}

/// A policy is a few KiB; anything bigger is not one.
const MAX_POLICY_FILE: u64 = 1 << 20;

/// Why [`read_checked`] gave no text: there is no file, or it was refused.
enum Unread {
    Missing,
    Refused(crate::error::ReserveError),
}

/// The policy's text, read from the very file whose owner and mode were checked: one
/// descriptor, opened without following a final symbolic link, inspected and read (a
/// check by path and a read by path could each find a different file, swapped between).
fn read_checked(path: &Path) -> std::result::Result<String, Unread> {
    use std::os::unix::fs::MetadataExt;
    use tame_host::regular_file::{self, Unreadable};
    let refuse =
        |why: String| Unread::Refused(invalid(format!("the policy {} {why}", path.display())));
    let (text, meta) = match regular_file::read(path, MAX_POLICY_FILE) {
        Ok(read) => read,
        Err(Unreadable::Gone) => return Err(Unread::Missing),
        Err(Unreadable::Link) => {
            let to = std::fs::read_link(path)
                .map(|t| format!(" to {}", t.display()))
                .unwrap_or_default();
            return Err(refuse(format!(
                "is a symbolic link{to}: give the file itself with --policy, so that its owner is the one checked"
            )));
        }
        Err(why @ Unreadable::Special(_)) => {
            return Err(refuse(format!(
                "{why}: give a policy file (see contrib/serve.toml)"
            )))
        }
        Err(why) => {
            return Err(refuse(format!(
                "{why} — give a readable policy file with --policy (see contrib/serve.toml)"
            )))
        }
    };
    // SAFETY: plain query without arguments.
    let euid = unsafe { libc::geteuid() };
    if (meta.uid() != 0 && meta.uid() != euid) || meta.mode() & 0o022 != 0 {
        return Err(refuse(format!(
            "is owned by uid {} with mode {:o}: it must belong to root and be writable by nobody else (whoever can write it hands out real-time priority) — chown root {2}; chmod go-w {2}",
            meta.uid(),
            meta.mode() & 0o7777,
            path.display()
        )));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accounts() -> Accounts {
        Accounts::parse(
            "root:x:0:0::/root:/bin/sh\nalice:x:1000:1000::/home/alice:/bin/sh\nbob:x:1001:1001::/:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n",
            "root:x:0:\naudio:x:29:bob\nnogroup:x:65534:\n",
        )
    }

    const EXAMPLE: &str = r#"
socket_group = "audio"
cap = "80%"

[[rule]]
name = "alice"
users = ["alice"]
cpus = "1"
max_share = "20%"
max_period = "50ms"
max_slice = "5ms"

[[rule]]
name = "audio"
groups = ["audio"]
max_share = "50%"
max_period = "1s"
max_slice = "100ms"
"#;

    fn reservable(cpus: &str) -> impl FnOnce() -> Result<Reservable> + '_ {
        move || {
            Ok(Reservable {
                cpus: CpuList::parse(cpus).unwrap(),
                partitions: CpuList::parse(cpus).unwrap(),
                boot: CpuList::new(),
                no_spec: false,
            })
        }
    }

    fn ask(cpu: u32, share_ppm: u64, period_ns: u64, held_ppm: u64) -> Ask {
        Ask {
            cpu,
            share_ppm,
            period_ns,
            threads: 1,
            held_ppm,
            ..Ask::default()
        }
    }

    fn alice() -> Asker {
        Asker {
            uid: 1000,
            gids: vec![1000],
        }
    }

    fn refusal(r: Result<&Rule>) -> String {
        match r {
            Err(crate::ReserveError::Refused(m)) => m,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn the_example_reads_with_names_resolved() {
        let p = Policy::parse("serve.toml", EXAMPLE, &accounts()).unwrap();
        assert_eq!(p.socket_gid, Some(29));
        assert_eq!(p.cap_ppm, 800_000);
        assert_eq!(p.rules.len(), 2);
        assert_eq!(p.rules[0].uids, vec![1000]);
        assert_eq!(p.rules[0].cpus, Cpus::List(CpuList::parse("1").unwrap()));
        assert_eq!(p.rules[0].max_slice_ns, 5_000_000);
        assert_eq!(p.rules[1].gids, vec![29]);
        assert_eq!(p.rules[1].cpus, Cpus::Reservable);
        // The shipped example reads too.
        let shipped = include_str!("../../../../contrib/serve.toml");
        let accounts = Accounts::parse("root:x:0:0::/:/bin/sh\n", "root:x:0:\ntame:x:990:\n");
        Policy::parse("contrib/serve.toml", shipped, &accounts).unwrap();
    }

    #[test]
    fn bad_files_name_line_and_column() {
        let a = accounts();
        let err = |text: &str| Policy::parse("p.toml", text, &a).unwrap_err().to_string();
        let e = err("cap = \"90%\"\nsocket_grup = \"audio\"\n");
        assert!(
            e.starts_with("p.toml:2:1: unknown field `socket_grup`"),
            "{e}"
        );
        let e = err("[[rule]]\nname = \"x\"\nusers = [\"alice\"]\nmax_share = \"20%\"\nmax_period = \"50\"\nmax_slice = \"5ms\"\n");
        assert!(e.starts_with("p.toml:5:14: duration \"50\""), "{e}");
        let e = err("[[rule]]\nname = \"x\"\nusers = [\"mallory\"]\nmax_share = \"20%\"\nmax_period = \"50ms\"\nmax_slice = \"5ms\"\n");
        assert!(e.starts_with("p.toml:3:10: no user \"mallory\""), "{e}");
        let e = err("[[rule]]\nname = \"x\"\nmax_share = \"20%\"\nmax_period = \"50ms\"\nmax_slice = \"5ms\"\n");
        assert!(e.contains("names no users and no groups"), "{e}");
        let e = err("[[rule]]\nname = \"x\"\nusers = [\"alice\"]\nmax_period = \"50ms\"\nmax_slice = \"5ms\"\n");
        assert!(e.contains("missing field `max_share`"), "{e}");
        let e = err("[[rule]]\nname = \"x\"\nusers = [\"alice\"]\ncpus = \"1-\"\nmax_share = \"20%\"\nmax_period = \"50ms\"\nmax_slice = \"5ms\"\n");
        assert!(e.starts_with("p.toml:4:8: invalid CPU list"), "{e}");
        let e = err("cap = \"150%\"\n");
        assert!(e.starts_with("p.toml:1:7: cap must be"), "{e}");
        let e = err("socket_group = \"wheel\"\n");
        assert!(e.starts_with("p.toml:1:16: no group \"wheel\""), "{e}");
        let two = "[[rule]]\nname = \"x\"\nusers = [\"alice\"]\nmax_share = \"20%\"\nmax_period = \"50ms\"\nmax_slice = \"5ms\"\n";
        let e = err(&format!("{two}{two}"));
        assert!(e.contains("a second rule named \"x\""), "{e}");
        let e = err("cap = 90\n");
        assert!(e.starts_with("p.toml:1:7: invalid type"), "{e}");
        let e = err("[[rule]]\nname = \"x\"\nusers = [\"alice\"]\nmax_share = \"20%\"\nmax_period = \"50ms\"\nmax_slice = \"0ms\"\n");
        assert!(
            e.starts_with("p.toml:6:13: max_slice must be above 0"),
            "{e}"
        );
    }

    #[test]
    fn without_a_rule_only_root_may_reserve_and_only_reservable_cpus() {
        let p = Policy::builtin();
        let e = refusal(p.check(&alice(), &ask(1, 100_000, 20_000_000, 0), reservable("1")));
        assert!(e.starts_with("refused by rule \"default\""), "{e}");
        assert!(e.contains("uid 1000"), "{e}");
        let root = Asker {
            uid: 0,
            gids: vec![0],
        };
        let r = p
            .check(&root, &ask(1, 500_000, 10_000_000_000, 0), reservable("1"))
            .unwrap();
        assert_eq!(r.name, ROOT_RULE);
        // Never a housekeeping CPU, and none at all without partitions.
        let e = refusal(p.check(&root, &ask(0, 100_000, 20_000_000, 0), reservable("1")));
        assert!(
            e.contains("rule \"root\"") && e.contains("cpus = 1") && e.contains("asked CPU 0"),
            "{e}"
        );
        let none = || {
            Ok(Reservable {
                no_spec: true,
                ..Reservable::default()
            })
        };
        let e = refusal(p.check(&root, &ask(1, 100_000, 20_000_000, 0), none));
        assert!(
            e.contains("cpus = none") && e.contains("no partition spec is applied"),
            "{e}"
        );
    }

    #[test]
    fn each_limit_refuses_naming_the_rule_the_limit_and_the_request() {
        let p = Policy::parse("serve.toml", EXAMPLE, &accounts()).unwrap();
        let a = alice();
        let unused = || -> Result<Reservable> { panic!("alice's rule lists its CPUs") };
        p.check(&a, &ask(1, 100_000, 50_000_000, 0), unused)
            .unwrap();
        let e = refusal(p.check(&a, &ask(0, 100_000, 20_000_000, 0), reservable("0")));
        assert!(
            e.contains("rule \"alice\"") && e.contains("cpus = 1, asked CPU 0"),
            "{e}"
        );
        let e = refusal(p.check(&a, &ask(1, 10_000, 100_000_000, 0), reservable("")));
        assert!(
            e.contains("max_period 50 ms, asked a period of 100 ms"),
            "{e}"
        );
        let e = refusal(p.check(&a, &ask(1, 200_000, 40_000_000, 0), reservable("")));
        assert!(
            e.contains("max_slice 5 ms, asked a slice of 8 ms (20 % of 40 ms)"),
            "{e}"
        );
        let e = refusal(p.check(&a, &ask(1, 100_000, 20_000_000, 150_000), reservable("")));
        assert!(e.contains("max_share 20 % per user and CPU, asked 25 % on CPU 1 (10 % more beside the 15 % you hold there)"), "{e}");
        // Bob is in group audio: its rule, with reservable CPUs.
        let bob = Asker {
            uid: 1001,
            gids: vec![1001, 29],
        };
        assert_eq!(
            p.check(&bob, &ask(3, 400_000, 100_000_000, 0), reservable("2-3"))
                .unwrap()
                .name,
            "audio"
        );
        let e = refusal(p.check(&bob, &ask(1, 400_000, 100_000_000, 0), reservable("2-3")));
        assert!(
            e.contains("rule \"audio\"") && e.contains("cpus = 2-3 (reservable"),
            "{e}"
        );
        // Root is named by no rule of the file: the built-in rule.
        let root = Asker {
            uid: 0,
            gids: vec![0],
        };
        assert_eq!(p.rule_for(&root).unwrap().name, ROOT_RULE);
        assert_eq!(
            p.root_rule.max_share_ppm,
            spec::PPM,
            "only the cap bounds root"
        );
    }

    #[test]
    fn threads_and_reservations_are_bounded_per_user() {
        let p = Policy::parse("serve.toml", EXAMPLE, &accounts()).unwrap();
        let a = alice();
        let unused = || -> Result<Reservable> { panic!("alice's rule lists its CPUs") };
        assert_eq!(p.rules[0].max_threads, DEFAULT_MAX_THREADS);
        assert_eq!(p.rules[0].max_reservations, DEFAULT_MAX_RESERVATIONS);
        let many = Ask {
            threads: 1024,
            ..ask(1, 10_000, 40_000_000, 0)
        };
        let e = refusal(p.check(&a, &many, unused));
        assert!(
            e.contains("rule \"alice\"")
                && e.contains("max_threads 64 per user, asked 1024 threads (1024 of this process beside the 0 you hold reserved)"),
            "{e}"
        );
        let beside = Ask {
            threads: 8,
            held_threads: 60,
            ..ask(1, 10_000, 40_000_000, 0)
        };
        let e = refusal(p.check(&a, &beside, unused));
        assert!(e.contains("asked 68 threads"), "{e}");
        let one_more = Ask {
            held_reservations: DEFAULT_MAX_RESERVATIONS,
            ..ask(1, 10_000, 40_000_000, 0)
        };
        let e = refusal(p.check(&a, &one_more, unused));
        assert!(
            e.contains("max_reservations 16 per user, asked one more beside the 16 you hold"),
            "{e}"
        );
        // A rule may allow more, up to what the watchdog watches; never 0 or beyond.
        let with = |extra: &str| {
            Policy::parse(
                "p.toml",
                &format!("[[rule]]\nname = \"x\"\nusers = [\"alice\"]\nmax_share = \"20%\"\nmax_period = \"50ms\"\nmax_slice = \"5ms\"\n{extra}\n"),
                &accounts(),
            )
        };
        let p = with("max_threads = 1024\nmax_reservations = 2").unwrap();
        assert_eq!(
            (p.rules[0].max_threads, p.rules[0].max_reservations),
            (1024, 2)
        );
        p.check(
            &a,
            &Ask {
                threads: 1024,
                ..many
            },
            || reservable("1")(),
        )
        .unwrap();
        for bad in [
            "max_threads = 0",
            "max_threads = 1025",
            "max_threads = -1",
            "max_reservations = 0",
        ] {
            let e = with(bad).unwrap_err().to_string();
            assert!(
                e.starts_with("p.toml:7:") && e.contains("must be a whole number from 1 to"),
                "{bad}: {e}"
            );
        }
        // Root: only the watchdog's bound.
        assert_eq!(Policy::builtin().root_rule.max_threads, MAX_WATCHED);
    }

    #[test]
    fn reservable_cpus_come_from_the_applied_spec_never_the_system_partition() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path().join("root"));
        std::fs::create_dir_all(dir.path().join("root/proc")).unwrap();
        let journal = dir.path().join("journal");
        let online = CpuList::parse("0-5").unwrap();
        let r = Reservable::read(&root, &journal, &online).unwrap();
        assert!(r.no_spec && r.cpus.is_empty(), "{r:?}");
        // Isolated at boot, no spec: those CPUs.
        std::fs::write(dir.path().join("root/proc/cmdline"), "quiet isolcpus=1,5\n").unwrap();
        let r = Reservable::read(&root, &journal, &online).unwrap();
        assert_eq!(r.cpus.to_string(), "1,5");
        let spec = "[[partition]]\nname = \"sys\"\ncpus = \"0-1\"\nrole = \"system\"\n\n[[partition]]\nname = \"rt\"\ncpus = \"2\"\nrole = \"isolated\"\n\n[[partition]]\nname = \"team\"\ncpus = \"3\"\nrole = \"shared\"\n";
        let mut j = tame_host::journal::Journal::open(&root, &journal).unwrap();
        j.note(tame_partition::apply::SPEC_NOTE, spec.as_bytes())
            .unwrap();
        drop(j);
        // The partitions, and what boot isolated outside the system partition (5, not 1).
        let r = Reservable::read(&root, &journal, &online).unwrap();
        assert!(!r.no_spec);
        assert_eq!(r.cpus.to_string(), "2-3,5");
        assert!(r.describe().contains("partitions 2-3"), "{}", r.describe());
    }

    /// Issue 34: the policy was read by path, then its owner checked by path — a file
    /// swapped between the two ran. Now one descriptor is checked and read, and a
    /// symbolic link (which an attacker can point anywhere, or repoint) is refused.
    #[test]
    fn a_policy_is_checked_and_read_through_one_descriptor_never_through_a_link() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path().join("root"));
        let good = dir.path().join("good.toml");
        std::fs::write(&good, "cap = \"50%\"\n").unwrap();
        std::fs::set_permissions(&good, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(Policy::load(&root, Some(&good)).unwrap().cap_ppm, 500_000);

        // A link to a root-owned, properly protected file is refused all the same: the
        // link's target can be changed at any moment by whoever owns the directory.
        let link = dir.path().join("link.toml");
        std::os::unix::fs::symlink(&good, &link).unwrap();
        let err = Policy::load(&root, Some(&link)).unwrap_err().to_string();
        assert!(err.contains("is a symbolic link to"), "{err}");
        assert!(err.contains("give the file itself"), "{err}");

        // Writable by others: refused, and the text of that file is never used.
        let open = dir.path().join("open.toml");
        std::fs::write(&open, "cap = \"50%\"\n").unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o666)).unwrap();
        let err = Policy::load(&root, Some(&open)).unwrap_err().to_string();
        assert!(err.contains("writable by nobody else"), "{err}");

        // A FIFO planted as the policy neither hangs the start nor is read.
        let fifo = dir.path().join("fifo.toml");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid C string for the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let err = Policy::load(&root, Some(&fifo)).unwrap_err().to_string();
        assert!(
            err.contains("is a FIFO, not a regular file: give a policy file"),
            "{err}"
        );
        // A --policy that does not exist is an error; the default file may be absent.
        let err = Policy::load(&root, Some(&dir.path().join("none.toml")))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("there is no such file — give an existing file"),
            "{err}"
        );
    }

    /// The race itself: a file that is swapped, between loads, for a link to an
    /// attacker's file and back, never yields the attacker's policy.
    #[test]
    fn a_policy_swapped_under_the_loader_never_yields_the_attackers_text() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path().join("root"));
        let path = dir.path().join("serve.toml");
        let good = dir.path().join("good.toml");
        let evil = dir.path().join("evil.toml");
        std::fs::write(&good, "cap = \"50%\"\n").unwrap();
        std::fs::write(&evil, "cap = \"90%\"\n").unwrap();
        // Group-writable: a policy the check must refuse, only reachable by a swap.
        std::fs::set_permissions(&evil, std::fs::Permissions::from_mode(0o666)).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let swapper = {
            let (stop, path, good, evil) = (stop.clone(), path.clone(), good.clone(), evil.clone());
            let tmp = dir.path().join("tmp.toml");
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    for from in [&good, &evil] {
                        let _ = std::fs::remove_file(&tmp);
                        std::fs::hard_link(from, &tmp).unwrap();
                        std::fs::rename(&tmp, &path).unwrap();
                    }
                }
            })
        };
        for _ in 0..20000 {
            if let Ok(p) = Policy::load(&root, Some(&path)) {
                assert_eq!(p.cap_ppm, 500_000, "the attacker's policy was loaded");
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        swapper.join().unwrap();
    }
}
