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
