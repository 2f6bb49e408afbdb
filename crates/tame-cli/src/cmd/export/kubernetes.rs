//! `tame export kubelet SPEC` and `tame export performance-profile SPEC`: the Kubernetes
//! node settings that realise a spec as tame validates it on this host (or `--root`).
//! The document goes to stdout or `-o FILE`; what Kubernetes cannot express goes to stderr.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use tame_host::HostModel;
use tame_kube::Export;

use crate::cmd::partition::read_spec;
use crate::output::print_out;
use crate::{bad_input, Context};

#[derive(clap::Args)]
pub struct Common {
    /// The partition spec (TOML; see examples/), validated on this host as `tame plan` does.
    pub spec: PathBuf,
    /// Write the document to FILE instead of stdout.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// JSON instead of YAML (without the YAML's comments; the notes still go to stderr).
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args)]
pub struct KubeletArgs {
    #[command(flatten)]
    pub common: Common,
}

#[derive(clap::Args)]
pub struct ProfileArgs {
    #[command(flatten)]
    pub common: Common,
    /// metadata.name of the profile (default: tame- and the spec's file name).
    #[arg(long)]
    pub name: Option<String>,
}

pub fn run_kubelet(ctx: &Context, args: KubeletArgs) -> anyhow::Result<i32> {
    let c = args.common;
    ctx.require_root_dir()?;
    let (spec, _) = read_spec(&c.spec)?;
    let export = tame_kube::kubelet_for(&spec, &HostModel::read(&ctx.root))?;
    let header = tame_kube::kubelet::header(&c.spec.display().to_string());
    emit(&c, &export, &header, "export kubelet")
}

pub fn run_profile(ctx: &Context, args: ProfileArgs) -> anyhow::Result<i32> {
    let c = args.common;
    ctx.require_root_dir()?;
    let name = match args.name {
        Some(n) if valid_name(&n) => n,
        Some(n) => {
            return Err(bad_input(format!(
                "--name {n:?} is not a Kubernetes object name — use lower-case letters, digits and '-' (at most 63, starting and ending with a letter or digit)"
            )))
        }
        None => tame_kube::profile::object_name(
            &c.spec
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
        ),
    };
    let (spec, _) = read_spec(&c.spec)?;
    let export = tame_kube::profile_for(&spec, &HostModel::read(&ctx.root), &name)?;
    let header = tame_kube::profile::header(&c.spec.display().to_string());
    emit(&c, &export, &header, "export performance-profile")
}

/// A DNS-1123 label, as metadata.name of most objects must be.
fn valid_name(name: &str) -> bool {
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !name.is_empty()
        && name.len() <= 63
        && name.chars().all(|c| ok(c) || c == '-')
        && name.starts_with(ok)
        && name.ends_with(ok)
}

/// The document to stdout or the file; the notes to stderr.
fn emit(c: &Common, export: &Export, header: &str, command: &str) -> anyhow::Result<i32> {
    let text = if c.json {
        export.to_json()
    } else {
        export.to_yaml(header)
    };
    match &c.output {
        Some(path) => write_file(path, &text)?,
        None => print_out(&text)?,
    }
    let on_terminal = c.output.is_none() && std::io::stdout().is_terminal();
    let not_expressed = if repeat_caveats(c.json, on_terminal) {
        notes(
            command,
            &format!("what the spec says that a {} cannot express", export.kind),
            &export.not_expressed,
        )
    } else {
        String::new()
    };
    eprint!(
        "{not_expressed}{}",
        notes(command, PLAN_WARNS, &export.plan_warnings)
    );
    Ok(0)
}

/// Whether stderr repeats what the document cannot express: not where the reader already
/// sees it, as the YAML's comments, on the same terminal (JSON has no comments; a file or a
/// pipe takes the comments away from the reader's eyes).
fn repeat_caveats(json: bool, document_on_terminal: bool) -> bool {
    json || !document_on_terminal
}

/// The title of `tame plan`'s warnings about the spec among a command's notes.
pub const PLAN_WARNS: &str = "tame plan warns about the spec on this host (so for nodes like it)";

/// `tame COMMAND: TITLE:` and one `  - line` each, for stderr; nothing when there are none.
pub fn notes(command: &str, title: &str, lines: &[String]) -> String {
    if lines.is_empty() {
        return String::new();
    }
    let mut out = format!("tame {command}: {title}:\n");
    for n in lines {
        out.push_str(&format!("  - {n}\n"));
    }
    out
}

fn write_file(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).map_err(|e| {
        bad_input(format!(
            "cannot write {}: {e} — choose a path in a writable directory",
            path.display()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::{repeat_caveats, valid_name};

    #[test]
    fn caveats_go_to_stderr_only_where_the_document_does_not_show_them() {
        // YAML on the terminal: its comments already list them, once.
        assert!(!repeat_caveats(false, true));
        // YAML into a file or a pipe, and JSON anywhere: stderr is where the reader sees them.
        assert!(repeat_caveats(false, false));
        assert!(repeat_caveats(true, true));
        assert!(repeat_caveats(true, false));
    }

    #[test]
    fn object_names() {
        assert!(valid_name("tame-rt0"));
        for bad in ["", "-a", "a-", "A", "a_b", &"a".repeat(64)] {
            assert!(!valid_name(bad), "{bad}");
        }
    }
}
