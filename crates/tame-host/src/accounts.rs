//! Users and groups from /etc/passwd and /etc/group: the uid of a name, the
//! gid of a name, the groups a user is listed in.

use crate::{HostError, Root};

const PASSWD: &str = "/etc/passwd";
const GROUP: &str = "/etc/group";

/// `name:x:uid:gid:…` of /etc/passwd.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

/// `name:x:gid:member,member` of /etc/group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    pub name: String,
    pub gid: u32,
    pub members: Vec<String>,
}

/// The local account database. Lines that do not parse are skipped, as
/// getpwnam does.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
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

    /// The uid of user `name` (the first entry of that name).
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
}
