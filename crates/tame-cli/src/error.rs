//! Exit codes: 0 success, 1 a failure while running, 2 bad input (nothing was
//! changed), 130 interrupted by Ctrl-C. Commands return their own code for
//! outcomes such as `check --strict` finding a failure.

use std::fmt;

/// Input the user must correct: the message says what, why and what to do.
/// Returned before anything is started or written; maps to exit code 2.
#[derive(Debug)]
pub struct BadInput(pub String);

impl fmt::Display for BadInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadInput {}

pub fn bad_input(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(BadInput(message.into()))
}

pub const EXIT_FAILED: i32 = 1;
pub const EXIT_BAD_INPUT: i32 = 2;
pub const EXIT_INTERRUPTED: i32 = 130;

pub fn exit_code(result: anyhow::Result<i32>) -> i32 {
    match result {
        Ok(code) => code,
        Err(e) if e.downcast_ref::<BadInput>().is_some() => {
            eprintln!("tame: {e}");
            EXIT_BAD_INPUT
        }
        Err(e) => {
            eprintln!("tame: {e:#}");
            EXIT_FAILED
        }
    }
}
