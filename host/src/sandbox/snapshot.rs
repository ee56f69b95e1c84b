//! Linear memory that sandwit owns, so an interpreter can be put back to
//! the state it was prepared in and serve run after run without being
//! instantiated again.
//!
//! The sandbox's own engine creates its interpreters' memories here
//! ([`Memories`], a wasmtime [`MemoryCreator`]): an anonymous mapping of
//! the reservation and guard wasmtime asks for. Once an interpreter is
//! prepared, [`Snapshot::take`] copies its memory aside and, where the
//! kernel allows (Linux 6.7 and later), write-protects it through a
//! userfaultfd in asynchronous mode: a write then only marks its page
//! written, in the kernel, without a signal or a thread to handle it.
//! [`Snapshot::restore`] asks the kernel (the `PAGEMAP_SCAN` ioctl) which
//! pages were written since, copies exactly those back, and protects them
//! again, so a run costs a reset in proportion to what it wrote. Without
//! the userfaultfd the whole memory is copied back.
//!
//! Invariant: after `restore` returns `true`, every byte of the memory is
//! what it was when the snapshot was taken, and the memory has the same
//! size. The rest of the instance's state outside linear memory is the
//! caller's to account for (see `Prepared` in `prepared.rs`): after an
//! export returns normally, the interpreter's mutable globals (its stack
//! pointer; the rest are addresses set at instantiation) are back to their
//! values, and its tables are what instantiation made them.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use wasmtime::{LinearMemory, MemoryCreator, MemoryType};

use crate::sys::linux::page_size;
use crate::sys::linux::pagemap::PagemapScan;
use crate::sys::linux::userfaultfd::WriteProtection;

/// Creates the memories of a sandbox's own engine, and hands the one an
/// instantiation made to the snapshot taken next.
#[derive(Default)]
pub(crate) struct Memories {
    /// Memories created since the last [`Memories::take_created`]: only the
    /// sandbox's preparing thread instantiates on this engine, one
    /// interpreter at a time. Weak: a memory nobody took (a GC heap's) is
    /// freed with its store.
    created: Mutex<Vec<Weak<Mapping>>>,
    /// Held by whoever instantiates on this engine (the preparing thread,
    /// or a run that starts or restores a session), from before it asks
    /// for an instance until it has taken the memory created: the memories
    /// created meanwhile are its own.
    pub(crate) instantiating: tokio::sync::Mutex<()>,
    /// The size the next memory is created at, if larger than its minimum
    /// (a session restored with the memory it was saved with), set by the
    /// holder of `instantiating`.
    next_size: Mutex<Option<usize>>,
}

impl Memories {
    /// Has the next memory created at `size` bytes (or its minimum, if
    /// larger): the caller holds `instantiating`. wasmtime takes the size a
    /// created memory has as its current size, so the guest's
    /// `memory.size` says so from the first instruction.
    pub(crate) fn create_next_at(&self, size: usize) {
        *self.next_size.lock().unwrap_or_else(|p| p.into_inner()) = Some(size);
    }

    /// The memories created since the last call, and still alive.
    pub(crate) fn take_created(&self) -> Vec<Arc<Mapping>> {
        let created = std::mem::take(&mut *self.created.lock().unwrap_or_else(|p| p.into_inner()));
        created.iter().filter_map(Weak::upgrade).collect()
    }
}

// SAFETY: each memory is a mapping of its own of `reserved + guard` bytes,
// of which the first `byte_size` are readable and writable and the rest
// inaccessible, the base never moves, and it is unmapped only when the last
// `Arc<Mapping>` goes (wasmtime's `LinearMemory` holds one).
unsafe impl MemoryCreator for Memories {
    fn new_memory(
        &self,
        _ty: MemoryType,
        minimum: usize,
        maximum: Option<usize>,
        reserved_size_in_bytes: Option<usize>,
        guard_size_in_bytes: usize,
    ) -> Result<Box<dyn LinearMemory>, String> {
        let asked = self
            .next_size
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let size = asked.map_or(minimum, |size| size.max(minimum));
        if maximum.is_some_and(|maximum| size > maximum) {
            return Err(format!(
                "a memory of {size} bytes is past its type's maximum"
            ));
        }
        // Without a reservation asked for, the maximum (or 4 GiB, all a
        // 32-bit memory can address) so growing never moves the base.
        let reserved = reserved_size_in_bytes
            .or(maximum)
            .unwrap_or(1 << 32)
            .max(size);
        let mapping = Mapping::new(size, reserved, guard_size_in_bytes)
            .map_err(|e| format!("cannot map {reserved} bytes for a linear memory: {e}"))?;
        let mapping = Arc::new(mapping);
        self.created
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Arc::downgrade(&mapping));
        Ok(Box::new(Memory(mapping)))
    }
}

/// An anonymous mapping: `reserved` bytes of which the first `size` are
/// accessible, then `guard` inaccessible bytes.
pub(crate) struct Mapping {
    base: NonNull<u8>,
    size: AtomicUsize,
    reserved: usize,
    guard: usize,
    /// Serialises growth (wasmtime grows through `&mut`, but restores read
    /// the size from another handle).
    grow: Mutex<()>,
}

// SAFETY: the mapping is plain memory; the base pointer is never freed
// while a handle exists, and its size is atomic.
unsafe impl Send for Mapping {}
// SAFETY: as above; writes to the contents are wasmtime's (while the guest
// runs) or a restore's (while the store is not in use), never both.
unsafe impl Sync for Mapping {}

impl Mapping {
    fn new(size: usize, reserved: usize, guard: usize) -> std::io::Result<Self> {
        let total = reserved
            .checked_add(guard)
            .ok_or_else(|| std::io::Error::other("reservation overflows"))?;
        // SAFETY: a fresh anonymous mapping at an address of the kernel's
        // choice; nothing else refers to it.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                total,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let mapping = Mapping {
            base: NonNull::new(base.cast()).expect("mmap returned a valid address"),
            size: AtomicUsize::new(0),
            reserved,
            guard,
            grow: Mutex::new(()),
        };
        mapping.grow_to(size)?;
        Ok(mapping)
    }

    pub(crate) fn byte_size(&self) -> usize {
        self.size.load(Ordering::Acquire)
    }

    /// The memory's bytes.
    ///
    /// # Safety
    ///
    /// No code may run in the instance, or grow its memory, while the
    /// slice lives: the caller holds its store exclusively.
    pub(crate) unsafe fn bytes(&self) -> &[u8] {
        // SAFETY: `byte_size` bytes from the base are accessible; the
        // caller keeps the guest from changing them meanwhile.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr(), self.byte_size()) }
    }

    /// The memory's bytes, to write.
    ///
    /// # Safety
    ///
    /// As for [`Mapping::bytes`], and nothing else reads them meanwhile.
    #[expect(clippy::mut_from_ref)]
    pub(crate) unsafe fn bytes_mut(&self) -> &mut [u8] {
        // SAFETY: as in `bytes`; the caller has the memory to itself.
        unsafe { std::slice::from_raw_parts_mut(self.base.as_ptr(), self.byte_size()) }
    }

    /// Where the memory starts.
    pub(crate) fn base(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    fn grow_to(&self, new_size: usize) -> std::io::Result<()> {
        let _grow = self.grow.lock().unwrap_or_else(|p| p.into_inner());
        let old = self.size.load(Ordering::Acquire);
        if new_size <= old {
            return Ok(());
        }
        if new_size > self.reserved {
            return Err(std::io::Error::other(format!(
                "{new_size} bytes is past the memory's {} byte reservation",
                self.reserved
            )));
        }
        let page = page_size();
        let (from, to) = (old.next_multiple_of(page), new_size.next_multiple_of(page));
        if to > from {
            // SAFETY: `from..to` is within the reservation, which this
            // mapping owns.
            let rc = unsafe {
                libc::mprotect(
                    self.base.as_ptr().add(from).cast(),
                    to - from,
                    libc::PROT_READ | libc::PROT_WRITE,
                )
            };
            if rc != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        self.size.store(new_size, Ordering::Release);
        Ok(())
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the whole mapping, no longer referred to by anyone.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.reserved + self.guard);
        }
    }
}

/// wasmtime's handle to a [`Mapping`].
struct Memory(Arc<Mapping>);

// SAFETY: see `Memories`' impl: the base never moves and `byte_size` bytes
// from it are accessible.
unsafe impl LinearMemory for Memory {
    fn byte_size(&self) -> usize {
        self.0.byte_size()
    }

    fn byte_capacity(&self) -> usize {
        self.0.reserved
    }

    fn grow_to(&mut self, new_size: usize) -> wasmtime::Result<()> {
        Ok(self.0.grow_to(new_size)?)
    }

    fn as_ptr(&self) -> *mut u8 {
        self.0.base.as_ptr()
    }
}

/// A copy of an interpreter's memory as it was prepared, and what finds the
/// pages written since.
pub(crate) struct Snapshot {
    mapping: Arc<Mapping>,
    /// Shared by the interpreters made from one prepared memory.
    image: Arc<[u8]>,
    tracker: Option<Tracker>,
}

impl Snapshot {
    /// Copies `mapping` aside as it is now.
    pub(crate) fn take(mapping: Arc<Mapping>) -> Snapshot {
        let size = mapping.byte_size();
        // SAFETY: `size` bytes from the base are accessible, and nothing
        // runs in the instance while its preparer holds its store.
        let image = unsafe { std::slice::from_raw_parts(mapping.base.as_ptr(), size) }.into();
        Self::tracking(mapping, image)
    }

    /// Copies the memory aside again as it is now, to restore it to from
    /// then on (after the instance was changed on purpose while nothing ran
    /// in it but its preparer).
    pub(crate) fn retake(self) -> Snapshot {
        let Snapshot {
            mapping,
            image,
            tracker,
        } = self;
        // The memory's range can be registered with one userfaultfd at a
        // time: the old one goes (unprotecting it) before the new one.
        drop((tracker, image));
        Self::take(mapping)
    }

    /// Makes `mapping` a copy of `image` (taken from another instance of
    /// the same module) and tracks it as [`Snapshot::take`] does. `None` if
    /// the memory is not the image's size.
    ///
    /// # Safety
    ///
    /// As for [`Snapshot::restore`].
    pub(crate) unsafe fn copy_of(mapping: Arc<Mapping>, image: Arc<[u8]>) -> Option<Snapshot> {
        if mapping.byte_size() != image.len() {
            return None;
        }
        // SAFETY: the memory holds `image.len()` bytes and is the caller's
        // alone.
        unsafe {
            std::ptr::copy_nonoverlapping(image.as_ptr(), mapping.base.as_ptr(), image.len());
        }
        Some(Self::tracking(mapping, image))
    }

    /// The image the memory is restored to.
    pub(crate) fn image(&self) -> &Arc<[u8]> {
        &self.image
    }

    /// The memory itself (as it grew, too).
    pub(crate) fn mapping(&self) -> &Arc<Mapping> {
        &self.mapping
    }

    fn tracking(mapping: Arc<Mapping>, image: Arc<[u8]>) -> Snapshot {
        let size = image.len();
        let tracker = Tracker::new(&mapping, size)
            .inspect_err(|e| {
                tracing::debug!("memory resets copy the whole image (no write tracking): {e}");
            })
            .ok();
        Snapshot {
            mapping,
            image,
            tracker,
        }
    }

    /// The runs of bytes of the image's length (as offsets) that may
    /// differ from the image: those written since the snapshot was taken
    /// or last restored, and those a restore left unprotected. Every other
    /// byte there is the image's. `None` without write tracking (or if the
    /// kernel failed to say): then any byte may differ.
    pub(crate) fn written(&mut self) -> Option<Vec<(usize, usize)>> {
        let len = self.image.len().min(self.mapping.byte_size());
        let tracker = self.tracker.as_mut()?;
        if std::process::id() != tracker.pid {
            return None;
        }
        let base = self.mapping.base.as_ptr();
        let mut written = Vec::new();
        (tracker.scan.written(base, len, &mut written))
            .inspect_err(|e| tracing::warn!("the pages an interpreter wrote are unknown: {e}"))
            .ok()?;
        Some(written)
    }

    /// Puts the memory back as it was when the snapshot was taken. `false`
    /// (the instance must not be reused) if it grew since, which cannot be
    /// undone, or the kernel failed to say what was written.
    ///
    /// # Safety
    ///
    /// No code may run in the instance, or read or write its memory,
    /// meanwhile: the caller holds its store exclusively.
    pub(crate) unsafe fn restore(&mut self) -> bool {
        let len = self.image.len();
        if self.mapping.byte_size() != len {
            return false;
        }
        let base = self.mapping.base.as_ptr();
        let Some(tracker) = &mut self.tracker else {
            // SAFETY: the memory holds `len` bytes and is the caller's alone
            // (above).
            unsafe { std::ptr::copy_nonoverlapping(self.image.as_ptr(), base, len) };
            return true;
        };
        // SAFETY: as above; the image is as long as the memory.
        unsafe { tracker.restore(base, &self.image) }
            .inspect_err(|e| tracing::warn!("an interpreter's memory could not be restored: {e}"))
            .is_ok()
    }

    /// Overwrites every byte of the memory with its complement in the
    /// snapshot, as a run that wrote every page would leave it, so that a
    /// restore that missed any page leaves it differing (for tests).
    ///
    /// # Safety
    ///
    /// As for [`Snapshot::restore`].
    #[cfg(feature = "internals")]
    pub(crate) unsafe fn scribble(&mut self) {
        let len = self.image.len().min(self.mapping.byte_size());
        // SAFETY: `len` bytes from the base are accessible, and the memory
        // is the caller's alone.
        let now = unsafe { std::slice::from_raw_parts_mut(self.mapping.base.as_ptr(), len) };
        for (byte, was) in now.iter_mut().zip(self.image.iter()) {
            *byte = !was;
        }
    }

    /// Whether every byte of the memory is what it was when the snapshot
    /// was taken (for tests).
    #[cfg(feature = "internals")]
    pub(crate) fn intact(&self) -> bool {
        if self.mapping.byte_size() != self.image.len() {
            return false;
        }
        // SAFETY: as in `take`.
        let now =
            unsafe { std::slice::from_raw_parts(self.mapping.base.as_ptr(), self.image.len()) };
        now == &self.image[..]
    }
}

/// A userfaultfd in asynchronous write-protect mode over one memory, and
/// the buffer `PAGEMAP_SCAN` reports written pages in.
///
/// A write to a protected page costs a page fault (a few µs in a VM), and
/// CPython writes the same few hundred pages in every run (reference counts
/// of common objects, its allocator's arenas). So a page a run wrote stays
/// unprotected, and is compared and copied back after every run, until it
/// comes back unchanged [`QUIET_RESTORES`] times in a row; only then is it
/// protected again. `PAGEMAP_SCAN` reports unprotected pages as written, so
/// every page that may differ from the image is looked at.
struct Tracker {
    protection: WriteProtection,
    scan: PagemapScan,
    /// Runs of written pages the last scan found, as offsets.
    written: Vec<(usize, usize)>,
    /// Runs of pages to protect again, as offsets.
    quiet: Vec<(usize, usize)>,
    /// Per page, the restores in a row that found it unprotected but
    /// unchanged.
    unchanged: Vec<u8>,
    /// The process that registered the memory: a child forked since has
    /// neither the write protection (the kernel does not carry it over
    /// without `UFFD_FEATURE_EVENT_FORK`) nor a pagemap of its own (the
    /// file describes the pages of the process that opened it).
    pid: u32,
}

/// Restores in a row a page must come back unchanged before it is
/// protected again.
const QUIET_RESTORES: u8 = 4;

/// Every tracked restore's pages in this process: found written, and of
/// those copied back (they differed). A bench's measure, read through
/// `PythonSandbox::restored_pages`.
#[cfg(feature = "internals")]
pub(crate) static RESTORED_PAGES: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];

impl Tracker {
    /// Registers the first `len` bytes of `mapping` with a new userfaultfd
    /// and write-protects them, so `PAGEMAP_SCAN` reports what is written
    /// from now on.
    fn new(mapping: &Mapping, len: usize) -> std::io::Result<Self> {
        let base = mapping.base.as_ptr();
        // SAFETY: `base..base + len` is the mapping's accessible part, which
        // stays mapped as long as the tracker (the snapshot holds both).
        let protection = unsafe { WriteProtection::new(base, len)? };
        let mut tracker = Tracker {
            protection,
            scan: PagemapScan::open()?,
            written: Vec::new(),
            quiet: Vec::new(),
            unchanged: vec![0; len.div_ceil(page_size())],
            pid: std::process::id(),
        };
        // Checks the scan works here before relying on it.
        tracker.scan.written(base, len, &mut tracker.written)?;
        Ok(tracker)
    }

    /// Puts back every page of `base..base + image.len()` that differs from
    /// `image`, and protects again those that stayed unchanged long enough.
    ///
    /// # Safety
    ///
    /// `base` is the tracked memory, `image.len()` bytes long, which nothing
    /// else reads or writes meanwhile.
    unsafe fn restore(&mut self, base: *mut u8, image: &[u8]) -> std::io::Result<()> {
        if std::process::id() != self.pid {
            return Err(std::io::Error::other(
                "the process forked since the memory was registered: its writes are not tracked",
            ));
        }
        let page = page_size();
        self.scan.written(base, image.len(), &mut self.written)?;
        self.quiet.clear();
        for &(start, end) in &self.written {
            for at in (start..end).step_by(page) {
                let size = page.min(end - at);
                let was = &image[at..at + size];
                // SAFETY: `at..at + size` is within the memory (the scan's
                // range), which is the caller's alone.
                let now = unsafe { std::slice::from_raw_parts_mut(base.add(at), size) };
                let count = &mut self.unchanged[at / page];
                if now == was {
                    *count += 1;
                    if *count >= QUIET_RESTORES {
                        *count = 0;
                        match self.quiet.last_mut() {
                            Some((_, end)) if *end == at => *end = at + size,
                            _ => self.quiet.push((at, at + size)),
                        }
                    }
                } else {
                    now.copy_from_slice(was);
                    *count = 0;
                    #[cfg(feature = "internals")]
                    RESTORED_PAGES[1].fetch_add(1, Ordering::Relaxed);
                }
                #[cfg(feature = "internals")]
                RESTORED_PAGES[0].fetch_add(1, Ordering::Relaxed);
            }
        }
        for &(start, end) in &self.quiet {
            // SAFETY: pages of the registered range.
            unsafe { self.protection.protect(base.add(start), end - start)? };
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory(pages: usize) -> Arc<Mapping> {
        Arc::new(Mapping::new(pages * page_size(), 1 << 24, 1 << 16).unwrap())
    }

    // Tests stand in for the guest, which writes through shared handles.
    #[expect(clippy::mut_from_ref)]
    fn bytes(mapping: &Mapping) -> &mut [u8] {
        // SAFETY: tests own the mapping and do not run wasm in it.
        unsafe { std::slice::from_raw_parts_mut(mapping.base.as_ptr(), mapping.byte_size()) }
    }

    #[test]
    fn restore_puts_back_exactly_what_was_written() {
        let mapping = memory(64);
        let page = page_size();
        for (i, byte) in bytes(&mapping).iter_mut().enumerate() {
            *byte = (i / page) as u8;
        }
        let mut snapshot = Snapshot::take(mapping.clone());
        for round in 0..3u8 {
            let memory = bytes(&mapping);
            // Scattered pages, a run of them, the first and the last byte.
            for at in [
                0,
                5 * page + 7,
                9 * page,
                10 * page,
                11 * page,
                64 * page - 1,
            ] {
                memory[at] = 0xEE ^ round;
            }
            // SAFETY: nothing else uses the mapping.
            assert!(unsafe { snapshot.restore() });
            for (i, byte) in bytes(&mapping).iter().enumerate() {
                assert_eq!(*byte, (i / page) as u8, "byte {i} after round {round}");
            }
        }
    }

    #[test]
    fn written_pages_stay_unprotected_until_they_come_back_unchanged() {
        let mapping = memory(16);
        let page = page_size();
        let mut snapshot = Snapshot::take(mapping.clone());
        assert!(
            snapshot.tracker.is_some(),
            "this kernel tracks no writes (userfaultfd write-protect, PAGEMAP_SCAN: Linux 6.7)"
        );
        let unprotected = |snapshot: &mut Snapshot| {
            let tracker = snapshot.tracker.as_mut().unwrap();
            let mut written = Vec::new();
            let scan = &mut tracker.scan;
            scan.written(mapping.base.as_ptr(), 16 * page, &mut written)
                .unwrap();
            written
        };
        assert_eq!(unprotected(&mut snapshot), []);
        bytes(&mapping)[3 * page] = 1;
        bytes(&mapping)[4 * page] = 1;
        // SAFETY (each restore): nothing else uses the mapping.
        assert!(unsafe { snapshot.restore() });
        assert_eq!(unprotected(&mut snapshot), [(3 * page, 5 * page)]);
        // Written again: still unprotected, and restored.
        bytes(&mapping)[4 * page] = 2;
        assert!(unsafe { snapshot.restore() });
        assert_eq!(bytes(&mapping)[4 * page], 0);
        // Page 3 came back unchanged once so far, page 4 not yet.
        for _ in 2..QUIET_RESTORES {
            assert!(unsafe { snapshot.restore() });
            assert_eq!(unprotected(&mut snapshot), [(3 * page, 5 * page)]);
        }
        // Page 3 has come back unchanged QUIET_RESTORES times, page 4 one
        // time fewer.
        assert!(unsafe { snapshot.restore() });
        assert_eq!(unprotected(&mut snapshot), [(4 * page, 5 * page)]);
        assert!(unsafe { snapshot.restore() });
        assert_eq!(unprotected(&mut snapshot), []);
    }

    #[test]
    fn restore_finds_what_the_kernel_wrote() {
        // A system call writing into a protected page (copy_to_user) marks
        // it written as a write from user space does.
        let mapping = memory(8);
        let page = page_size();
        let mut snapshot = Snapshot::take(mapping.clone());
        assert!(snapshot.tracker.is_some(), "this kernel tracks no writes");
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let sent = [0xAB_u8; 16];
        // SAFETY: writes `sent` to the pipe, then reads it into page 5 of
        // the mapping, which nothing else uses; both ends are closed after.
        unsafe {
            assert_eq!(libc::write(fds[1], sent.as_ptr().cast(), sent.len()), 16);
            let into = mapping.base.as_ptr().add(5 * page + 100);
            assert_eq!(libc::read(fds[0], into.cast(), sent.len()), 16);
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
        assert_eq!(bytes(&mapping)[5 * page + 100], 0xAB);
        // SAFETY: nothing else uses the mapping.
        assert!(unsafe { snapshot.restore() });
        assert!(bytes(&mapping).iter().all(|&b| b == 0));
    }

    #[test]
    fn a_forked_child_does_not_restore_its_copy_of_a_memory() {
        // The kernel does not carry the write protection into a child (no
        // UFFD_FEATURE_EVENT_FORK), and the pagemap file opened by the
        // parent describes the parent's pages: a restore in the child would
        // miss what the child wrote.
        let mapping = memory(4);
        let mut snapshot = Snapshot::take(mapping.clone());
        assert!(snapshot.tracker.is_some(), "this kernel tracks no writes");
        // SAFETY: the child only writes to the mapping, restores and exits.
        match unsafe { libc::fork() } {
            0 => {
                bytes(&mapping)[page_size()] = 1;
                // SAFETY: nothing else uses the mapping in the child.
                let restored = unsafe { snapshot.restore() };
                let missed = restored && bytes(&mapping)[page_size()] != 0;
                // SAFETY: ends the child without running the parent's
                // destructors or the test harness.
                unsafe { libc::_exit(i32::from(missed)) }
            }
            -1 => panic!("fork: {}", std::io::Error::last_os_error()),
            child => {
                let mut status = 0;
                // SAFETY: waits for the child just forked.
                assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
                assert!(libc::WIFEXITED(status), "the child did not exit: {status}");
                assert_eq!(
                    libc::WEXITSTATUS(status),
                    0,
                    "the child's restore missed the page it wrote"
                );
            }
        }
    }

    #[test]
    fn a_grown_memory_is_not_restored() {
        let mapping = memory(4);
        let mut snapshot = Snapshot::take(mapping.clone());
        mapping.grow_to(8 * page_size()).unwrap();
        // SAFETY: nothing else uses the mapping.
        assert!(!unsafe { snapshot.restore() });
    }

    #[test]
    fn growth_stays_within_the_reservation() {
        let mapping = memory(1);
        assert!(mapping.grow_to(1 << 24).is_ok());
        assert!(mapping.grow_to((1 << 24) + 1).is_err());
        bytes(&mapping)[(1 << 24) - 1] = 1;
    }
}
