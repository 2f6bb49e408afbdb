//! The metrics options `tame serve` and `tame guard` share: where the Prometheus text goes
//! (a TCP address, a Unix socket, or a file for node_exporter's textfile collector), and
//! whether failing to serve it stops the command. By default it does not: the metrics
//! are an extra, and a port some other user took first must not keep the scheduling
//! server (or the guard) from starting.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::bad_input;

#[derive(clap::Args, Clone, Debug)]
pub struct MetricsArgs {
    /// Serve the figures as Prometheus text (docs/metrics.md) at http://ADDR/metrics:
    /// IP:PORT or a port alone (127.0.0.1:PORT; port 0 picks a free one), loopback only
    /// unless --metrics-remote; or unix:PATH, a Unix socket only root (and `tame serve`'s
    /// socket group) may connect to. Any local user can read a loopback port: the
    /// figures name client pids, shares and CPU time (docs/security.md).
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,
    /// Allow --metrics on an address other than loopback: anyone who reaches it sees the
    /// figures, which name processes of this machine (put a firewall or a proxy in front).
    #[arg(long, requires = "metrics")]
    pub metrics_remote: bool,
    /// Write the figures to FILE every 5 s (a temporary file renamed over it, mode 0644),
    /// for node_exporter's textfile collector (name it *.prom in its directory); removed
    /// on exit.
    #[arg(long, value_name = "FILE", conflicts_with = "metrics")]
    pub metrics_file: Option<PathBuf>,
    /// Refuse to start (exit 2) when the metrics cannot be served; without it the failure
    /// is reported on stderr and the command goes on without metrics.
    #[arg(long)]
    pub metrics_required: bool,
}

/// Where the figures go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sink {
    Tcp(SocketAddr),
    Unix(PathBuf),
    File(PathBuf),
}

/// How often `--metrics-file` is rewritten.
pub const FILE_EVERY: Duration = Duration::from_secs(5);

impl MetricsArgs {
    /// The sink asked for, checked before anything starts.
    pub fn sink(&self) -> anyhow::Result<Option<Sink>> {
        if let Some(file) = &self.metrics_file {
            if file.file_name().is_none() {
                return Err(bad_input(format!(
                    "--metrics-file {}: names no file — give a path such as /var/lib/node_exporter/textfile/tame.prom",
                    file.display()
                )));
            }
            return Ok(Some(Sink::File(file.clone())));
        }
        let Some(text) = self.metrics.as_deref() else {
            if self.metrics_required {
                return Err(bad_input(
                    "--metrics-required: no metrics asked for — add --metrics ADDR or --metrics-file FILE, or leave it out",
                ));
            }
            return Ok(None);
        };
        if let Some(path) = text.strip_prefix("unix:") {
            if path.is_empty() || Path::new(path).file_name().is_none() {
                return Err(bad_input(format!(
                    "--metrics {text}: names no socket — give unix:PATH, such as unix:/run/tame/metrics.sock"
                )));
            }
            return Ok(Some(Sink::Unix(PathBuf::from(path))));
        }
        Ok(Some(Sink::Tcp(metrics_addr(text, self.metrics_remote)?)))
    }
}

/// `--metrics ADDR` as a TCP address: loopback unless `remote`.
pub(crate) fn metrics_addr(text: &str, remote: bool) -> anyhow::Result<SocketAddr> {
    let addr: SocketAddr = match text.parse::<u16>() {
        Ok(port) => SocketAddr::from(([127, 0, 0, 1], port)),
        Err(_) => text.parse().map_err(|_| {
            bad_input(format!(
                "--metrics {text}: not an address — give IP:PORT (127.0.0.1:9464, [::1]:9464), a port alone, or unix:PATH"
            ))
        })?,
    };
    if !remote && !tame_prometheus::http::is_local(&addr) {
        return Err(bad_input(format!(
            "--metrics {addr}: not a loopback address — tame runs as root and its figures name processes of this machine; serve them on 127.0.0.1:{} (and let the scraper reach it through a proxy or tunnel), or add --metrics-remote to serve them on {addr} anyway",
            addr.port()
        )));
    }
    Ok(addr)
}

/// Why the metrics did not start.
#[derive(Debug)]
pub enum NotStarted {
    /// The sink could not be set up, and --metrics-required was given: the user's to fix.
    Unavailable(String),
    /// The system refused a thread.
    Thread(std::io::Error),
}

/// Start the figures of `who` (`tame serve`, `tame guard`) going to `sink`: `Ok(None)`
/// when the sink could not be set up and it is not required (said on stderr). The thread
/// returned ends once `stop` is set, leaving no socket or file behind.
pub fn start(
    who: &str,
    sink: &Sink,
    required: bool,
    socket_gid: Option<u32>,
    stop: Arc<AtomicBool>,
    mut render: impl FnMut() -> Result<String, String> + Send + 'static,
) -> Result<Option<std::thread::JoinHandle<()>>, NotStarted> {
    use tame_prometheus::http;
    let (set_up, fix) = match sink {
        Sink::Tcp(addr) => (
            http::bind(*addr).map(|(l, bound)| {
                (
                    http::Listener::Tcp(l),
                    format!("metrics at http://{bound}/metrics"),
                )
            }),
            "give another address or port (port 0 picks a free one)",
        ),
        Sink::Unix(path) => (
            http::bind_unix(path, socket_gid).map(|l| {
                (
                    http::Listener::Unix(l, path.clone()),
                    format!("metrics at unix:{} (GET /metrics)", path.display()),
                )
            }),
            "give another path",
        ),
        Sink::File(path) => {
            // The first write now, so a path that cannot be written is reported at start.
            let first = render().and_then(|text| write_atomically(path, &text));
            if let Err(e) = first {
                return unavailable(who, &format!("--metrics-file: cannot write {}: {e} — give a file in a directory root may write", path.display()), required);
            }
            eprintln!(
                "{who}: metrics written to {} every {} s",
                path.display(),
                FILE_EVERY.as_secs()
            );
            let (path, who) = (path.clone(), who.to_string());
            return std::thread::Builder::new()
                .name("tame-metrics-file".into())
                .spawn(move || {
                    // Soon once more: the first write may come before the first figures.
                    let mut next = Instant::now() + Duration::from_secs(1);
                    while !stop.load(Ordering::Relaxed) {
                        if Instant::now() < next {
                            std::thread::sleep(Duration::from_millis(50));
                            continue;
                        }
                        next = Instant::now() + FILE_EVERY;
                        if let Err(e) = render().and_then(|t| write_atomically(&path, &t)) {
                            eprintln!(
                                "{who}: --metrics-file: cannot write {}: {e}",
                                path.display()
                            );
                        }
                    }
                    // A file left behind would be read as current figures.
                    let _ = std::fs::remove_file(&path);
                })
                .map(Some)
                .map_err(NotStarted::Thread);
        }
    };
    let what = match sink {
        Sink::Tcp(a) => a.to_string(),
        Sink::Unix(p) => format!("unix:{}", p.display()),
        Sink::File(_) => unreachable!("handled above"),
    };
    let (listener, said) = match set_up {
        Ok(x) => x,
        Err(e) => {
            return unavailable(
                who,
                &format!("--metrics: cannot listen on {what}: {e} — {fix}"),
                required,
            )
        }
    };
    eprintln!("{who}: {said}");
    http::spawn(listener, stop, render)
        .map(Some)
        .map_err(NotStarted::Thread)
}

fn unavailable(
    who: &str,
    why: &str,
    required: bool,
) -> Result<Option<std::thread::JoinHandle<()>>, NotStarted> {
    if required {
        return Err(NotStarted::Unavailable(why.to_string()));
    }
    eprintln!(
        "{who}: {why}; going on without metrics (--metrics-required refuses to start instead)"
    );
    Ok(None)
}

/// The file sink's write ([`crate::output::replace_file`]), its error as text.
fn write_atomically(path: &Path, text: &str) -> Result<(), String> {
    crate::output::replace_file(path, text).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(metrics: Option<&str>, file: Option<&str>, required: bool) -> MetricsArgs {
        MetricsArgs {
            metrics: metrics.map(str::to_string),
            metrics_remote: false,
            metrics_file: file.map(PathBuf::from),
            metrics_required: required,
        }
    }

    #[test]
    fn metrics_are_loopback_unless_asked() {
        assert_eq!(
            metrics_addr("9464", false).unwrap(),
            "127.0.0.1:9464".parse().unwrap()
        );
        assert!(metrics_addr("[::1]:0", false).is_ok());
        let e = metrics_addr("0.0.0.0:9464", false).unwrap_err().to_string();
        assert!(
            e.contains("not a loopback address") && e.contains("--metrics-remote"),
            "{e}"
        );
        assert!(metrics_addr("0.0.0.0:9464", true).is_ok());
        let e = metrics_addr("localhost:x", false).unwrap_err().to_string();
        assert!(e.contains("not an address"), "{e}");
    }

    #[test]
    fn sinks_are_read_from_the_options() {
        assert_eq!(args(None, None, false).sink().unwrap(), None);
        assert_eq!(
            args(Some("unix:/run/m.sock"), None, false).sink().unwrap(),
            Some(Sink::Unix("/run/m.sock".into()))
        );
        assert_eq!(
            args(None, Some("/t/tame.prom"), false).sink().unwrap(),
            Some(Sink::File("/t/tame.prom".into()))
        );
        let e = args(Some("unix:"), None, false).sink().unwrap_err();
        assert!(e.to_string().contains("names no socket"), "{e}");
        let e = args(None, None, true).sink().unwrap_err();
        assert!(e.to_string().contains("no metrics asked for"), "{e}");
    }

    #[test]
    fn the_file_is_replaced_whole_and_a_link_there_is_replaced_not_followed() {
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let path = d.path().join("tame.prom");
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        write_atomically(&path, "tame_x 1\n").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "tame_x 1\n");
        assert!(!std::fs::symlink_metadata(&path).unwrap().is_symlink());
        write_atomically(&path, "tame_x 2\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "tame_x 2\n");
        let mut names: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["tame.prom", "victim"], "no temporary file is left");
    }
}
