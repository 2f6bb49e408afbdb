//! Copying elements into and out of ring slots.
//!
//! The ring protocol hands each slot to one side at a time, but a hostile or buggy
//! peer in another process may write a slot while we read it (or the other way
//! round). Plain loads and stores would then be a data race, undefined behaviour that
//! lets the compiler assume memory it read twice is the same both times. So slot bytes
//! are moved only with relaxed atomic accesses — 8-byte words where aligned, single
//! bytes at unaligned edges — as the register does: a racing peer makes the copied
//! value wrong, never the program undefined. Relaxed loads and stores of up to 8 bytes
//! compile to the plain `mov`s a memcpy would use on x86-64 and aarch64; the ordering
//! comes from the index loads and stores around them (acquire/release), as before.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

use bytemuck::Pod;

/// Copies `len` bytes from shared `src` into private `dst`.
///
/// # Safety
/// `src` is valid for reading `len` bytes of shared memory that is only ever accessed
/// atomically or by other processes; `dst` is valid for writing `len` bytes and does
/// not overlap `src`.
#[inline(always)]
pub(crate) unsafe fn load(src: *const u8, dst: *mut u8, len: usize) {
    if (src as usize | len) & 7 == 0 {
        // The usual case: an aligned slot of whole words.
        // SAFETY: src is 8-aligned and len a multiple of 8 (checked).
        unsafe { load_words(src, dst, len / 8) };
        return;
    }
    let load_byte = |i: usize| {
        // SAFETY: i < len: inside both ranges (the caller's contract); a byte atomic
        // needs no alignment.
        unsafe {
            dst.add(i)
                .write(AtomicU8::from_ptr(src.add(i).cast_mut()).load(Ordering::Relaxed))
        };
    };
    let head = ((src as usize).wrapping_neg() & 7).min(len);
    let words = (len - head) / 8;
    (0..head).for_each(load_byte);
    // SAFETY: src + head is 8-aligned (head rounds it up) and the words fit in len.
    unsafe { load_words(src.add(head), dst.add(head), words) };
    (head + 8 * words..len).for_each(load_byte);
}

/// Copies `words` 8-byte words from shared, 8-aligned `src` into private `dst`, four
/// at a time where it can (slots are usually whole words).
///
/// # Safety
/// As for [`load`], with `src` 8-aligned and `words × 8` bytes long.
#[inline(always)]
unsafe fn load_words(src: *const u8, dst: *mut u8, words: usize) {
    let word = |w: usize| {
        // SAFETY: w < words: an aligned word inside the range (the caller's contract).
        unsafe {
            let value = AtomicU64::from_ptr(src.add(8 * w).cast::<u64>().cast_mut())
                .load(Ordering::Relaxed);
            dst.add(8 * w).cast::<u64>().write_unaligned(value);
        }
    };
    each_word(words, word);
}

/// Copies `len` bytes from private `src` into shared `dst`.
///
/// # Safety
/// `dst` is valid for writing `len` bytes of shared memory that is only ever accessed
/// atomically or by other processes; `src` is valid for reading `len` bytes and does
/// not overlap `dst`.
#[inline(always)]
pub(crate) unsafe fn store(src: *const u8, dst: *mut u8, len: usize) {
    if (dst as usize | len) & 7 == 0 {
        // SAFETY: dst is 8-aligned and len a multiple of 8 (checked).
        unsafe { store_words(src, dst, len / 8) };
        return;
    }
    let store_byte = |i: usize| {
        // SAFETY: i < len: inside both ranges (the caller's contract).
        unsafe { AtomicU8::from_ptr(dst.add(i)).store(src.add(i).read(), Ordering::Relaxed) };
    };
    let head = ((dst as usize).wrapping_neg() & 7).min(len);
    let words = (len - head) / 8;
    (0..head).for_each(store_byte);
    // SAFETY: dst + head is 8-aligned and the words fit in len.
    unsafe { store_words(src.add(head), dst.add(head), words) };
    (head + 8 * words..len).for_each(store_byte);
}

/// Copies `words` words from private `src` into shared, 8-aligned `dst`.
///
/// # Safety
/// As for [`store`], with `dst` 8-aligned and `words × 8` bytes long.
#[inline(always)]
unsafe fn store_words(src: *const u8, dst: *mut u8, words: usize) {
    let word = |w: usize| {
        // SAFETY: w < words: an aligned word inside the range (the caller's contract).
        unsafe {
            let value = src.add(8 * w).cast::<u64>().read_unaligned();
            AtomicU64::from_ptr(dst.add(8 * w).cast::<u64>()).store(value, Ordering::Relaxed);
        }
    };
    each_word(words, word);
}

/// Whether every slot of `T` is 8-aligned and a whole number of words: ring slots lie a
/// multiple of 8 bytes apart from a 128-aligned base (and the register's value starts on
/// a word), so this holds when the size is a multiple of 8. Known at compile time, so
/// the word loops below have a fixed count.
const fn whole_words<T>() -> bool {
    std::mem::size_of::<T>().is_multiple_of(8)
}

/// Reads one `T` from a typed slot.
///
/// # Safety
/// `slot` is the element of a typed ring slot of `T` (8-aligned) inside the mapping, as
/// for [`load`].
#[inline(always)]
pub(crate) unsafe fn load_value<T: Pod>(slot: *const T) -> T {
    let mut value = T::zeroed();
    let dst = (&mut value as *mut T).cast::<u8>();
    let src = slot.cast::<u8>();
    if whole_words::<T>() {
        for w in 0..std::mem::size_of::<T>() / 8 {
            // SAFETY: the slot is 8-aligned and whole words long (whole_words), so
            // each word lies inside it; `value` is private and written unaligned.
            unsafe {
                let word = AtomicU64::from_ptr(src.add(8 * w).cast::<u64>().cast_mut())
                    .load(Ordering::Relaxed);
                dst.add(8 * w).cast::<u64>().write_unaligned(word);
            }
        }
    } else {
        // SAFETY: the slot holds size_of::<T>() bytes (the caller's contract).
        unsafe { load(src, dst, std::mem::size_of::<T>()) };
    }
    value
}

/// Writes one `T` into a typed slot.
///
/// # Safety
/// As for [`load_value`], with the slot ours to write.
#[inline(always)]
pub(crate) unsafe fn store_value<T: Pod>(slot: *mut T, value: &T) {
    let src = (value as *const T).cast::<u8>();
    let dst = slot.cast::<u8>();
    if whole_words::<T>() {
        for w in 0..std::mem::size_of::<T>() / 8 {
            // SAFETY: as in `load_value`.
            unsafe {
                let word = src.add(8 * w).cast::<u64>().read_unaligned();
                AtomicU64::from_ptr(dst.add(8 * w).cast::<u64>()).store(word, Ordering::Relaxed);
            }
        }
    } else {
        // SAFETY: the slot holds size_of::<T>() bytes (the caller's contract).
        unsafe { store(src, dst, std::mem::size_of::<T>()) };
    }
}

/// Calls `word` for 0..words, four at a time where it can (slots are usually whole
/// words, and the unrolled loop keeps the copy as fast as a memcpy of them).
#[inline(always)]
fn each_word(words: usize, word: impl Fn(usize)) {
    let mut w = 0;
    while w + 4 <= words {
        word(w);
        word(w + 1);
        word(w + 2);
        word(w + 3);
        w += 4;
    }
    while w < words {
        word(w);
        w += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_every_length_and_offset_exactly() {
        let source: Vec<u8> = (0..64u8).collect();
        for offset in 0..9 {
            for len in 0..40 {
                let mut shared = [0u64; 8];
                let base = shared.as_mut_ptr().cast::<u8>();
                // SAFETY: offset + len ≤ 49 < 64 bytes of `shared`; `source` and the
                // output are separate allocations.
                unsafe { store(source.as_ptr(), base.add(offset), len) };
                let mut out = vec![0xffu8; len];
                // SAFETY: as above.
                unsafe { load(base.add(offset), out.as_mut_ptr(), len) };
                assert_eq!(out, source[..len], "offset {offset}, len {len}");
                let bytes: &[u8] = bytemuck::cast_slice(&shared);
                assert!(bytes[..offset].iter().all(|&b| b == 0));
                assert!(bytes[offset + len..].iter().all(|&b| b == 0));
            }
        }
    }

    #[test]
    fn typed_values_round_trip() {
        let mut shared = [0u64; 16];
        let slot = shared.as_mut_ptr().cast::<[u64; 4]>();
        // SAFETY: 32 bytes inside the 128-byte, 8-aligned buffer.
        unsafe { store_value(slot, &[1, 2, 3, u64::MAX]) };
        // SAFETY: as above.
        assert_eq!(unsafe { load_value(slot) }, [1, 2, 3, u64::MAX]);
        let odd = shared.as_mut_ptr().cast::<[u8; 5]>();
        // SAFETY: 5 bytes inside the buffer.
        unsafe { store_value(odd, &[9, 8, 7, 6, 5]) };
        // SAFETY: as above.
        assert_eq!(unsafe { load_value(odd) }, [9, 8, 7, 6, 5]);
    }
}
