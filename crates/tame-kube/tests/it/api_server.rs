//! A stand-in Kubernetes API server on a loopback port, for `kubectl apply --dry-run=client`,
//! which maps each document's kind to a resource through the server's discovery before it
//! does anything. It serves the discovery documents of Kubernetes' own core (`v1`) and
//! `apps/v1` groups — only resources the real API has, with their real names, kinds and
//! scopes — and answers every object with 404, so apply takes its create path. It records
//! the path of every request, so a test can check which objects kubectl looked up where.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// `(name, singular, kind, namespaced, short names)` of the core group's resources served.
const CORE: &[(&str, &str, &str, bool, &[&str])] = &[
    ("namespaces", "namespace", "Namespace", false, &["ns"]),
    (
        "serviceaccounts",
        "serviceaccount",
        "ServiceAccount",
        true,
        &["sa"],
    ),
    ("configmaps", "configmap", "ConfigMap", true, &["cm"]),
    ("secrets", "secret", "Secret", true, &[]),
    ("services", "service", "Service", true, &["svc"]),
    ("pods", "pod", "Pod", true, &["po"]),
];

/// The same for `apps/v1`.
const APPS: &[(&str, &str, &str, bool, &[&str])] = &[
    ("daemonsets", "daemonset", "DaemonSet", true, &["ds"]),
    ("deployments", "deployment", "Deployment", true, &["deploy"]),
    ("statefulsets", "statefulset", "StatefulSet", true, &["sts"]),
];

const VERBS: &str =
    r#"["create","delete","deletecollection","get","list","patch","update","watch"]"#;

fn resource_list(group_version: &str, resources: &[(&str, &str, &str, bool, &[&str])]) -> String {
    let items: Vec<String> = resources
        .iter()
        .map(|(name, singular, kind, namespaced, short)| {
            let short: Vec<String> = short.iter().map(|s| format!("\"{s}\"")).collect();
            format!(
                r#"{{"name":"{name}","singularName":"{singular}","namespaced":{namespaced},"kind":"{kind}","verbs":{VERBS},"shortNames":[{}]}}"#,
                short.join(",")
            )
        })
        .collect();
    format!(
        r#"{{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"{group_version}","resources":[{}]}}"#,
        items.join(",")
    )
}

/// The status and body the server gives for `path` (without its query).
fn answer(path: &str) -> (&'static str, String) {
    match path {
        "/version" => (
            "200 OK",
            r#"{"major":"1","minor":"32","gitVersion":"v1.32.0"}"#.into(),
        ),
        "/api" => (
            "200 OK",
            r#"{"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":[{"clientCIDR":"0.0.0.0/0","serverAddress":"127.0.0.1"}]}"#.into(),
        ),
        "/apis" => (
            "200 OK",
            r#"{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":"apps","versions":[{"groupVersion":"apps/v1","version":"v1"}],"preferredVersion":{"groupVersion":"apps/v1","version":"v1"}}]}"#.into(),
        ),
        "/api/v1" => ("200 OK", resource_list("v1", CORE)),
        "/apis/apps/v1" => ("200 OK", resource_list("apps/v1", APPS)),
        _ => (
            "404 Not Found",
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"not found","reason":"NotFound","code":404}"#.into(),
        ),
    }
}

/// One request: its path, answered and recorded; the connection is closed after it.
fn serve(stream: TcpStream, seen: &Mutex<Vec<String>>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request = String::new();
    reader.read_line(&mut request)?;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header == "\r\n" {
            break;
        }
    }
    let target = request.split_whitespace().nth(1).unwrap_or("");
    let path = target.split('?').next().unwrap_or("");
    seen.lock().unwrap().push(path.to_string());
    let (status, body) = answer(path);
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    stream.flush()
}

/// The server, running until dropped.
pub struct ApiServer {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    kubeconfig: tempfile::NamedTempFile,
}

impl ApiServer {
    pub fn start() -> ApiServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (seen, stop) = (Arc::clone(&seen), Arc::clone(&stop));
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Ok(stream) = stream {
                        let _ = serve(stream, &seen);
                    }
                }
            })
        };
        let mut kubeconfig = tempfile::NamedTempFile::new().unwrap();
        write!(
            kubeconfig,
            "apiVersion: v1\nkind: Config\nclusters: [{{name: stand-in, cluster: {{server: \"http://127.0.0.1:{port}\"}}}}]\ncontexts: [{{name: stand-in, context: {{cluster: stand-in}}}}]\ncurrent-context: stand-in\n"
        )
        .unwrap();
        ApiServer {
            port,
            seen,
            stop,
            thread: Some(thread),
            kubeconfig,
        }
    }

    /// A kubeconfig whose one context is this server.
    pub fn kubeconfig(&self) -> &std::path::Path {
        self.kubeconfig.path()
    }

    /// The paths requested so far, in order.
    pub fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop, which then sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
