//! The messages the IPC bench moves: `size` bytes as an array of `size / 8` u64 words — a
//! Pod type aligned to 8, so the tame ring takes its typed path (whole-word slot copies)
//! exactly as a user's 8-aligned struct would, and every transport moves the same type.
//! The first word carries the sequence number the receiver checks.

/// Message sizes the bench knows, bytes: the goals at 8, 56 (a cache line less one
/// sequence word) and 64, and 256 and 1024 for larger messages.
pub const SIZES: [usize; 5] = [8, 56, 64, 256, 1024];

/// A message of `W` words (`8 × W` bytes).
pub type Message<const W: usize> = [u64; W];

#[inline(always)]
pub fn set_seq<const W: usize>(msg: &mut Message<W>, seq: u64) {
    msg[0] = seq;
}

#[inline(always)]
pub fn seq<const W: usize>(msg: &Message<W>) -> u64 {
    msg[0]
}

/// The message's bytes, for the transports that move bytes (pipe, socket, mq).
#[inline(always)]
pub fn bytes<const W: usize>(msg: &Message<W>) -> &[u8] {
    bytemuck::bytes_of(msg)
}

#[inline(always)]
pub fn bytes_mut<const W: usize>(msg: &mut Message<W>) -> &mut [u8] {
    bytemuck::bytes_of_mut(msg)
}

/// Runs `$body` with the const `$w` set to the words of `$size` (one of [`SIZES`]); any
/// other size gives an `InvalidInput` error (settings validation refuses it first).
macro_rules! with_words {
    ($size:expr, $w:ident => $body:expr) => {
        with_words!(@match $size, $w, $body, [8 => 1, 56 => 7, 64 => 8, 256 => 32, 1024 => 128])
    };
    (@match $size:expr, $w:ident, $body:expr, [$($bytes:literal => $words:literal),*]) => {
        match $size {
            $($bytes => {
                const $w: usize = $words;
                $body
            })*
            other => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("message size {other} B is not one the bench knows"),
            )),
        }
    };
}
pub(super) use with_words;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_size_is_an_8_aligned_pod_of_that_many_bytes() {
        for size in SIZES {
            let (bytes, align) = with_words!(size, W => Ok::<_, std::io::Error>((
                std::mem::size_of::<Message<W>>(),
                std::mem::align_of::<Message<W>>(),
            )))
            .unwrap();
            assert_eq!((bytes, align), (size, 8), "{size} B");
        }
        let e = with_words!(16, W => Ok::<usize, std::io::Error>(W)).unwrap_err();
        assert!(e.to_string().contains("16 B"), "{e}");
    }

    #[test]
    fn the_sequence_number_is_the_first_word_and_its_bytes_little_endian() {
        let mut msg: Message<7> = [0; 7];
        set_seq(&mut msg, 0x0102);
        assert_eq!(seq(&msg), 0x0102);
        assert_eq!(bytes(&msg).len(), 56);
        assert_eq!(&bytes(&msg)[..2], &0x0102u64.to_ne_bytes()[..2]);
        bytes_mut(&mut msg)[8] = 1;
        assert_eq!(msg[1], u64::from_ne_bytes([1, 0, 0, 0, 0, 0, 0, 0]));
    }
}
