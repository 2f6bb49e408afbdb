//! Helpers shared by the integration tests (the modules of `tests/it`).
#![allow(dead_code)]

use std::process::{Command, Stdio};

/// A unique segment name; the segment is unlinked when the guard drops, even when
/// the test fails.
pub struct NameGuard(pub String);

impl NameGuard {
    pub fn new(tag: &str) -> NameGuard {
        NameGuard(format!("test-{}-{tag}", std::process::id()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn path(&self) -> std::path::PathBuf {
        std::path::PathBuf::from(format!("/dev/shm/tame.{}", self.0))
    }
}

impl Drop for NameGuard {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.path());
    }
}

/// Runs the child-side test `test` of this test binary in a child process, with
/// `env`. A child side is an `#[ignore]`d test (so alone, or with the rest, it never
/// counts as a pass) that reads its instructions with [`child_env`]; the harness's
/// output is echoed here, and [`ChildTest::wait`] fails when it ran no test.
pub fn spawn_child(test: &str, env: &[(&str, String)]) -> ChildTest {
    spawn_child_as(test, env, None)
}

/// As [`spawn_child`], running the child as user `uid` when given.
pub fn spawn_child_as(test: &str, env: &[(&str, String)], uid: Option<u32>) -> ChildTest {
    let mut command = child_command(test, env);
    if let Some(uid) = uid {
        use std::os::unix::process::CommandExt;
        command.uid(uid);
    }
    let mut child = command
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn child test process");
    let stdout = child.stdout.take().expect("piped stdout");
    let echo = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut ran_one = false;
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            ran_one |= line.contains("running 1 test");
            println!("child: {line}");
        }
        ran_one
    });
    ChildTest {
        name: test.to_string(),
        child,
        echo: Some(echo),
    }
}

/// A child-side test running in a child process (see [`spawn_child`]).
pub struct ChildTest {
    name: String,
    child: std::process::Child,
    echo: Option<std::thread::JoinHandle<bool>>,
}

impl ChildTest {
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the child; panics when its harness ran no test (the name matched
    /// none: a renamed or un-ignored child side would otherwise pass doing nothing).
    #[track_caller]
    pub fn wait(mut self) -> std::process::ExitStatus {
        let status = self.child.wait().expect("wait for child test process");
        let ran_one = self
            .echo
            .take()
            .map(|echo| echo.join().unwrap_or(false))
            .unwrap_or(false);
        assert!(
            ran_one,
            "the child test {} did not run (nothing matched `{} --exact --ignored`; is it #[ignore]d and named so?)",
            self.name, self.name
        );
        status
    }
}

/// The command that runs the child-side test `test` of this test binary (see
/// [`spawn_child`]), for callers that read its output, add a wrapper or a `pre_exec`;
/// they check what the child printed, which a child that did not run cannot print.
pub fn child_command(test: &str, env: &[(&str, String)]) -> Command {
    let mut command = Command::new(std::env::current_exe().expect("test binary path"));
    command.args(child_args(test)).stdin(Stdio::null());
    for (key, value) in env {
        command.env(key, value);
    }
    command
}

/// The name libtest gives test `name` of the module `module_path` (pass `module_path!()`):
/// the integration tests are one binary (`tests/it`), its former files modules, so a
/// test's name is `MODULE::NAME`. tame_testing::serial::test_name's rule, which this
/// crate cannot depend on.
pub fn test_name(module_path: &str, name: &str) -> String {
    match module_path.split_once("::") {
        Some((_, inner)) => format!("{inner}::{name}"),
        None => name.to_string(),
    }
}

/// The arguments that make this test binary run exactly the ignored test `test`.
pub fn child_args(test: &str) -> [&str; 5] {
    [
        test,
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ]
}

/// A child side's instruction `var`; panics when unset: a child side runs only as the
/// child of its parent test (not under `--include-ignored`).
#[track_caller]
pub fn child_env(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| {
        panic!("a child-side test runs only as its parent's child process ({var} unset)")
    })
}

/// Whether this process may do what a privileged test, or a privileged part of one,
/// needs (root). Otherwise says it is skipped — and fails the test under CI=true, where
/// a skip must not pass.
pub fn privileged(what: &str) -> bool {
    // SAFETY: geteuid takes no arguments and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    skip(&format!("{what} needs root"));
    false
}

/// Says a test is skipped because `why`; fails it instead under `CI=true` (the rule
/// of tame_testing::require, which this crate cannot depend on).
pub fn skip(why: &str) {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{why}, and CI=true: a skipped test must not pass there"
    );
    println!("skipped: {why}");
}

/// Makes a FIFO at `path`, as any local user could under a segment's name in /dev/shm.
pub fn plant_fifo(path: &std::path::Path) {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a NUL-terminated path that outlives the call.
    let rc = unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) };
    assert_eq!(
        rc,
        0,
        "mkfifo {}: {}",
        path.display(),
        std::io::Error::last_os_error()
    );
}

/// Runs `open` (an open of the FIFO at `fifo`) on a thread and returns its result, or
/// fails the test when it has not returned within 5 s: a hang becomes a failure, not a
/// stuck suite. Before failing it opens the FIFO's write end, which lets an open that
/// blocks for want of a writer return, so the thread does not outlive the test blocked.
#[track_caller]
pub fn opens_promptly<T: Send + 'static>(
    fifo: &std::path::Path,
    open: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(open());
    });
    match rx.recv_timeout(std::time::Duration::from_secs(5)) {
        Ok(result) => result,
        Err(_) => {
            use std::os::unix::fs::OpenOptionsExt;
            let _writer = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(fifo);
            let _ = rx.recv_timeout(std::time::Duration::from_secs(5));
            panic!(
                "opening the FIFO {} still blocked after 5 s: a planted FIFO hangs the open",
                fifo.display()
            );
        }
    }
}
