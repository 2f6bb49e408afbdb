//! The measured memory: one anonymous mapping per buffer size, bound to a NUMA node,
//! backed by small or huge pages as asked, locked and prefaulted before anything is timed.

use std::io;

use serde::{Deserialize, Serialize};

/// Which pages back a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HugePages {
    /// Base (4 KiB) pages: transparent huge pages are declined with MADV_NOHUGEPAGE so
    /// that a kernel with THP `always` does not change what is measured.
    None,
    /// Transparent huge pages requested with MADV_HUGEPAGE (THP `always` or `madvise`).
    Thp,
    /// Pages of the hugetlb pool (MAP_HUGETLB), reserved with vm.nr_hugepages.
    Hugetlb,
}

impl HugePages {
    /// The mapping granule: a buffer is rounded up to it.
    pub fn granule(self, huge_page_bytes: u64) -> u64 {
        match self {
            HugePages::None => 4096,
            HugePages::Thp | HugePages::Hugetlb => huge_page_bytes.max(4096),
        }
    }
}

/// An anonymous private mapping, unmapped on drop.
pub struct Buffer {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is owned by the one thread that measures it; nothing else aliases it.
unsafe impl Send for Buffer {}

/// `MPOL_BIND` from <linux/mempolicy.h>: allocate only on the given nodes.
const MPOL_BIND: libc::c_int = 2;
/// `MPOL_MF_STRICT`: fail if pages already placed elsewhere (none are: the mapping is new).
const MPOL_MF_STRICT: libc::c_uint = 1;

impl Buffer {
    /// Map `len` bytes (a multiple of the page granule), bind them to `node` when given,
    /// ask for the pages `huge` names, then lock (`lock`) and touch every page, so the
    /// timed loops take no page fault. Errors name the step that failed.
    pub fn new(
        len: usize,
        huge: HugePages,
        node: Option<u32>,
        lock: bool,
    ) -> Result<Buffer, String> {
        let mut flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        if huge == HugePages::Hugetlb {
            flags |= libc::MAP_HUGETLB;
        }
        // SAFETY: a fresh anonymous mapping; the result is checked.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(format!(
                "cannot map {len} bytes{}: {}",
                if huge == HugePages::Hugetlb {
                    " of hugetlb pages (is the pool large enough? see HugePages_Free in /proc/meminfo)"
                } else {
                    ""
                },
                io::Error::last_os_error()
            ));
        }
        let buffer = Buffer {
            ptr: ptr.cast(),
            len,
        };
        if let Some(node) = node {
            buffer.bind(node)?;
        }
        let advice = match huge {
            HugePages::None => Some(libc::MADV_NOHUGEPAGE),
            HugePages::Thp => Some(libc::MADV_HUGEPAGE),
            HugePages::Hugetlb => None,
        };
        if let Some(advice) = advice {
            // SAFETY: advice on our own mapping.
            if unsafe { libc::madvise(ptr, len, advice) } != 0 {
                return Err(format!(
                    "madvise({}) refused: {}",
                    if advice == libc::MADV_HUGEPAGE {
                        "MADV_HUGEPAGE"
                    } else {
                        "MADV_NOHUGEPAGE"
                    },
                    io::Error::last_os_error()
                ));
            }
        }
        // Touch every page (writing, so each gets its own frame), then lock them.
        for offset in (0..len).step_by(4096) {
            // SAFETY: within the mapping.
            unsafe { ptr.cast::<u8>().add(offset).write_volatile(1) };
        }
        // SAFETY: locking our own mapping.
        if lock && unsafe { libc::mlock(ptr, len) } != 0 {
            return Err(format!(
                "cannot lock {len} bytes (mlock): {} — raise the locked-memory limit (ulimit -l), run as root, or pass --no-mlock",
                io::Error::last_os_error()
            ));
        }
        Ok(buffer)
    }

    /// Bind the mapping's pages to NUMA node `node` (mbind, MPOL_BIND).
    fn bind(&self, node: u32) -> Result<(), String> {
        let mut mask = [0 as libc::c_ulong; 16];
        let bits = libc::c_ulong::BITS;
        let word = (node / bits) as usize;
        if word >= mask.len() {
            return Err(format!(
                "NUMA node {node} is beyond the node masks tame builds"
            ));
        }
        mask[word] |= 1 << (node % bits);
        // SAFETY: mbind on our own mapping with a mask of `mask.len() * bits` bits.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_mbind,
                self.ptr,
                self.len,
                MPOL_BIND,
                mask.as_ptr(),
                (mask.len() as u32 * bits) as libc::c_ulong,
                MPOL_MF_STRICT,
            )
        };
        if rc != 0 {
            return Err(format!(
                "cannot bind the buffer to NUMA node {node} (mbind): {}",
                io::Error::last_os_error()
            ));
        }
        Ok(())
    }

    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping we made; nothing points into it any more.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_is_mapped_touched_and_writable() {
        let mut b = Buffer::new(64 * 1024, HugePages::None, None, false).unwrap();
        assert_eq!(b.len(), 64 * 1024);
        // Every page was touched with a 1.
        let p = b.as_mut_ptr();
        // SAFETY: within the mapping.
        assert_eq!(unsafe { p.add(4096 * 3).read() }, 1);
    }

    #[test]
    fn binding_to_a_node_that_does_not_exist_names_mbind() {
        let e = Buffer::new(64 * 1024, HugePages::None, Some(1000), false)
            .err()
            .expect("node 1000 does not exist");
        assert!(e.contains("NUMA node 1000") && e.contains("mbind"), "{e}");
        assert_eq!(HugePages::Thp.granule(2 << 20), 2 << 20);
        assert_eq!(HugePages::None.granule(2 << 20), 4096);
    }
}
