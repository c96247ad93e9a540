//! Anonymous memory for CUPTI's buffers that costs what was written into it, not its size.
//!
//! A buffer is its own mapping: pages CUPTI never writes are never backed, `resident` tells
//! (mincore) how many bytes CUPTI's writes made real, and `release` gives them back to the
//! system when the buffer returns to the pool, so a recycled buffer costs nothing again.
//! (Heap allocations would keep freed pages resident and could not be measured.)

/// The system's page size, read once.
pub fn page_size() -> usize {
    static PAGE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *PAGE.get_or_init(|| {
        // SAFETY: sysconf has no preconditions.
        let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if n > 0 {
            n as usize
        } else {
            4096
        }
    })
}

/// `bytes` rounded up to whole pages.
pub fn whole_pages(bytes: usize) -> usize {
    bytes.div_ceil(page_size()) * page_size()
}

/// A fresh mapping of `size` bytes (page-aligned, so 8-byte aligned as CUPTI requires), or
/// None when the system refuses. NORESERVE: untouched pages are not charged against
/// overcommit, since most of a buffer is never written.
pub fn map(size: usize) -> Option<*mut u8> {
    // SAFETY: an anonymous private mapping at an address of the kernel's choosing.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    // Where transparent huge pages are on for everything, CUPTI's first record would make a
    // whole 2 MiB huge page resident: keep buffers on small pages. Advice only; failure is fine.
    // SAFETY: p/size is the mapping just made.
    unsafe { libc::madvise(p, size, libc::MADV_NOHUGEPAGE) };
    Some(p.cast())
}

/// Drops the pages of a mapping from [`map`] (they read as zero again, unbacked); the mapping
/// stays usable.
///
/// # Safety
/// `p` and `size` must be a live mapping from [`map`] that nobody else is using.
pub unsafe fn release(p: *mut u8, size: usize) {
    // SAFETY: the caller's contract; MADV_DONTNEED on a private anonymous mapping only
    // discards its pages.
    unsafe { libc::madvise(p.cast(), size, libc::MADV_DONTNEED) };
}

/// Bytes of the mapping at `p` that are backed by memory now (0 if `p` is not mapped:
/// mincore fails, and a scan racing a buffer's return must not count it).
pub fn resident(p: *mut u8, size: usize) -> usize {
    let pages = size.div_ceil(page_size());
    let mut vec = vec![0u8; pages];
    // SAFETY: mincore only reads the page tables of [p, p + size) and writes one byte per page
    // into `vec`, which has exactly that many.
    let r = unsafe { libc::mincore(p.cast(), size, vec.as_mut_ptr()) };
    if r != 0 {
        return 0;
    }
    vec.iter().filter(|&&b| b & 1 != 0).count() * page_size()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_written_pages_are_resident_and_release_frees_them() {
        let page = page_size();
        let size = 64 * page;
        let p = map(size).expect("mapped");
        assert_eq!(p as usize % page, 0);
        assert_eq!(resident(p, size), 0, "untouched");
        // SAFETY: p is a fresh mapping of `size` bytes; writes one byte in pages 0, 1 and 40.
        unsafe {
            *p = 1;
            *p.add(page + 7) = 1;
            *p.add(40 * page) = 1;
        }
        assert_eq!(resident(p, size), 3 * page);
        // SAFETY: p/size is the mapping above, used by nobody else.
        unsafe { release(p, size) };
        assert_eq!(resident(p, size), 0);
        // SAFETY: the mapping is still valid after MADV_DONTNEED; its pages read as zero.
        assert_eq!(unsafe { *p.add(page + 7) }, 0);
        assert_eq!(whole_pages(1), page);
        assert_eq!(whole_pages(page), page);
        assert_eq!(whole_pages(0), 0);
    }
}
