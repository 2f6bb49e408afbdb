//! The checked-in C header must be what cbindgen generates from src/ffi/ now.
//! Set TAME_IPC_BLESS=1 to rewrite it after an intended ABI change.

use std::path::Path;

#[test]
fn checked_in_header_is_current() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config =
        cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("cbindgen.toml parses");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut generated);
    let generated = String::from_utf8(generated).expect("header is UTF-8");
    let path = crate_dir.join("include/tame_ipc.h");
    if std::env::var_os("TAME_IPC_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write header");
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "{} is stale — regenerate it with `TAME_IPC_BLESS=1 cargo test -p tame-ipc --test it header::` and commit it",
        path.display()
    );
    // The ABI promises: every result code and every handle pair is declared.
    for symbol in [
        "TAME_IPC_OK 0",
        "TAME_IPC_ERR_PANIC -12",
        "tame_ipc_ring_open(",
        "tame_ipc_ring_close(",
        "tame_ipc_producer_push(",
        "tame_ipc_consumer_pop(",
        "tame_ipc_writer_write(",
        "tame_ipc_reader_read(",
        "tame_ipc_event_signal(",
        "TAME_IPC_ERR_UNTRUSTED -13",
        "tame_ipc_register_open_read_only(",
        "tame_ipc_event_open_read_only(",
        "tame_ipc_ring_lost(",
    ] {
        assert!(generated.contains(symbol), "header lacks {symbol}");
    }
}
