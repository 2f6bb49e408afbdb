use std::path::PathBuf;

use tame_host::Root;

/// What every command gets: where the host is, and how the command was invoked.
pub struct Context {
    pub root: Root,
    /// The exact command line, recorded in every result.
    pub command_line: Vec<String>,
}

impl Context {
    pub fn new(root: PathBuf) -> Self {
        Self {
            root: Root::new(root),
            command_line: std::env::args().collect(),
        }
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
