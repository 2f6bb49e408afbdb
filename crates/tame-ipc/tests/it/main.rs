//! tame-ipc's integration tests: one test binary, its former test files as modules, so
//! cargo links one executable here instead of one per file (docs/testing.md).
//! `common` holds what the modules share.
//!
//! `channels` and `hostile` run this binary's tests as child processes, by their full names
//! (`common::test_name`); every module names its shared-memory segments apart (one pid
//! for all of them now). None changes the machine: none needs to run alone.

mod c_examples;
mod channels;
mod common;
mod ffi;
mod fuzz_header;
mod header;
mod hostile;
mod inspect;
mod robustness;
