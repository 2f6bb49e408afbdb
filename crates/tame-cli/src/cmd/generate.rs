//! `tame completions SHELL` and the hidden `tame man --out DIR`: shell completions and
//! manual pages generated from the clap definitions the binary parses its arguments
//! with, so neither can drift from the program. `make install` runs both.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::CommandFactory;

use crate::output::print_out;
use crate::{bad_input, Context};

/// The shells `make install` installs completions for.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

impl From<Shell> for clap_complete::Shell {
    fn from(shell: Shell) -> Self {
        match shell {
            Shell::Bash => clap_complete::Shell::Bash,
            Shell::Zsh => clap_complete::Shell::Zsh,
            Shell::Fish => clap_complete::Shell::Fish,
        }
    }
}

#[derive(clap::Args)]
#[command(
    after_help = "Install: tame completions bash > ~/.local/share/bash-completion/completions/tame \
(zsh: a file _tame in a directory of $fpath; fish: ~/.config/fish/completions/tame.fish). \
`make install` installs all three."
)]
pub struct CompletionsArgs {
    /// The shell to complete in.
    #[arg(value_enum)]
    shell: Shell,
}

#[derive(clap::Args)]
pub struct ManArgs {
    /// Directory to write the pages into (created when missing): tame.1, tame-bench.1, tame-bench-cycle.1, …
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

/// The name the completions complete: the installed binary's.
const BIN: &str = "tame";

pub fn completions(_ctx: &Context, args: CompletionsArgs) -> anyhow::Result<i32> {
    print_out(&completion_script(args.shell)?)?;
    Ok(0)
}

/// The completion script for `shell`. Rendered into memory first: clap_complete panics
/// when its writer fails, and stdout may be a closed pipe.
pub fn completion_script(shell: Shell) -> anyhow::Result<String> {
    let mut script = Vec::new();
    clap_complete::generate(
        clap_complete::Shell::from(shell),
        &mut without_hidden_commands(crate::Cli::command()),
        BIN,
        &mut script,
    );
    Ok(String::from_utf8(script)?)
}

/// `cmd` without its hidden subcommands: clap_complete offers hidden subcommands (`man`)
/// like any other, and clap cannot remove one, so the top level is rebuilt from the
/// visible parts. Only what completion reads is carried over: arguments, subcommands,
/// about and version.
fn without_hidden_commands(cmd: clap::Command) -> clap::Command {
    let mut visible = clap::Command::new(BIN)
        .version(env!("CARGO_PKG_VERSION"))
        .subcommand_required(true)
        .args(cmd.get_arguments().cloned())
        .subcommands(cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
    if let Some(about) = cmd.get_about() {
        visible = visible.about(about.clone());
    }
    visible
}

pub fn man(_ctx: &Context, args: ManArgs) -> anyhow::Result<i32> {
    let pages = write_man_pages(&args.out)?;
    print_out(&format!(
        "wrote {pages} manual pages into {}\n",
        args.out.display()
    ))?;
    Ok(0)
}

/// One page per visible command and subcommand (hidden ones, such as `man`, get none);
/// returns how many were written.
pub fn write_man_pages(dir: &Path) -> anyhow::Result<usize> {
    std::fs::create_dir_all(dir).map_err(|e| {
        bad_input(format!(
            "cannot create the manual page directory {}: {e} — give a writable directory",
            dir.display()
        ))
    })?;
    let before = count_pages(dir)?;
    // clap_mangen walks the tree itself and names each page after the command path
    // (tame-bench-cycle.1); building the command first would add `help` pages.
    clap_mangen::generate_to(crate::Cli::command(), dir)
        .with_context(|| format!("cannot write the manual pages into {}", dir.display()))?;
    Ok(count_pages(dir)? - before)
}

fn count_pages(dir: &Path) -> anyhow::Result<usize> {
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))?;
    Ok(entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".1"))
        .count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_visible_command_gets_a_page_and_hidden_ones_none() {
        let dir = tempfile::tempdir().unwrap();
        let n = write_man_pages(dir.path()).unwrap();
        for page in [
            "tame.1",
            "tame-bench.1",
            "tame-bench-cycle.1",
            "tame-completions.1",
        ] {
            assert!(dir.path().join(page).is_file(), "{page} missing");
        }
        assert!(!dir.path().join("tame-man.1").exists());
        assert!(!dir.path().join("tame-help.1").exists());
        assert_eq!(n, count_pages(dir.path()).unwrap());
    }

    #[test]
    fn an_uncreatable_directory_is_bad_input() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "").unwrap();
        let e = write_man_pages(&file.join("sub")).unwrap_err();
        assert!(crate::error::is_bad_input(&e), "{e}");
    }

    #[test]
    fn no_script_offers_a_hidden_command() {
        let offered = |shell| completion_script(shell).unwrap();
        let bash = offered(Shell::Bash);
        assert!(
            bash.contains(" completions help"),
            "the visible ones are there"
        );
        assert!(!bash.contains(" man "), "bash offers `man`");
        assert!(!offered(Shell::Zsh).contains("'man:"), "zsh offers `man`");
        assert!(
            !offered(Shell::Fish).contains("-a \"man\""),
            "fish offers `man`"
        );
        // The global option is still offered.
        assert!(bash.contains("--root"));
    }

    #[test]
    fn the_scripts_complete_the_tame_binary() {
        assert!(completion_script(Shell::Bash)
            .unwrap()
            .contains("complete -F _tame"));
        assert!(completion_script(Shell::Zsh)
            .unwrap()
            .starts_with("#compdef tame"));
        assert!(completion_script(Shell::Fish)
            .unwrap()
            .contains("complete -c tame"));
    }
}
