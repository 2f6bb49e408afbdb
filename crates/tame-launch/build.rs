//! Build the preload library that locks memory inside a program after exec;
//! the binary embeds it, so there is no install path to get wrong.
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("libtame_preload.so");
    let src = "preload/tame_preload.c";
    println!("cargo:rerun-if-changed={src}");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let status = Command::new(&cc)
        .args(["-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o"])
        .arg(&out)
        .arg(src)
        .status()
        .unwrap_or_else(|e| {
            panic!("cannot run the C compiler {cc:?} ({e}): install gcc (apt-get install gcc)")
        });
    assert!(status.success(), "compiling {src} failed");
}
