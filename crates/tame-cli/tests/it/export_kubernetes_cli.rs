//! `tame export kubelet|performance-profile` and `tame plan --from-kubelet`, on the fixture
//! hosts (read-only: nothing here touches the machine).
//!
//! Golden files: tests/fixtures/kubernetes/HOST.{kubelet,performance-profile}.yaml hold the
//! exports of each fixture host's spec. Regenerate them after an intended change with
//! `TAME_KUBE_BLESS=1 cargo test -p tame-cli --test export_kubernetes_cli` and review the diff.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Each fixture host and a spec that is valid on it.
const HOSTS: &[(&str, &str)] = &[
    ("dev-vm", "examples/isolate-cpu0.toml"),
    (
        "rt-8cpu",
        "crates/tame-cli/tests/fixtures/kubernetes/rt-8cpu.toml",
    ),
    ("two-socket-smt", "examples/numa-resctrl.toml"),
    (
        "fc-16cpu",
        "crates/tame-cli/tests/fixtures/kubernetes/fc-16cpu.toml",
    ),
];

const EXPORTS: &[&str] = &["kubelet", "performance-profile"];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `tame ARGS` run from the workspace root, so paths in the output are the ones written here.
fn tame(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tame"))
        .current_dir(workspace())
        .args(args)
        .output()
        .expect("tame runs")
}

fn root(host: &str) -> String {
    format!("fixtures/hosts/{host}")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn exports_match_the_golden_files_for_every_fixture_host() {
    let dir = workspace().join("crates/tame-cli/tests/fixtures/kubernetes");
    let bless = std::env::var_os("TAME_KUBE_BLESS").is_some();
    for (host, spec) in HOSTS {
        for export in EXPORTS {
            let out = tame(&["--root", &root(host), "export", export, spec]);
            let stderr = text(&out.stderr);
            assert_eq!(out.status.code(), Some(0), "{host} {export}: {stderr}");
            let stdout = text(&out.stdout);
            let golden = dir.join(format!("{host}.{export}.yaml"));
            if bless {
                std::fs::write(&golden, &stdout).unwrap();
                continue;
            }
            let want = std::fs::read_to_string(&golden).unwrap_or_default();
            assert!(
                stdout == want,
                "{host} {export} differs from {} — if intended, regenerate with TAME_KUBE_BLESS=1 cargo test -p tame-cli --test export_kubernetes_cli\n--- got:\n{stdout}",
                golden.display()
            );
            // What Kubernetes cannot express is on stderr, never dropped (every spec here
            // has exclusive CPUs, which the kubelet shares until claimed).
            assert!(
                stderr.starts_with(&format!("tame export {export}: what the spec says that a ")),
                "{stderr}"
            );
            assert!(stderr.contains("exclusive only once claimed"), "{stderr}");
            // The plan's own warnings come along: CPU 0 carries housekeeping.
            if *host == "dev-vm" {
                assert!(
                    stderr.contains("tame plan warns about the spec on this host (so for nodes like it):\n  - partition \"rt\" isolates CPU 0"),
                    "{stderr}"
                );
            }
        }
    }
}

/// `tame --root fixtures/hosts/HOST export WHAT SPEC --json EXTRA…`, which must succeed.
fn export_json(host: &str, what: &str, spec: &str, extra: &[&str]) -> serde_json::Value {
    let root = root(host);
    let mut args = vec!["--root", root.as_str(), "export", what, spec, "--json"];
    args.extend(extra);
    let out = tame(&args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The fields each export must carry, by value, on the richest fixture (2 sockets, SMT, mems).
#[test]
fn the_two_socket_exports_carry_the_layout() {
    let spec = "examples/numa-resctrl.toml";
    let k = export_json("two-socket-smt", "kubelet", spec, &[]);
    assert_eq!(k["apiVersion"], "kubelet.config.k8s.io/v1beta1");
    assert_eq!(k["kind"], "KubeletConfiguration");
    assert_eq!(k["cpuManagerPolicy"], "static");
    assert_eq!(k["reservedSystemCPUs"], "0-3,12-15,24-27,36-39");
    // rt0 and rt1 each lie in one node, but the shared "pool" spans both.
    assert_eq!(k["topologyManagerPolicy"], "restricted");
    assert_eq!(k["cpuManagerPolicyOptions"]["full-pcpus-only"], "true");
    assert_eq!(k["memoryManagerPolicy"], "Static");
    assert_eq!(k["reservedMemory"][1]["numaNode"], 1);
    let p = export_json(
        "two-socket-smt",
        "performance-profile",
        spec,
        &["--name", "fleet-a"],
    );
    assert_eq!(p["apiVersion"], "performance.openshift.io/v2");
    assert_eq!(p["metadata"]["name"], "fleet-a");
    assert_eq!(p["spec"]["cpu"]["reserved"], "0-3,12-15,24-27,36-39");
    assert_eq!(p["spec"]["cpu"]["isolated"], "4-11,16-23,28-35,40-47");
    assert_eq!(p["spec"]["realTimeKernel"]["enabled"], false);
    assert_eq!(p["spec"]["globallyDisableIrqLoadBalancing"], true);
    assert_eq!(p["spec"]["numa"]["topologyPolicy"], "restricted");
    assert_eq!(
        p["spec"]["nodeSelector"]["node-role.kubernetes.io/tame"],
        ""
    );
    // The PREEMPT_RT fixture asks for the real-time kernel.
    let p = export_json("rt-8cpu", "performance-profile", HOSTS[1].1, &[]);
    assert_eq!(p["spec"]["realTimeKernel"]["enabled"], true);
    assert_eq!(p["metadata"]["name"], "tame-rt-8cpu");
}

#[test]
fn output_file_gets_what_stdout_gets() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("kubelet.yaml");
    let args = [
        "--root",
        "fixtures/hosts/dev-vm",
        "export",
        "kubelet",
        HOSTS[0].1,
    ];
    let to_stdout = tame(&args);
    let mut with_file = args.to_vec();
    with_file.extend(["-o", file.to_str().unwrap()]);
    let to_file = tame(&with_file);
    assert_eq!(to_file.status.code(), Some(0), "{}", text(&to_file.stderr));
    assert!(to_file.stdout.is_empty());
    assert_eq!(std::fs::read(&file).unwrap(), to_stdout.stdout);
}

#[test]
fn bad_input_is_refused_with_exit_2() {
    let cases: &[(&[&str], &str)] = &[
        // Not valid on the 2-CPU VM: the plan's errors.
        (
            &[
                "--root",
                "fixtures/hosts/dev-vm",
                "export",
                "kubelet",
                "examples/numa-resctrl.toml",
            ],
            "the spec cannot be applied here",
        ),
        (
            &[
                "--root",
                "fixtures/hosts/dev-vm",
                "export",
                "kubelet",
                "no/such.toml",
            ],
            "cannot read spec no/such.toml",
        ),
        (
            &[
                "--root",
                "fixtures/hosts/dev-vm",
                "export",
                "performance-profile",
                HOSTS[0].1,
                "--name",
                "Bad_Name",
            ],
            "is not a Kubernetes object name",
        ),
        (
            &[
                "--root",
                "fixtures/hosts/dev-vm",
                "export",
                "kubelet",
                HOSTS[0].1,
                "-o",
                "/nonexistent/dir/k.yaml",
            ],
            "cannot write /nonexistent/dir/k.yaml",
        ),
        (
            &["--root", "no/such/root", "export", "kubelet", HOSTS[0].1],
            "not a directory",
        ),
    ];
    for (args, needle) in cases {
        expect_bad_input(args, needle);
    }
}

/// `tame ARGS` (from the workspace root) is refused as bad input, exit 2, with `needle` in
/// its message and no document printed.
fn expect_bad_input(args: &[&str], needle: &str) {
    let out = tame(args);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(
        stderr.contains(needle),
        "{args:?}: expected {needle:?} in {stderr}"
    );
    assert!(out.stdout.is_empty(), "{args:?}");
}

/// `tame --root HOST plan SPEC --from-kubelet FILE` for one of [`HOSTS`].
fn from_kubelet((host, spec): (&str, &str), file: &Path) -> Output {
    tame(&[
        "--root",
        &root(host),
        "plan",
        spec,
        "--from-kubelet",
        file.to_str().unwrap(),
    ])
}

/// `plan --from-kubelet` on a file written by `tame export kubelet` (YAML and JSON): every
/// field matches, exit 0.
#[test]
fn from_kubelet_matches_the_export_itself() {
    let dir = tempfile::tempdir().unwrap();
    let spec = HOSTS[2].1;
    for (name, json) in [("k.yaml", false), ("k.json", true)] {
        let file = dir.path().join(name);
        let mut args = vec![
            "--root",
            "fixtures/hosts/two-socket-smt",
            "export",
            "kubelet",
            spec,
            "-o",
        ];
        args.push(file.to_str().unwrap());
        if json {
            args.push("--json");
        }
        assert_eq!(tame(&args).status.code(), Some(0));
        let out = from_kubelet(HOSTS[2], &file);
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
        assert!(
            stdout.contains("  matched  reservedSystemCPUs: \"0-3,12-15,24-27,36-39\""),
            "{stdout}"
        );
        assert!(stdout.contains("  matched  reservedMemory: "), "{stdout}");
        assert!(
            stdout.contains("6 matched, 0 differ, 0 missing: the node's kubelet realises the spec"),
            "{stdout}"
        );
    }
}

/// A kubeadm-style node config: CPU lists spelled differently still match; a wrong policy
/// differs (with tame's value and why); an absent field is missing; exit 1.
#[test]
fn from_kubelet_reports_differing_and_missing_fields() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.yaml");
    std::fs::write(
        &file,
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n\
         cgroupDriver: systemd\nclusterDNS: [10.96.0.10]\n\
         cpuManagerPolicy: none\nreservedSystemCPUs: \"0,1\"\n",
    )
    .unwrap();
    let args = [
        "--root",
        "fixtures/hosts/rt-8cpu",
        "plan",
        HOSTS[1].1,
        "--from-kubelet",
        file.to_str().unwrap(),
    ];
    let out = tame(&args);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("  differs  cpuManagerPolicy: the node has \"none\", tame sets \"static\" — Guaranteed pods"),
        "{stdout}"
    );
    assert!(
        stdout.contains("  matched  reservedSystemCPUs: \"0-1\""),
        "{stdout}"
    );
    assert!(
        stdout.contains("  missing  topologyManagerPolicy: tame sets \"single-numa-node\" — this host has one NUMA node"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "1 matched, 1 differ, 1 missing: the node's kubelet does not realise the spec"
        ),
        "{stdout}"
    );
    // The same as JSON, for scripts.
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let out = tame(&json_args);
    assert_eq!(out.status.code(), Some(1));
    let c: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(c["checks"][0]["field"], "cpuManagerPolicy");
    assert_eq!(c["checks"][0]["status"], "differs");
    assert_eq!(c["checks"][0]["node"], "none");
    assert_eq!(c["checks"][0]["want"], "static");
    assert_eq!(c["checks"][2]["status"], "missing");
}

/// The other shapes a node's config comes in: the kubelet's /configz output (JSON, one
/// `kubeletconfig` key) and an OpenShift KubeletConfig object (YAML, with a merge key).
#[test]
fn from_kubelet_reads_configz_output_and_openshift_kubelet_configs() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "configz.json",
            "{\"kubeletconfig\":{\"enableServer\":true,\"cpuManagerPolicy\":\"static\",\
             \"reservedSystemCPUs\":\"0,1\",\"topologyManagerPolicy\":\"single-numa-node\"}}",
        ),
        (
            "kubeletconfig.yaml",
            "apiVersion: machineconfiguration.openshift.io/v1\nkind: KubeletConfig\n\
             metadata: {name: tame}\nspec:\n  machineConfigPoolSelector: {matchLabels: {tame: \"\"}}\n\
             \x20 kubeletConfig:\n    <<: {cpuManagerPolicy: static, reservedSystemCPUs: \"0-1\"}\n\
             \x20   topologyManagerPolicy: single-numa-node\n",
        ),
    ];
    for (name, content) in cases {
        let file = dir.path().join(name);
        std::fs::write(&file, content).unwrap();
        let out = from_kubelet(HOSTS[1], &file);
        let stdout = text(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{name}: {stdout}{}",
            text(&out.stderr)
        );
        assert!(
            stdout.contains("3 matched, 0 differ, 0 missing: the node's kubelet realises the spec"),
            "{name}: {stdout}"
        );
    }
}

/// The plan's warnings about the spec reach stderr, as with `tame export`, and stdout
/// stays the comparison alone.
#[test]
fn from_kubelet_prints_the_plans_warnings_to_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("empty.yaml");
    std::fs::write(&file, "{}\n").unwrap();
    let out = from_kubelet(HOSTS[0], &file);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stderr.starts_with("tame plan --from-kubelet: tame plan warns about the spec on this host (so for nodes like it):\n  - partition \"rt\" isolates CPU 0"),
        "{stderr}"
    );
    assert!(!stdout.contains("warns"), "{stdout}");
}

#[test]
fn from_kubelet_refuses_malformed_files_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "bad.yaml",
            "cpuManagerPolicy: [static\n",
            "not valid YAML at line",
        ),
        (
            "bad.json",
            "{\"cpuManagerPolicy\": }",
            "not valid JSON at line 1",
        ),
        (
            "pod.yaml",
            "apiVersion: v1\nkind: Pod\n",
            "is a Pod, not a KubeletConfiguration",
        ),
        ("list.yaml", "- a\n", "not a map of fields"),
    ];
    let refused = |file: &str, needle: &str| {
        expect_bad_input(
            &[
                "--root",
                "fixtures/hosts/rt-8cpu",
                "plan",
                HOSTS[1].1,
                "--from-kubelet",
                file,
            ],
            needle,
        )
    };
    for (name, content, needle) in cases {
        let file = dir.path().join(name);
        std::fs::write(&file, content).unwrap();
        refused(file.to_str().unwrap(), needle);
    }
    refused(
        "/no/such/config.yaml",
        "cannot read the kubelet config /no/such/config.yaml",
    );
}
