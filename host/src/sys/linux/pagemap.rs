//! `PAGEMAP_SCAN` (Linux 6.7 and later) on `/proc/self/pagemap`: which
//! pages of a range are not write-protected, i.e. were written since
//! [`super::userfaultfd`] last protected them.

use std::os::fd::AsRawFd;

const PAGEMAP_SCAN: libc::c_ulong = 0xC060_6610;
const PAGE_IS_WRITTEN: u64 = 1 << 1;

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct PageRegion {
    start: u64,
    end: u64,
    categories: u64,
}

#[repr(C)]
struct PmScanArg {
    size: u64,
    flags: u64,
    start: u64,
    end: u64,
    walk_end: u64,
    vec: u64,
    vec_len: u64,
    max_pages: u64,
    category_inverted: u64,
    category_mask: u64,
    category_anyof_mask: u64,
    return_mask: u64,
}

/// Regions one `PAGEMAP_SCAN` call reports at most; a scan that fills them
/// goes on from where it stopped.
const REGIONS: usize = 256;

/// This process's pagemap, and the buffer a scan reports regions in. It
/// describes the pages of the process that opened it: a child forked since
/// must not use it.
pub(crate) struct PagemapScan {
    pagemap: std::fs::File,
    regions: Vec<PageRegion>,
}

impl PagemapScan {
    /// Opens `/proc/self/pagemap`.
    pub(crate) fn open() -> std::io::Result<Self> {
        Ok(PagemapScan {
            pagemap: std::fs::File::open("/proc/self/pagemap")?,
            regions: vec![PageRegion::default(); REGIONS],
        })
    }

    /// Fills `written` with the runs of pages of `base..base + len` that are
    /// written (not write-protected), as offsets from `base`.
    pub(crate) fn written(
        &mut self,
        base: *mut u8,
        len: usize,
        written: &mut Vec<(usize, usize)>,
    ) -> std::io::Result<()> {
        written.clear();
        let (start, end) = (base as u64, base as u64 + len as u64);
        let mut from = start;
        while from < end {
            let mut arg = PmScanArg {
                size: size_of::<PmScanArg>() as u64,
                flags: 0,
                start: from,
                end,
                walk_end: 0,
                vec: self.regions.as_mut_ptr() as u64,
                vec_len: self.regions.len() as u64,
                max_pages: 0,
                category_inverted: 0,
                category_mask: PAGE_IS_WRITTEN,
                category_anyof_mask: 0,
                return_mask: PAGE_IS_WRITTEN,
            };
            // SAFETY: `arg` is the ioctl's structure, `vec` points to
            // `vec_len` regions the kernel may fill, and the kernel checks
            // the range against this process's mappings.
            let found = unsafe { libc::ioctl(self.pagemap.as_raw_fd(), PAGEMAP_SCAN, &mut arg) };
            if found < 0 {
                return Err(std::io::Error::last_os_error());
            }
            for region in &self.regions[..found as usize] {
                written.push((
                    (region.start - start) as usize,
                    (region.end - start) as usize,
                ));
            }
            if arg.walk_end <= from {
                return Err(std::io::Error::other("PAGEMAP_SCAN made no progress"));
            }
            from = arg.walk_end;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::linux::iowr;

    #[test]
    fn the_ioctl_number_encodes_the_structure_it_takes() {
        assert_eq!(PAGEMAP_SCAN, iowr(b'f', 16, size_of::<PmScanArg>()));
        // The kernel's structures are of u64 fields only.
        assert_eq!((size_of::<PmScanArg>(), size_of::<PageRegion>()), (96, 24));
    }
}
