//! Listing and removing segments in a fixture directory (what `tame ipc ls/rm` use).

use tame_ipc::inspect::{self, SegmentState};
use tame_ipc::layout::{pack_owner, Layout};
use tame_ipc::{ChannelSpec, Liveness, ProcFs, SegmentName};

fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

/// A segment's bytes; `pid_ns` is the pid namespace its creator and role holders
/// recorded (0: none, as a 1.0 creator wrote).
fn segment_bytes(
    spec: ChannelSpec,
    creator_pid: u32,
    creator_start: u64,
    peers: [u64; 2],
    pid_ns: u32,
) -> Vec<u8> {
    let layout = Layout::compute(spec).unwrap();
    let mut header = layout.header(creator_pid, creator_start, 1_700_000_000_000_000_000);
    header.peers = peers;
    let header = header.with_pid_ns(pid_ns);
    let mut bytes = vec![0u8; layout.segment_size as usize];
    bytes[..128].copy_from_slice(bytemuck::bytes_of(&header));
    bytes
}

#[test]
fn lists_states_owners_and_staleness() {
    let dir = std::env::temp_dir().join(format!("tame-ipc-inspect-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let proc = ProcFs::default();
    let me = std::process::id();
    let my_start = proc.own_start_ticks().unwrap();
    let dead = dead_pid();
    let ns = proc.pid_ns().expect("our /proc shows our pid namespace");

    let live = segment_bytes(
        ChannelSpec::ring::<u64>(16),
        me,
        my_start,
        [pack_owner(me, my_start), 0],
        ns,
    );
    std::fs::write(dir.join("tame.live"), live).unwrap();
    let stale = segment_bytes(
        ChannelSpec::register::<u32>(),
        dead,
        12345,
        [pack_owner(dead, 12345), 0],
        ns,
    );
    std::fs::write(dir.join("tame.stale"), stale).unwrap();
    // The same dead pids recorded in another pid namespace (a container), or with no
    // namespace recorded (a 1.0 creator): undecidable, so never stale.
    let foreign = segment_bytes(
        ChannelSpec::register::<u32>(),
        dead,
        12345,
        [pack_owner(dead, 12345), 0],
        ns ^ 1,
    );
    std::fs::write(dir.join("tame.foreign"), foreign).unwrap();
    let legacy = segment_bytes(
        ChannelSpec::register::<u32>(),
        dead,
        12345,
        [pack_owner(dead, 12345), 0],
        0,
    );
    std::fs::write(dir.join("tame.legacy"), legacy).unwrap();
    // Creator dead but a live consumer attached: not stale.
    let held = segment_bytes(
        ChannelSpec::ring::<u64>(4),
        dead,
        1,
        [0, pack_owner(me, my_start)],
        ns,
    );
    std::fs::write(dir.join("tame.held"), held).unwrap();
    std::fs::write(dir.join("tame.junk"), vec![0xffu8; 4096]).unwrap();
    std::fs::write(dir.join("tame.empty"), b"").unwrap();
    std::fs::write(dir.join("other"), b"ignored").unwrap();

    let found = inspect::list(&dir, &proc).unwrap();
    let names: Vec<&str> = found.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        ["empty", "foreign", "held", "junk", "legacy", "live", "stale"]
    );

    let by_name = |n: &str| found.iter().find(|s| s.name == n).unwrap();
    assert_eq!(by_name("empty").state, SegmentState::NotReady);
    assert!(matches!(&by_name("junk").state, SegmentState::Invalid(why) if why.contains("magic")));
    let SegmentState::Valid(live) = &by_name("live").state else {
        panic!("live invalid")
    };
    assert_eq!(live.layout.spec, ChannelSpec::ring::<u64>(16));
    assert_eq!(
        (live.creator.pid, live.creator.liveness),
        (me, Liveness::Alive)
    );
    assert_eq!(live.peers.len(), 1);
    assert_eq!(
        (live.peers[0].role, live.peers[0].liveness),
        ("producer", Liveness::Alive)
    );
    let SegmentState::Valid(stale) = &by_name("stale").state else {
        panic!("stale invalid")
    };
    assert_eq!(stale.creator.liveness, Liveness::Dead);
    assert_eq!(stale.peers[0].role, "writer");
    assert_eq!(stale.peers[0].liveness, Liveness::Dead);
    for undecidable in ["foreign", "legacy"] {
        let SegmentState::Valid(d) = &by_name(undecidable).state else {
            panic!("{undecidable} invalid")
        };
        assert_eq!(d.creator.liveness, Liveness::Unknown, "{undecidable}");
        assert_eq!(d.peers[0].liveness, Liveness::Unknown, "{undecidable}");
    }

    let stale_names: Vec<&str> = found
        .iter()
        .filter(|s| s.is_stale())
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(stale_names, ["stale"]);

    inspect::remove(&dir, &SegmentName::new("stale").unwrap()).unwrap();
    assert!(!dir.join("tame.stale").exists());
    let err = inspect::remove(&dir, &SegmentName::new("stale").unwrap()).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    std::fs::remove_dir_all(&dir).unwrap();
}
