//! What `tame status` and `tame check` say about an enabled partition: the files
//! installed, and whether the running kernel carries the boot parameters yet.

use std::path::Path;

use serde::{Deserialize, Serialize};
use tame_host::journal::{self, Change, JournalError};
use tame_host::kernel::Cmdline;
use tame_host::Root;

use super::{journal_dir, BootLoader, NOTE_BOOT_FILE, NOTE_LOADER, NOTE_PARAMETERS, SPEC_FILE};
use crate::plan::boot;

/// A partition enabled at boot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Enabled {
    pub spec_file: String,
    pub loader: Option<BootLoader>,
    /// Where the boot parameters were written (none with `--boot none`).
    pub boot_file: Option<String>,
    pub parameters: Vec<String>,
    /// Those the running kernel's command line lacks.
    pub missing_from_running_kernel: Vec<String>,
    /// The machine booted since enable wrote them (unknown: `None`).
    pub rebooted_since: Option<bool>,
    /// Installed files that no longer hold what enable wrote.
    pub changed_since: Vec<String>,
}

impl Enabled {
    /// One line on the boot parameters: pending, active, or not taken.
    pub fn boot_line(&self) -> String {
        let missing = &self.missing_from_running_kernel;
        if self.parameters.is_empty() {
            return "no boot parameter is needed".into();
        }
        if missing.is_empty() {
            return format!(
                "the running kernel carries the boot parameters ({})",
                self.parameters.join(" ")
            );
        }
        let missing = missing.join(" ");
        match (&self.boot_file, self.rebooted_since) {
            (None, _) => format!(
                "not written (--boot none): add {missing} to the boot loader's command line yourself"
            ),
            (Some(file), Some(true)) => format!(
                "written to {file}, but the running kernel lacks {missing} although the machine rebooted since — did the boot loader read {file} (update-grub, kernel-install)? is this the entry it booted?"
            ),
            (Some(file), _) => format!("{missing} written to {file}: active after a reboot"),
        }
    }
}

/// The enabled partition of `root` (journals below `apply_journal_dir`), `None` when none.
pub fn enabled(
    root: &Root,
    apply_journal_dir: &Path,
    running: &Cmdline,
) -> Result<Option<Enabled>, JournalError> {
    let Some(rec) =
        journal::load(&journal_dir(apply_journal_dir))?.filter(|r| !r.entries.is_empty())
    else {
        return Ok(None);
    };
    let note = |key: &str| {
        rec.note(key)
            .map(|v| String::from_utf8_lossy(v).into_owned())
    };
    let parameters: Vec<String> = note(NOTE_PARAMETERS)
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let missing_from_running_kernel = parameters
        .iter()
        .filter(|p| !boot::carries(running, p))
        .cloned()
        .collect();
    let rebooted_since = match (
        note(journal::BOOT_ID_NOTE),
        tame_host::kernel::boot_id(root),
    ) {
        (Some(then), Some(now)) => Some(then != now),
        _ => None,
    };
    let changed_since = rec
        .entries
        .iter()
        .filter_map(|e| match &e.change {
            Change::Install { path, content, .. } => {
                let now = root.read(path).ok();
                (now.as_deref().map(str::as_bytes) != Some(content.as_slice()))
                    .then(|| path.clone())
            }
            _ => None,
        })
        .collect();
    Ok(Some(Enabled {
        spec_file: SPEC_FILE.into(),
        loader: note(NOTE_LOADER).and_then(|l| BootLoader::parse(&l)),
        boot_file: note(NOTE_BOOT_FILE),
        parameters,
        missing_from_running_kernel,
        rebooted_since,
        changed_since,
    }))
}
