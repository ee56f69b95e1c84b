//! A userfaultfd in asynchronous write-protect mode (Linux 6.7 and later):
//! a write to a protected page only marks it written, in the kernel, with
//! no signal and no thread to handle it; [`super::pagemap`] reads the marks.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::os_error;

const UFFD_USER_MODE_ONLY: libc::c_int = 1;
const UFFD_API: u64 = 0xAA;
const UFFD_FEATURE_WP_UNPOPULATED: u64 = 1 << 13;
const UFFD_FEATURE_WP_ASYNC: u64 = 1 << 15;
const UFFDIO_API: libc::c_ulong = 0xC018_AA3F;
const UFFDIO_REGISTER: libc::c_ulong = 0xC020_AA00;
const UFFDIO_REGISTER_MODE_WP: u64 = 1 << 1;
const UFFDIO_WRITEPROTECT: libc::c_ulong = 0xC018_AA06;
const UFFDIO_WRITEPROTECT_MODE_WP: u64 = 1 << 0;

#[repr(C)]
struct UffdioApi {
    api: u64,
    features: u64,
    ioctls: u64,
}

#[repr(C)]
struct UffdioRange {
    start: u64,
    len: u64,
}

#[repr(C)]
struct UffdioRegister {
    range: UffdioRange,
    mode: u64,
    ioctls: u64,
}

#[repr(C)]
struct UffdioWriteprotect {
    range: UffdioRange,
    mode: u64,
}

/// A range of memory registered with a userfaultfd of its own for
/// asynchronous write protection. Dropping it closes the descriptor, which
/// unregisters the range.
pub(crate) struct WriteProtection {
    uffd: OwnedFd,
}

impl WriteProtection {
    /// Registers `base..base + len` and write-protects all of it.
    ///
    /// # Safety
    ///
    /// The range is memory this process maps, readable and writable, and
    /// stays mapped while the protection lives.
    pub(crate) unsafe fn new(base: *mut u8, len: usize) -> std::io::Result<Self> {
        // SAFETY: the userfaultfd syscall takes flags only; user-mode-only
        // needs no privilege (faults from the kernel are not handled).
        let fd = unsafe {
            libc::syscall(
                libc::SYS_userfaultfd,
                libc::O_CLOEXEC | libc::O_NONBLOCK | UFFD_USER_MODE_ONLY,
            )
        };
        if fd < 0 {
            return Err(os_error("userfaultfd"));
        }
        // SAFETY: a new descriptor that nothing else owns.
        let uffd = unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) };
        let mut api = UffdioApi {
            api: UFFD_API,
            features: UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED,
            ioctls: 0,
        };
        let mut register = UffdioRegister {
            range: UffdioRange {
                start: base as u64,
                len: len as u64,
            },
            mode: UFFDIO_REGISTER_MODE_WP,
            ioctls: 0,
        };
        // SAFETY: each ioctl gets the structure its number names, alive for
        // the call; the range is the caller's mapped memory.
        unsafe {
            if libc::ioctl(uffd.as_raw_fd(), UFFDIO_API, &mut api) != 0 {
                return Err(os_error("UFFDIO_API with asynchronous write-protect"));
            }
            if libc::ioctl(uffd.as_raw_fd(), UFFDIO_REGISTER, &mut register) != 0 {
                return Err(os_error("UFFDIO_REGISTER"));
            }
        }
        let protection = WriteProtection { uffd };
        // SAFETY: the range just registered.
        unsafe { protection.protect(base, len) }
            .map_err(|e| std::io::Error::new(e.kind(), format!("UFFDIO_WRITEPROTECT: {e}")))?;
        Ok(protection)
    }

    /// Write-protects `start..start + len` again, so the next write to each
    /// of its pages is marked.
    ///
    /// # Safety
    ///
    /// The range is within the registered one.
    pub(crate) unsafe fn protect(&self, start: *mut u8, len: usize) -> std::io::Result<()> {
        let mut protect = UffdioWriteprotect {
            range: UffdioRange {
                start: start as u64,
                len: len as u64,
            },
            mode: UFFDIO_WRITEPROTECT_MODE_WP,
        };
        // SAFETY: the ioctl's structure, alive for the call, over pages of
        // the registered range.
        if unsafe { libc::ioctl(self.uffd.as_raw_fd(), UFFDIO_WRITEPROTECT, &mut protect) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::linux::iowr;

    #[test]
    fn the_ioctl_numbers_encode_the_structures_they_take() {
        assert_eq!(UFFDIO_API, iowr(0xAA, 0x3F, size_of::<UffdioApi>()));
        assert_eq!(
            UFFDIO_REGISTER,
            iowr(0xAA, 0x00, size_of::<UffdioRegister>())
        );
        assert_eq!(
            UFFDIO_WRITEPROTECT,
            iowr(0xAA, 0x06, size_of::<UffdioWriteprotect>())
        );
        // The kernel's structures are of u64 fields only.
        assert_eq!(
            (
                size_of::<UffdioApi>(),
                size_of::<UffdioRegister>(),
                size_of::<UffdioWriteprotect>()
            ),
            (24, 32, 24)
        );
    }
}
