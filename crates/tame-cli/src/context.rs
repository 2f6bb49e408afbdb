use std::path::{Path, PathBuf};

use tame_host::Root;
use tame_launch::target::Caller;

/// What every command gets, resolved once in `main`: where the host is, who asks, and
/// how the command was invoked. Commands take the journal directory from here too.
pub struct Context {
    pub root: Root,
    /// The process's user and groups: what the partition access rule looks at.
    pub caller: Caller,
    /// The exact command line, recorded in every result.
    pub command_line: Vec<String>,
}

impl Context {
    pub fn new(root: PathBuf) -> Self {
        Self {
            root: Root::new(root),
            caller: Caller::current(),
            command_line: std::env::args().collect(),
        }
    }

    /// The journal directory of every command: `--journal-dir` (`given`) as it is, else
    /// /var/lib/tame below `--root` ([`tame_host::journal::journal_dir`]).
    pub fn journal_dir(&self, given: Option<&Path>) -> PathBuf {
        tame_host::journal::journal_dir(&self.root, given)
    }

    /// `--root` must be a directory (a fixture tree); a typo would otherwise read as an empty machine.
    pub fn require_root_dir(&self) -> anyhow::Result<()> {
        let base = self.root.base();
        if base.is_dir() {
            return Ok(());
        }
        Err(crate::bad_input(format!(
            "--root {}: not a directory — it must be a host tree such as one written by `tame host capture` — check the path",
            base.display()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_journal_dir_is_below_root_unless_given() {
        let ctx = Context::new(PathBuf::from("/tmp/fixture"));
        assert_eq!(
            ctx.journal_dir(None),
            PathBuf::from("/tmp/fixture/var/lib/tame")
        );
        assert_eq!(
            ctx.journal_dir(Some(Path::new("/srv/j"))),
            PathBuf::from("/srv/j")
        );
    }
}
