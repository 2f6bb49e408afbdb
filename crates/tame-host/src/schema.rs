//! The one convention for naming and versioning the JSON documents tame writes: every
//! output document is a [`Document`] whose [`Schema`] is a name (`tame.check`) and a
//! version, bumped on any change an old reader would misread (docs/results.md).
//!
//! Documents written before this convention keep their on-disk spelling until their next
//! version bump, so files and goldens stay byte-identical; [`Spelling`] says which one a
//! document uses. New documents and bumped ones use [`Spelling::Tagged`].
//!
//! It lives in tame-host because nearly every crate that writes a document depends on it;
//! tame-ipc depends on nothing, so the `tame ipc ls` document is `tame_results::ipc_ls`.

use std::fmt;

use serde::{Serialize, Serializer};

/// How a document writes its schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spelling {
    /// `"schema": "tame.check/1"`: the name and version as one string.
    Tagged,
    /// `"schema": 1`: the version alone (the older documents: plan, apply, status, revert,
    /// the host model, an admission analysis, the reservation study's report).
    Number,
    /// `"schema_version": 1` beside `"bench"`: a bench result (the common result schema).
    BenchVersion,
}

/// A document's name and version, and how it is spelled on disk. Made with [`schema!`]
/// (`schema!(Tagged "tame.check", 1)`), which also spells the tag `tame.check/1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Schema {
    /// Dotted, starting `tame.`: `tame.check`, `tame.reserve.list`.
    pub name: &'static str,
    pub version: u32,
    /// `NAME/VERSION`: what a tagged document writes in `schema`.
    pub tag: &'static str,
    pub spelling: Spelling,
}

/// A [`Schema`]: `schema!(Tagged "tame.check", 1)`, `schema!(Number "tame.plan", 1)`,
/// `schema!(BenchVersion "tame.bench", 1)` (the [`Spelling`] first).
#[macro_export]
macro_rules! schema {
    ($spelling:ident $name:literal, $version:literal) => {
        $crate::schema::Schema {
            name: $name,
            version: $version,
            tag: concat!($name, "/", $version),
            spelling: $crate::schema::Spelling::$spelling,
        }
    };
}

impl Schema {
    /// Whether `schema` (the document's `schema` string) names this very version.
    pub fn is_tag(&self, schema: &str) -> bool {
        schema == self.tag
    }

    /// Whether `schema` (a `schema` string) names this document, any version.
    pub fn names(&self, schema: &str) -> bool {
        schema
            .strip_prefix(self.name)
            .is_some_and(|version| version.starts_with('/'))
    }
}

/// As written on disk: `tame.check/1` for a tagged document, the bare version otherwise.
impl fmt::Display for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.spelling {
            Spelling::Tagged => f.write_str(self.tag),
            Spelling::Number | Spelling::BenchVersion => write!(f, "{}", self.version),
        }
    }
}

/// The value of the document's `schema` (or `schema_version`) field.
impl Serialize for Schema {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.spelling {
            Spelling::Tagged => s.serialize_str(self.tag),
            Spelling::Number | Spelling::BenchVersion => s.serialize_u32(self.version),
        }
    }
}

/// A JSON document tame writes (`--json`, a result file): its schema, in one place.
pub trait Document {
    const SCHEMA: Schema;
}

/// A document whose type does not hold its `schema` field, written with it first
/// (`{"schema": "tame.compare/1", …its fields}`).
#[derive(Serialize)]
pub struct Versioned<'a, T: Serialize> {
    schema: Schema,
    #[serde(flatten)]
    doc: &'a T,
}

impl<'a, T: Document + Serialize> Versioned<'a, T> {
    pub fn new(doc: &'a T) -> Self {
        Versioned {
            schema: T::SCHEMA,
            doc,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_spelling_is_written_as_before() {
        let check: Schema = crate::schema!(Tagged "tame.check", 1);
        assert_eq!(check.to_string(), "tame.check/1");
        assert_eq!(serde_json::to_string(&check).unwrap(), "\"tame.check/1\"");
        let plan: Schema = crate::schema!(Number "tame.plan", 1);
        assert_eq!(plan.to_string(), "1");
        assert_eq!(serde_json::to_string(&plan).unwrap(), "1");
        let ipc: Schema = crate::schema!(BenchVersion "tame.bench.ipc", 2);
        assert_eq!(serde_json::to_string(&ipc).unwrap(), "2");
    }

    #[test]
    fn a_tag_is_recognised_by_name_and_by_version() {
        let s: Schema = crate::schema!(Tagged "tame.reserve", 1);
        assert!(s.is_tag("tame.reserve/1"));
        assert!(!s.is_tag("tame.reserve/10"));
        assert!(!s.is_tag("tame.reserve.list/1"));
        assert!(s.names("tame.reserve/9"));
        assert!(!s.names("tame.reserve.list/1"));
    }
}
