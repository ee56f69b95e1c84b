//! Linux interfaces the libc crate does not wrap: a userfaultfd in
//! asynchronous write-protect mode (`userfaultfd`) and the `PAGEMAP_SCAN`
//! ioctl that reports the pages written since (`pagemap`), with the
//! kernel's ABI (include/uapi/linux/userfaultfd.h and fs.h) beside each.

pub(crate) mod pagemap;
pub(crate) mod userfaultfd;

/// The size of a memory page.
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf with a valid name has no preconditions.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096)
}

/// The last OS error, prefixed with what failed.
fn os_error(what: &str) -> std::io::Error {
    let e = std::io::Error::last_os_error();
    std::io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// `_IOWR(ty, nr, size)` on Linux (asm-generic/ioctl.h): the direction
/// (read | write) in bits 30-31, the size in 16-29, the type in 8-15 and the
/// number in 0-7. The tests check the ioctl numbers against it.
#[cfg(test)]
fn iowr(ty: u8, nr: u8, size: usize) -> libc::c_ulong {
    (3 << 30)
        | ((size as libc::c_ulong) << 16)
        | (libc::c_ulong::from(ty) << 8)
        | libc::c_ulong::from(nr)
}
