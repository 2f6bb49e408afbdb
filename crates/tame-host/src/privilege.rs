//! Whether this process may change the files below a root.

use crate::Root;

/// Root may change anything. Another user may change only a tree it can write
/// (a fixture copy), never the live system, whose `/` belongs to root.
pub fn may_change(root: &Root) -> bool {
    nix::unistd::geteuid().is_root()
        || nix::unistd::access(root.base(), nix::unistd::AccessFlags::W_OK).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_we_own_may_be_changed() {
        let dir = tempfile::tempdir().unwrap();
        assert!(may_change(&Root::new(dir.path())));
    }
}
