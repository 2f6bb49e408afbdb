//! Write a synthetic host tree: `cargo run -p tame-testing --example synthetic_host -- PRESET DIR`
//! with PRESET one of two-socket-smt, rt-8cpu, big-256, big-1024. The committed fixtures
//! under fixtures/hosts/ were made with this.

use tame_testing::synthetic::SyntheticHost;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(preset), Some(dir)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: synthetic_host two-socket-smt|rt-8cpu|big-256|big-1024 DIR");
        std::process::exit(2);
    };
    let host = match preset.as_str() {
        "two-socket-smt" => SyntheticHost::two_socket_smt(),
        "rt-8cpu" => SyntheticHost::rt_8cpu(),
        "big-256" => SyntheticHost::big_256(),
        "big-1024" => SyntheticHost::big_1024(),
        other => {
            eprintln!("unknown preset {other:?}: use two-socket-smt, rt-8cpu, big-256 or big-1024");
            std::process::exit(2);
        }
    };
    if let Err(e) = host.write(std::path::Path::new(dir)) {
        eprintln!("cannot write {dir}: {e}");
        std::process::exit(1);
    }
}
