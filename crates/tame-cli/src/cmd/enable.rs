//! `tame enable SPEC` / `tame disable`: a partition kept across reboots (see
//! [`tame_partition::enable`]). The library plans and journals the files; this module
//! also runs what makes the boot loader and systemd read them, on the live system only.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use tame_launch::spawn::Spawn;
use tame_launch::LaunchError;

use tame_host::HostModel;
use tame_partition::enable::{self, BootLoader, EnableOptions, EnableReport};

use crate::cmd::partition::read_spec;
use crate::output::{print_json, print_out};
use crate::Context;

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum BootArg {
    /// A drop-in in /etc/default/grub.d, then update-grub.
    Grub,
    /// /etc/kernel/cmdline (kernel-install, systemd-boot); only when no such file exists.
    KernelCmdline,
    /// No boot parameters written: the report lists them for your boot loader.
    None,
}

#[derive(clap::Args)]
pub struct EnableArgs {
    /// The partition spec (TOML; see examples/), installed as /etc/tame/partition.toml.
    pub spec: PathBuf,
    /// Where the boot parameters go (default: GRUB where /etc/default/grub exists, else
    /// kernel-install's /etc/kernel/cmdline where kernel-install makes the boot entries,
    /// else none).
    #[arg(long, value_enum, value_name = "LOADER")]
    pub boot: Option<BootArg>,
    /// Show every file with its content, write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Where the journals live (default /var/lib/tame below --root; enable's is its
    /// `enabled` subdirectory).
    #[arg(long, value_name = "DIR")]
    pub journal_dir: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub struct DisableArgs {
    /// Where the journals live (default /var/lib/tame below --root).
    #[arg(long, value_name = "DIR")]
    pub journal_dir: Option<PathBuf>,
}

/// The binary the unit runs: this one, resolved (a symlink in PATH may move).
fn this_binary() -> String {
    std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "/usr/local/bin/tame".into())
}

pub fn run_enable(ctx: &Context, args: EnableArgs) -> anyhow::Result<i32> {
    ctx.require_root_dir()?;
    let (spec, text) = read_spec(&args.spec)?;
    let dir = ctx.journal_dir(args.journal_dir.as_deref());
    let options = EnableOptions {
        boot: args.boot.map(|b| match b {
            BootArg::Grub => BootLoader::Grub,
            BootArg::KernelCmdline => BootLoader::KernelCmdline,
            BootArg::None => BootLoader::None,
        }),
        binary: this_binary(),
    };
    if !args.dry_run && !tame_host::privilege::may_change(&ctx.root) {
        return Err(enable::EnableError::NotRoot.into());
    }
    let host = HostModel::read(&ctx.root);
    let mut report = enable::plan(&ctx.root, &host, &spec, &text, &options, &dir)?;
    let live = ctx.root.base() == Path::new("/");
    if args.dry_run {
        report.dry_run = true;
        return show(&report, &args.spec, &[], args.json).map(|()| 0);
    }
    enable::enable(&ctx.root, &report, &dir)?;
    let mut after = Vec::new();
    let mut code = 0;
    if !report.unchanged {
        if !live {
            after.push("not run: --root names a host tree, not this machine".to_string());
        } else {
            if report.boot.loader == BootLoader::Grub {
                code = regenerate_grub(&mut after);
            }
            reload_systemd(&mut after);
        }
    }
    show(&report, &args.spec, &after, args.json)?;
    Ok(code)
}

pub fn run_disable(ctx: &Context, args: DisableArgs) -> anyhow::Result<i32> {
    ctx.require_root_dir()?;
    let dir = ctx.journal_dir(args.journal_dir.as_deref());
    let done = enable::disable(&ctx.root, &dir)?;
    let mut o = String::new();
    if done.revert.nothing_to_revert {
        let _ = writeln!(
            o,
            "Nothing enabled (no journal at {}).",
            tame_host::journal::journal_path(&enable::journal_dir(&dir)).display()
        );
        print_out(&o)?;
        return Ok(0);
    }
    let _ = writeln!(o, "Disabled: the partition is no longer applied at boot.");
    for path in &done.removed {
        let _ = writeln!(o, "  removed {path}");
    }
    for line in done.revert.not_restored_lines() {
        let _ = writeln!(o, "  not removed: {line}");
    }
    let mut code = if done.revert.not_restored.is_empty() {
        0
    } else {
        1
    };
    let mut after = Vec::new();
    if ctx.root.base() == Path::new("/") {
        if done.loader == Some(BootLoader::Grub) {
            code = code.max(regenerate_grub(&mut after));
        }
        reload_systemd(&mut after);
    }
    for line in &after {
        let _ = writeln!(o, "  {line}");
    }
    if done.boot_file.is_some() {
        let _ = writeln!(
            o,
            "The running kernel keeps its boot parameters until the next reboot; the partition applied now stays until `tame revert`."
        );
    }
    print_out(&o)?;
    Ok(code)
}

/// Run the first of `commands` that exists; `None` when none does.
fn run_first(commands: &[&[&str]]) -> Option<(String, Result<std::process::Output, LaunchError>)> {
    let found = commands
        .iter()
        .find(|c| tame_launch::spawn::resolve(c[0]).is_some())?;
    let shown = found.join(" ");
    Some((shown, Spawn::program(found[0]).args(&found[1..]).output()))
}

/// update-grub (Debian), else grub-mkconfig; 1 when it failed, so the user runs it.
fn regenerate_grub(after: &mut Vec<String>) -> i32 {
    let ran = run_first(&[
        &["update-grub"],
        &["grub-mkconfig", "-o", "/boot/grub/grub.cfg"],
        &["grub2-mkconfig", "-o", "/boot/grub2/grub.cfg"],
    ]);
    match ran {
        None => {
            after.push("update-grub not found: run your distribution's GRUB update (grub-mkconfig -o …) so the next boot reads /etc/default/grub.d/tame.cfg".into());
            1
        }
        Some((shown, Ok(out))) if out.status.success() => {
            after.push(format!("ran {shown}"));
            0
        }
        Some((shown, Ok(out))) => {
            after.push(format!(
                "{shown} failed ({}): {} — fix it and run it again",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
            1
        }
        Some((shown, Err(e))) => {
            after.push(format!("cannot run {shown}: {e} — run it yourself"));
            1
        }
    }
}

/// `systemctl daemon-reload` where systemd is the init system (it reads units and
/// drop-ins only then); elsewhere say so.
fn reload_systemd(after: &mut Vec<String>) {
    if !tame_host::environment::systemd_running() {
        after.push("systemd is not the init system here: nothing reloaded (the files take effect where systemd boots this machine)".into());
        return;
    }
    match Spawn::program("systemctl").arg("daemon-reload").output() {
        Ok(o) if o.status.success() => after.push("ran systemctl daemon-reload".into()),
        Ok(o) => after.push(format!(
            "systemctl daemon-reload failed ({}): run it yourself",
            o.status
        )),
        Err(e) => after.push(format!(
            "cannot run systemctl daemon-reload: {e} — run it yourself"
        )),
    }
}

fn show(report: &EnableReport, spec: &Path, after: &[String], json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(report);
    }
    print_out(&human(report, spec, after))
}

/// The report as text: what is (or would be) written and why, the boot parameters, and
/// what was run afterwards.
pub fn human(r: &EnableReport, spec: &Path, after: &[String]) -> String {
    let mut o = String::new();
    let verb = if r.dry_run { "would write" } else { "wrote" };
    if r.unchanged {
        let _ = writeln!(
            o,
            "Already enabled with this spec ({}): nothing to write.",
            r.journal
        );
    } else {
        let _ = writeln!(
            o,
            "tame enable {}: {verb} (journaled in {}; `tame disable` removes each):",
            spec.display(),
            r.journal
        );
        for d in &r.dirs {
            let _ = writeln!(o, "  {d}/ (new directory)");
        }
        for f in &r.files {
            let _ = writeln!(o, "  {} — {}", f.path, f.why);
        }
        for l in &r.links {
            let _ = writeln!(o, "  {} → {} — {}", l.path, l.target, l.why);
        }
    }
    let b = &r.boot;
    let _ = writeln!(o, "\nBoot parameters ({}: {}):", b.loader.name(), b.chosen);
    for p in &b.parameters {
        let now = if b.on_running_kernel.contains(&p.parameter) {
            " (the running kernel has it)"
        } else {
            ""
        };
        let _ = writeln!(o, "  {} — {}{now}", p.parameter, p.why);
    }
    let pending = b.parameters.len() > b.on_running_kernel.len();
    match (&b.file, pending) {
        (_, false) => {
            let _ = writeln!(o, "  the running kernel carries them all");
        }
        (Some(file), true) => {
            let then = b
                .then
                .as_ref()
                .map(|c| format!(", then {}", c.join(" ")))
                .unwrap_or_default();
            let _ = writeln!(o, "  → {file}{then}; active after a reboot");
        }
        (None, true) => {
            let _ = writeln!(
                o,
                "  → not written: add them to your boot loader's kernel command line yourself"
            );
        }
    }
    if !binary_installed(&r.binary) {
        let _ = writeln!(
            o,
            "\nThe unit runs this tame from a build tree: install it (make install) and enable again, or the boot's apply fails once that file is gone."
        );
    }
    if !after.is_empty() {
        let _ = writeln!(o);
        for line in after {
            let _ = writeln!(o, "{line}");
        }
    }
    if r.dry_run {
        for f in &r.files {
            let _ = write!(o, "\n--- {} (mode {})\n{}", f.path, f.mode, f.content);
        }
    }
    o
}

/// The unit runs a binary in a system directory (not a build tree).
fn binary_installed(binary: &str) -> bool {
    ["/usr/", "/bin/", "/sbin/", "/opt/"]
        .iter()
        .any(|p| binary.starts_with(p))
}
