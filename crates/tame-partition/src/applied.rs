//! The applied partition set, typed where it is born: [`crate::apply`] returns it, and
//! [`Applied::read`] — the one reader of the journal's spec note — gives it back to status,
//! `tame run -p`, the benches, assess, check and the reservation server.

use std::path::{Path, PathBuf};

use tame_host::cgroup::{CgroupModel, CgroupVersion, Cgroups, Group};
use tame_host::journal::{self, JournalError, Recorded};
use tame_host::reader::Reader;
use tame_host::{CpuList, Root};

use crate::apply::{PUBLIC_SPEC, SPEC_NOTE};
use crate::spec::{PartitionSpec, Role, Spec, SpecError};

/// The partitions a spec applied through the journal in `journal_dir` made.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// The spec applied.
    pub spec: Spec,
    /// Its text as the journal notes it, comments (and a measurement's marker) included.
    pub text: String,
    /// The journal directory it lives in (`tame revert` there undoes it).
    pub journal_dir: PathBuf,
    /// One per partition of the spec, in its order.
    pub partitions: Vec<AppliedPartition>,
}

/// One applied partition: what a program placed there gets, and who may place one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppliedPartition {
    pub name: String,
    pub role: Role,
    pub cpus: CpuList,
    /// Its memory nodes, when the spec binds them.
    pub mems: Option<CpuList>,
    /// L3 cache ways reserved for it (resctrl), when the spec reserves some.
    pub cache_ways: Option<u32>,
    /// The user, and the group, the spec lets put their own tasks there (root always may).
    pub user: Option<String>,
    pub group: Option<String>,
    /// Its cgroup in the cpuset hierarchy; `None` where no cpuset controller is mounted.
    pub cgroup: Option<PartitionCgroup>,
}

impl AppliedPartition {
    /// Not the system partition: no other work runs on its CPUs.
    pub fn is_isolated(&self) -> bool {
        self.role != Role::System
    }
}

/// A partition's cgroup: where its programs join.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionCgroup {
    pub version: CgroupVersion,
    /// Where the cpuset hierarchy is mounted.
    pub mount: String,
    /// Relative to the cpuset hierarchy (`/tame-rt`; `/` for its root).
    pub path: String,
    /// Host path of the cgroup's directory.
    pub dir: String,
}

impl PartitionCgroup {
    /// The cgroup at `path` of the cpuset hierarchy of `version` mounted at `mount`.
    pub fn new(version: CgroupVersion, mount: &str, path: &str) -> Self {
        let dir = if path == "/" {
            mount.to_string()
        } else {
            format!("{mount}{path}")
        };
        Self {
            version,
            mount: mount.to_string(),
            path: path.to_string(),
            dir,
        }
    }

    /// The cgroup of a partition named `name` with `role` in the cpuset hierarchy of
    /// `version` at `mount`: `tame-NAME` below it — except the v2 system partition, the
    /// root cgroup (apply makes cgroups only for the other partitions there).
    pub fn of(version: CgroupVersion, mount: &str, name: &str, role: Role) -> Self {
        let path = if version == CgroupVersion::V2 && role == Role::System {
            "/".to_string()
        } else {
            format!("/{}", crate::plan::group_name(name))
        };
        Self::new(version, mount, &path)
    }

    /// The cpuset controller's hierarchy this cgroup is in.
    pub fn hierarchy(&self) -> Cgroups {
        Cgroups::at("cpuset", self.version, &self.mount)
    }

    /// The cgroup as a group of the cpuset hierarchy.
    pub fn group(&self) -> Group {
        self.hierarchy().group(&self.path)
    }

    /// The cgroup's `cgroup.procs` (v1 and v2), as a host path.
    pub fn procs(&self) -> String {
        format!("{}/cgroup.procs", self.dir)
    }
}

/// Why the applied partitions could not be read from the journal.
#[derive(Debug, thiserror::Error)]
pub enum AppliedSpecError {
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// The journal's note holds a spec that does not parse (a damaged journal).
    #[error(transparent)]
    Spec(#[from] SpecError),
}

/// A journal refused as unsafe to trust is the caller's to fix (its location); a journal
/// that cannot be read, or whose note does not parse, is a failure.
impl tame_host::error::LayerError for AppliedSpecError {
    fn is_bad_input(&self) -> bool {
        match self {
            AppliedSpecError::Journal(e) => e.is_bad_input(),
            AppliedSpecError::Spec(_) => false,
        }
    }
    fn names_its_cause(&self) -> bool {
        match self {
            AppliedSpecError::Journal(e) => tame_host::error::LayerError::names_its_cause(e),
            AppliedSpecError::Spec(_) => true,
        }
    }
}

impl Applied {
    /// `spec` (noted as `text`) applied through the journal in `journal_dir` on `root`:
    /// each partition with its cgroup in the host's cpuset hierarchy.
    pub fn new(root: &Root, spec: Spec, text: &str, journal_dir: &Path) -> Self {
        let home = CgroupModel::read(&mut Reader::new(root)).controller_home("cpuset");
        let partitions = spec
            .partitions
            .iter()
            .map(|p: &PartitionSpec| AppliedPartition {
                name: p.name.clone(),
                role: p.role,
                cpus: p.cpus.clone(),
                mems: p.mems.clone(),
                cache_ways: p.cache_ways,
                user: p.user.clone(),
                group: p.group.clone(),
                cgroup: home
                    .as_ref()
                    .map(|h| PartitionCgroup::of(h.version, &h.mount, &p.name, p.role)),
            })
            .collect();
        Self {
            spec,
            text: text.to_string(),
            journal_dir: journal_dir.to_path_buf(),
            partitions,
        }
    }

    /// The partitions applied with the journal in `journal_dir`, from the journal's note
    /// alone (the spec apply published beside it for a reader that is not root): `None`
    /// when nothing is applied. The one reader of the applied spec.
    pub fn read(root: &Root, journal_dir: &Path) -> Result<Option<Self>, AppliedSpecError> {
        let loaded = match journal::load(journal_dir) {
            // Not root: the journal is root's alone; the spec apply published beside it is not.
            Err(JournalError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::PermissionDenied =>
            {
                return Ok(published_text(journal_dir)
                    .map(|t| Self::parse(root, &t, journal_dir))
                    .transpose()?);
            }
            other => other?,
        };
        // A journal from before the last reboot: nothing of it is applied now.
        Ok(loaded
            .as_ref()
            .filter(|rec| !rec.from_previous_boot(root))
            .and_then(|rec| Self::of_record(root, rec, journal_dir))
            .transpose()?)
    }

    /// The applied partitions a loaded journal notes (`None`: it notes no spec).
    pub(crate) fn of_record(
        root: &Root,
        rec: &Recorded,
        journal_dir: &Path,
    ) -> Option<Result<Self, SpecError>> {
        let text = noted_text(rec)?;
        Some(Self::parse(root, &text, journal_dir))
    }

    fn parse(root: &Root, text: &str, journal_dir: &Path) -> Result<Self, SpecError> {
        let spec = Spec::parse("applied spec", text)?;
        Ok(Self::new(root, spec, text, journal_dir))
    }

    /// Partition `name`, if applied.
    pub fn partition(&self, name: &str) -> Option<&AppliedPartition> {
        self.partitions.iter().find(|p| p.name == name)
    }

    /// The system partition, where ordinary work (and a bench's load) runs.
    pub fn system(&self) -> Option<&AppliedPartition> {
        self.partitions.iter().find(|p| p.role == Role::System)
    }

    /// The CPUs of the partitions with `role`.
    pub fn cpus_of(&self, role: Role) -> CpuList {
        self.spec.cpus_of(role)
    }

    /// The CPUs of the partitions other work stays off (isolated and shared): what the
    /// reservation server may hand out.
    pub fn cpus_apart_from_system(&self) -> CpuList {
        self.cpus_of(Role::Isolated)
            .union(&self.cpus_of(Role::Shared))
    }

    /// The names of the partitions other work stays off (isolated or shared).
    pub fn isolated_names(&self) -> Vec<String> {
        self.partitions
            .iter()
            .filter(|p| p.is_isolated())
            .map(|p| p.name.clone())
            .collect()
    }

    /// The partition whose CPUs include every one of `cpus`, if one does.
    pub fn holding(&self, cpus: &CpuList) -> Option<&AppliedPartition> {
        self.partitions
            .iter()
            .find(|p| !cpus.is_empty() && cpus.is_subset(&p.cpus))
    }

    /// The names of every applied partition.
    pub fn names(&self) -> Vec<&str> {
        self.partitions.iter().map(|p| p.name.as_str()).collect()
    }
}

/// The spec text apply noted in the journal.
pub(crate) fn noted_text(rec: &Recorded) -> Option<String> {
    rec.note(SPEC_NOTE)
        .map(|t| String::from_utf8_lossy(t).into_owned())
}

/// The spec apply published for other users, trusted only when root's and writable by
/// nobody else (a file anybody could have put there says nothing about partitions).
fn published_text(dir: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt as _;
    let path = dir.join(PUBLIC_SPEC);
    let meta = std::fs::symlink_metadata(&path).ok()?;
    if !meta.is_file() || meta.uid() != 0 || meta.mode() & 0o022 != 0 {
        return None;
    }
    std::fs::read_to_string(&path).ok()
}
