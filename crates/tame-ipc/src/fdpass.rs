//! Passing a segment's descriptor (typically an anonymous memfd segment) to another
//! process over a Unix socket (SCM_RIGHTS).

use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

use nix::sys::socket::{recvmsg, sendmsg, ControlMessage, ControlMessageOwned, MsgFlags};

/// Sends `fd` as one message with a single data byte.
pub fn send_fd(socket: &UnixStream, fd: BorrowedFd<'_>) -> io::Result<()> {
    let byte = [0u8];
    let iov = [IoSlice::new(&byte)];
    let fds = [fd.as_raw_fd()];
    let cmsg = [ControlMessage::ScmRights(&fds)];
    sendmsg::<()>(socket.as_raw_fd(), &iov, &cmsg, MsgFlags::empty(), None)?;
    Ok(())
}

/// Receives one descriptor sent by [`send_fd`] (close-on-exec set).
pub fn recv_fd(socket: &UnixStream) -> io::Result<OwnedFd> {
    let mut byte = [0u8];
    let mut iov = [IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!([RawFd; 4]);
    let msg = recvmsg::<()>(
        socket.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )?;
    let mut received: Option<OwnedFd> = None;
    for cmsg in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(fds) = cmsg {
            for fd in fds {
                // SAFETY: the kernel just installed this descriptor for us; we own it.
                let owned = unsafe { OwnedFd::from_raw_fd(fd) };
                // Keep the first; extra descriptors are closed by dropping them.
                if received.is_none() {
                    received = Some(owned);
                }
            }
        }
    }
    received.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "the message carried no file descriptor",
        )
    })
}
