//! In-process helpers for time-critical threads.
