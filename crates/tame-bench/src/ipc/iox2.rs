//! The iceoryx2 transport (cargo feature `iceoryx2`): the crate's publish-subscribe over
//! shared memory between processes (`ipc::Service`), one service per direction. A message
//! goes out as a zero-copy loan: the publisher loans a sample in the shared data segment,
//! writes the message into it and sends its offset; the subscriber receives the sample,
//! copies the message out and releases it. What a user of iceoryx2 would write.
//!
//! iceoryx2's ports stay on the thread that made them, so each side makes its node, opens
//! the services and makes its ports on its own thread ([`pair`] returns the two makers).
//!
//! Each link lives in a private iceoryx2 domain ([`Domain`]): its own file-name prefix in
//! /dev/shm and its own root directory in place of /tmp/iceoryx2, so the bench neither meets
//! another iceoryx2 application's nodes nor leaves anything behind — iceoryx2 removes its
//! nodes' and services' files when they drop, and the domain then removes the one segment
//! iceoryx2 keeps on purpose (its global node counter) and the root directory.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};

use iceoryx2::port::publisher::Publisher;
use iceoryx2::port::subscriber::Subscriber;
use iceoryx2::port::update_connections::UpdateConnections;
use iceoryx2::prelude::*;
use iceoryx2::service::port_factory::publish_subscribe::PortFactory;

use super::endpoint::{spin_until, Endpoint, Make};
use super::message::Message;

type Ipc = ipc::Service;

/// Where iceoryx2 puts its shared-memory segments (POSIX shm, as tame-ipc's named ones).
use tame_ipc::SHM_DIR;

/// One side: its publisher on one service, its subscriber on the other. Fields drop in
/// order: the ports before the services, the services before the node, the node before
/// (the last end's) domain.
pub struct Iceoryx2End<const W: usize> {
    publisher: Publisher<Ipc, Message<W>, ()>,
    subscriber: Subscriber<Ipc, Message<W>, ()>,
    _services: [PortFactory<Ipc, Message<W>, ()>; 2],
    _node: Node<Ipc>,
    _domain: Arc<Domain>,
}

fn failed(what: &str, e: impl std::fmt::Debug) -> io::Error {
    io::Error::other(format!("iceoryx2: {what} failed: {e:?}"))
}

/// A private iceoryx2 domain: the configuration both sides' nodes use, with a file-name
/// prefix of this process and link and a scratch root directory. Dropped after both ends,
/// it removes what iceoryx2 leaves behind on purpose.
pub struct Domain {
    config: Config,
    prefix: String,
    /// Removed (with what is left in it) when the domain drops.
    _root: tempfile::TempDir,
}

impl Domain {
    fn new() -> io::Result<Domain> {
        static SERIAL: AtomicU64 = AtomicU64::new(0);
        let prefix = format!(
            "iox2_tame-bench-{}-{}_",
            std::process::id(),
            SERIAL.fetch_add(1, Ordering::Relaxed)
        );
        let root = tempfile::Builder::new()
            .prefix("tame-iceoryx2.")
            .tempdir()?;
        let mut config = Config::default();
        config.global.prefix =
            FileName::new(prefix.as_bytes()).map_err(|e| failed("naming the domain", e))?;
        let path = Path::new(root.path().as_os_str().as_encoded_bytes())
            .map_err(|e| failed("using the domain's root directory", e))?;
        config.global.set_root_path(&path);
        Ok(Domain {
            config,
            prefix,
            _root: root,
        })
    }

    /// The domain's segments still in /dev/shm.
    fn segments(&self) -> Vec<std::path::PathBuf> {
        let Ok(entries) = std::fs::read_dir(SHM_DIR) else {
            return Vec::new();
        };
        entries
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with(&self.prefix))
            .map(|e| e.path())
            .collect()
    }
}

impl Drop for Domain {
    fn drop(&mut self) {
        // Only this domain's nodes used these names, and they are gone.
        for segment in self.segments() {
            let _ = std::fs::remove_file(segment);
        }
    }
}

/// The makers of the two ends of a link whose subscribers buffer `capacity` samples
/// (the tame and rtrb rings' capacity; the publisher waits when a buffer is full, so no
/// message is lost). The first (timing) side creates both services, the second opens them.
pub fn pair<const W: usize>(
    capacity: usize,
) -> io::Result<(impl Make<Iceoryx2End<W>>, impl Make<Iceoryx2End<W>>)> {
    let domain = Arc::new(Domain::new()?);
    let names = [
        "tame-bench/there".to_string(),
        "tame-bench/back".to_string(),
    ];
    // The opening side waits until the creating side has created (or failed to); then the
    // creating side waits until the opening side has made its ports (or failed to), and
    // connects its subscriber to the other's publisher before any message flows. Without
    // that, the creator's subscriber connected on its first receive, after the echo's reply
    // had been delivered, and lost it (the first round trip stalled in about 1 run of 7).
    let (created, opened) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
    let creator = {
        let (names, created, opened, domain) = (
            names.clone(),
            created.clone(),
            opened.clone(),
            domain.clone(),
        );
        move || {
            let end = make::<W>(&domain, &names, capacity, true);
            created.wait();
            opened.wait();
            let end = end?;
            end.subscriber
                .update_connections()
                .map_err(|e| failed("connecting to the peer's publisher", e))?;
            Ok(end)
        }
    };
    let opener = move || {
        created.wait();
        let [there, back] = names;
        let end = make::<W>(&domain, &[back, there], capacity, false);
        opened.wait();
        end
    };
    Ok((creator, opener))
}

/// A node, the two services (`names[0]` this side publishes on, `names[1]` it subscribes
/// to), created or opened, and the two ports.
fn make<const W: usize>(
    domain: &Arc<Domain>,
    names: &[String; 2],
    capacity: usize,
    create: bool,
) -> io::Result<Iceoryx2End<W>> {
    let node = NodeBuilder::new()
        .config(&domain.config)
        // tame's own handler answers Ctrl-C between segments.
        .signal_handling_mode(SignalHandlingMode::Disabled)
        .create::<Ipc>()
        .map_err(|e| failed("creating a node", e))?;
    let service = |name: &String| -> io::Result<PortFactory<Ipc, Message<W>, ()>> {
        let name = ServiceName::new(name).map_err(|e| failed("naming a service", e))?;
        let builder = node
            .service_builder(&name)
            .publish_subscribe::<Message<W>>()
            // Lossless, as the rings: a full subscriber buffer makes the publisher wait.
            .enable_safe_overflow(false)
            .subscriber_max_buffer_size(capacity)
            .max_publishers(1)
            .max_subscribers(1)
            .history_size(0);
        if create {
            builder
                .create()
                .map_err(|e| failed("creating a service", e))
        } else {
            builder.open().map_err(|e| failed("opening a service", e))
        }
    };
    let outgoing = service(&names[0])?;
    let incoming = service(&names[1])?;
    let publisher = outgoing
        .publisher_builder()
        .backpressure_strategy(BackpressureStrategy::RetryUntilDelivered)
        .create()
        .map_err(|e| failed("creating a publisher", e))?;
    let subscriber = incoming
        .subscriber_builder()
        .buffer_size(capacity)
        .create()
        .map_err(|e| failed("creating a subscriber", e))?;
    Ok(Iceoryx2End {
        publisher,
        subscriber,
        _services: [outgoing, incoming],
        _node: node,
        _domain: domain.clone(),
    })
}

impl<const W: usize> Endpoint<W> for Iceoryx2End<W> {
    #[inline]
    fn send(&mut self, msg: &Message<W>) -> io::Result<()> {
        spin_until(|| {
            let sample = match self.publisher.loan_uninit() {
                Ok(sample) => sample,
                Err(e) => return Some(Err(failed("loaning a sample", e))),
            };
            match sample.write_payload(*msg).send() {
                // Delivered to no subscriber: the peer's subscriber was not connected yet
                // (iceoryx2 connects ports when it next looks); the message went nowhere,
                // so send it again rather than lose it.
                Ok(0) => None,
                Ok(_) => Some(Ok(())),
                Err(e) => Some(Err(failed("sending", e))),
            }
        })
    }

    #[inline]
    fn recv(&mut self, msg: &mut Message<W>) -> io::Result<()> {
        *msg = spin_until(|| match self.subscriber.receive() {
            Ok(Some(sample)) => Some(Ok(*sample.payload())),
            Ok(None) => None,
            Err(e) => Some(Err(failed("receiving", e))),
        })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A link in its own domain moves messages both ways, and nothing of the domain is left
    /// in /dev/shm or on disk once the ends drop.
    #[test]
    fn a_link_leaves_nothing_behind() {
        let (a, b) = pair::<8>(4).unwrap();
        // Both ends exist before the first message (a subscriber gets only what is sent
        // after it connected), as the bench's barrier ensures.
        let made = &Barrier::new(2);
        let (root, prefix) = std::thread::scope(|s| {
            // The echo end lives on its own thread (iceoryx2's ports stay where made).
            let echo = s.spawn(move || -> io::Result<()> {
                let b = b();
                made.wait();
                let mut b = b?;
                let mut msg = [0u64; 8];
                b.recv(&mut msg)?;
                msg[0] += 1;
                b.send(&msg)
            });
            let a = a();
            made.wait();
            let mut a = a.unwrap();
            let domain = &a._domain;
            let found = (domain._root.path().to_path_buf(), domain.prefix.clone());
            assert!(!domain.segments().is_empty(), "the link's segments");
            a.send(&[7; 8]).unwrap();
            let mut msg = [0; 8];
            a.recv(&mut msg).unwrap();
            assert_eq!(msg, [8, 7, 7, 7, 7, 7, 7, 7]);
            echo.join().unwrap().unwrap();
            found
        });
        assert!(!root.exists(), "{} is left", root.display());
        let left: Vec<String> = std::fs::read_dir(SHM_DIR)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(&prefix))
            .collect();
        assert!(left.is_empty(), "left in {SHM_DIR}: {left:?}");
    }
}
