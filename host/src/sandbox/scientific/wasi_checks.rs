//! The workspace's checks in front of WASI preview 1's functions that
//! write, grow, create and link (`workspace.rs` says what they check): a
//! call they let through goes on to wasmtime-wasi's own function.
//!
//! A write is charged by what its descriptor is, not by its number: WASI
//! hands out the lowest free number, so after `close(1)` a file may get
//! stdout's. The descriptor table is wasmtime-wasi's own, private, and
//! changed by `fd_close` and `fd_renumber` as well as `path_open`; rather
//! than keep a copy of it that could fall out of step, the checks ask it
//! through its own `fd_tell`, which answers a position for a file,
//! `ESPIPE` for the stdio streams (the run's captured output, not
//! charged) and `EBADF` for anything else (a folder, a closed number: the
//! write fails the same way and writes nothing). The only files that can
//! be written are the workspace's (the other preopens are read-only).
//!
//! `fd_allocate` needs no check: wasmtime-wasi 48 answers `ENOTSUP` for
//! every file (preview 2 has no such call).

use wasmtime::{Caller, Extern, Linker};
use wasmtime_wasi::p1::types::{Errno, Fd, Lookupflags};
use wasmtime_wasi::p1::wasi_snapshot_preview1::{self as p1, WasiSnapshotPreview1 as _};
use wiggle::{GuestMemory, GuestPtr};

use super::state::SciData;
use crate::sandbox::workspace::{Checked, Creates, Refusal, Reserved, grow_charge, write_charge};

/// WASI preview 1's `EPERM`, `ENAMETOOLONG` and `ENOSPC`.
const EPERM: i32 = 63;
const ENAMETOOLONG: i32 = 37;
const ENOSPC: i32 = 51;
/// `path_open`'s `O_CREAT`.
const O_CREAT: i32 = 1;

/// Puts the quota checks in front of WASI's `fd_write`, `fd_pwrite`,
/// `fd_filestat_set_size`, `path_open`, `path_create_directory`,
/// `path_symlink` and `path_link`; a call they let through goes to
/// wasmtime-wasi's own function.
pub(crate) fn add_to_linker(linker: &mut Linker<SciData>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let wasi = "wasi_snapshot_preview1";
    linker.func_wrap_async(wasi, "fd_write", |caller, args| {
        Box::new(fd_write(caller, args))
    })?;
    linker.func_wrap_async(wasi, "fd_pwrite", |caller, args| {
        Box::new(fd_pwrite(caller, args))
    })?;
    linker.func_wrap_async(wasi, "fd_filestat_set_size", |caller, args| {
        Box::new(fd_filestat_set_size(caller, args))
    })?;
    linker.func_wrap_async(wasi, "path_open", |caller, args| {
        Box::new(path_open(caller, args))
    })?;
    linker.func_wrap_async(wasi, "path_create_directory", |caller, args| {
        Box::new(path_create_directory(caller, args))
    })?;
    // Links: none in a workspace (one could point at another chat's
    // files through a path the host would follow later).
    linker.func_wrap(
        wasi,
        "path_symlink",
        |_: i32, _: i32, _: i32, _: i32, _: i32| EPERM,
    )?;
    linker.func_wrap(
        wasi,
        "path_link",
        |_: i32, _: i32, _: i32, _: i32, _: i32, _: i32, _: i32| EPERM,
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// `fd_write`, charged to the run's workspace first.
async fn fd_write(
    mut caller: Caller<'_, SciData>,
    (fd, iovs, n, out): (i32, i32, i32, i32),
) -> wasmtime::Result<i32> {
    if let Some(errno) = charge_write(&mut caller, fd, iovs, n, None).await? {
        return Ok(errno);
    }
    let (mut memory, data) = guest(&mut caller)?;
    p1::fd_write(&mut data.wasi, &mut memory, fd, iovs, n, out).await
}

/// `fd_pwrite`, charged to the run's workspace first (at `offset`).
async fn fd_pwrite(
    mut caller: Caller<'_, SciData>,
    (fd, iovs, n, offset, out): (i32, i32, i32, i64, i32),
) -> wasmtime::Result<i32> {
    let at = Some(offset as u64);
    if let Some(errno) = charge_write(&mut caller, fd, iovs, n, at).await? {
        return Ok(errno);
    }
    let (mut memory, data) = guest(&mut caller)?;
    let wasi = &mut data.wasi;
    p1::fd_pwrite(wasi, &mut memory, fd, iovs, n, offset, out).await
}

/// `fd_filestat_set_size`, what it grows a file by charged to the run's
/// workspace first.
async fn fd_filestat_set_size(
    mut caller: Caller<'_, SciData>,
    (fd, size): (i32, i64),
) -> wasmtime::Result<i32> {
    if let Some((now, _)) = file(&mut caller, fd).await? {
        let growth = grow_charge(now, size as u64);
        if let Some(refusal) = charge(&mut caller, growth) {
            return Ok(errno(refusal));
        }
    }
    let (mut memory, data) = guest(&mut caller)?;
    p1::fd_filestat_set_size(&mut data.wasi, &mut memory, fd, size).await
}

/// `path_open`, a file it would create checked by the run's workspace
/// first.
async fn path_open(
    mut caller: Caller<'_, SciData>,
    (dirfd, lookup, path, len, oflags, base, inheriting, fdflags, out): (
        i32,
        i32,
        i32,
        i32,
        i32,
        i64,
        i64,
        i32,
        i32,
    ),
) -> wasmtime::Result<i32> {
    let creates = match oflags & O_CREAT != 0 {
        true => Creates::File,
        false => Creates::Nothing,
    };
    let new = match check_new(&mut caller, dirfd, (path, len), creates).await? {
        Checked::Refused(refusal) => return Ok(errno(refusal)),
        Checked::New(reserved) => Some(reserved),
        Checked::Named => None,
    };
    let (mut memory, data) = guest(&mut caller)?;
    let errno = p1::path_open(
        &mut data.wasi,
        &mut memory,
        dirfd,
        lookup,
        path,
        len,
        oflags,
        base,
        inheriting,
        fdflags,
        out,
    )
    .await?;
    settle_new(&mut caller, new, errno == 0);
    Ok(errno)
}

/// `path_create_directory`, checked by the run's workspace first.
async fn path_create_directory(
    mut caller: Caller<'_, SciData>,
    (fd, path, len): (i32, i32, i32),
) -> wasmtime::Result<i32> {
    let new = match check_new(&mut caller, fd, (path, len), Creates::Folder).await? {
        Checked::Refused(refusal) => return Ok(errno(refusal)),
        Checked::New(reserved) => Some(reserved),
        Checked::Named => None,
    };
    let (mut memory, data) = guest(&mut caller)?;
    let wasi = &mut data.wasi;
    let errno = p1::path_create_directory(wasi, &mut memory, fd, path, len).await?;
    settle_new(&mut caller, new, errno == 0);
    Ok(errno)
}

/// Preview 1's error number for `refusal`.
fn errno(refusal: Refusal) -> i32 {
    match refusal {
        Refusal::NoSpace => ENOSPC,
        Refusal::NameTooLong => ENAMETOOLONG,
    }
}

/// The guest's memory and the store data, borrowed together, for calling
/// wasmtime-wasi's preview 1 functions as its own linker does.
fn guest<'a>(
    caller: &'a mut Caller<'_, SciData>,
) -> wasmtime::Result<(GuestMemory<'a>, &'a mut SciData)> {
    let memory = memory(caller)?;
    let (bytes, data) = memory.data_and_store_mut(caller);
    Ok((GuestMemory::Unshared(bytes), data))
}

fn memory(caller: &mut Caller<'_, SciData>) -> wasmtime::Result<wasmtime::Memory> {
    caller
        .get_export("memory")
        .and_then(Extern::into_memory)
        .ok_or_else(|| wasmtime::format_err!("the interpreter has no memory"))
}

/// Charges a write of the iovecs at `iovs` to `fd` at `offset` (at its
/// position when `None`) to the run's workspace, if `fd` is a file: their
/// total length (wasmtime-wasi may write less, never more) and the hole
/// past the file's end; the errno that refuses it.
async fn charge_write(
    caller: &mut Caller<'_, SciData>,
    fd: i32,
    iovs: i32,
    n: i32,
    offset: Option<u64>,
) -> wasmtime::Result<Option<i32>> {
    if caller.data().workspace.is_none() {
        return Ok(None);
    }
    let Some((size, position)) = file(caller, fd).await? else {
        return Ok(None);
    };
    let memory = memory(caller)?;
    let data = memory.data(&*caller);
    let mut total: u64 = 0;
    for i in 0..n.max(0) as usize {
        let at = (iovs as u32 as usize).saturating_add(i * 8 + 4);
        let len = data
            .get(at..at + 4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
            .unwrap_or(0);
        total += u64::from(len);
    }
    let bytes = write_charge(size, offset.unwrap_or(position), total);
    Ok(charge(caller, bytes).map(errno))
}

/// The size and position of the file `fd` names, as wasmtime-wasi's own
/// table has it; `None` if `fd` is not a file (see the module's comment).
/// A size it cannot say counts as 0, which charges a write the most.
async fn file(caller: &mut Caller<'_, SciData>, fd: i32) -> wasmtime::Result<Option<(u64, u64)>> {
    let (mut memory, data) = guest(caller)?;
    let fd = Fd::from(fd as u32);
    // `ESPIPE` (stdio) and `EBADF` (not a file) are the errors it has.
    let position = match data.wasi.fd_tell(&mut memory, fd) {
        Ok(position) => position,
        Err(e) => return e.downcast().map(|_: Errno| None),
    };
    let size = match data.wasi.fd_filestat_get(&mut memory, fd).await {
        Ok(stat) => stat.size,
        Err(e) => match e.downcast() {
            Ok(_) => 0,
            Err(trap) => return Err(trap),
        },
    };
    Ok(Some((size, position)))
}

/// Charges `bytes` to the run's workspace, if it has one.
fn charge(caller: &mut Caller<'_, SciData>, bytes: u64) -> Option<Refusal> {
    caller.data_mut().workspace.as_mut()?.charge(bytes)
}

/// The path at `path` (its address and length) the code names relative
/// to `dirfd`, checked by the run's workspace for a call that `creates`
/// it. Whether it is there already is asked where the call names it, of
/// wasmtime-wasi (its `path_filestat_get` relative to `dirfd`): a folder
/// the code opened names its own entries, not the workspace's top's. A
/// folder is never looked up: making one that is there fails, and gives
/// back what was reserved.
async fn check_new(
    caller: &mut Caller<'_, SciData>,
    dirfd: i32,
    (path, len): (i32, i32),
    creates: Creates,
) -> wasmtime::Result<Checked> {
    let memory = memory(caller)?;
    let start = path as u32 as usize;
    let name = memory
        .data(&*caller)
        .get(start..start.saturating_add(len.max(0) as usize))
        .map(|b| String::from_utf8_lossy(b).into_owned());
    let (Some(name), true) = (name, caller.data().workspace.is_some()) else {
        return Ok(Checked::Named);
    };
    let exists = match creates {
        Creates::File => {
            let (mut memory, data) = guest(caller)?;
            let at = GuestPtr::<str>::new((path as u32, len as u32));
            let found = data.wasi.path_filestat_get(
                &mut memory,
                Fd::from(dirfd as u32),
                Lookupflags::empty(),
                at,
            );
            found.await.is_ok()
        }
        Creates::Folder | Creates::Nothing => false,
    };
    let run = caller.data_mut().workspace.as_mut().expect("checked");
    Ok(run.check_new(&name, creates, exists))
}

/// Settles what [`check_new`] reserved, if anything: kept if the call
/// `created` it.
fn settle_new(caller: &mut Caller<'_, SciData>, new: Option<Reserved>, created: bool) {
    if let (Some(reserved), Some(run)) = (new, caller.data_mut().workspace.as_mut()) {
        run.settle_new(reserved, created);
    }
}
