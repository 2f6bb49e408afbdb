//! tame-assess's integration tests: one test binary with its test files as modules, like
//! every crate's (docs/testing.md, "One test binary per crate"), so a new file here costs
//! no new link.

mod bound;
mod cost_classes;
mod verdict;
