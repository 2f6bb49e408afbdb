//! Builds the C producer and consumer examples with gcc against the static library
//! and the checked-in header, and runs them against each other.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Removes the example's three segments even if the test fails.
struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for suffix in ["", ".status", ".done"] {
            let _ = std::fs::remove_file(format!("/dev/shm/tame.{}{suffix}", self.0));
        }
    }
}

/// target/<profile>/ (the test binary lives in target/<profile>/deps/).
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().and_then(Path::parent).unwrap().to_path_buf()
}

/// The static library of this build: cargo makes the library with every crate type
/// (`deps/libtame_ipc.a` beside the `.rlib` this binary links, made by the same rustc
/// after it), and leaves it in `deps/` only. Where it is missing or older than the
/// `.rlib` (a build that made the rlib alone), it is built ([`build_static_library`]).
fn static_library() -> PathBuf {
    let deps = profile_dir().join("deps");
    let (lib, rlib) = (deps.join("libtame_ipc.a"), deps.join("libtame_ipc.rlib"));
    let modified = |p: &Path| p.metadata().and_then(|m| m.modified()).ok();
    match (modified(&lib), modified(&rlib)) {
        (Some(a), Some(r)) if a >= r => lib,
        _ => build_static_library(&profile_dir().parent().unwrap().join("c-examples")),
    }
}

/// Where cargo left no static library, build it — in a target dir of its own.
/// tame-ipc is a cdylib/staticlib crate, so its artifacts carry no hash in their names: built
/// alone, with its dependencies' features unified differently than in the workspace build,
/// it would overwrite the workspace's `deps/libtame_ipc.rlib` with one of another crate hash,
/// and every later compile against a crate that depends on it (the doc tests of tame-bench's
/// dependants) would fail with "can't find crate" (E0463). Only the staticlib is made
/// (`cargo rustc --crate-type staticlib`): the C programs need nothing else.
fn build_static_library(target_dir: &Path) -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .args(["rustc", "--quiet", "-p", "tame-ipc", "--lib"])
        .args(["--crate-type", "staticlib"])
        .env("CARGO_TARGET_DIR", target_dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    if profile_dir().file_name().is_some_and(|p| p == "release") {
        command.arg("--release");
    }
    let status = command.status().expect("run cargo rustc");
    assert!(status.success(), "cargo build of the static library failed");
    let profile = profile_dir().file_name().unwrap().to_owned();
    let lib = target_dir.join(profile).join("libtame_ipc.a");
    assert!(
        lib.exists(),
        "{} was not built (crate-type staticlib)",
        lib.display()
    );
    lib
}

fn gcc(source: &Path, output: &Path, include: &Path, lib: &Path) -> std::process::Child {
    Command::new("gcc")
        .args(["-std=c11", "-O2", "-Wall", "-Wextra", "-Werror"])
        .arg("-I")
        .arg(include)
        .arg("-I")
        .arg(source.parent().unwrap())
        .arg(source)
        .arg(lib)
        .args(["-lpthread", "-ldl", "-lm", "-lrt", "-lgcc_s", "-o"])
        .arg(output)
        .spawn()
        .expect("run gcc")
}

/// The C programs, built once for every test of this binary: the static library, then
/// each program with gcc (all at once), each given its place by a rename, so a run
/// beside this one never sees half a program.
struct Programs {
    consumer: PathBuf,
    producer: PathBuf,
    shrink_victim: PathBuf,
}

fn programs() -> &'static Programs {
    static BUILT: std::sync::OnceLock<Programs> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| {
        let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
        let lib = static_library();
        let out = profile_dir().parent().unwrap().join("c-examples/programs");
        std::fs::create_dir_all(&out).unwrap();
        let include = crate_dir.join("include");
        let examples = crate_dir.join("examples/c");
        let sources = [
            examples.join("consumer.c"),
            examples.join("producer.c"),
            crate_dir.join("tests/c/shrink_victim.c"),
        ];
        let builds: Vec<(PathBuf, PathBuf, std::process::Child)> = sources
            .iter()
            .map(|source| {
                let name = source.file_stem().unwrap().to_str().unwrap();
                let part = out.join(format!("{name}.{}", std::process::id()));
                let child = gcc(source, &part, &include, &lib);
                (part, out.join(name), child)
            })
            .collect();
        let mut built = Vec::new();
        for ((part, program, mut child), source) in builds.into_iter().zip(&sources) {
            let status = child.wait().expect("wait for gcc");
            assert!(status.success(), "gcc failed for {}", source.display());
            std::fs::rename(&part, &program).unwrap();
            built.push(program);
        }
        let [consumer, producer, shrink_victim] = built.try_into().unwrap();
        Programs {
            consumer,
            producer,
            shrink_victim,
        }
    })
}

/// Whether gcc can be run; otherwise the test is skipped (failed under CI).
fn have_gcc() -> bool {
    let found = Command::new("gcc")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok();
    if !found {
        common::skip("gcc is not installed, the C programs cannot be built");
    }
    found
}

#[test]
fn c_producer_and_consumer_talk_through_a_ring() {
    if !have_gcc() {
        return;
    }
    let programs = programs();

    let name = format!("test-{}-c", std::process::id());
    let _cleanup = Cleanup(name.clone());
    let count = "200000";
    let mut consumer = Command::new(&programs.consumer)
        .args([&name, count])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(consumer.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "READY");
    let producer = Command::new(&programs.producer)
        .args([&name, count])
        .output()
        .unwrap();
    assert!(
        producer.status.success(),
        "producer failed: {}",
        String::from_utf8_lossy(&producer.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&producer.stdout).trim(),
        "sent 200000 messages"
    );
    let status = consumer.wait().unwrap();
    let report = lines.next().unwrap().unwrap();
    assert!(status.success(), "consumer failed: {report}");
    // The producer closed its handle before exiting, so its role slot is free (0).
    assert_eq!(
        report,
        "received 200000 messages; register 200000 after 196 writes; producer state 0"
    );
}

/// A C consumer whose ring and register a peer truncates to 0 under its mappings
/// keeps running (the SIGBUS guard swaps in private memory) and learns it was cut
/// off; before the guard it died of SIGBUS.
#[test]
fn c_consumer_survives_a_peer_shrinking_its_segments() {
    if !have_gcc() {
        return;
    }
    let programs = programs();
    let name = format!("test-{}-cvictim", std::process::id());
    let _cleanup = Cleanup(name.clone());
    let ring = tame_ipc::Ring::create(&name, tame_ipc::ChannelSpec::ring::<u64>(64)).unwrap();
    let status = tame_ipc::Register::create(
        &format!("{name}.status"),
        tame_ipc::ChannelSpec::register::<u64>(),
    )
    .unwrap();
    ring.producer::<u64>().unwrap().push(1).unwrap();
    status.writer::<u64>().unwrap().write(&7);
    let mut victim = Command::new(&programs.shrink_victim)
        .arg(&name)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(victim.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "READY");
    for suffix in ["", ".status"] {
        std::fs::OpenOptions::new()
            .write(true)
            .open(format!("/dev/shm/tame.{name}{suffix}"))
            .unwrap()
            .set_len(0)
            .unwrap();
    }
    writeln!(victim.stdin.take().unwrap(), "GO").unwrap();
    let status = victim.wait().unwrap();
    let report = lines.next().map(|l| l.unwrap()).unwrap_or_default();
    assert!(
        status.success(),
        "the C victim ended with {status}: {report}"
    );
    assert!(report.starts_with("SURVIVED lost=1 1 popped="), "{report}");
}
