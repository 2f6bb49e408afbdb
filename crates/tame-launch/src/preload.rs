//! The preload library, embedded in the binary and handed to the child as an
//! inherited memfd, so `LD_PRELOAD=/proc/self/fd/N` finds it in the new
//! program (and in programs it execs) without any install path.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::error::{failed, LaunchError};

static LIBRARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libtame_preload.so"));

/// The preload library in memory; keep it alive until the child has exec'd.
pub struct Preload {
    fd: OwnedFd,
}

impl Preload {
    pub fn new() -> Result<Self, LaunchError> {
        let name = CString::new("tame-preload").expect("no NUL in a literal");
        // SAFETY: name is a valid C string; no CLOEXEC, so the child inherits the fd.
        let raw = unsafe { libc::memfd_create(name.as_ptr(), 0) };
        if raw < 0 {
            return Err(failed(format!(
                "cannot create the preload memfd: {}",
                std::io::Error::last_os_error()
            )));
        }
        // SAFETY: raw is a fresh fd we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut file =
            std::fs::File::from(fd.try_clone().map_err(|e| failed(format!("memfd: {e}")))?);
        std::io::Write::write_all(&mut file, LIBRARY)
            .map_err(|e| failed(format!("cannot write the preload memfd: {e}")))?;
        Ok(Self { fd })
    }

    /// The LD_PRELOAD entry that names this library in the child.
    pub fn ld_preload_entry(&self) -> String {
        format!("/proc/self/fd/{}", self.fd.as_raw_fd())
    }
}
