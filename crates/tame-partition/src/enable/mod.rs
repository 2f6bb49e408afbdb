//! `tame enable SPEC` / `tame disable`: a partition that survives a reboot. Enable installs
//! the spec as [`SPEC_FILE`], a unit that applies it early in every boot (and reverts it at
//! shutdown), the systemd drop-ins that keep everything systemd starts later off the
//! isolated CPUs, and the boot parameters the plan derives, as a GRUB drop-in or
//! /etc/kernel/cmdline. Every file is new (tame never edits a file it did not write) and
//! journaled like apply's changes, in its own journal ([`journal_dir`]); disable removes
//! each, byte-exactly, and leaves a file someone changed since in place, saying so.

mod render;
mod state;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tame_host::error::LayerError;
use tame_host::journal::{self, Change, Journal, JournalError, RevertReport};
use tame_host::{HostModel, Root};

use crate::plan::{self, boot, BootParameter, Invalid};
use crate::spec::{Role, Spec};

pub use state::{enabled, Enabled};

/// Where the enabled spec lives; the unit applies it.
pub const SPEC_FILE: &str = "/etc/tame/partition.toml";
/// The unit enable installs (and `make install` ships).
pub const UNIT: &str = "tame-partition.service";
const UNIT_DIR: &str = "/etc/systemd/system";
/// The unit is wanted by sysinit.target (its [Install] section), as `systemctl enable` would.
const WANTS_DIR: &str = "/etc/systemd/system/sysinit.target.wants";
const MANAGER_DROPIN_DIR: &str = "/etc/systemd/system.conf.d";
const GRUB_DEFAULT: &str = "/etc/default/grub";
const GRUB_DROPIN_DIR: &str = "/etc/default/grub.d";
const KERNEL_CMDLINE: &str = "/etc/kernel/cmdline";
/// Signs that kernel-install (systemd-boot, BLS entries) makes the boot entries.
const KERNEL_INSTALL_SIGNS: &[&str] = &[
    "/etc/kernel/install.conf",
    "/boot/loader/entries",
    "/efi/loader/entries",
];
/// Enable's journal: a directory of its own below apply's, so `tame revert` (a run-time
/// partition) and `tame disable` (the boot-time one) each undo only their own changes.
pub const JOURNAL_SUBDIR: &str = "enabled";

const NOTE_SPEC: &str = "spec";
const NOTE_LOADER: &str = "loader";
const NOTE_PARAMETERS: &str = "parameters";
const NOTE_BOOT_FILE: &str = "boot_file";

/// Version of the JSON shape of [`EnableReport`].
impl tame_host::Document for EnableReport {
    const SCHEMA: tame_host::Schema = tame_host::schema!(Tagged "tame.enable", 1);
}

/// The journal directory of enable, below apply's (`journal_dir`).
pub fn journal_dir(apply_journal_dir: &Path) -> PathBuf {
    apply_journal_dir.join(JOURNAL_SUBDIR)
}

/// Where the boot parameters go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BootLoader {
    /// A drop-in in /etc/default/grub.d, then update-grub.
    Grub,
    /// /etc/kernel/cmdline, which kernel-install gives every new boot entry.
    KernelCmdline,
    /// Nowhere: the report lists them for the user's boot loader.
    None,
}

impl BootLoader {
    pub fn name(self) -> &'static str {
        match self {
            BootLoader::Grub => "grub",
            BootLoader::KernelCmdline => "kernel-cmdline",
            BootLoader::None => "none",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        [Self::Grub, Self::KernelCmdline, Self::None]
            .into_iter()
            .find(|l| l.name() == name)
    }
}

#[derive(Clone, Debug)]
pub struct EnableOptions {
    /// `--boot`; `None`: chosen from what the machine has.
    pub boot: Option<BootLoader>,
    /// The tame binary the unit runs (absolute).
    pub binary: String,
}

#[derive(Debug, thiserror::Error)]
pub enum EnableError {
    #[error("enable changes the live system and needs root — run it as root (or with --root on a fixture tree)")]
    NotRoot,
    #[error(transparent)]
    Invalid(#[from] Invalid),
    #[error("{path} exists and tame did not write it — tame never edits a file it did not write; move it away (or merge its settings into your own configuration) and run enable again")]
    Exists { path: String },
    #[error("{KERNEL_CMDLINE} exists and tame did not write it — add these parameters to it yourself: {parameters}; or give --boot none (tame then writes no boot parameters) or --boot grub")]
    KernelCmdlineExists { parameters: String },
    #[error("{0} is missing: enable needs systemd to apply the partition at boot — on a machine without systemd, run `tame apply SPEC` from your init system")]
    NoSystemd(String),
    #[error("--boot grub: {GRUB_DEFAULT} is missing, so GRUB would not read a drop-in — give --boot kernel-cmdline or --boot none")]
    NoGrub,
    #[error("--boot kernel-cmdline: /etc/kernel is missing, so kernel-install is not set up here — give --boot grub or --boot none")]
    NoKernelInstall,
    #[error("another spec is enabled (journal {journal}) — run `tame disable` first, then enable this one")]
    OtherSpecEnabled { journal: String },
    #[error("the spec has no isolated partition: nothing to keep at boot — add a partition with role = \"isolated\"")]
    NothingIsolated,
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error("{step} failed: {reason}; every file written before it was removed again")]
    Failed { step: String, reason: String },
    #[error("{step} failed: {reason}; removing what was written failed too ({}) — run `tame disable` to finish", .rollback.not_restored_lines().join("; "))]
    FailedHalfway {
        step: String,
        reason: String,
        rollback: RevertReport,
    },
}

impl LayerError for EnableError {
    fn is_bad_input(&self) -> bool {
        match self {
            EnableError::Journal(e) => e.is_bad_input(),
            EnableError::Failed { .. } | EnableError::FailedHalfway { .. } => false,
            _ => true,
        }
    }
    fn names_its_cause(&self) -> bool {
        matches!(self, EnableError::Journal(e) if e.names_its_cause())
    }
}

/// A file enable writes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InstalledFile {
    pub path: String,
    /// Permission bits, octal as `ls` shows them ("644").
    pub mode: String,
    pub why: String,
    pub content: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InstalledLink {
    pub path: String,
    pub target: String,
    pub why: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BootPlan {
    pub loader: BootLoader,
    /// Why this loader (given, or what the machine has).
    pub chosen: String,
    /// Every parameter that makes the isolation hold from boot on this kernel.
    pub parameters: Vec<BootParameter>,
    /// Those the running kernel's command line already carries.
    pub on_running_kernel: Vec<String>,
    /// The file they are written to (none with `--boot none`).
    pub file: Option<String>,
    /// What makes the boot loader read them (run by the CLI on the live system).
    pub then: Option<Vec<String>>,
}

#[derive(Clone, Debug, Serialize)]
pub struct EnableReport {
    pub schema: String,
    /// Nothing was written: only shown (`--dry-run`).
    pub dry_run: bool,
    /// This spec was enabled already, with these very files: nothing to write.
    pub unchanged: bool,
    pub journal: String,
    pub spec_file: String,
    pub unit: String,
    /// The tame the unit runs (this one, resolved).
    pub binary: String,
    /// Directories created first (parents first).
    pub dirs: Vec<String>,
    pub files: Vec<InstalledFile>,
    pub links: Vec<InstalledLink>,
    pub boot: BootPlan,
}

/// Plan what enabling `spec` installs under `root`: validates everything (the spec plans
/// on this host, no file in the way, no other spec enabled), writes nothing.
pub fn plan(
    root: &Root,
    host: &HostModel,
    spec: &Spec,
    spec_text: &str,
    options: &EnableOptions,
    apply_journal_dir: &Path,
) -> Result<EnableReport, EnableError> {
    plan::plan(spec, host)?;
    if spec.isolated_cpus().is_empty() {
        return Err(EnableError::NothingIsolated);
    }
    if !root.is_dir("/etc/systemd") {
        return Err(EnableError::NoSystemd("/etc/systemd".into()));
    }
    let system = spec.cpus_of(Role::System);
    let boot = boot_plan(root, host, spec, options.boot)?;
    let mut files = vec![
        InstalledFile::new(
            SPEC_FILE,
            "the spec the unit applies at every boot",
            format!(
                "# Written by `tame enable` (journaled); `tame disable` removes it. To change the partition, run `tame disable`, then `tame enable` with the new spec.\n{spec_text}"
            ),
        ),
        InstalledFile::new(
            &format!("{UNIT_DIR}/{UNIT}"),
            "applies the spec early in every boot, before ordinary services; reverts it at shutdown",
            render::unit(&options.binary),
        ),
        InstalledFile::new(
            &format!("{MANAGER_DROPIN_DIR}/tame.conf"),
            "systemd and everything it starts run on the system partition's CPUs",
            render::manager_affinity(&system),
        ),
    ];
    // systemd confines slices with `AllowedCPUs=` only on the unified (v2) hierarchy; with
    // cpusets on v1 `CPUAffinity=` alone keeps services off.
    if host.cgroups.systemd_cpusets() {
        for (unit, section) in [
            ("system.slice", "Slice"),
            ("user.slice", "Slice"),
            ("init.scope", "Scope"),
        ] {
            files.push(InstalledFile::new(
                &format!("{UNIT_DIR}/{unit}.d/tame.conf"),
                "its cgroup v2 cpuset holds only the system partition's CPUs",
                render::allowed_cpus(section, &system),
            ));
        }
    }
    if let Some(file) = &boot.file {
        let text = match boot.loader {
            BootLoader::Grub => render::grub(&boot.parameters),
            _ => render::kernel_cmdline(&host.kernel.cmdline, &boot.parameters),
        };
        files.push(InstalledFile::new(
            file,
            "the boot parameters, for the next boot",
            text,
        ));
    }
    let links = vec![InstalledLink {
        path: format!("{WANTS_DIR}/{UNIT}"),
        target: format!("{UNIT_DIR}/{UNIT}"),
        why: "the unit starts at boot (as `systemctl enable` would)".into(),
    }];
    let journal = journal::journal_path(&journal_dir(apply_journal_dir))
        .display()
        .to_string();
    let mut report = EnableReport {
        schema: <EnableReport as tame_host::Document>::SCHEMA
            .tag
            .to_string(),
        dry_run: false,
        unchanged: false,
        journal,
        spec_file: SPEC_FILE.into(),
        unit: UNIT.into(),
        binary: options.binary.clone(),
        dirs: Vec::new(),
        files,
        links,
        boot,
    };
    if let Some(rec) =
        journal::load(&journal_dir(apply_journal_dir))?.filter(|r| !r.entries.is_empty())
    {
        if installed_as_planned(&rec, &report) {
            report.unchanged = true;
            return Ok(report);
        }
        return Err(EnableError::OtherSpecEnabled {
            journal: report.journal,
        });
    }
    let paths = report
        .files
        .iter()
        .map(|f| f.path.as_str())
        .chain(report.links.iter().map(|l| l.path.as_str()));
    for path in paths {
        if root.exists(path) || root.read_link(path).is_ok() {
            if path == KERNEL_CMDLINE {
                return Err(EnableError::KernelCmdlineExists {
                    parameters: parameter_words(&report.boot.parameters),
                });
            }
            return Err(EnableError::Exists { path: path.into() });
        }
        for dir in missing_dirs(root, path) {
            if !report.dirs.contains(&dir) {
                report.dirs.push(dir);
            }
        }
    }
    Ok(report)
}

impl InstalledFile {
    fn new(path: &str, why: &str, content: String) -> Self {
        Self {
            path: path.into(),
            mode: "644".into(),
            why: why.into(),
            content,
        }
    }
}

fn boot_plan(
    root: &Root,
    host: &HostModel,
    spec: &Spec,
    given: Option<BootLoader>,
) -> Result<BootPlan, EnableError> {
    let parameters = boot::wanted(spec, host);
    let on_running_kernel = parameters
        .iter()
        .filter(|p| boot::carries(&host.kernel.cmdline, &p.parameter))
        .map(|p| p.parameter.clone())
        .collect();
    let (loader, chosen) = match given {
        Some(BootLoader::Grub) if !root.exists(GRUB_DEFAULT) => return Err(EnableError::NoGrub),
        Some(BootLoader::KernelCmdline) if !root.is_dir("/etc/kernel") => {
            return Err(EnableError::NoKernelInstall)
        }
        Some(l) => (l, format!("--boot {}", l.name())),
        None => {
            if root.exists(GRUB_DEFAULT) {
                (BootLoader::Grub, format!("{GRUB_DEFAULT} exists"))
            } else if let Some(sign) = KERNEL_INSTALL_SIGNS.iter().find(|p| root.exists(p)) {
                (
                    BootLoader::KernelCmdline,
                    format!("{sign} exists (kernel-install makes the boot entries)"),
                )
            } else {
                (
                    BootLoader::None,
                    format!("neither GRUB ({GRUB_DEFAULT}) nor kernel-install ({}) found: add the parameters to your boot loader yourself", KERNEL_INSTALL_SIGNS.join(", ")),
                )
            }
        }
    };
    let (file, then) = match loader {
        BootLoader::Grub => (
            Some(format!("{GRUB_DROPIN_DIR}/tame.cfg")),
            Some(vec!["update-grub".to_string()]),
        ),
        BootLoader::KernelCmdline => (Some(KERNEL_CMDLINE.to_string()), None),
        BootLoader::None => (None, None),
    };
    Ok(BootPlan {
        loader,
        chosen,
        parameters,
        on_running_kernel,
        file,
        then,
    })
}

fn parameter_words(parameters: &[BootParameter]) -> String {
    parameters
        .iter()
        .map(|p| p.parameter.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The directories above `path` that do not exist yet, parents first (down from /etc).
fn missing_dirs(root: &Root, path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut dir = Path::new(path).parent();
    while let Some(d) = dir.filter(|d| *d != Path::new("/") && !root.is_dir(d)) {
        out.push(d.display().to_string());
        dir = d.parent();
    }
    out.reverse();
    out
}

/// The journal records exactly the files and links of `report`.
fn installed_as_planned(rec: &journal::Recorded, report: &EnableReport) -> bool {
    let mut files: Vec<(&str, &[u8])> = Vec::new();
    let mut links: Vec<(&str, &str)> = Vec::new();
    for e in &rec.entries {
        match &e.change {
            Change::Install { path, content, .. } => files.push((path, content)),
            Change::Link { path, target } => links.push((path, target)),
            _ => {}
        }
    }
    let mut want_files: Vec<(&str, &[u8])> = report
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.content.as_bytes()))
        .collect();
    let mut want_links: Vec<(&str, &str)> = report
        .links
        .iter()
        .map(|l| (l.path.as_str(), l.target.as_str()))
        .collect();
    files.sort();
    links.sort();
    want_files.sort();
    want_links.sort();
    files == want_files && links == want_links
}

/// Install what [`plan`] planned, journaled; on a failure everything written is removed.
pub fn enable(
    root: &Root,
    report: &EnableReport,
    apply_journal_dir: &Path,
) -> Result<(), EnableError> {
    if !tame_host::privilege::may_change(root) {
        return Err(EnableError::NotRoot);
    }
    if report.unchanged {
        return Ok(());
    }
    let mut journal = Journal::open(root, &journal_dir(apply_journal_dir))?;
    // Files stay across reboots: this journal is never one of an earlier boot.
    journal.note(journal::PERSISTS_NOTE, b"files")?;
    let spec = report
        .files
        .first()
        .map(|f| f.content.as_bytes())
        .unwrap_or_default();
    journal.note(NOTE_SPEC, spec)?;
    journal.note(NOTE_LOADER, report.boot.loader.name().as_bytes())?;
    journal.note(
        NOTE_PARAMETERS,
        parameter_words(&report.boot.parameters).as_bytes(),
    )?;
    if let Some(file) = &report.boot.file {
        journal.note(NOTE_BOOT_FILE, file.as_bytes())?;
    }
    let mut failure = None;
    for dir in &report.dirs {
        if let Err(e) = journal.create_dir(dir, None)? {
            failure = Some((format!("creating {dir}"), e.to_string()));
            break;
        }
    }
    if failure.is_none() {
        for f in &report.files {
            if let Err(e) = journal.install_file(&f.path, f.content.as_bytes(), 0o644)? {
                failure = Some((format!("writing {}", f.path), e.to_string()));
                break;
            }
        }
    }
    if failure.is_none() {
        for l in &report.links {
            if let Err(e) = journal.link(&l.path, &l.target)? {
                failure = Some((format!("linking {}", l.path), e.to_string()));
                break;
            }
        }
    }
    let Some((step, reason)) = failure else {
        return Ok(());
    };
    let rollback = journal.revert()?;
    if rollback.not_restored.is_empty() {
        Err(EnableError::Failed { step, reason })
    } else {
        Err(EnableError::FailedHalfway {
            step,
            reason,
            rollback,
        })
    }
}

/// What `tame disable` did.
#[derive(Clone, Debug)]
pub struct Disabled {
    pub revert: RevertReport,
    /// Where the boot parameters were written, and by which loader (to regenerate its
    /// configuration now that they are gone).
    pub loader: Option<BootLoader>,
    pub boot_file: Option<String>,
    /// The files and links gone now (removed, or found removed already).
    pub removed: Vec<String>,
}

/// Remove everything enable installed, newest first; a file changed since is left in
/// place (and named in `revert.not_restored`).
pub fn disable(root: &Root, apply_journal_dir: &Path) -> Result<Disabled, EnableError> {
    let dir = journal_dir(apply_journal_dir);
    let rec = journal::load(&dir)?;
    if rec.is_some() && !tame_host::privilege::may_change(root) {
        return Err(EnableError::NotRoot);
    }
    let note = |key: &str| {
        rec.as_ref()
            .and_then(|r| r.note(key))
            .map(|v| String::from_utf8_lossy(v).into_owned())
    };
    let loader = note(NOTE_LOADER).and_then(|l| BootLoader::parse(&l));
    let boot_file = note(NOTE_BOOT_FILE);
    let revert = journal::revert(root, &dir)?;
    // What is gone now: a file left in place (changed since) is not among them.
    let removed = rec
        .iter()
        .flat_map(|r| r.entries.iter())
        .filter_map(|e| match &e.change {
            Change::Install { path, .. } | Change::Link { path, .. } => Some(path.clone()),
            _ => None,
        })
        .filter(|p| !root.exists(p) && root.read_link(p).is_err())
        .collect();
    Ok(Disabled {
        revert,
        loader,
        boot_file,
        removed,
    })
}
