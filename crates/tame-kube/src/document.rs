//! An exported document: the fields tame sets (each with why, and how a node's value is
//! compared with it), what Kubernetes cannot express, and the rendering as YAML or JSON.

use serde::Serialize;
use serde_norway::{Mapping, Value};

/// How `tame plan --from-kubelet` compares a node's value of a field with tame's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Check {
    /// The same string (policy names are case-sensitive in the kubelet).
    Text,
    /// The same set of CPUs, however written (`0-1` = `0,1`).
    CpuList,
    /// A list of `{numaNode, limits}`: the same set of NUMA nodes carries a reservation
    /// (the amounts are the node's to size; their total is checked on its own).
    NumaNodes,
    /// An amount tame proposes for sizing, not something the spec decides: not compared.
    Sizing,
}

/// One value tame sets, at `path` below the document's root.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Field {
    pub path: Vec<String>,
    pub value: Value,
    pub why: String,
    pub check: Check,
}

impl Field {
    pub fn new(path: &[&str], value: impl Into<Value>, why: impl Into<String>) -> Self {
        Self {
            path: path.iter().map(|s| s.to_string()).collect(),
            value: value.into(),
            why: why.into(),
            check: Check::Text,
        }
    }

    pub fn checked(mut self, check: Check) -> Self {
        self.check = check;
        self
    }

    /// `a.b.c`, the path as people write it.
    pub fn dotted(&self) -> String {
        self.path.join(".")
    }
}

/// A whole export: the document's head (apiVersion, kind, metadata), the fields tame
/// sets, and what the spec says that the document cannot.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Export {
    pub api_version: &'static str,
    pub kind: &'static str,
    /// `metadata.name` for API objects; `None` for a config file (KubeletConfiguration).
    pub name: Option<String>,
    pub fields: Vec<Field>,
    /// Everything the spec says that this document cannot express, one sentence each.
    pub not_expressed: Vec<String>,
    /// `tame plan`'s warnings about the spec on this host (they hold for the fleet too).
    pub plan_warnings: Vec<String>,
}

impl Export {
    /// The document, in Kubernetes' order: apiVersion, kind, metadata, then the fields
    /// in the order they were added.
    pub fn document(&self) -> Value {
        let mut root = Mapping::new();
        root.insert("apiVersion".into(), self.api_version.into());
        root.insert("kind".into(), self.kind.into());
        if let Some(name) = &self.name {
            let mut meta = Mapping::new();
            meta.insert("name".into(), name.as_str().into());
            root.insert("metadata".into(), Value::Mapping(meta));
        }
        for f in &self.fields {
            insert(&mut root, &f.path, f.value.clone());
        }
        Value::Mapping(root)
    }

    /// The document as YAML, preceded by comments: where it came from, why each field
    /// has its value, and what the spec says that the document cannot express.
    pub fn to_yaml(&self, header: &str) -> String {
        let mut out = String::new();
        for line in header.lines() {
            out.push_str(&format!("# {line}\n"));
        }
        out.push_str("#\n# Why each value:\n");
        for f in &self.fields {
            out.push_str(&format!("#   {}: {}\n", f.dotted(), f.why));
        }
        if !self.not_expressed.is_empty() {
            out.push_str("#\n# What the spec says that this document cannot express:\n");
            for n in &self.not_expressed {
                out.push_str(&format!("#   - {n}\n"));
            }
        }
        out.push_str(&yaml(&self.document()));
        out
    }

    /// The document as pretty JSON (no comments: the notes go to stderr).
    pub fn to_json(&self) -> String {
        // A document of strings, numbers, booleans, lists and string-keyed maps always
        // serialises; the fallback only keeps this infallible.
        serde_json::to_string_pretty(&self.document()).unwrap_or_default() + "\n"
    }
}

/// YAML text of a value (documents tame builds always serialise).
pub fn yaml(value: &Value) -> String {
    serde_norway::to_string(value).unwrap_or_default()
}

/// A value on one line, as JSON (`"static"`, `[{"numaNode":0,…}]`): for messages.
pub fn inline(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// Put `value` at `path`, creating the maps on the way (a later field at the same path
/// replaces an earlier one).
fn insert(map: &mut Mapping, path: &[String], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut here = map;
    for key in parents {
        let key = Value::from(key.as_str());
        if !matches!(here.get(&key), Some(Value::Mapping(_))) {
            here.insert(key.clone(), Value::Mapping(Mapping::new()));
        }
        here = match here.get_mut(&key) {
            Some(Value::Mapping(m)) => m,
            // Just made a mapping there.
            _ => return,
        };
    }
    here.insert(Value::from(last.as_str()), value);
}

/// A value at `path` below a document, if every step is a map with that key.
pub fn lookup<'a>(doc: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter()
        .try_fold(doc, |v, key| v.as_mapping()?.get(key.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_nest_in_order_after_the_head() {
        let e = Export {
            api_version: "v1",
            kind: "K",
            name: Some("n".into()),
            fields: vec![
                Field::new(&["spec", "b"], "x", "why b"),
                Field::new(&["spec", "a", "c"], true, "why c"),
                Field::new(&["top"], 3, "why top"),
            ],
            not_expressed: vec!["cache ways".into()],
            plan_warnings: vec![],
        };
        let text = e.to_yaml("from s.toml");
        assert_eq!(
            text,
            "# from s.toml\n#\n# Why each value:\n#   spec.b: why b\n#   spec.a.c: why c\n#   top: why top\n\
             #\n# What the spec says that this document cannot express:\n#   - cache ways\n\
             apiVersion: v1\nkind: K\nmetadata:\n  name: n\nspec:\n  b: x\n  a:\n    c: true\ntop: 3\n"
        );
        let doc = e.document();
        let path: Vec<String> = vec!["spec".into(), "a".into(), "c".into()];
        assert_eq!(lookup(&doc, &path), Some(&Value::Bool(true)));
        assert_eq!(lookup(&doc, &path[..1]).map(Value::is_mapping), Some(true));
        assert!(lookup(&doc, &["spec".into(), "zz".into()]).is_none());
        assert!(e
            .to_json()
            .starts_with("{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"K\""));
    }
}
