//! Where output goes: stdout that tolerates a closed pipe (`| head`), JSON, and the
//! `--json FILE|-` choice every bench and `compare` offer.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use anyhow::Context as _;
use serde::Serialize;

use crate::bad_input;

/// Write to stdout; a closed pipe is not an error.
pub fn print_out(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// `value` as pretty JSON on stdout (innermost containers on one line).
pub fn print_json(value: &impl Serialize) -> anyhow::Result<()> {
    print_out(&(tame_bench::json::pretty(value)? + "\n"))
}

/// Replace `path` with `text` at once, readable by all (node_exporter's textfile collector
/// runs as another user): a reader sees the old text or the new, never half. Written to a
/// new file of a random name beside it (created exclusively, so never through a link
/// someone planted; `.tame-…tmp`, which the collector never reads), synced, renamed over
/// the name — a link at `path` is replaced, not followed.
pub fn replace_file(path: &Path, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".tame-")
        .suffix(".tmp")
        .tempfile_in(dir)?;
    tmp.write_all(text.as_bytes())?;
    tmp.as_file().sync_all()?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o644))?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Create an output file before anything runs, so an unwritable path is bad input.
pub fn create(path: &Path, what: &str) -> anyhow::Result<File> {
    File::create(path).map_err(|e| {
        bad_input(format!(
            "cannot write the {what} file {}: {e} — choose a path in a writable directory",
            path.display()
        ))
    })
}

/// Where `--json FILE|-` sends the JSON. The human view goes to stdout, or to stderr when
/// the JSON takes stdout.
pub struct JsonOut {
    to: Destination,
    /// What the JSON is, for messages ("JSON result").
    what: &'static str,
}

enum Destination {
    Nowhere,
    Stdout,
    File(File),
}

impl JsonOut {
    /// `arg` is the option's value; a file is created now.
    pub fn open(arg: Option<&str>, what: &'static str) -> anyhow::Result<Self> {
        let to = match arg {
            None => Destination::Nowhere,
            Some("-") => Destination::Stdout,
            Some(path) => Destination::File(create(Path::new(path), what)?),
        };
        Ok(JsonOut { to, what })
    }

    /// Write `value` as JSON where asked, then the human view where it belongs.
    pub fn emit(self, value: &impl Serialize, human: &str) -> anyhow::Result<()> {
        match self.to {
            Destination::Nowhere => print_out(human),
            Destination::Stdout => {
                print_json(value)?;
                eprint!("{human}");
                Ok(())
            }
            Destination::File(mut f) => {
                let json = tame_bench::json::pretty(value)?;
                writeln!(f, "{json}").with_context(|| format!("cannot write the {}", self.what))?;
                print_out(human)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unwritable_json_path_is_bad_input_before_anything_runs() {
        let e = JsonOut::open(Some("/nonexistent/dir/r.json"), "JSON result")
            .err()
            .unwrap();
        assert!(crate::error::is_bad_input(&e));
        assert!(
            e.to_string()
                .starts_with("cannot write the JSON result file /nonexistent/dir/r.json: "),
            "{e}"
        );
    }

    #[test]
    fn the_json_file_gets_the_value() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        let out = JsonOut::open(Some(path.to_str().unwrap()), "JSON result").unwrap();
        out.emit(&serde_json::json!({"bench": "cycle"}), "")
            .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "{\n  \"bench\": \"cycle\"\n}\n");
    }
}
