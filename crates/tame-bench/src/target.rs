//! What a bench runs on: CPU lists as the user writes them (`all` meaning the online CPUs)
//! and the background load with its CPUs, resolved against the host.

use tame_host::{CpuList, Root};

use crate::error::{invalid, BenchError, Failure, Result};
use crate::load::{LoadKind, LoadSpec};

/// The CPUs `text` names: `all` for every online CPU, or a list such as `0,2-3`.
/// `what` names the argument in the message (`--cpus`).
pub fn cpus(root: &Root, text: &str, what: &str) -> Result<CpuList> {
    if text.trim() == "all" {
        return online_cpus(root);
    }
    CpuList::parse(text).map_err(|e| {
        invalid(format!(
            "{what}: {e} — write CPUs as a list such as 0,2-3, or `all`"
        ))
    })
}

/// The CPUs online now.
pub fn online_cpus(root: &Root) -> Result<CpuList> {
    root.cpus_online().map_err(|e| {
        BenchError::Failed(Failure::Host {
            what: "cannot tell which CPUs are online".into(),
            source: e,
        })
    })
}

/// The background load of `--load` on the CPUs of `--load-cpus` (default: every online CPU).
pub fn load(root: &Root, kinds: Option<&str>, load_cpus: Option<&str>) -> Result<Option<LoadSpec>> {
    let Some(kinds) = kinds else {
        if load_cpus.is_some() {
            return Err(invalid(
                "--load-cpus without --load — say which load to run, e.g. --load cpu,io",
            ));
        }
        return Ok(None);
    };
    let kinds = LoadKind::parse_list(kinds)?;
    let cpus = match load_cpus {
        Some(list) => cpus(root, list, "--load-cpus")?,
        None => online_cpus(root)?,
    };
    Ok(Some(LoadSpec {
        kinds,
        cpus,
        command: None,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(online: &str) -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(&tame_host::cpu::SYS_CPU[1..]);
        std::fs::create_dir_all(&path).unwrap();
        std::fs::write(path.join("online"), online).unwrap();
        let root = Root::new(dir.path());
        (dir, root)
    }

    #[test]
    fn all_means_the_online_cpus() {
        let (_d, root) = host("0-3\n");
        assert_eq!(cpus(&root, "all", "--cpus").unwrap().to_string(), "0-3");
        assert_eq!(cpus(&root, "1,3", "--cpus").unwrap().to_string(), "1,3");
        let e = cpus(&root, "x", "--cpus").unwrap_err();
        assert!(
            e.is_bad_input() && e.to_string().starts_with("--cpus: "),
            "{e}"
        );
    }

    #[test]
    fn unreadable_online_list_is_a_failure_with_its_cause() {
        let dir = tempfile::tempdir().unwrap();
        let e = online_cpus(&Root::new(dir.path())).unwrap_err();
        assert!(!e.is_bad_input());
        assert!(
            e.to_string()
                .starts_with("cannot tell which CPUs are online: "),
            "{e}"
        );
        assert!(std::error::Error::source(&e).is_some());
    }

    #[test]
    fn malformed_online_list_is_a_failure_that_names_the_file() {
        let (_d, root) = host("zero\n");
        let e = online_cpus(&root).unwrap_err();
        assert!(!e.is_bad_input());
        assert!(
            e.to_string().starts_with(
                "cannot tell which CPUs are online: /sys/devices/system/cpu/online:1: "
            ),
            "{e}"
        );
    }

    #[test]
    fn load_cpus_default_to_the_online_cpus() {
        let (_d, root) = host("0-1\n");
        assert_eq!(load(&root, None, None).unwrap(), None);
        let spec = load(&root, Some("cpu,io"), None).unwrap().unwrap();
        assert_eq!(
            (spec.kinds.len(), spec.cpus.to_string().as_str()),
            (2, "0-1")
        );
        let spec = load(&root, Some("cpu"), Some("1")).unwrap().unwrap();
        assert_eq!(spec.cpus.to_string(), "1");
        let e = load(&root, None, Some("1")).unwrap_err();
        assert!(e.is_bad_input() && e.to_string().contains("--load-cpus without --load"));
    }
}
