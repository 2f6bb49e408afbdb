//! Builds the C producer and consumer examples with gcc against the static library
//! and the checked-in header, and runs them against each other.

mod common;

use std::io::{BufRead, BufReader};
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

/// `cargo test` builds only the rlib, so build the staticlib (same target dir, so the
/// work is shared and the archive is current).
fn build_static_library() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let target_dir = profile_dir().parent().unwrap().to_path_buf();
    let mut command = Command::new(cargo);
    command
        .args(["build", "--quiet", "-p", "tame-ipc", "--lib"])
        .env("CARGO_TARGET_DIR", &target_dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    if profile_dir().file_name().is_some_and(|p| p == "release") {
        command.arg("--release");
    }
    let status = command.status().expect("run cargo build");
    assert!(status.success(), "cargo build of the static library failed");
    let lib = profile_dir().join("libtame_ipc.a");
    assert!(
        lib.exists(),
        "{} was not built (crate-type staticlib)",
        lib.display()
    );
    lib
}

fn gcc(source: &Path, output: &Path, include: &Path, lib: &Path) {
    let status = Command::new("gcc")
        .args(["-std=c11", "-O2", "-Wall", "-Wextra", "-Werror"])
        .arg("-I")
        .arg(include)
        .arg("-I")
        .arg(source.parent().unwrap())
        .arg(source)
        .arg(lib)
        .args(["-lpthread", "-ldl", "-lm", "-lrt", "-lgcc_s", "-o"])
        .arg(output)
        .status()
        .expect("run gcc");
    assert!(status.success(), "gcc failed for {}", source.display());
}

#[test]
fn c_producer_and_consumer_talk_through_a_ring() {
    if !common::require(common::have_program("gcc"), "gcc to build the C examples") {
        return;
    }
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = build_static_library();
    let out = profile_dir().join(format!("c-examples-{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    let include = crate_dir.join("include");
    let examples = crate_dir.join("examples/c");
    gcc(
        &examples.join("consumer.c"),
        &out.join("consumer"),
        &include,
        &lib,
    );
    gcc(
        &examples.join("producer.c"),
        &out.join("producer"),
        &include,
        &lib,
    );

    let name = format!("test-{}-c", std::process::id());
    let _cleanup = Cleanup(name.clone());
    let count = "200000";
    let mut consumer = Command::new(out.join("consumer"))
        .args([&name, count])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(consumer.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "READY");
    let producer = Command::new(out.join("producer"))
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
    let _ = std::fs::remove_dir_all(&out);
}
