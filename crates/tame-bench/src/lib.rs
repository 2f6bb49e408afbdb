//! Measurement engine.
