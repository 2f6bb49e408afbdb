//! The text of every file `tame enable` installs: pure, so the goldens pin it.

use tame_host::kernel::Cmdline;
use tame_host::CpuList;

use crate::plan::BootParameter;

/// The unit as shipped in contrib/systemd (one source for `make install` and enable).
const UNIT_TEMPLATE: &str = include_str!("../../../../contrib/systemd/tame-partition.service");
/// The binary the shipped unit names; enable puts the tame that ran it there.
const SHIPPED_BINARY: &str = "/usr/local/bin/tame";

/// The first line of every file enable writes: whose it is and how it goes away.
fn header(comment: &str) -> String {
    format!(
        "{comment} Written by `tame enable` (journaled); `tame disable` removes it. Do not edit.\n"
    )
}

pub(super) fn unit(binary: &str) -> String {
    let body: String = UNIT_TEMPLATE
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.replace(SHIPPED_BINARY, binary) + "\n")
        .collect();
    header("#") + &body
}

/// systemd itself and everything it starts later: `CPUAffinity=` (cgroup v1 or v2).
pub(super) fn manager_affinity(system: &CpuList) -> String {
    format!(
        "{}[Manager]\nCPUAffinity={}\n",
        header("#"),
        cpu_words(system)
    )
}

/// A slice's or scope's cpuset on cgroup v2: `AllowedCPUs=`.
pub(super) fn allowed_cpus(section: &str, system: &CpuList) -> String {
    format!(
        "{}[{section}]\nAllowedCPUs={}\n",
        header("#"),
        cpu_words(system)
    )
}

/// systemd reads CPU lists as words ("0-3 8"); the kernel's commas read too, but words
/// are what its documentation shows.
fn cpu_words(cpus: &CpuList) -> String {
    cpus.to_string().replace(',', " ")
}

/// A GRUB drop-in: appended to the normal entries' command line (not recovery's, so a
/// recovery boot is never isolated).
pub(super) fn grub(parameters: &[BootParameter]) -> String {
    let words: Vec<&str> = parameters.iter().map(|p| p.parameter.as_str()).collect();
    format!(
        "{}GRUB_CMDLINE_LINUX_DEFAULT=\"$GRUB_CMDLINE_LINUX_DEFAULT {}\"\n",
        header("#"),
        words.join(" ")
    )
}

/// /etc/kernel/cmdline: the whole command line kernel-install gives new entries (no
/// comments allowed). The running one, less what the boot loader adds itself, plus ours.
pub(super) fn kernel_cmdline(running: &Cmdline, parameters: &[BootParameter]) -> String {
    let keys: Vec<&str> = parameters
        .iter()
        .map(|p| p.parameter.split('=').next().unwrap_or(&p.parameter))
        .collect();
    let mut words: Vec<String> = running
        .params
        .iter()
        .filter(|p| !matches!(p.key.as_str(), "BOOT_IMAGE" | "initrd"))
        .filter(|p| !keys.contains(&p.key.as_str()))
        .map(|p| match &p.value {
            Some(v) if v.contains(' ') => format!("{}=\"{v}\"", p.key),
            Some(v) => format!("{}={v}", p.key),
            None => p.key.clone(),
        })
        .collect();
    words.extend(parameters.iter().map(|p| p.parameter.clone()));
    if !running.init_args.is_empty() {
        words.push("--".to_string());
        words.extend(running.init_args.iter().cloned());
    }
    words.join(" ") + "\n"
}
