//! `tame serve --metrics`: a real server on a socket in a temporary directory, its figures
//! scraped over HTTP before, during and after one reservation of a child process this test
//! starts (admitted by a policy of the test's own), and one refused request; then stopped
//! with SIGTERM. It must leave nothing behind: no process (the server, its watchdog, the
//! child), no listening port, no cgroup, nothing in its directory but the policy it was
//! given and the lock file, and nothing new in /run/tame or the journal directory
//! (/var/lib/tame). Needs root (the
//! watchdog and the scheduler threads run at SCHED_FIFO). Non-loopback addresses are
//! refused without root.

use crate::common::{expect_bad_input, have_program, is_root, last_cpu, require, tame, Killed};

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[test]
fn a_non_loopback_address_is_refused_unless_asked() {
    let _machine = tame_testing::serial::module(module_path!());
    expect_bad_input(
        &[
            "serve",
            "--socket",
            "/nonexistent/s",
            "--metrics",
            "0.0.0.0:9464",
        ],
        "add --metrics-remote",
    );
    expect_bad_input(
        &["serve", "--socket", "/nonexistent/s", "--metrics", "nine"],
        "not an address",
    );
}

fn scrape(addr: SocketAddr) -> Option<String> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let (head, body) = out.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200 OK")
        .then(|| body.to_string())
}

fn value(text: &str, series: &str) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let (s, v) = l.rsplit_once(' ')?;
        (s == series).then(|| v.parse().unwrap())
    })
}

/// Entries of a directory, sorted (empty when it does not exist).
fn listing(dir: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid, 0) == 0 }
}

fn promtool_accepts(text: &str) {
    if !require(
        have_program("promtool"),
        "promtool (apt-get install prometheus)",
    ) {
        return;
    }
    if let Err(said) = tame_testing::promtool::check_metrics(text).unwrap() {
        panic!("{said}\n{text}");
    }
}

#[test]
fn serves_its_live_figures_and_leaves_nothing_behind() {
    let _machine = tame_testing::serial::module(module_path!());
    if !require(
        is_root(),
        "root (tame serve runs its threads at SCHED_FIFO)",
    ) {
        return;
    }
    let cgroups_before = (listing("/sys/fs/cgroup"), listing("/sys/fs/cgroup/cpuset"));
    // Where a server could leave files outside its socket's directory: tame's run-time
    // directory and the journal directory (the server reads the journal, never writes it).
    let host_files = || {
        (
            listing("/run/tame"),
            listing(tame_host::journal::DEFAULT_JOURNAL_DIR),
        )
    };
    let host_files_before = host_files();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("s");
    let cpu = last_cpu();
    let policy = dir.path().join("serve.toml");
    std::fs::write(
        &policy,
        format!(
            "[[rule]]\nname = \"test\"\nusers = [\"root\"]\ncpus = \"{cpu}\"\nmax_share = \"50%\"\nmax_period = \"1s\"\nmax_slice = \"100ms\"\n"
        ),
    )
    .unwrap();
    let (s, p) = (socket.display().to_string(), policy.display().to_string());
    let (mut server, _rx, said) =
        serve_until_listening(&["--socket", &s, "--policy", &p, "--metrics", "127.0.0.1:0"]);
    let (mut addr, mut watchdog) = (None, None);
    for line in &said {
        if let Some(rest) = line.split("watchdog pid ").nth(1) {
            watchdog = rest.split(' ').next().and_then(|p| p.parse::<i32>().ok());
        }
        if let Some(rest) = line.strip_prefix("tame serve: metrics at http://") {
            addr = rest.strip_suffix("/metrics").map(|a| a.parse().unwrap());
        }
    }
    let (addr, watchdog): (SocketAddr, i32) = (addr.unwrap(), watchdog.unwrap());
    assert!(addr.ip().is_loopback() && addr.port() != 0, "{addr}");

    // The watchdog process reports itself up a moment after the server says where it
    // listens: on a loaded machine the first scrape can come before that.
    let started = Instant::now();
    let idle = loop {
        let page = scrape(addr).expect("GET /metrics answers 200");
        if value(&page, "tame_serve_watchdog_up") == Some(1.0)
            || started.elapsed() > Duration::from_secs(5)
        {
            break page;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    promtool_accepts(&idle);
    assert_eq!(value(&idle, "tame_serve_reservations"), Some(0.0), "{idle}");
    assert_eq!(value(&idle, "tame_serve_watchdog_up"), Some(1.0));
    assert_eq!(value(&idle, "tame_serve_requests_total"), Some(0.0));
    assert_eq!(value(&idle, "tame_serve_cap_ratio"), Some(0.9));
    assert!(value(&idle, "tame_serve_uptime_seconds").unwrap() > 0.0);

    // A request that is not one is answered, and counted as invalid.
    let mut peer = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    peer.write_all(b"not json\n").unwrap();
    let mut answer = String::new();
    let _ = peer.read_to_string(&mut answer);
    assert!(answer.contains("\"invalid\""), "{answer}");
    let junk = scrape(addr).unwrap();
    assert_eq!(
        value(&junk, "tame_serve_requests_total"),
        Some(1.0),
        "{junk}"
    );
    assert_eq!(
        value(&junk, "tame_serve_refusals_total{reason=\"invalid\"}"),
        Some(1.0)
    );

    // A busy child, reserved 20 % of the last CPU every 100 ms.
    let child = Killed(
        Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap(),
    );
    let pid = child.0.id().to_string();
    let s = socket.display().to_string();
    let common = ["--socket", &s, "--cpu", &cpu, "--period", "100ms"];
    let reserve = |share: &str| {
        let mut args = vec!["reserve", "--pid", &pid, "--share", share];
        args.extend(common);
        tame(&args)
    };
    // Above the policy's max_share (50 %), below the cap: the server refuses it.
    let too_much = reserve("60%");
    assert_eq!(too_much.status.code(), Some(2), "{too_much:?}");
    let ok = reserve("20%");
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let held = scrape(addr).unwrap();
    let client = format!("{{pid=\"{pid}\",cpu=\"{cpu}\"}}");
    assert_eq!(value(&held, "tame_serve_reservations"), Some(1.0), "{held}");
    assert_eq!(
        value(
            &held,
            &format!("tame_serve_reserved_ratio{{cpu=\"{cpu}\"}}")
        ),
        Some(0.2)
    );
    assert_eq!(
        value(&held, &format!("tame_serve_client_reserved_ratio{client}")),
        Some(0.2)
    );
    assert_eq!(value(&held, "tame_serve_admissions_total"), Some(1.0));
    assert_eq!(value(&held, "tame_serve_requests_total"), Some(3.0));
    assert_eq!(
        value(&held, "tame_serve_refusals_total{reason=\"refused\"}"),
        Some(1.0),
        "{held}"
    );
    assert_eq!(value(&held, "tame_serve_scheduler_threads"), Some(1.0));
    promtool_accepts(&held);
    // What the client received grows while it holds the reservation.
    let ran = |t: &str| value(t, &format!("tame_serve_client_cpu_seconds_total{client}"));
    let first = ran(&held).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let later = ran(&scrape(addr).unwrap()).unwrap();
    assert!(
        later > first,
        "received CPU time did not grow: {first} → {later}"
    );

    let released = tame(&["reserve", "--release", &pid, "--socket", &s]);
    assert!(released.status.success(), "{released:?}");
    let after = scrape(addr).unwrap();
    assert_eq!(value(&after, "tame_serve_reservations"), Some(0.0));
    assert_eq!(value(&after, "tame_serve_releases_total"), Some(1.0));
    drop(child);

    // SIGTERM: the server stops, its watchdog goes, the port closes, its files go.
    let spid = server.0.id() as i32;
    // SAFETY: signalling our own child.
    unsafe { libc::kill(spid, libc::SIGTERM) };
    let status = exit_within(
        &mut server,
        Duration::from_secs(10),
        "tame serve after SIGTERM",
    );
    assert!(status.success(), "{status:?}");
    let gone_by = Instant::now() + Duration::from_secs(5);
    while alive(watchdog) {
        assert!(
            Instant::now() < gone_by,
            "the watchdog {watchdog} outlived the server"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(scrape(addr).is_none(), "something still answers on {addr}");
    assert!(!Path::new(&socket).exists());
    assert_eq!(
        (listing("/sys/fs/cgroup"), listing("/sys/fs/cgroup/cpuset")),
        cgroups_before
    );
    // The lock stays by design (removing a lock file races with a server starting on it);
    // the socket and the restore record go.
    assert_eq!(
        listing(&dir.path().display().to_string()),
        ["s.lock", "serve.toml"],
        "the server left files beside its socket"
    );
    assert_eq!(
        host_files(),
        host_files_before,
        "/run/tame or the journal changed"
    );
}

/// The child's exit status; the test fails if it has not ended within `limit` (and the
/// child is killed when the panic drops it).
fn exit_within(child: &mut Killed, limit: Duration, what: &str) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(st) = child.0.try_wait().unwrap() {
            return st;
        }
        assert!(
            Instant::now() < deadline,
            "{what} did not end within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `tame ARGS` with its stderr, killed (and the test failed) if it has not ended within
/// `limit`.
fn tame_within(args: &[&str], limit: Duration) -> std::process::Output {
    let mut child = Killed(
        Command::new(env!("CARGO_BIN_EXE_tame"))
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("tame runs"),
    );
    let status = exit_within(&mut child, limit, &format!("tame {args:?}"));
    let mut stderr = Vec::new();
    if let Some(mut e) = child.0.stderr.take() {
        e.read_to_end(&mut stderr).unwrap();
    }
    std::process::Output {
        status,
        stdout: Vec::new(),
        stderr,
    }
}

/// With --metrics-required, a port taken is the user's to fix: refused, exit 2, nothing
/// left. Without it, the server says so and serves without metrics.
#[test]
fn a_metrics_port_in_use_is_bad_input_and_leaves_nothing() {
    let _machine = tame_testing::serial::module(module_path!());
    if !require(
        is_root(),
        "root (tame serve runs its watchdog at SCHED_FIFO)",
    ) {
        return;
    }
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("s");
    let s = socket.display().to_string();
    // Refused at once; a server that started instead must not hang the test.
    let out = tame_within(
        &[
            "serve",
            "--socket",
            &s,
            "--metrics",
            &addr,
            "--metrics-required",
        ],
        Duration::from_secs(15),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot listen on {addr}")),
        "{stderr}"
    );
    // The watchdog is a fork of tame serve (no exec): its command line names our directory.
    let gone_by = Instant::now() + Duration::from_secs(5);
    loop {
        let left = Command::new("pgrep")
            .args(["-f", &s])
            .output()
            .expect("pgrep runs");
        if left.stdout.is_empty() {
            break;
        }
        assert!(
            Instant::now() < gone_by,
            "processes of the refused server are left: {}",
            String::from_utf8_lossy(&left.stdout)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!socket.exists(), "the socket was left");

    // Issue 34: a user listening on the metrics port first kept the scheduling server
    // from starting at all. Without --metrics-required it says so and serves without.
    let (server, _rx, said) = serve_until_listening(&["--socket", &s, "--metrics", &addr]);
    let said = said.join("\n");
    assert!(
        said.contains(&format!("--metrics: cannot listen on {addr}"))
            && said.contains("going on without metrics"),
        "{said}"
    );
    // The scheduling server answers on its socket.
    let mut peer = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    peer.write_all(b"not json\n").unwrap();
    let mut answer = String::new();
    let _ = peer.read_to_string(&mut answer);
    assert!(answer.contains("\"invalid\""), "{answer}");
    stop_server(server);
    assert!(!socket.exists(), "the socket was left");
}

/// `tame serve ARGS` started, and the lines it wrote to stderr up to the one saying it
/// listens (the rest keep coming on the receiver).
pub(crate) fn serve_until_listening(
    args: &[&str],
) -> (Killed, mpsc::Receiver<String>, Vec<String>) {
    let mut server = Killed(
        Command::new(env!("CARGO_BIN_EXE_tame"))
            .arg("serve")
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("tame serve starts"),
    );
    let (tx, rx) = mpsc::channel();
    let stderr = server.0.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut said = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx.recv_timeout(left).unwrap_or_else(|_| {
            panic!("tame serve did not say it listens within 15 s; it said: {said:?}")
        });
        let up = line.contains("tame serve: listening on");
        said.push(line);
        if up {
            return (server, rx, said);
        }
    }
}

/// SIGTERM, and the server must end cleanly within 10 s.
pub(crate) fn stop_server(mut server: Killed) {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(server.0.id() as i32, libc::SIGTERM) };
    let status = exit_within(
        &mut server,
        Duration::from_secs(10),
        "tame serve after SIGTERM",
    );
    assert!(status.success(), "{status:?}");
}

/// The alternatives to a TCP port: a Unix socket only root may connect to, and a file for
/// node_exporter's textfile collector; both gone once the server stops.
#[test]
fn metrics_over_a_unix_socket_and_to_a_file() {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let _machine = tame_testing::serial::module(module_path!());
    if !require(
        is_root(),
        "root (tame serve runs its watchdog at SCHED_FIFO)",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("s");
    let s = socket.display().to_string();
    let msock = dir.path().join("metrics.sock");
    let unix = format!("unix:{}", msock.display());
    let (server, _rx, said) = serve_until_listening(&["--socket", &s, "--metrics", &unix]);
    assert!(
        said.iter()
            .any(|l| l.contains(&format!("metrics at {unix}"))),
        "{said:?}"
    );
    let m = std::fs::symlink_metadata(&msock).unwrap();
    assert!(m.file_type().is_socket());
    assert_eq!((m.uid(), m.mode() & 0o7777), (0, 0o600), "root only");
    let mut peer = std::os::unix::net::UnixStream::connect(&msock).unwrap();
    peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    peer.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
    let mut page = String::new();
    peer.read_to_string(&mut page).unwrap();
    assert!(page.starts_with("HTTP/1.1 200 OK"), "{page}");
    assert!(page.contains("\ntame_serve_reservations 0\n"), "{page}");
    stop_server(server);
    assert!(!msock.exists(), "the metrics socket was left");

    let file = dir.path().join("tame.prom");
    let f = file.display().to_string();
    let (server, _rx, said) = serve_until_listening(&["--socket", &s, "--metrics-file", &f]);
    assert!(
        said.iter()
            .any(|l| l.contains(&format!("metrics written to {f}"))),
        "{said:?}"
    );
    // Written at once, then again within a second with the server's first figures.
    let by = Instant::now() + Duration::from_secs(8);
    loop {
        let text = std::fs::read_to_string(&file).unwrap();
        if text.contains("\ntame_serve_reservations 0\n") {
            break;
        }
        assert!(Instant::now() < by, "{text}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(std::fs::metadata(&file).unwrap().mode() & 0o7777, 0o644);
    stop_server(server);
    assert!(!file.exists(), "the metrics file was left");
}
