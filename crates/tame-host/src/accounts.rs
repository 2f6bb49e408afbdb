//! Users and groups from /etc/passwd and /etc/group: the uid of a name, the
//! gid of a name, the groups a user is listed in.

use serde::{Deserialize, Serialize};

use crate::reader::Reader;
use crate::{HostError, Root};

pub const PASSWD: &str = "/etc/passwd";
pub const GROUP: &str = "/etc/group";

/// `name:x:uid:gid:…` of /etc/passwd.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

/// `name:x:gid:member,member` of /etc/group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    pub name: String,
    pub gid: u32,
    pub members: Vec<String>,
}

/// The local account database. Lines that do not parse are skipped, as
/// getpwnam does.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Accounts {
    pub users: Vec<User>,
    pub groups: Vec<Group>,
}

impl Accounts {
    /// Parse passwd and group text.
    pub fn parse(passwd: &str, group: &str) -> Self {
        let fields = |l: &str| l.split(':').map(str::to_string).collect::<Vec<_>>();
        let users = passwd
            .lines()
            .filter_map(|l| {
                let f = fields(l);
                Some(User {
                    name: f.first()?.clone(),
                    uid: f.get(2)?.trim().parse().ok()?,
                    gid: f.get(3)?.trim().parse().ok()?,
                })
            })
            .collect();
        let groups = group
            .lines()
            .filter_map(|l| {
                let f = fields(l);
                Some(Group {
                    name: f.first()?.clone(),
                    gid: f.get(2)?.trim().parse().ok()?,
                    members: f
                        .get(3)
                        .map(|m| {
                            m.split(',')
                                .map(str::trim)
                                .filter(|m| !m.is_empty())
                                .map(str::to_string)
                                .collect()
                        })
                        .unwrap_or_default(),
                })
            })
            .collect();
        Self { users, groups }
    }

    /// Read into the host model; missing files read as no accounts (fixture trees have none).
    pub fn read(r: &mut Reader) -> Self {
        let passwd = r.optional(PASSWD).unwrap_or_default();
        let group = r.optional(GROUP).unwrap_or_default();
        Self::parse(&passwd, &group)
    }

    /// The uid of user `name` (the first entry of that name with a numeric id, as getpwnam).
    pub fn uid_of(&self, name: &str) -> Option<u32> {
        self.users.iter().find(|u| u.name == name).map(|u| u.uid)
    }

    /// The gid of group `name`.
    pub fn gid_of(&self, name: &str) -> Option<u32> {
        self.groups.iter().find(|g| g.name == name).map(|g| g.gid)
    }

    /// Every group `user` belongs to: its primary group and those listing it.
    pub fn groups_of(&self, user: &str) -> Vec<u32> {
        let mut gids: Vec<u32> = self
            .users
            .iter()
            .filter(|u| u.name == user)
            .map(|u| u.gid)
            .take(1)
            .chain(
                self.groups
                    .iter()
                    .filter(|g| g.members.iter().any(|m| m == user))
                    .map(|g| g.gid),
            )
            .collect();
        gids.sort_unstable();
        gids.dedup();
        gids
    }
}

impl Root {
    /// Users and groups; a missing file reads as empty (a minimal container).
    pub fn accounts(&self) -> Result<Accounts, HostError> {
        let passwd = self.read_optional(PASSWD)?.unwrap_or_default();
        let group = self.read_optional(GROUP)?.unwrap_or_default();
        Ok(Accounts::parse(&passwd, &group))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_to_ids_and_memberships() {
        let a = Accounts::parse(
            "root:x:0:0:root:/root:/bin/sh\nbroken\nrt:x:1001:1001::/home/rt:/bin/sh\n",
            "root:x:0:\nrtgrp:x:2000:rt, other\nrt:x:1001:\n",
        );
        assert_eq!(a.uid_of("rt"), Some(1001));
        assert_eq!(a.uid_of("nobody"), None);
        assert_eq!(a.gid_of("rtgrp"), Some(2000));
        assert_eq!(a.groups_of("rt"), vec![1001, 2000]);
        assert_eq!(a.groups_of("other"), vec![2000]);
    }

    #[test]
    fn first_numeric_line_of_a_name_wins() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\n# note\nme:x:bad:1\nme:x:1000:1000::/home/me:/bin/sh\nme:x:7:7::/:/bin/sh\n+nis\n";
        let a = Accounts::parse(passwd, "root:x:0:\nteam:x:1000:me,you\n");
        assert_eq!(a.uid_of("root"), Some(0));
        assert_eq!(a.uid_of("me"), Some(1000));
        assert_eq!(a.gid_of("team"), Some(1000));
        assert_eq!(a.groups_of("you"), vec![1000]);
    }

    #[test]
    fn a_tree_without_etc_has_no_accounts_and_no_problem() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/hosts/rt-8cpu");
        let root = crate::Root::new(dir);
        let mut r = Reader::new(&root);
        assert_eq!(Accounts::read(&mut r), Accounts::default());
        assert!(r.problems.is_empty());
        assert_eq!(root.accounts().unwrap(), Accounts::default());
    }
}
