//! Accounts: user and group names with their ids, from /etc/passwd and /etc/group
//! (who may be given a partition's task list).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::reader::Reader;

pub const PASSWD: &str = "/etc/passwd";
pub const GROUP: &str = "/etc/group";

/// User and group ids by name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Accounts {
    pub users: BTreeMap<String, u32>,
    pub groups: BTreeMap<String, u32>,
}

impl Accounts {
    pub fn parse(passwd: &str, group: &str) -> Self {
        Self {
            users: parse_ids(passwd),
            groups: parse_ids(group),
        }
    }

    /// Missing files read as no accounts (fixture trees have none).
    pub fn read(r: &mut Reader) -> Self {
        let passwd = r.optional(PASSWD).unwrap_or_default();
        let group = r.optional(GROUP).unwrap_or_default();
        Self::parse(&passwd, &group)
    }

    pub fn uid(&self, user: &str) -> Option<u32> {
        self.users.get(user).copied()
    }

    pub fn gid(&self, group: &str) -> Option<u32> {
        self.groups.get(group).copied()
    }
}

/// `name:x:id:…` lines (both files have the id third); the first line of a name
/// with a numeric id counts, as getpwnam's does; others are skipped.
pub fn parse_ids(table: &str) -> BTreeMap<String, u32> {
    let mut out = BTreeMap::new();
    for line in table.lines() {
        let mut f = line.split(':');
        let (Some(name), Some(id)) = (f.next(), f.nth(1)) else {
            continue;
        };
        if let Ok(id) = id.trim().parse() {
            out.entry(name.to_string()).or_insert(id);
        }
    }
    out
}

/// The uid of a user name, from passwd text.
pub fn user_id(passwd: &str, name: &str) -> Option<u32> {
    parse_ids(passwd).get(name).copied()
}

/// The gid of a group name, from group text.
pub fn group_id(group: &str, name: &str) -> Option<u32> {
    parse_ids(group).get(name).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_by_name_first_numeric_line_wins() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\n# note\nme:x:bad:1\nme:x:1000:1000::/home/me:/bin/sh\nme:x:7:7::/:/bin/sh\n+nis\n";
        let a = Accounts::parse(passwd, "root:x:0:\nteam:x:1000:me,you\n");
        assert_eq!(a.uid("root"), Some(0));
        assert_eq!(a.uid("me"), Some(1000));
        assert_eq!(a.uid("nobody-here"), None);
        assert_eq!(a.gid("team"), Some(1000));
        assert_eq!(user_id(passwd, "me"), Some(1000));
        assert_eq!(group_id("team:x:5:\n", "team"), Some(5));
        assert_eq!(a.users.len(), 2);
    }

    #[test]
    fn a_tree_without_etc_has_no_accounts_and_no_problem() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/hosts/rt-8cpu");
        let root = crate::Root::new(dir);
        let mut r = Reader::new(&root);
        assert_eq!(Accounts::read(&mut r), Accounts::default());
        assert!(r.problems.is_empty());
    }
}
