//! `tame host capture`: copy exactly the files the host layer reads into a
//! fixture tree, so tests (and bug reports) can replay a machine without root.

use std::path::Path;

use crate::error::Unreadable;
use crate::{HostError, HostModel, Root};

/// What a capture copied.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CaptureReport {
    pub files: usize,
    pub dirs: usize,
    /// Files the host layer tried to read that exist but could not be copied.
    pub skipped: Vec<Unreadable>,
}

/// `tame host capture DIR --json`: what a capture copied, where.
#[derive(serde::Serialize)]
pub struct CaptureDoc<'a> {
    schema: crate::Schema,
    dir: String,
    #[serde(flatten)]
    report: &'a CaptureReport,
}

impl crate::Document for CaptureDoc<'_> {
    const SCHEMA: crate::Schema = crate::schema!(Tagged "tame.host.capture", 1);
}

impl<'a> CaptureDoc<'a> {
    pub fn new(dir: &Path, report: &'a CaptureReport) -> Self {
        CaptureDoc {
            schema: <Self as crate::Document>::SCHEMA,
            dir: dir.display().to_string(),
            report,
        }
    }
}

impl CaptureReport {
    /// The line a capture into `dir` is reported with (what could not be read is listed
    /// apart, one [`Unreadable`] each).
    pub fn summary(&self, dir: &Path) -> String {
        format!(
            "captured {} files and {} directories into {}",
            self.files,
            self.dirs,
            dir.display()
        )
    }
}

/// Read the model through a recording root and copy every file and directory
/// listing it used from `source` into `dest` (which should be empty).
pub fn capture(source: &Root, dest: &Path) -> Result<CaptureReport, HostError> {
    let recording = source.recording();
    HostModel::read(&recording);
    let recorded = recording.recorded();
    let target = Root::new(dest);
    let mkdir = |p: &Path| {
        std::fs::create_dir_all(p).map_err(|e| HostError::Read {
            path: p.to_path_buf(),
            source: e,
        })
    };
    let mut report = CaptureReport::default();
    for dir in &recorded.dirs {
        let Ok(entries) = source.list_dir(dir) else {
            continue;
        };
        mkdir(&target.path(dir))?;
        report.dirs += 1;
        for name in entries {
            let host = dir.join(&name);
            // Listings are used to find subdirectories (cpuN, stateN, PIDs); keep their names.
            if source.is_dir(&host) {
                mkdir(&target.path(&host))?;
                report.dirs += 1;
            }
        }
    }
    for file in &recorded.files {
        match source.read_bytes(file) {
            Ok(bytes) => {
                let to = target.path(file);
                if let Some(parent) = to.parent() {
                    mkdir(parent)?;
                }
                std::fs::write(&to, bytes).map_err(|e| HostError::Read {
                    path: to,
                    source: e,
                })?;
                report.files += 1;
            }
            Err(e) if e.is_not_found() => {}
            // A directory read as a file (sysfs oddities) or EACCES: note and go on.
            Err(e) => report.skipped.push(Unreadable::from_error(file, &e)),
        }
    }
    Ok(report)
}
