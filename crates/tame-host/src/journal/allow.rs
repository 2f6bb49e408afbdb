//! What a journal record may name. Revert acts on every path a journal holds, as
//! root, so a record naming anything but the kernel settings tame changes is
//! refused: when it is recorded (nothing is written) and when it is read back
//! (a journal altered to make revert write elsewhere).
//!
//! `tame enable` installs configuration files: those records (`install`, `link`, a
//! `mkdir` without task lists) may name only the places in [`CONFIG_ROOTS`], and the
//! kernel records only the kernel trees.

use std::path::{Component, Path};

/// The host trees tame changes: IRQ affinities, sysctls, and `/sys`, where the
/// cgroup hierarchies, resctrl, tracefs and debugfs are mounted.
pub const ALLOWED_ROOTS: &[&str] = &["/proc/irq", "/proc/sys", "/sys"];

/// Where `tame enable` installs files (each the directory itself or below it): its spec,
/// its unit and systemd drop-ins, its GRUB drop-in, and the kernel-install command line.
pub const CONFIG_ROOTS: &[&str] = &[
    "/etc/tame",
    "/etc/systemd/system",
    "/etc/systemd/system.conf.d",
    "/etc/default/grub.d",
    "/etc/kernel/cmdline",
];

/// Why `path` may not appear in a journal; `None` when it may.
pub fn path_refusal(path: &str) -> Option<String> {
    if let Some(reason) = plain_path_refusal(path) {
        return Some(reason);
    }
    let p = Path::new(path);
    let below = |root: &&str| p.starts_with(root) && p != Path::new(root);
    if !ALLOWED_ROOTS.iter().any(below) {
        return Some(format!(
            "{path} is outside the trees tame changes ({})",
            ALLOWED_ROOTS.join(", ")
        ));
    }
    None
}

/// Why `path` may not appear in a record of an installed configuration file or
/// directory; `None` when it may.
pub fn config_path_refusal(path: &str) -> Option<String> {
    if let Some(reason) = plain_path_refusal(path) {
        return Some(reason);
    }
    if !CONFIG_ROOTS
        .iter()
        .any(|root| Path::new(path).starts_with(root))
    {
        return Some(format!(
            "{path} is outside the places tame installs configuration ({})",
            CONFIG_ROOTS.join(", ")
        ));
    }
    None
}

fn plain_path_refusal(path: &str) -> Option<String> {
    if !path.starts_with('/') {
        return Some(format!("{path:?} is not an absolute path"));
    }
    if path.contains('\0') {
        return Some(format!("{path:?} contains a NUL byte"));
    }
    // Spelled plainly: no `..` (which would leave the root), no `.`, no empty component.
    if path[1..]
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Some(format!(
            "{path:?} is not a plain path (it has an empty, `.` or `..` component)"
        ));
    }
    debug_assert!(Path::new(path)
        .components()
        .all(|c| matches!(c, Component::RootDir | Component::Normal(_))));
    None
}

/// Why a file mode may not appear in an ownership record; `None` when it may.
/// Revert sets the old mode back and apply sets the new one, as root: neither may
/// hand out privilege.
pub fn mode_refusal(mode: u32) -> Option<String> {
    if mode > 0o7777 {
        Some(format!("{mode:o} is not a permission mode"))
    } else if mode & 0o6000 != 0 {
        Some(format!("mode {mode:o} is setuid or setgid"))
    } else if mode & 0o002 != 0 {
        Some(format!("mode {mode:o} lets anyone write"))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_paths_below_the_kernel_trees_pass() {
        for ok in [
            "/proc/irq/24/smp_affinity_list",
            "/proc/sys/kernel/timer_migration",
            "/sys/fs/cgroup/cpuset/tame-rt/tasks",
            "/sys/kernel/tracing/instances/tame-1/trace_clock",
        ] {
            assert_eq!(path_refusal(ok), None, "{ok}");
        }
        for bad in [
            "/sys/../etc/shadow",
            "/sys/fs/./cgroup",
            "/sys//fs",
            "/sys/fs/cgroup/",
            "sys/fs/cgroup/tasks",
            "/etc/passwd",
            "/proc/self/mem",
            "/sys",
            "/system/x",
            "/proc/irqx/1",
            "/sys/a\0b",
        ] {
            assert!(path_refusal(bad).is_some(), "{bad:?} passed");
        }
    }

    #[test]
    fn configuration_goes_only_where_enable_installs_it() {
        for ok in [
            "/etc/tame",
            "/etc/tame/partition.toml",
            "/etc/systemd/system/tame-partition.service",
            "/etc/systemd/system/sysinit.target.wants",
            "/etc/default/grub.d/tame.cfg",
            "/etc/kernel/cmdline",
        ] {
            assert_eq!(config_path_refusal(ok), None, "{ok}");
            assert!(path_refusal(ok).is_some(), "{ok} passed as a kernel file");
        }
        for bad in [
            "/etc/passwd",
            "/etc/kernel/install.d/x",
            "/etc/tame/../shadow",
            "/etc/default/grub",
            "/proc/sys/kernel/x",
            "/etc/systemd",
        ] {
            assert!(config_path_refusal(bad).is_some(), "{bad:?} passed");
        }
    }

    #[test]
    fn modes_that_hand_out_privilege_are_refused() {
        for ok in [0o644, 0o664, 0o755, 0o1755, 0o600] {
            assert_eq!(mode_refusal(ok), None, "{ok:o}");
        }
        for bad in [0o4777, 0o4755, 0o2755, 0o666, 0o777, 0o10644] {
            assert!(mode_refusal(bad).is_some(), "{bad:o} passed");
        }
    }
}
