//! Reading the workspace's Rust sources as code: comments blanked, string literals known,
//! `#[cfg(test)]` items blanked. The one-door tests (tame-host's host paths, tame-launch's
//! processes) scan non-test code with it.

use std::path::{Path, PathBuf};

/// The `crates/` directory of the workspace a test crate (`manifest_dir`) is in.
pub fn crates_dir(manifest_dir: &str) -> PathBuf {
    Path::new(manifest_dir).join("..")
}

/// Every crate directory below `crates`, sorted.
pub fn crate_dirs(crates: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(crates)
        .map(|r| {
            r.flatten()
                .map(|e| e.path())
                .filter(|p| p.join("Cargo.toml").is_file())
                .collect()
        })
        .unwrap_or_default();
    dirs.sort();
    dirs
}

/// Non-test code of `src`: comments and `#[cfg(test)]` items blanked (newlines kept), and
/// which characters are inside string or char literals.
pub fn code_of(src: &str) -> (Vec<char>, Vec<bool>) {
    let (mut code, in_lit) = strip_comments(src);
    strip_test_items(&mut code, &in_lit);
    (code, in_lit)
}

/// Every `.rs` file below `dir`, appended to `out`.
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let p = entry.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The source with comments blanked (newlines kept), and which characters are
/// inside string or char literals.
pub fn strip_comments(src: &str) -> (Vec<char>, Vec<bool>) {
    let c: Vec<char> = src.chars().collect();
    let mut code = c.clone();
    let mut in_lit = vec![false; c.len()];
    let blank = |code: &mut Vec<char>, i: usize| {
        if code[i] != '\n' {
            code[i] = ' ';
        }
    };
    let mut i = 0;
    while i < c.len() {
        match c[i] {
            '/' if c.get(i + 1) == Some(&'/') => {
                while i < c.len() && c[i] != '\n' {
                    blank(&mut code, i);
                    i += 1;
                }
            }
            '/' if c.get(i + 1) == Some(&'*') => {
                let mut depth = 0;
                while i < c.len() {
                    if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                        depth += 1;
                        blank(&mut code, i);
                        blank(&mut code, i + 1);
                        i += 2;
                    } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                        depth -= 1;
                        blank(&mut code, i);
                        blank(&mut code, i + 1);
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        blank(&mut code, i);
                        i += 1;
                    }
                }
            }
            'r' if matches!(c.get(i + 1), Some('"') | Some('#'))
                && (i == 0 || !(c[i - 1].is_alphanumeric() || c[i - 1] == '_')) =>
            {
                let mut j = i + 1;
                let mut hashes = 0;
                while c.get(j) == Some(&'#') {
                    hashes += 1;
                    j += 1;
                }
                if c.get(j) != Some(&'"') {
                    i += 1;
                    continue;
                }
                j += 1;
                let start = j;
                loop {
                    if j >= c.len() {
                        break;
                    }
                    if c[j] == '"' && (0..hashes).all(|h| c.get(j + 1 + h) == Some(&'#')) {
                        break;
                    }
                    j += 1;
                }
                in_lit[start..j.min(c.len())].fill(true);
                i = j + 1 + hashes;
            }
            '"' => {
                let mut j = i + 1;
                while j < c.len() && c[j] != '"' {
                    if c[j] == '\\' {
                        j += 1;
                    }
                    j += 1;
                }
                in_lit[i + 1..j.min(c.len())].fill(true);
                i = j + 1;
            }
            '\'' => {
                // A char literal ('x', '\n', '\''), or a lifetime ('a).
                if c.get(i + 1) == Some(&'\\') {
                    let mut j = i + 2;
                    while j < c.len() && c[j] != '\'' {
                        j += 1;
                    }
                    in_lit[i + 1..j.min(c.len())].fill(true);
                    i = j + 1;
                } else if c.get(i + 2) == Some(&'\'') {
                    in_lit[i + 1] = true;
                    i += 3;
                } else {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    (code, in_lit)
}

/// Blank every item marked `#[cfg(test)]` (a module, a function, a `use`).
pub fn strip_test_items(code: &mut [char], in_lit: &[bool]) {
    let marker: Vec<char> = "#[cfg(test)]".chars().collect();
    let starts: Vec<usize> = (0..code.len())
        .filter(|&i| code[i..].starts_with(&marker) && !in_lit[i])
        .collect();
    for start in starts.into_iter().rev() {
        let mut i = start + marker.len();
        let mut depth = 0usize;
        let mut end = code.len();
        while i < code.len() {
            if !in_lit[i] {
                match code[i] {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = i + 1;
                            break;
                        }
                    }
                    ';' if depth == 0 => {
                        end = i + 1;
                        break;
                    }
                    _ => {}
                }
            }
            i += 1;
        }
        for ch in &mut code[start..end] {
            if *ch != '\n' {
                *ch = ' ';
            }
        }
    }
}

/// A one-door rule over the workspace's non-test sources: which crates and files may do
/// the thing, and which files still do it a counted number of times.
pub struct Door<'a> {
    /// Crates exempt from the rule: (name, why).
    pub exempt_crates: &'a [(&'a str, &'a str)],
    /// Files below `crates/` that are the door itself (a path ending in `/` is a directory).
    pub door: &'a [&'a str],
    /// Files still allowed: (path below `crates/`, exactly how many sites, why). The count
    /// must match, so the list can only shrink.
    pub allowed: &'a [(&'a str, usize, &'a str)],
    /// What a file with no site left no longer does ("starts no process any more").
    pub none_left: &'a str,
    /// What a site is counted as ("sites").
    pub unit: &'a str,
    /// What to do instead, after each site found.
    pub fix: &'a str,
}

impl Door<'_> {
    /// Every breach of the rule below `crates`, in words; `find` gives a file's sites as
    /// (line, what).
    pub fn problems(
        &self,
        crates: &Path,
        find: impl Fn(&str) -> Vec<(usize, String)>,
    ) -> Vec<String> {
        let dirs = crate_dirs(crates);
        assert!(dirs.len() >= 10, "found the crates: {dirs:?}");
        let mut problems = Vec::new();
        for dir in dirs {
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            if self.exempt_crates.iter().any(|(c, _)| *c == name) {
                continue;
            }
            let mut files = Vec::new();
            rust_files(&dir.join("src"), &mut files);
            files.sort();
            for file in files {
                let rel = file
                    .strip_prefix(crates)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                if self
                    .door
                    .iter()
                    .any(|d| rel == *d || (d.ends_with('/') && rel.starts_with(d)))
                {
                    continue;
                }
                let found = find(&std::fs::read_to_string(&file).unwrap());
                self.judge(&rel, &found, &mut problems);
            }
        }
        for (path, _, _) in self.allowed {
            if !crates.join(path).is_file() {
                problems.push(format!("ALLOWED names {path}, which does not exist"));
            }
        }
        problems
    }

    fn judge(&self, rel: &str, found: &[(usize, String)], problems: &mut Vec<String>) {
        let allowed = self.allowed.iter().find(|(p, _, _)| *p == rel);
        match allowed {
            Some((_, n, _)) if *n == found.len() => {}
            Some((_, n, why)) if found.is_empty() => problems.push(format!(
                "{rel} {}: remove its entry ({n}, {why}) from ALLOWED",
                self.none_left
            )),
            _ => {
                for (line, what) in found {
                    problems.push(format!("crates/{rel}:{line}: {what} — {}", self.fix));
                }
                if let Some((_, n, _)) = allowed {
                    problems.push(format!(
                        "crates/{rel}: {} {}, {n} allowed",
                        found.len(),
                        self.unit
                    ));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_door_names_each_site_a_count_that_differs_and_an_entry_left_over() {
        let door = Door {
            exempt_crates: &[],
            door: &[],
            allowed: &[("a/src/lib.rs", 1, "why")],
            none_left: "does it no more",
            unit: "sites",
            fix: "go through the door",
        };
        let mut problems = Vec::new();
        door.judge("a/src/lib.rs", &[(3, "x".into())], &mut problems);
        assert!(problems.is_empty(), "{problems:?}");
        door.judge("a/src/lib.rs", &[], &mut problems);
        assert_eq!(
            problems,
            ["a/src/lib.rs does it no more: remove its entry (1, why) from ALLOWED"]
        );
        problems.clear();
        door.judge(
            "a/src/lib.rs",
            &[(3, "x".into()), (9, "y".into())],
            &mut problems,
        );
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert_eq!(
            problems[1],
            "crates/a/src/lib.rs:9: y — go through the door"
        );
        assert_eq!(problems[2], "crates/a/src/lib.rs: 2 sites, 1 allowed");
        problems.clear();
        door.judge("b/src/lib.rs", &[(1, "z".into())], &mut problems);
        assert_eq!(problems, ["crates/b/src/lib.rs:1: z — go through the door"]);
    }
}
