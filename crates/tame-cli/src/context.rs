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
}
