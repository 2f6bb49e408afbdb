//! contrib/kubernetes: every manifest parses as YAML and carries what the API requires of
//! its kind; the DaemonSet is wired as docs/fleet.md says (host mounts below /host, the
//! textfile directory shared with the node_exporter side car); kubectl reads them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::api_server::ApiServer;
use serde_norway::Value;
use tame_testing::require::{have_program, require};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn contrib() -> PathBuf {
    workspace().join("contrib/kubernetes")
}

/// Every manifest by kind: `kubectl apply -f contrib/kubernetes/` reads the .yaml files.
fn manifests() -> BTreeMap<String, (PathBuf, Value)> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(contrib()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let doc: Value = serde_norway::from_str(&text)
            .unwrap_or_else(|e| panic!("{} is not YAML: {e}", path.display()));
        for key in ["apiVersion", "kind"] {
            assert!(
                doc.get(key)
                    .and_then(Value::as_str)
                    .is_some_and(|s| !s.is_empty()),
                "{} lacks {key}",
                path.display()
            );
        }
        assert!(
            str_at(&doc, &["metadata", "name"]).is_some_and(|n| !n.is_empty()),
            "{} lacks metadata.name",
            path.display()
        );
        let kind = str_at(&doc, &["kind"]).unwrap().to_string();
        assert!(
            out.insert(kind.clone(), (path, doc)).is_none(),
            "two {kind}s"
        );
    }
    out
}

fn at<'a>(doc: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(doc, |v, k| v.get(*k))
}

fn str_at<'a>(doc: &'a Value, path: &[&str]) -> Option<&'a str> {
    at(doc, path)?.as_str()
}

fn list<'a>(doc: &'a Value, path: &[&str]) -> &'a [Value] {
    at(doc, path)
        .and_then(Value::as_sequence)
        .map_or(&[], Vec::as_slice)
}

/// `kubectl apply -f contrib/kubernetes/` applies the files in the order of their names and
/// stops at the first object whose namespace or service account does not exist yet.
#[test]
fn manifests_apply_in_dependency_order_by_file_name() {
    let mut by_name: Vec<(PathBuf, String)> = manifests()
        .into_iter()
        .map(|(kind, (path, _))| (path, kind))
        .collect();
    by_name.sort();
    assert_eq!(
        by_name.iter().map(|(_, k)| k.as_str()).collect::<Vec<_>>(),
        ["Namespace", "ServiceAccount", "DaemonSet"],
        "{by_name:?}"
    );
}

#[test]
fn every_manifest_carries_what_its_kind_requires() {
    let m = manifests();
    assert_eq!(
        m.keys().map(String::as_str).collect::<Vec<_>>(),
        ["DaemonSet", "Namespace", "ServiceAccount"]
    );
    let ns = &m["Namespace"].1;
    assert_eq!(str_at(ns, &["apiVersion"]), Some("v1"));
    let namespace = str_at(ns, &["metadata", "name"]).unwrap();
    // Privileged pods are refused where Pod Security enforces baseline or restricted.
    assert_eq!(
        str_at(
            ns,
            &["metadata", "labels", "pod-security.kubernetes.io/enforce"]
        ),
        Some("privileged")
    );
    let sa = &m["ServiceAccount"].1;
    assert_eq!(str_at(sa, &["metadata", "namespace"]), Some(namespace));
    let ds = &m["DaemonSet"].1;
    assert_eq!(str_at(ds, &["apiVersion"]), Some("apps/v1"));
    assert_eq!(str_at(ds, &["metadata", "namespace"]), Some(namespace));
    // apps/v1 requires a selector that matches the template's labels.
    let selector = at(ds, &["spec", "selector", "matchLabels"])
        .and_then(Value::as_mapping)
        .expect("spec.selector.matchLabels");
    let labels = at(ds, &["spec", "template", "metadata", "labels"]).expect("template labels");
    assert!(!selector.is_empty());
    for (k, v) in selector {
        assert_eq!(
            labels.get(k),
            Some(v),
            "selector {k:?} does not match the template"
        );
    }
    let pod = at(ds, &["spec", "template", "spec"]).expect("spec.template.spec");
    assert_eq!(
        str_at(pod, &["serviceAccountName"]),
        str_at(sa, &["metadata", "name"])
    );
    assert_eq!(pod.get("hostPID"), Some(&Value::Bool(true)));
    assert!(at(pod, &["nodeSelector"])
        .and_then(Value::as_mapping)
        .is_some_and(|m| !m.is_empty()));
    assert!(!list(pod, &["tolerations"]).is_empty());
    let volumes: Vec<&str> = list(pod, &["volumes"])
        .iter()
        .map(|v| str_at(v, &["name"]).expect("volume name"))
        .collect();
    let containers = list(pod, &["containers"]);
    assert_eq!(containers.len(), 2);
    for c in containers {
        for key in ["name", "image"] {
            assert!(str_at(c, &[key]).is_some(), "a container lacks {key}");
        }
        for mount in list(c, &["volumeMounts"]) {
            let name = str_at(mount, &["name"]).unwrap();
            assert!(volumes.contains(&name), "mount of undeclared volume {name}");
        }
    }
    let mount_path = |c: &Value, volume: &str| {
        list(c, &["volumeMounts"])
            .iter()
            .find(|m| str_at(m, &["name"]) == Some(volume))
            .and_then(|m| str_at(m, &["mountPath"]))
            .map(str::to_string)
    };
    let tame = &containers[0];
    assert_eq!(
        at(tame, &["securityContext", "privileged"]),
        Some(&Value::Bool(true))
    );
    // `tame --root /host` reads the host's /proc and /sys there.
    let host_path = |volume: &str| {
        list(pod, &["volumes"])
            .iter()
            .find(|v| str_at(v, &["name"]) == Some(volume))
            .and_then(|v| str_at(v, &["hostPath", "path"]))
            .map(str::to_string)
    };
    for dir in ["/proc", "/sys", "/etc", "/var/lib/tame"] {
        let volume = list(tame, &["volumeMounts"])
            .iter()
            .find(|m| str_at(m, &["mountPath"]) == Some(&format!("/host{dir}")))
            .and_then(|m| str_at(m, &["name"]))
            .unwrap_or_else(|| panic!("nothing mounted at /host{dir}"));
        assert_eq!(host_path(volume).as_deref(), Some(dir));
    }
    // The textfile directory (the lead's interface): an emptyDir both containers mount.
    let exporter = &containers[1];
    for c in [tame, exporter] {
        assert_eq!(
            mount_path(c, "metrics").as_deref(),
            Some("/var/lib/tame-metrics")
        );
    }
    let metrics = list(pod, &["volumes"])
        .iter()
        .find(|v| str_at(v, &["name"]) == Some("metrics"))
        .unwrap();
    assert!(metrics.get("emptyDir").is_some());
    let args: Vec<&str> = list(exporter, &["args"])
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        args.contains(&"--collector.textfile.directory=/var/lib/tame-metrics"),
        "{args:?}"
    );
    // The command is the loop the image installs, and the loop writes tame.prom there.
    let command = list(tame, &["command"])[0].as_str().unwrap();
    let containerfile = std::fs::read_to_string(contrib().join("Containerfile")).unwrap();
    assert!(
        containerfile.contains(&format!("tame-node.sh {command}")),
        "{command}"
    );
    // Docker reads Containerfile.dockerignore, podman the root's .containerignore: the same.
    let patterns = |path: PathBuf| -> Vec<String> {
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
            .map(str::to_string)
            .collect()
    };
    let ignored = patterns(workspace().join(".containerignore"));
    assert!(ignored.contains(&"/target*".to_string()), "{ignored:?}");
    assert_eq!(
        patterns(contrib().join("Containerfile.dockerignore")),
        ignored
    );
    let script = std::fs::read_to_string(contrib().join("tame-node.sh")).unwrap();
    assert!(script.contains("out=${TAME_METRICS_DIR:-/var/lib/tame-metrics}"));
    // The JSON results stay for `kubectl cp` (docs/fleet.md), below what the collector reads.
    assert!(script.contains("work=$out/json"));
    assert!(script.contains("tame export prometheus \"$@\" -o \"$out/tame.prom\""));
    // Each measuring thread's locked stack counts against the memory limit: capped.
    assert!(script.contains("max_cpus=${TAME_BENCH_MAX_CPUS:-64}"));
}

#[test]
fn the_node_loop_is_valid_shell() {
    let out = Command::new("sh")
        .arg("-n")
        .arg(contrib().join("tame-node.sh"))
        .output()
        .expect("sh runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One round of the loop with a `tame` that fails every step: the last round's tame.prom is
/// removed (not served as current), and the bench gets at most TAME_BENCH_MAX_CPUS CPUs.
#[test]
fn the_node_loop_removes_stale_metrics_and_caps_the_bench_cpus() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    let out = dir.path().join("metrics");
    let log = dir.path().join("calls");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("tame.prom"), "tame_up 1\n").unwrap();
    let fake = bin.join("tame");
    std::fs::write(
        &fake,
        format!("#!/bin/sh\necho \"$*\" >> '{}'\nexit 1\n", log.display()),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut child = Command::new("sh")
        .arg(contrib().join("tame-node.sh"))
        .env("PATH", path)
        .env("TAME_METRICS_DIR", &out)
        .env("TAME_INTERVAL", "1")
        .env("TAME_BENCH_MAX_CPUS", "1")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("sh runs");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let calls = loop {
        let calls = std::fs::read_to_string(&log).unwrap_or_default();
        let rounds = calls.lines().filter(|l| !l.contains(" guard ")).count();
        if rounds >= 3 && !out.join("tame.prom").exists() {
            break calls;
        }
        assert!(std::time::Instant::now() < deadline, "{calls}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    // SIGTERM: the loop's trap exits.
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let _ = child.wait();
    // `tame guard` runs beside the rounds (started again while it is not running).
    assert!(
        calls.lines().any(|l| l
            == "--root /host guard --journal-dir /host/var/lib/tame --metrics 0.0.0.0:9641 --metrics-remote"),
        "{calls}"
    );
    let lines: Vec<&str> = calls.lines().filter(|l| !l.contains(" guard ")).collect();
    assert_eq!(lines[0], "--root /host check --json");
    assert_eq!(lines[1], "--root /host status --json");
    // One CPU of those this process may use, the first.
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let allowed = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim();
    let first = allowed.split([',', '-']).next().unwrap();
    assert_eq!(
        lines[2],
        format!("bench cycle --cpus {first} --duration 5s --json -")
    );
}

/// kubectl reads every document (`label --local`: its own decoder, no cluster), and
/// `apply --dry-run=client` runs against a stand-in API server ([`ApiServer`]: the
/// discovery of Kubernetes' core and apps groups, every object absent), since the dry run
/// maps kinds to resources through a server's discovery and no test machine has a cluster.
/// kubectl comes from scripts/install-test-deps.sh (Debian's kubernetes-client where no
/// kubectl is on PATH): without it the test is skipped, and fails under CI.
#[test]
fn kubectl_reads_the_manifests_and_the_exported_profiles() {
    if !require(
        have_program("kubectl"),
        "kubectl (scripts/install-test-deps.sh installs Debian's kubernetes-client)",
    ) {
        return;
    }
    let profiles = workspace().join("crates/tame-cli/tests/fixtures/kubernetes");
    let mut files = vec![contrib()];
    for e in std::fs::read_dir(&profiles).unwrap() {
        let p = e.unwrap().path();
        if p.to_string_lossy().ends_with(".performance-profile.yaml") {
            files.push(p);
        }
    }
    let mut local = Command::new("kubectl");
    local
        .env("KUBECONFIG", "/nonexistent")
        .args(["label", "--local", "-o", "name"]);
    for f in &files {
        local.arg("-f").arg(f);
    }
    let out = local
        .arg("tame.test/read=yes")
        .output()
        .expect("kubectl runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for name in [
        "namespace/tame",
        "serviceaccount/tame-node",
        "daemonset.apps/tame-node",
        "performanceprofile.performance.openshift.io/tame-numa-resctrl",
    ] {
        assert!(stdout.lines().any(|l| l == name), "{name} not in {stdout}");
    }
    let server = ApiServer::start();
    let out = Command::new("kubectl")
        .env("KUBECONFIG", server.kubeconfig())
        .args(["apply", "--dry-run=client", "--validate=false", "-f"])
        .arg(contrib())
        .output()
        .expect("kubectl runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for name in [
        "namespace/tame",
        "serviceaccount/tame-node",
        "daemonset.apps/tame-node",
    ] {
        let line = format!("{name} created (dry run)");
        assert!(stdout.lines().any(|l| l == line), "{line} not in {stdout}");
    }
    // Each object looked up where its kind lives: the namespaced ones in namespace tame.
    let seen = server.seen();
    for path in [
        "/api/v1/namespaces/tame",
        "/api/v1/namespaces/tame/serviceaccounts/tame-node",
        "/apis/apps/v1/namespaces/tame/daemonsets/tame-node",
    ] {
        assert!(seen.iter().any(|p| p == path), "{path} not in {seen:?}");
    }
}
