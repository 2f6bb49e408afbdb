//! Steps compared with the current values in the host model: a step that
//! would change nothing is left out, so a second apply does nothing.

use tame_host::cgroup::{CgroupWrite, CreateGroup};
use tame_host::journal::Ownership;
use tame_host::knobs::Knobs;

use super::{same_value, Step, ValueKind};

pub(super) struct Builder<'a> {
    knobs: &'a Knobs,
    steps: Vec<Step>,
}

impl<'a> Builder<'a> {
    pub(super) fn new(knobs: &'a Knobs) -> Self {
        Self {
            knobs,
            steps: Vec::new(),
        }
    }

    pub(super) fn into_steps(self) -> Vec<Step> {
        self.steps
    }

    /// What the file holds now; `None` when it does not exist.
    pub(super) fn current(&self, path: &str) -> Option<&'a str> {
        self.knobs.text(path)
    }

    pub(super) fn exists(&self, path: &str) -> bool {
        self.knobs.exists(path)
    }

    pub(super) fn push(&mut self, step: Step) {
        self.steps.push(step);
    }

    /// Add a write unless the file already holds the value.
    pub(super) fn write(&mut self, path: String, new: String, kind: ValueKind, why: &str) {
        self.write_full(path, new, kind, why, None, false);
    }

    pub(super) fn write_full(
        &mut self,
        path: String,
        new: String,
        kind: ValueKind,
        why: &str,
        restore_with: Option<String>,
        may_be_refused: bool,
    ) {
        let old = self.current(&path);
        if old.is_some_and(|o| same_value(o, &new, kind)) {
            return;
        }
        self.steps.push(Step::Write {
            old: old.map(str::to_string),
            path,
            new,
            why: why.to_string(),
            restore_with,
            may_be_refused,
            ineffective: None,
        });
    }

    /// [`Builder::write`], noting on the write, where one is made, that it changes nothing
    /// on this host and why (`ineffective`).
    pub(super) fn write_noting(
        &mut self,
        path: String,
        new: String,
        kind: ValueKind,
        why: &str,
        ineffective: Option<&str>,
    ) {
        let before = self.steps.len();
        self.write(path, new, kind, why);
        if let (Some(note), true) = (ineffective, self.steps.len() > before) {
            if let Some(Step::Write { ineffective, .. }) = self.steps.last_mut() {
                *ineffective = Some(note.to_string());
            }
        }
    }

    /// A cgroup file write, compared by its setting's kind (CPU lists as sets,
    /// controller changes against the enabled set).
    pub(super) fn cgroup(&mut self, w: CgroupWrite, why: &str) {
        let kind = ValueKind::from(w.setting);
        self.write_full(w.path, w.value, kind, why, w.restore_with, false);
    }

    /// Give `path` this owner and mode unless it has them (a file in a directory apply
    /// creates is compared with nothing: it is new).
    pub(super) fn owner(&mut self, path: String, new: Ownership, why: &str) {
        let old = self.knobs.owner(&path).map(|o| Ownership {
            uid: o.uid,
            gid: o.gid,
            mode: o.mode,
        });
        if old == Some(new) {
            return;
        }
        let field = |o: &Ownership| format!("{}:{}:{:o}", o.uid, o.gid, o.mode);
        self.steps.push(Step::Owner {
            path,
            old: old.as_ref().map(field),
            new: field(&new),
            ownership: new,
            why: why.to_string(),
        });
    }

    /// Create a directory tame makes unless it exists; `members` as in [`Step::Mkdir`].
    pub(super) fn mkdir(&mut self, path: String, members: Option<(String, String)>, why: &str) {
        if self.knobs.has_dir(&path) {
            return;
        }
        self.steps.push(Step::Mkdir {
            path,
            members,
            why: why.to_string(),
        });
    }

    pub(super) fn create(&mut self, c: CreateGroup, why: &str) {
        self.mkdir(c.path, Some(c.members), why);
    }
}
