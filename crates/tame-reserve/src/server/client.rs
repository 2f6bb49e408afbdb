//! Talking to `tame serve`.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use super::protocol::{ErrorKind, Request, Response, Status};
use crate::error::{failed, failed_by, invalid, io_failed, refused, Result};

/// Send one request and return the server's status, or its refusal as an error.
pub fn call(socket: &Path, request: &Request) -> Result<Status> {
    let mut stream = UnixStream::connect(socket).map_err(|e| {
        invalid(format!(
            "cannot reach the scheduling server at {}: {e} — start it (tame serve, or systemctl start tame-serve), or choose --backend deadline or cgroup",
            socket.display()
        ))
    })?;
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut text = serde_json::to_string(request).map_err(failed_by)?;
    text.push('\n');
    stream
        .write_all(text.as_bytes())
        .map_err(|e| io_failed("cannot send to the server", e))?;
    let mut line = String::new();
    BufReader::new(&stream)
        .read_line(&mut line)
        .map_err(|e| io_failed("no answer from the server", e))?;
    match serde_json::from_str::<Response>(&line).map_err(|e| {
        failed(format!(
            "the server's answer is not understood ({e}): {line:?}"
        ))
    })? {
        Response::Ok { status } => Ok(status),
        Response::Error { kind, message } => Err(match kind {
            ErrorKind::Invalid => invalid(message),
            ErrorKind::Refused => refused(message),
            ErrorKind::Failed => failed(message),
        }),
    }
}
