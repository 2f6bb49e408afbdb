//! Hostile peers in other processes: a peer that shrinks or grows a named segment,
//! hands over an unsealed descriptor, plants a segment for others to adopt, or holds
//! a role from another pid namespace or behind hidepid. Each test runs the peer (or
//! the victim) as a real separate process and checks what the other side survives or
//! refuses.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};

use crate::common::{
    child_args, child_command, child_env, opens_promptly, plant_fifo, privileged, spawn_child,
    spawn_child_as, test_name, NameGuard,
};
use tame_ipc::inspect;
use tame_ipc::layout::Layout;
use tame_ipc::{
    fdpass, ChannelSpec, Error, Event, PeerState, PopError, ProcFs, ReadError, Register, Ring,
};

/// Reads a child's stdout up to the line that holds `prefix` and returns that line
/// from `prefix` on (libtest writes "test NAME ... " in front of the first one).
fn expect_line(lines: &mut impl Iterator<Item = std::io::Result<String>>, prefix: &str) -> String {
    for line in lines.by_ref() {
        let line = line.expect("read child output");
        if let Some(at) = line.find(prefix) {
            return line[at..].to_string();
        }
    }
    panic!("the child ended without printing {prefix}");
}

/// Waits for a child and says how it ended.
fn ended(mut child: Child) -> String {
    let status = child.wait().unwrap();
    match status.signal() {
        Some(signal) => format!("killed by signal {signal}"),
        None => format!("exit {}", status.code().unwrap_or(-1)),
    }
}

/// A child whose stdin and stdout are pipes to this process.
fn spawn_piped(mut command: Command) -> (Child, impl Iterator<Item = std::io::Result<String>>) {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn child");
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    (child, lines)
}

fn truncate(path: &std::path::Path, size: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(size)
        .unwrap();
}

// ---- a peer shrinks the segment under the other side's mapping --------------------

/// Victim side of `shrunk_named_segments_do_not_kill_their_users`: uses a named ring
/// (both ends) and a register opened read-only, waits while the peer truncates both
/// to 0, then keeps using them.
#[test]
#[ignore = "child side: run by its parent test"]
fn child_shrink_victim() {
    let name = child_env("RING_NAME");
    let status = child_env("REGISTER_NAME");
    let ring = Ring::open(&name, ChannelSpec::ring::<[u64; 8]>(64)).unwrap();
    let register = Register::open_read_only(&status, ChannelSpec::register::<u64>()).unwrap();
    let mut producer = ring.producer::<[u64; 8]>().unwrap();
    let mut consumer = ring.consumer::<[u64; 8]>().unwrap();
    let mut reader = register.reader::<u64>().unwrap();
    producer.push([1; 8]).unwrap();
    assert_eq!(consumer.pop(), Ok([1; 8]));
    assert_eq!(reader.read().map(|s| s.value), Ok(7));
    println!("READY");
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    // Every page of both segments is gone from the file now.
    let (mut pushed, mut popped, mut corrupted) = (0, 0, 0);
    for i in 0..1000u64 {
        if producer.push([i; 8]).is_ok() {
            pushed += 1;
        }
        match consumer.pop() {
            Ok(_) => popped += 1,
            Err(PopError::Corrupted) => corrupted += 1,
            Err(_) => {}
        }
    }
    let read = match reader.read() {
        Ok(sample) => format!("value {}", sample.value),
        Err(ReadError::Empty) => "empty".into(),
        Err(e) => format!("{e:?}"),
    };
    println!(
        "SURVIVED lost={} {} pushed={pushed} popped={popped} corrupted={corrupted} read={read}",
        ring.segment().is_lost(),
        register.segment().is_lost(),
    );
}

#[test]
fn shrunk_named_segments_do_not_kill_their_users() {
    let ring_name = NameGuard::new("shrink-ring");
    let register_name = NameGuard::new("shrink-reg");
    let ring = Ring::create(ring_name.as_str(), ChannelSpec::ring::<[u64; 8]>(64)).unwrap();
    let register =
        Register::create(register_name.as_str(), ChannelSpec::register::<u64>()).unwrap();
    register.writer::<u64>().unwrap().write(&7);
    let (mut child, mut lines) = spawn_piped(child_command(
        &test_name(module_path!(), "child_shrink_victim"),
        &[
            ("RING_NAME", ring_name.0.clone()),
            ("REGISTER_NAME", register_name.0.clone()),
        ],
    ));
    expect_line(&mut lines, "READY");
    // The hostile peer: shrink both files to nothing under the victim's mappings.
    truncate(&ring_name.path(), 0);
    truncate(&register_name.path(), 0);
    writeln!(child.stdin.take().unwrap(), "GO").unwrap();
    let report = expect_line(&mut lines, "SURVIVED");
    assert_eq!(ended(child), "exit 0", "{report}");
    // Both mappings were replaced, so the victim knows it is cut off; the ring's
    // indices read as zero against its private ones (Corrupted) or it carries on
    // privately — never a crash.
    assert!(report.starts_with("SURVIVED lost=true true"), "{report}");
    // Our own mappings (the creator's) are just as exposed, and just as guarded.
    assert!(!ring.segment().is_lost());
    if let Ok(mut producer) = ring.producer::<[u64; 8]>() {
        let _ = producer.push([3; 8]);
    }
    assert!(ring.segment().is_lost());
}

/// Side of `sigbus_elsewhere_still_kills`: opens a named segment (installing the
/// guard), then faults on a mapping of another file, or is sent SIGBUS.
#[test]
#[ignore = "child side: run by its parent test"]
fn child_foreign_sigbus() {
    let _ring = Ring::open(&child_env("RING_NAME"), ChannelSpec::ring::<u64>(8)).unwrap();
    if child_env("SIGBUS_MODE") == "kill" {
        // Rust's own SIGBUS handler (installed at start, before ours) swallows the first
        // signal sent and restores the default action, with or without tame-ipc; ours
        // must hand both to it, so the second one kills.
        for _ in 0..2 {
            // SAFETY: raise sends a signal to this thread; nothing of ours is touched.
            unsafe { libc::raise(libc::SIGBUS) };
        }
    } else {
        let path = child_env("OTHER_FILE");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        // SAFETY: a fresh shared mapping of one page of a file we hold; no Rust object
        // aliases it, and it is only accessed with a volatile read below.
        let page = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        assert_ne!(page, libc::MAP_FAILED);
        file.set_len(0).unwrap();
        // SAFETY: the page is mapped (beyond the file's end now: this must fault).
        let byte = unsafe { std::ptr::read_volatile(page.cast::<u8>()) };
        println!("READ {byte}");
    }
    println!("STILL ALIVE");
}

/// The guard handles faults in tame-ipc's named mappings only: a SIGBUS anywhere else
/// (a fault on another mapping, a signal sent) still ends the process as before.
#[test]
fn sigbus_elsewhere_still_kills() {
    let name = NameGuard::new("foreign-sigbus");
    let _ring = Ring::create(name.as_str(), ChannelSpec::ring::<u64>(8)).unwrap();
    let dir = tempdir("sigbus");
    let other = dir.join("other");
    std::fs::write(&other, vec![1u8; 4096]).unwrap();
    for mode in ["fault", "kill"] {
        let mut child = child_command(
            &test_name(module_path!(), "child_foreign_sigbus"),
            &[
                ("SIGBUS_MODE", mode.into()),
                ("RING_NAME", name.0.clone()),
                ("OTHER_FILE", other.display().to_string()),
            ],
        )
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
        // A handler that swallowed the fault would make it fault again forever.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                panic!("{mode}: the child neither died nor finished");
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        assert_eq!(status.signal(), Some(libc::SIGBUS), "{mode}: {status}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---- a peer grows the segment: the opener maps the layout, not the file -----------

/// Hostile side: grows the file named by SEGMENT_PATH to GROW_TO bytes.
#[test]
#[ignore = "child side: run by its parent test"]
fn child_grow_peer() {
    let size: u64 = child_env("GROW_TO").parse().unwrap();
    truncate(std::path::Path::new(&child_env("SEGMENT_PATH")), size);
}

/// The lengths of this process's mappings of `path` (from /proc/self/maps).
fn mapped_lengths(path: &std::path::Path) -> Vec<u64> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines()
        .filter(|line| line.ends_with(path.to_str().unwrap()))
        .map(|line| {
            let range = line.split_whitespace().next().unwrap();
            let (start, end) = range.split_once('-').unwrap();
            u64::from_str_radix(end, 16).unwrap() - u64::from_str_radix(start, 16).unwrap()
        })
        .collect()
}

#[test]
fn grown_named_segment_is_mapped_only_as_far_as_its_layout() {
    let name = NameGuard::new("grow");
    let spec = ChannelSpec::ring::<u64>(16);
    let layout = Layout::compute(spec).unwrap();
    let _creator = Ring::create(name.as_str(), spec).unwrap();
    const GROWN: u64 = 256 << 20;
    let peer = spawn_child(
        &test_name(module_path!(), "child_grow_peer"),
        &[
            ("SEGMENT_PATH", name.path().display().to_string()),
            ("GROW_TO", GROWN.to_string()),
        ],
    );
    assert!(peer.wait().success());
    assert_eq!(std::fs::metadata(name.path()).unwrap().len(), GROWN);
    let opened = Ring::open(name.as_str(), spec).unwrap();
    assert_eq!(opened.segment().mapped_len() as u64, layout.segment_size);
    // What the kernel says: every mapping of the file is the layout's size.
    let lengths = mapped_lengths(&name.path());
    assert_eq!(lengths, vec![layout.segment_size; 2], "creator and opener");
    // The tool reads only the header and still sees a valid segment.
    let info = inspect::inspect(&name.path(), name.as_str(), &ProcFs::default());
    assert!(
        matches!(info.state, inspect::SegmentState::Valid(_)),
        "{:?}",
        info.state
    );
}

// ---- a peer hands over a descriptor that is not sealed ----------------------------

/// Hostile side: connects to SOCKET and sends three ring descriptors: a named
/// segment's (cannot be sealed), an unsealed memfd holding a valid ring, and a proper
/// anonymous (sealed) ring.
#[test]
#[ignore = "child side: run by its parent test"]
fn child_fd_sender() {
    let socket = UnixStream::connect(child_env("SOCKET")).unwrap();
    let spec = ChannelSpec::ring::<u64>(8);
    let named = Ring::create(&child_env("RING_NAME"), spec).unwrap();
    fdpass::send_fd(&socket, named.segment().fd()).unwrap();

    let layout = Layout::compute(spec).unwrap();
    // SAFETY: memfd_create reads the NUL-terminated literal and returns a new fd we own.
    let raw = unsafe { libc::memfd_create(c"unsealed".as_ptr(), libc::MFD_CLOEXEC) };
    assert!(raw >= 0);
    // SAFETY: `raw` is a fresh descriptor owned by nobody else.
    let file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(raw) });
    file.set_len(layout.segment_size).unwrap();
    use std::os::unix::fs::FileExt;
    file.write_all_at(layout.header(std::process::id(), 1, 0).as_bytes(), 0)
        .unwrap();
    fdpass::send_fd(&socket, file.as_fd()).unwrap();

    let sealed = Ring::create_anonymous(spec).unwrap();
    fdpass::send_fd(&socket, sealed.segment().fd()).unwrap();
}

#[test]
fn unsealed_descriptors_are_refused() {
    let dir = tempdir("fdpass");
    let socket_path = dir.join("socket");
    let listener = UnixListener::bind(&socket_path).unwrap();
    let name = NameGuard::new("unsealed");
    let peer = spawn_child(
        &test_name(module_path!(), "child_fd_sender"),
        &[
            ("SOCKET", socket_path.display().to_string()),
            ("RING_NAME", name.0.clone()),
        ],
    );
    // A child that never runs never connects: wait a bounded time, not forever.
    listener.set_nonblocking(true).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let socket = loop {
        match listener.accept() {
            Ok((socket, _)) => break socket,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the peer never connected"
                );
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(e) => panic!("accept: {e}"),
        }
    };
    socket.set_nonblocking(false).unwrap();
    let spec = ChannelSpec::ring::<u64>(8);
    for what in ["a named segment's descriptor", "an unsealed memfd"] {
        let fd = fdpass::recv_fd(&socket).unwrap();
        let err = Ring::from_fd(fd, spec).unwrap_err();
        assert!(matches!(err, Error::Untrusted { .. }), "{what}: {err}");
        assert!(
            err.to_string().contains("seal") && err.to_string().contains("anonymous segment"),
            "{what}: {err}"
        );
    }
    // The safe mode's descriptor is accepted, and its seal holds.
    let fd = fdpass::recv_fd(&socket).unwrap();
    let sealed = Ring::from_fd(fd, spec).unwrap();
    let mut producer = sealed.producer::<u64>().unwrap();
    producer.push(5).unwrap();
    let file = std::fs::File::from(sealed.segment().fd().try_clone_to_owned().unwrap());
    assert!(
        file.set_len(0).is_err(),
        "a sealed segment cannot be shrunk"
    );
    assert!(peer.wait().success());
    std::fs::remove_dir_all(&dir).unwrap();
}

fn tempdir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("tame-ipc-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

// ---- segments planted for others to adopt ------------------------------------------

#[test]
fn world_writable_or_linked_segments_are_not_adopted() {
    use std::os::unix::fs::PermissionsExt;
    let spec = ChannelSpec::ring::<u64>(8);
    let name = NameGuard::new("planted");
    let _ring = Ring::create(name.as_str(), spec).unwrap();
    std::fs::set_permissions(name.path(), std::fs::Permissions::from_mode(0o666)).unwrap();
    let err = Ring::open(name.as_str(), spec).unwrap_err();
    assert!(matches!(err, Error::Untrusted { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("0o666") && text.contains("every local user") && text.contains("tame ipc rm"),
        "{text}"
    );
    let err = Register::open_read_only(name.as_str(), ChannelSpec::register::<u64>()).unwrap_err();
    assert!(matches!(err, Error::Untrusted { .. }), "{err}");
    // Creating such a segment is refused up front.
    let other = NameGuard::new("planted-create");
    let err = Ring::create_with_mode(other.as_str(), spec, 0o666).unwrap_err();
    assert!(matches!(err, Error::InvalidSpec(_)), "{err}");
    assert!(!other.path().exists());
    // A symbolic link planted under a name is not followed.
    let link = NameGuard::new("planted-link");
    std::fs::set_permissions(name.path(), std::fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::symlink(name.path(), link.path()).unwrap();
    let err = Ring::open(link.as_str(), spec).unwrap_err();
    assert!(
        matches!(&err, Error::Untrusted { reason, .. } if reason.contains("symbolic link")),
        "{err}"
    );
}

/// A FIFO planted under a name (any local user can make one in /dev/shm): a read-only
/// open blocked in open(2) for a writer that never came. Every open refuses it at once.
#[test]
fn a_fifo_planted_under_a_name_is_refused_without_blocking() {
    let name = NameGuard::new("planted-fifo");
    plant_fifo(&name.path());
    let (n, path) = (name.0.clone(), name.path());
    type Open = fn(&str) -> Result<(), Error>;
    let opens: [(&str, Open); 4] = [
        ("Register::open_read_only", |n| {
            Register::open_read_only(n, ChannelSpec::register::<u64>()).map(drop)
        }),
        ("Event::open_read_only", |n| {
            Event::open_read_only(n).map(drop)
        }),
        ("Register::open", |n| {
            Register::open(n, ChannelSpec::register::<u64>()).map(drop)
        }),
        ("Ring::open", |n| {
            Ring::open(n, ChannelSpec::ring::<u64>(8)).map(drop)
        }),
    ];
    for (what, open) in opens {
        let n = n.clone();
        let err = opens_promptly(&path, move || open(&n)).unwrap_err();
        assert!(
            matches!(&err, Error::Untrusted { reason, .. } if reason.contains("not a regular file")),
            "{what}: {err}"
        );
        assert!(err.to_string().contains("tame ipc rm"), "{what}: {err}");
    }
    assert!(path.exists(), "the FIFO is the test's to remove");
}

/// Another user's side of `another_users_segment_is_not_adopted`: creates the segment
/// and opens it to everybody, as an attacker pre-creating a name would.
#[test]
#[ignore = "child side: run by its parent test"]
fn child_plant_segment() {
    let name = child_env("RING_NAME");
    let ring = Ring::create_with_mode(&name, ChannelSpec::ring::<u64>(8), 0o660).unwrap();
    drop(ring);
}

#[test]
fn another_users_segment_is_not_adopted() {
    if !privileged("running the planting peer as another user") {
        return;
    }
    let name = NameGuard::new("foreign");
    let child = spawn_child_as(
        &test_name(module_path!(), "child_plant_segment"),
        &[("RING_NAME", name.0.clone())],
        Some(65534),
    );
    assert!(child.wait().success());
    use std::os::unix::fs::MetadataExt;
    assert_eq!(std::fs::metadata(name.path()).unwrap().uid(), 65534);
    let err = Ring::open(name.as_str(), ChannelSpec::ring::<u64>(8)).unwrap_err();
    assert!(matches!(err, Error::Untrusted { .. }), "{err}");
    assert!(err.to_string().contains("owned by uid 65534"), "{err}");
    let err = Ring::open_or_create(name.as_str(), ChannelSpec::ring::<u64>(8)).unwrap_err();
    assert!(matches!(err, Error::Untrusted { .. }), "{err}");
}

// ---- read-only opens ----------------------------------------------------------------

/// A reader with read permission only (another user) opens a register read-only.
#[test]
#[ignore = "child side: run by its parent test"]
fn child_read_only_reader() {
    let name = child_env("REGISTER_NAME");
    let spec = ChannelSpec::register::<u64>();
    let err = Register::open(&name, spec).unwrap_err();
    assert!(matches!(err, Error::PermissionDenied { .. }), "{err}");
    let register = Register::open_read_only(&name, spec).unwrap();
    assert_eq!(
        register.reader::<u64>().unwrap().read().map(|s| s.value),
        Ok(43)
    );
}

#[test]
fn read_only_opens_read_but_never_write() {
    let name = NameGuard::new("ro");
    let spec = ChannelSpec::register::<u64>();
    let register = Register::create_with_mode(name.as_str(), spec, 0o644).unwrap();
    let mut writer = register.writer::<u64>().unwrap();
    writer.write(&42);
    let read_only = Register::open_read_only(name.as_str(), spec).unwrap();
    assert!(read_only.segment().is_read_only());
    let mut reader = read_only.reader::<u64>().unwrap();
    assert_eq!(reader.read().map(|s| s.value), Ok(42));
    writer.write(&43);
    assert_eq!(reader.read().map(|s| (s.value, s.fresh)), Ok((43, true)));
    let err = read_only.writer::<u64>().unwrap_err();
    assert!(matches!(err, Error::ReadOnly { .. }), "{err}");
    // The kernel holds the line too: the read-only mapping is not writable.
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let modes: Vec<&str> = maps
        .lines()
        .filter(|l| l.ends_with(name.path().to_str().unwrap()))
        .map(|l| l.split_whitespace().nth(1).unwrap())
        .collect();
    assert_eq!(modes.len(), 2, "{modes:?}");
    assert!(
        modes.contains(&"rw-s") && modes.contains(&"r--s"),
        "{modes:?}"
    );

    let event_name = NameGuard::new("ro-event");
    let event = Event::create(event_name.as_str()).unwrap();
    let listening = Event::open_read_only(event_name.as_str()).unwrap();
    let err = listening.signaller().unwrap_err();
    assert!(matches!(err, Error::ReadOnly { .. }), "{err}");
    let mut listener = listening.listener();
    let signaller = event.signaller().unwrap();
    signaller.signal();
    assert_eq!(listener.poll(), 1);
    // A read-only listener cannot announce itself as a sleeper, so it is not woken;
    // it re-checks often enough to see a plain signal well before its timeout.
    let late = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(20));
        signaller.signal();
    });
    let started = std::time::Instant::now();
    assert_eq!(listener.wait(std::time::Duration::from_secs(10)), 1);
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
    late.join().unwrap();

    // Someone with read permission only can still read.
    if privileged("running the reader as another user") {
        let child = spawn_child_as(
            &test_name(module_path!(), "child_read_only_reader"),
            &[("REGISTER_NAME", name.0.clone())],
            Some(65534),
        );
        assert!(child.wait().success());
    }
}

// ---- liveness across pid namespaces and behind hidepid ------------------------------

/// Peer side of `role_held_from_another_pid_namespace_is_not_taken_over`: runs as
/// pid 1 of a new pid namespace and holds the producer role until told to stop.
#[test]
#[ignore = "child side: run by its parent test"]
fn child_namespaced_producer() {
    assert_eq!(
        std::process::id(),
        1,
        "runs as pid 1 of a new pid namespace"
    );
    let ring = Ring::open(&child_env("RING_NAME"), ChannelSpec::ring::<u64>(8)).unwrap();
    let mut producer = ring.producer::<u64>().unwrap();
    producer.push(11).unwrap();
    println!("READY");
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    // Leave without releasing the role, like a crash.
    std::process::exit(0);
}

#[test]
fn role_held_from_another_pid_namespace_is_not_taken_over() {
    if !privileged("starting a peer in a new pid namespace (unshare)") {
        return;
    }
    let name = NameGuard::new("pidns");
    let spec = ChannelSpec::ring::<u64>(8);
    let ring = Ring::create(name.as_str(), spec).unwrap();
    let mut consumer = ring.consumer::<u64>().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut command = Command::new("unshare");
    command
        .args(["--pid", "--fork", "--mount-proc", "--"])
        .arg(exe)
        .args(child_args(&test_name(
            module_path!(),
            "child_namespaced_producer",
        )))
        .env("RING_NAME", &name.0);
    let (mut child, mut lines) = spawn_piped(command);
    expect_line(&mut lines, "READY");
    assert_eq!(consumer.pop(), Ok(11));
    // Pid 1 here is our init, not the peer: nothing about the peer can be decided.
    assert_eq!(consumer.producer_state(), PeerState::Unknown { pid: 1 });
    let err = ring.producer::<u64>().unwrap_err();
    assert!(
        matches!(
            err,
            Error::RoleTaken {
                role: "producer",
                pid: 1,
                ..
            }
        ),
        "{err}"
    );
    let info = inspect::inspect(&name.path(), name.as_str(), &ProcFs::default());
    let inspect::SegmentState::Valid(description) = &info.state else {
        panic!("{:?}", info.state)
    };
    assert_eq!(description.peers[0].liveness, tame_ipc::Liveness::Unknown);
    assert!(!info.is_stale());
    writeln!(child.stdin.take().unwrap(), "GO").unwrap();
    assert_eq!(ended(child), "exit 0");
    // Even gone, a holder from another namespace cannot be proven dead: the role stays
    // held (a person decides: `tame ipc rm --force`, recreate).
    assert_eq!(consumer.producer_state(), PeerState::Unknown { pid: 1 });
    assert!(ring.producer::<u64>().is_err());
}

/// Peer side of `holder_hidden_by_hidepid_is_not_taken_over`: runs as nobody with a
/// /proc mounted hidepid=2 (its own mount namespace), inherits the ring's descriptor
/// (RING_FD), and tries to take the producer role the parent holds.
#[test]
#[ignore = "child side: run by its parent test"]
fn child_hidepid_claimer() {
    let parent: u32 = child_env("PARENT_PID").parse().unwrap();
    // SAFETY: getuid takes no arguments and cannot fail.
    assert_eq!(unsafe { libc::getuid() }, 65534);
    assert!(
        !std::path::Path::new(&format!("/proc/{parent}")).exists(),
        "hidepid=2 hides the parent"
    );
    let raw: i32 = child_env("RING_FD").parse().unwrap();
    // SAFETY: the parent kept this descriptor open across exec for us; nothing else in
    // this process owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let ring = Ring::from_fd(fd, ChannelSpec::ring::<u64>(8)).unwrap();
    let consumer = ring.consumer::<u64>().unwrap();
    assert_eq!(
        consumer.producer_state(),
        PeerState::Unknown { pid: parent }
    );
    let err = ring.producer::<u64>().unwrap_err();
    assert!(matches!(err, Error::RoleTaken { .. }), "{err}");
    println!("REFUSED");
}

#[test]
fn holder_hidden_by_hidepid_is_not_taken_over() {
    if !privileged("mounting a hidepid=2 /proc in a private mount namespace") {
        return;
    }
    let ring = Ring::create_anonymous(ChannelSpec::ring::<u64>(8)).unwrap();
    let _producer = ring.producer::<u64>().unwrap();
    let memfd = ring.segment().fd().as_raw_fd();
    let mut command = child_command(
        &test_name(module_path!(), "child_hidepid_claimer"),
        &[
            ("PARENT_PID", std::process::id().to_string()),
            ("RING_FD", memfd.to_string()),
        ],
    );
    // SAFETY: runs in the forked child before exec and only makes system calls
    // (async-signal-safe); the mount namespace is made private before anything is
    // mounted, so nothing propagates to the system's mounts.
    unsafe {
        command.pre_exec(move || {
            let check = |result: libc::c_int| {
                if result == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            };
            check(libc::unshare(libc::CLONE_NEWNS))?;
            check(libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ))?;
            check(libc::mount(
                c"proc".as_ptr(),
                c"/proc".as_ptr(),
                c"proc".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                c"hidepid=2".as_ptr().cast(),
            ))?;
            // Keep the ring's descriptor across exec (flags are per process after fork).
            check(libc::fcntl(memfd, libc::F_SETFD, 0))?;
            check(libc::setgroups(0, std::ptr::null()))?;
            check(libc::setresgid(65534, 65534, 65534))?;
            check(libc::setresuid(65534, 65534, 65534))
        });
    }
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("REFUSED"),
        "{}\n{}",
        stdout,
        String::from_utf8_lossy(&output.stderr)
    );
    // The system's /proc is untouched.
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !mounts
            .lines()
            .any(|l| l.contains(" /proc ") && l.contains("hidepid")),
        "{mounts}"
    );
}

/// A role claimed here records our pid namespace beside it, and the creator's too.
#[test]
fn claims_record_the_pid_namespace() {
    let name = NameGuard::new("nsrecord");
    let ring = Ring::create(name.as_str(), ChannelSpec::ring::<u64>(8)).unwrap();
    let _consumer = ring.consumer::<u64>().unwrap();
    let ns = ProcFs::default().pid_ns().unwrap();
    let bytes = std::fs::read(name.path()).unwrap();
    let header: tame_ipc::layout::RawHeader = bytemuck::pod_read_unaligned(&bytes[..128]);
    assert_eq!(header.creator_pid_ns, ns);
    assert_eq!(header.peer_pid_ns(1), ns);
    assert_eq!(header.peer_pid_ns(0), 0, "no producer");
    assert_eq!(ring.segment().creator_pid_ns(), ns);
    assert_eq!(ring.segment().creator_liveness(), tame_ipc::Liveness::Alive);
}
