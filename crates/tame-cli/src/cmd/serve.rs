//! `tame serve`: the scheduling server behind `tame reserve --backend server`.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use tame_reserve::server::{self as srv, daemon};
use tame_reserve::spec::parse_share_ppm;

use crate::{bad_input, Context};

#[derive(clap::Args)]
pub struct ServeArgs {
    /// Where to listen.
    #[arg(long, default_value = srv::DEFAULT_SOCKET)]
    socket: PathBuf,
    /// Admission cap per CPU: the most all reservations on one CPU may add up to.
    #[arg(long, default_value = "90%")]
    cap: String,
}

pub fn run(ctx: &Context, args: ServeArgs) -> anyhow::Result<i32> {
    let cap_ppm = parse_share_ppm(&args.cap).map_err(|e| bad_input(format!("--cap: {e}")))?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    let config = daemon::Config {
        socket: args.socket,
        cap_ppm,
        root: ctx.root.clone(),
    };
    // The cap and socket are validated inside serve before anything starts.
    daemon::serve(config, stop)?;
    Ok(0)
}
