//! The chromium process: started headless with a fresh profile, and always ended.
//!
//! Every process chromium starts must end with it and the profile must go, even when
//! the test that started it fails (a panic unwinds through [`Chromium`]'s `Drop`):
//! chromium runs in a process group of its own, which `Drop` kills; its crash handlers
//! (`chrome_crashpad_handler`) leave that group with a session of their own, so `Drop`
//! also kills every process whose command line names this instance's directory — each
//! of them does, through `--user-data-dir` or the crash database kept below it.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;

use super::BrowserError;

/// The program: Debian's package `chromium` (scripts/install-test-deps.sh installs it).
pub const PROGRAM: &str = "chromium";

/// The flags chromium runs with, besides the profile directory and the DevTools port.
///
/// `--headless` draws without a display; `--no-sandbox` because the tests run as root,
/// where chromium refuses to start sandboxed; `--disable-gpu` draws in software, the same
/// pixels on every machine. The rest keep chromium from calling home on its own: on an
/// offline machine its background connections (field trials, component and safe-browsing
/// updates, sync, QUIC probes) are refused in bulk and fill its log, and they would count
/// as requests a page did not make.
pub const FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-crash-reporter",
    "--disable-breakpad",
    "--no-default-browser-check",
    "--hide-scrollbars",
    "--mute-audio",
];

/// Lines of chromium's stderr kept to explain a failed start.
const STDERR_LINES_KEPT: usize = 40;

/// How long `Drop` waits for the processes it killed to go.
const EXIT_WAIT: Duration = Duration::from_secs(10);

/// A running chromium, killed with every process it started when dropped.
pub struct Chromium {
    child: Child,
    /// Profile, configuration and cache of this instance; removed after the kill.
    dir: Option<tempfile::TempDir>,
    /// `ws://127.0.0.1:PORT/devtools/browser/ID`: the browser's DevTools endpoint.
    pub websocket_url: String,
    stderr_tail: Arc<Mutex<Vec<String>>>,
}

impl Chromium {
    /// Start chromium and wait up to `timeout` for its DevTools endpoint.
    pub fn launch(timeout: Duration) -> Result<Chromium, BrowserError> {
        let program = crate::require::find_program(PROGRAM).ok_or_else(|| {
            BrowserError::new(format!(
                "{PROGRAM} not found in PATH: run scripts/install-test-deps.sh (as root) or \
                 'apt-get install {PROGRAM}'"
            ))
        })?;
        let dir = tempfile::Builder::new()
            .prefix("tame-chromium-")
            .tempdir()
            .map_err(|e| BrowserError::new(format!("cannot make chromium's profile dir: {e}")))?;
        let mut command = Command::new(&program);
        command
            .args(FLAGS)
            .arg(format!(
                "--user-data-dir={}",
                dir.path().join("profile").display()
            ))
            // Port 0: the kernel picks a free one and chromium prints it on stderr, so
            // tests running at once never collide.
            .arg("--remote-debugging-port=0")
            .arg("--remote-debugging-address=127.0.0.1")
            .arg("about:blank")
            // Its crash database and caches follow $XDG_CONFIG_HOME and $XDG_CACHE_HOME,
            // not --user-data-dir: keep them in this instance's directory too.
            .env("XDG_CONFIG_HOME", dir.path().join("config"))
            .env("XDG_CACHE_HOME", dir.path().join("cache"))
            .env("HOME", dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = command
            .spawn()
            .map_err(|e| BrowserError::new(format!("cannot start {}: {e}", program.display())))?;
        let stderr = child.stderr.take().expect("stderr is piped");
        let stderr_tail = Arc::new(Mutex::new(Vec::new()));
        let (url_tx, url_rx) = mpsc::channel();
        let tail = Arc::clone(&stderr_tail);
        // Reads stderr to its end (chromium blocks on a full pipe), keeping the last lines.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("DevTools listening on ") {
                    let _ = url_tx.send(url.trim().to_string());
                }
                let mut tail = tail.lock().unwrap_or_else(|e| e.into_inner());
                if tail.len() == STDERR_LINES_KEPT {
                    tail.remove(0);
                }
                tail.push(line);
            }
        });
        // From here on `Drop` ends chromium whatever happens.
        let mut chromium = Chromium {
            child,
            dir: Some(dir),
            websocket_url: String::new(),
            stderr_tail,
        };
        match url_rx.recv_timeout(timeout) {
            Ok(url) => {
                chromium.websocket_url = url;
                Ok(chromium)
            }
            Err(_) => {
                let state = match chromium.child.try_wait() {
                    Ok(Some(status)) => format!("it exited ({status})"),
                    _ => format!("no DevTools endpoint within {timeout:?}"),
                };
                Err(BrowserError::new(format!(
                    "{PROGRAM} did not start: {state}; its stderr ends:\n{}",
                    chromium.stderr_tail()
                )))
            }
        }
    }

    /// The last lines chromium wrote on stderr, for error messages.
    pub fn stderr_tail(&self) -> String {
        self.stderr_tail
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .join("\n")
    }

    /// This instance's directory (profile, configuration, cache).
    pub fn dir(&self) -> &Path {
        self.dir.as_ref().expect("kept until drop").path()
    }
}

impl Drop for Chromium {
    fn drop(&mut self) {
        let dir = self.dir().to_path_buf();
        // The group first (the browser, its zygotes, renderers and utilities), then
        // whatever left the group but still names our directory (the crash handlers).
        let pgid = Pid::from_raw(self.child.id() as i32);
        let _ = killpg(pgid, Signal::SIGKILL);
        let _ = self.child.wait();
        let start = Instant::now();
        loop {
            let left = processes_naming(&dir);
            if left.is_empty() {
                break;
            }
            if start.elapsed() > EXIT_WAIT {
                // Never panic in drop (it would abort a test already unwinding): say it.
                eprintln!("chromium processes {left:?} outlived a kill of {EXIT_WAIT:?}");
                break;
            }
            for pid in left {
                let _ = kill(pid, Signal::SIGKILL);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Some(dir) = self.dir.take() {
            if let Err(e) = dir.close() {
                eprintln!("cannot remove chromium's profile dir: {e}");
            }
        }
    }
}

/// Processes whose command line contains `dir`: those of one chromium instance only,
/// since each instance has a directory of its own. Zombies (empty command line) are
/// left to their parents.
pub fn processes_naming(dir: &Path) -> Vec<Pid> {
    let needle = dir.as_os_str().as_encoded_bytes();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid as u32 != std::process::id())
        .filter(|pid| {
            let cmdline = std::fs::read(PathBuf::from(format!("/proc/{pid}/cmdline")));
            cmdline.is_ok_and(|c| c.windows(needle.len()).any(|w| w == needle))
        })
        .map(Pid::from_raw)
        .collect()
}
