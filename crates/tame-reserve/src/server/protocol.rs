//! The wire protocol: one JSON request per line, one JSON response per line, one exchange
//! per connection.

use serde::{Deserialize, Serialize};

pub const PROTOCOL_VERSION: u32 = 1;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    Reserve {
        pid: u32,
        share_ppm: u64,
        period_ns: u64,
        cpu: u32,
    },
    Release {
        pid: u32,
    },
    List,
}

impl Request {
    /// The numbers a client sent, checked before the server takes its lock (they are
    /// anyone's: a share of 2⁶⁴ − 1 ppm once overflowed under it).
    pub fn check_numbers(&self) -> crate::error::Result<()> {
        match *self {
            Request::Reserve {
                share_ppm,
                period_ns,
                ..
            } => crate::spec::check_numbers(share_ppm, period_ns),
            Request::Release { .. } | Request::List => Ok(()),
        }
    }
}

/// A client as the server holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientInfo {
    pub pid: u32,
    pub cpu: u32,
    pub share_ppm: u64,
    pub period_ns: u64,
    pub tids: Vec<u32>,
}

/// Why the server said no: `invalid` and `refused` are the user's to fix (exit 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    Invalid,
    Refused,
    Failed,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    pub version: u32,
    pub server_pid: u32,
    /// The watchdog process that resets clients if the server dies.
    pub watchdog_pid: u32,
    pub cap_ppm: u64,
    pub clients: Vec<ClientInfo>,
    /// What bounds the guarantee here (RT throttling, fair server).
    pub notes: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum Response {
    Ok { status: Status },
    Error { kind: ErrorKind, message: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_tagged_json() {
        let r = Request::Reserve {
            pid: 7,
            share_ppm: 250_000,
            period_ns: 40_000_000,
            cpu: 1,
        };
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(
            text,
            r#"{"op":"reserve","pid":7,"share_ppm":250000,"period_ns":40000000,"cpu":1}"#
        );
        assert_eq!(serde_json::from_str::<Request>(&text).unwrap(), r);
        assert_eq!(
            serde_json::from_str::<Request>(r#"{"op":"list"}"#).unwrap(),
            Request::List
        );
        assert!(serde_json::from_str::<Request>(r#"{"op":"steal"}"#).is_err());
    }
}
