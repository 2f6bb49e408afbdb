//! The exports on a fixture host changed in one respect each: what the golden files of
//! tame-cli (one spec per host) do not reach.

use std::path::Path;

use tame_host::kernel::parse_cmdline;
use tame_host::{HostModel, Root};
use tame_kube::{document::lookup, Export, Value};
use tame_partition::Spec;

fn two_socket() -> HostModel {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/hosts/two-socket-smt");
    HostModel::read(&Root::new(root))
}

fn at<'a>(e: &Export, doc: &'a mut Option<Value>, path: &str) -> Option<&'a Value> {
    *doc = Some(e.document());
    let p: Vec<String> = path.split('.').map(str::to_string).collect();
    lookup(doc.as_ref()?, &p)
}

fn spec(text: &str) -> Spec {
    Spec::parse("s.toml", text).unwrap()
}

const ONE_PER_SOCKET: &str = r#"
[[partition]]
name = "system"
cpus = "0-3,12-15,24-27,36-39"
role = "system"

[[partition]]
name = "rt"
cpus = "4-5,28-29"
role = "isolated"
"#;

#[test]
fn boot_huge_pages_become_the_profiles_hugepages() {
    let mut host = two_socket();
    host.kernel.cmdline = parse_cmdline(
        "ro default_hugepagesz=1G hugepagesz=1G hugepages=0:4,1:4 hugepagesz=2M hugepages=256",
    );
    let e = tame_kube::profile_for(&spec(ONE_PER_SOCKET), &host, "p").unwrap();
    let mut d = None;
    assert_eq!(
        at(&e, &mut d, "spec.hugepages.defaultHugepagesSize").and_then(Value::as_str),
        Some("1G")
    );
    let pages = at(&e, &mut d, "spec.hugepages.pages").cloned().unwrap();
    let want: Value = serde_norway::from_str(
        "- {size: 1G, count: 4, node: 0}\n- {size: 1G, count: 4, node: 1}\n- {size: 2M, count: 256}\n",
    )
    .unwrap();
    assert_eq!(pages, want);
    // The fixture's own command line reserves none: no hugepages section at all.
    let e = tame_kube::profile_for(&spec(ONE_PER_SOCKET), &two_socket(), "p").unwrap();
    assert!(at(&e, &mut d, "spec.hugepages").is_none());
}

/// CPUs in no partition are in neither reserved nor isolated: the profile warns, and only
/// the profile (a KubeletConfiguration has no such rule).
#[test]
fn cpus_in_no_partition_are_a_profile_warning() {
    let host = two_socket();
    let p = tame_kube::profile_for(&spec(ONE_PER_SOCKET), &host, "p").unwrap();
    let warning = p
        .not_expressed
        .iter()
        .find(|n| n.starts_with("WARNING: the Node Tuning Operator expects"))
        .unwrap_or_else(|| panic!("{:?}", p.not_expressed));
    assert!(
        warning.contains("CPUs 6-11,16-23,30-35,40-47 are in neither"),
        "{warning}"
    );
    let k = tame_kube::kubelet_for(&spec(ONE_PER_SOCKET), &host).unwrap();
    assert!(!k
        .not_expressed
        .iter()
        .any(|n| n.contains("Node Tuning Operator")));
}

#[test]
fn a_partition_across_sockets_gets_restricted_and_no_memory_manager_without_mems() {
    let across = ONE_PER_SOCKET.replace("4-5,28-29", "4-5,16-17,28-29,40-41");
    let host = two_socket();
    let k = tame_kube::kubelet_for(&spec(&across), &host).unwrap();
    let mut d = None;
    assert_eq!(
        at(&k, &mut d, "topologyManagerPolicy").and_then(Value::as_str),
        Some("restricted")
    );
    let why = &k
        .fields
        .iter()
        .find(|f| f.dotted() == "topologyManagerPolicy")
        .unwrap()
        .why;
    assert!(why.contains("\"rt\" (nodes 0-1) spans NUMA nodes"), "{why}");
    assert!(at(&k, &mut d, "memoryManagerPolicy").is_none());
    // A shared partition across sockets is as wide a pod to the kubelet: restricted too.
    let shared = format!(
        "{ONE_PER_SOCKET}\n[[partition]]\nname = \"pool\"\ncpus = \"6-7,18-19,30-31,42-43\"\nrole = \"shared\"\n"
    );
    let k = tame_kube::kubelet_for(&spec(&shared), &host).unwrap();
    assert_eq!(
        at(&k, &mut d, "topologyManagerPolicy").and_then(Value::as_str),
        Some("restricted")
    );
    // One socket: single-numa-node; whole cores: full-pcpus-only.
    let k = tame_kube::kubelet_for(&spec(ONE_PER_SOCKET), &host).unwrap();
    assert_eq!(
        at(&k, &mut d, "topologyManagerPolicy").and_then(Value::as_str),
        Some("single-numa-node")
    );
    assert_eq!(
        at(&k, &mut d, "cpuManagerPolicyOptions.full-pcpus-only").and_then(Value::as_str),
        Some("true")
    );
    // CPU 4 without its sibling 28: no full-pcpus-only, and the split is noted.
    let split = ONE_PER_SOCKET.replace("4-5,28-29", "4-5");
    let k = tame_kube::kubelet_for(&spec(&split), &host).unwrap();
    assert!(at(&k, &mut d, "cpuManagerPolicyOptions").is_none());
    assert!(
        k.not_expressed
            .iter()
            .any(|n| n.contains("splits SMT siblings")),
        "{:?}",
        k.not_expressed
    );
}

#[test]
fn mems_on_another_node_than_the_cpus_are_noted() {
    let far = ONE_PER_SOCKET.replace("role = \"isolated\"", "role = \"isolated\"\nmems = \"1\"");
    let k = tame_kube::kubelet_for(&spec(&far), &two_socket()).unwrap();
    assert!(
        k.not_expressed
            .iter()
            .any(|n| n.contains("mems = \"1\" is not the NUMA node of its CPUs (0)")),
        "{:?}",
        k.not_expressed
    );
    let mut d = None;
    assert_eq!(
        at(&k, &mut d, "memoryManagerPolicy").and_then(Value::as_str),
        Some("Static")
    );
}

#[test]
fn a_spec_invalid_on_the_host_is_refused() {
    let bad = ONE_PER_SOCKET.replace("4-5,28-29", "4-5,99");
    let e = tame_kube::kubelet_for(&spec(&bad), &two_socket()).unwrap_err();
    assert!(e.to_string().contains("not online"), "{e}");
}
