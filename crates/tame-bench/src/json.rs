//! Results as readable JSON of a sensible size: pretty-printed, except that a container
//! holding only scalars (a histogram bin `[low, high, count]`, a timeline window, a
//! summary) stays on one line. Fully pretty output put every number of the distributions
//! and timelines on a line of its own and made a result four times its compact size.

use serde::Serialize;

/// `value` as JSON, indented, with every innermost array or object inside it on one line.
pub fn pretty<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    Ok(fold_leaves(&serde_json::to_string_pretty(value)?))
}

/// Put each container of serde_json's pretty output that holds no container on one line.
/// Raw newlines in that output are all structural (strings escape theirs), so a leaf's
/// line breaks can go: after an opening bracket and before a closing one for nothing,
/// after a comma for one space.
fn fold_leaves(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    // Per open container: where it starts in `out`, and whether it holds a container.
    let mut open: Vec<(usize, bool)> = Vec::new();
    let mut in_string = false;
    let mut escaped = false;
    for c in text.chars() {
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '[' | '{' => {
                if let Some(parent) = open.last_mut() {
                    parent.1 = true;
                }
                open.push((out.len(), false));
            }
            ']' | '}' => {
                // The document itself stays unfolded, however flat it is.
                if let (Some((start, false)), false) = (open.pop(), open.is_empty()) {
                    let folded = fold_region(&out[start..]);
                    out.truncate(start);
                    out.push_str(&folded);
                }
            }
            _ => {}
        }
        out.push(c);
    }
    out
}

/// One leaf container (without its closing bracket) on one line. Every raw newline is
/// structural (a string holds `\n` escaped), so no string needs tracking here.
fn fold_region(region: &str) -> String {
    let mut folded = String::with_capacity(region.len());
    let mut chars = region.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\n' {
            folded.push(c);
            continue;
        }
        while chars.peek() == Some(&' ') {
            chars.next();
        }
        if folded.ends_with(',') {
            folded.push(' ');
        }
    }
    folded
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn leaves_fold_onto_one_line_and_the_rest_stays_indented() {
        let v = json!({
            "bench": "cycle",
            "bins": [[992, 1024, 3], [1024, 1088, 1]],
            "window": {"count": 2, "max": 30},
            "empty": [],
            "nested": {"inner": {"a": 1}}
        });
        let text = pretty(&v).unwrap();
        assert!(
            text.contains("\"bins\": [\n    [992, 1024, 3],\n    [1024, 1088, 1]\n  ]"),
            "{text}"
        );
        assert!(
            text.contains("\"window\": {\"count\": 2, \"max\": 30}"),
            "{text}"
        );
        assert!(text.contains("\"empty\": []"), "{text}");
        assert!(
            text.contains("\"nested\": {\n    \"inner\": {\"a\": 1}\n  }"),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap(), v);
    }

    #[test]
    fn a_flat_document_stays_unfolded() {
        assert_eq!(
            pretty(&json!({"bench": "cycle"})).unwrap(),
            "{\n  \"bench\": \"cycle\"\n}"
        );
        assert_eq!(pretty(&json!([1, 2])).unwrap(), "[\n  1,\n  2\n]");
    }

    #[test]
    fn brackets_commas_and_newlines_inside_strings_are_left_alone() {
        let v = json!({"command_line": ["tame", "a,\n[b]{c}", "q\"]\\"], "x": {"y": "}\n,"}});
        let text = pretty(&v).unwrap();
        assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap(), v);
        assert!(
            text.contains(r#""command_line": ["tame", "a,\n[b]{c}", "q\"]\\"]"#),
            "{text}"
        );
    }
}
