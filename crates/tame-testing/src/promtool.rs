//! What `promtool check metrics` (Debian package prometheus) says of an exposition: the
//! format's own checker and linter, which the tests run on every export and scrape.

use std::io::{self, Write};
use std::process::{Command, Stdio};

/// `Ok(())` when promtool accepts `text` without a word (no error, no lint warning),
/// else what it said; `Err` when promtool cannot be run.
pub fn check_metrics(text: &str) -> io::Result<Result<(), String>> {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let mut stdin = child.stdin.take().expect("stdin is piped");
    // A write error means promtool stopped reading: its answer below says why.
    let _ = stdin.write_all(text.as_bytes());
    drop(stdin);
    let out = child.wait_with_output()?;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(if out.status.success() && said.trim().is_empty() {
        Ok(())
    } else {
        Err(format!("promtool check metrics: {}: {said}", out.status))
    })
}
