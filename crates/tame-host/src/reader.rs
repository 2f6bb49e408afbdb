//! Reading many host files while recording, rather than failing on, the ones
//! that cannot be used. Every model's `read` goes through a [`Reader`].

use std::path::Path;

use crate::error::{ParseError, Unreadable};
use crate::knobs::Knobs;
use crate::{CpuList, HostError, Root};

/// A [`Root`] plus the list of files that could not be used so far.
pub struct Reader<'a> {
    root: &'a Root,
    /// Files that were expected but missing, unreadable or malformed.
    pub problems: Vec<Unreadable>,
    /// The text of every file tame may write that was read through a `knob` method.
    pub knobs: Knobs,
}

impl<'a> Reader<'a> {
    pub fn new(root: &'a Root) -> Self {
        Self {
            root,
            problems: Vec::new(),
            knobs: Knobs::default(),
        }
    }

    pub fn root(&self) -> &Root {
        self.root
    }

    /// Record a problem with a file.
    pub fn problem(&mut self, host_path: &str, e: &HostError) {
        self.problems
            .push(Unreadable::from_error(Path::new(host_path), e));
    }

    /// Record a parse error in a file.
    pub fn parse_problem(&mut self, host_path: &str, e: ParseError) {
        let err = e.at(self.root.path(host_path));
        self.problem(host_path, &err);
    }

    /// A file that should exist: a missing one is recorded as a problem.
    pub fn required(&mut self, host_path: &str) -> Option<String> {
        match self.root.read(host_path) {
            Ok(s) => Some(s),
            Err(e) => {
                self.problem(host_path, &e);
                None
            }
        }
    }

    /// A file that may legitimately be absent (a feature the kernel lacks):
    /// absence is silent, any other failure (EACCES, EIO, …) is recorded.
    pub fn optional(&mut self, host_path: &str) -> Option<String> {
        match self.root.read(host_path) {
            Ok(s) => Some(s),
            Err(e) if e.is_not_found() => None,
            Err(e) => {
                self.problem(host_path, &e);
                None
            }
        }
    }

    /// An optional file, trimmed.
    pub fn value(&mut self, host_path: &str) -> Option<String> {
        self.optional(host_path).map(|s| s.trim().to_string())
    }

    /// An optional file holding one number; a non-number is recorded.
    pub fn number<T: std::str::FromStr>(&mut self, host_path: &str) -> Option<T> {
        let text = self.optional(host_path)?;
        self.number_in(host_path, &text)
    }

    /// An optional `0`/`1` file.
    pub fn flag(&mut self, host_path: &str) -> Option<bool> {
        self.number::<i64>(host_path).map(|n| n != 0)
    }

    /// An optional CPU list file; a malformed list is recorded.
    pub fn cpu_list(&mut self, host_path: &str) -> Option<CpuList> {
        let text = self.optional(host_path)?;
        self.cpu_list_in(host_path, &text)
    }

    /// An optional file tame may write: like [`Reader::optional`], and its text is
    /// kept in [`Reader::knobs`] (the value a plan compares with and journals as old).
    pub fn knob(&mut self, host_path: &str) -> Option<String> {
        let text = self.optional(host_path)?;
        self.knobs.keep(host_path, &text);
        Some(text)
    }

    /// [`Reader::knob`], trimmed.
    pub fn knob_value(&mut self, host_path: &str) -> Option<String> {
        self.knob(host_path).map(|s| s.trim().to_string())
    }

    /// [`Reader::knob`] holding one number.
    pub fn knob_number<T: std::str::FromStr>(&mut self, host_path: &str) -> Option<T> {
        let text = self.knob(host_path)?;
        self.number_in(host_path, &text)
    }

    /// [`Reader::knob`] holding `0`/`1`.
    pub fn knob_flag(&mut self, host_path: &str) -> Option<bool> {
        self.knob_number::<i64>(host_path).map(|n| n != 0)
    }

    /// [`Reader::knob`] holding a CPU list.
    pub fn knob_cpu_list(&mut self, host_path: &str) -> Option<CpuList> {
        let text = self.knob(host_path)?;
        self.cpu_list_in(host_path, &text)
    }

    fn number_in<T: std::str::FromStr>(&mut self, host_path: &str, text: &str) -> Option<T> {
        let text = text.trim();
        match text.parse() {
            Ok(n) => Some(n),
            Err(_) => {
                self.parse_problem(
                    host_path,
                    ParseError::new(1, format!("{text:?} is not a number")),
                );
                None
            }
        }
    }

    fn cpu_list_in(&mut self, host_path: &str, text: &str) -> Option<CpuList> {
        // A cpumask the kernel never allocated prints as "(null)" (e.g. nohz_full without nohz_full=).
        if text.trim() == "(null)" {
            return Some(CpuList::new());
        }
        match CpuList::parse(text) {
            Ok(l) => Some(l),
            Err(e) => {
                self.parse_problem(host_path, ParseError::new(1, e.reason));
                None
            }
        }
    }

    /// Entries of a directory that may be absent (sorted); other failures are recorded.
    pub fn list(&mut self, host_path: &str) -> Vec<String> {
        match self.root.list_dir(host_path) {
            Ok(v) => v,
            Err(e) if e.is_not_found() => Vec::new(),
            Err(e) => {
                self.problem(host_path, &e);
                Vec::new()
            }
        }
    }

    /// Numbered entries with a prefix (`cpu12`, `node1`, `state3`), sorted by number.
    pub fn numbered(&mut self, host_path: &str, prefix: &str) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .list(host_path)
            .iter()
            .filter_map(|n| n.strip_prefix(prefix)?.parse().ok())
            .collect();
        v.sort_unstable();
        v
    }

    pub fn is_dir(&self, host_path: &str) -> bool {
        self.root.is_dir(host_path)
    }

    pub fn exists(&self, host_path: &str) -> bool {
        self.root.exists(host_path)
    }
}

/// The word in brackets of a sysfs choice file (`always [madvise] never` → `madvise`).
pub fn bracketed(text: &str) -> Option<String> {
    text.split_whitespace()
        .find(|w| w.starts_with('[') && w.ends_with(']'))
        .map(|w| w.trim_matches(|c| c == '[' || c == ']').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bracketed_picks_the_current_choice() {
        assert_eq!(
            bracketed("always [madvise] never\n").as_deref(),
            Some("madvise")
        );
        assert_eq!(bracketed("none integrity"), None);
    }

    #[test]
    fn missing_optional_files_are_silent_but_required_ones_are_recorded() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sys")).unwrap();
        std::fs::write(dir.path().join("sys/n"), "x1\n").unwrap();
        let root = Root::new(dir.path());
        let mut r = Reader::new(&root);
        assert_eq!(r.optional("/sys/absent"), None);
        assert!(r.problems.is_empty());
        assert_eq!(r.required("/sys/absent"), None);
        assert_eq!(r.problems.len(), 1);
        assert!(
            r.problems[0].error.starts_with("ENOENT"),
            "{:?}",
            r.problems
        );
        std::fs::write(dir.path().join("sys/nohz_full"), "(null)\n").unwrap();
        assert_eq!(r.cpu_list("/sys/nohz_full"), Some(CpuList::new()));
        assert_eq!(r.number::<u32>("/sys/n"), None);
        assert_eq!(r.problems[1].path, "/sys/n");
        assert!(r.problems[1].error.contains("line 1"));
        // A knob keeps its exact text; a plain read keeps nothing.
        std::fs::write(dir.path().join("sys/k"), "0-3\n").unwrap();
        assert_eq!(r.knob_cpu_list("/sys/k").unwrap().to_string(), "0-3");
        assert_eq!(r.knobs.text("/sys/k"), Some("0-3\n"));
        assert_eq!(r.knob_value("/sys/absent"), None);
        r.value("/sys/nohz_full");
        assert_eq!(r.knobs.values.len(), 1);
    }
}
