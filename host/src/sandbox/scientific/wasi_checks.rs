//! The workspace's checks in front of WASI preview 1's functions that
//! write, create and link (`workspace.rs` says what they check): a call
//! they let through goes on to wasmtime-wasi's own function.

use wasmtime::{Caller, Extern, Linker};
use wasmtime_wasi::p1::wasi_snapshot_preview1 as p1;
use wiggle::GuestMemory;

use super::state::SciData;
use crate::sandbox::workspace::{Checked, Refusal};

/// WASI preview 1's `EPERM`, `ENAMETOOLONG` and `ENOSPC`.
const EPERM: i32 = 63;
const ENAMETOOLONG: i32 = 37;
const ENOSPC: i32 = 51;
/// `path_open`'s `O_CREAT`.
const O_CREAT: i32 = 1;

/// Puts the quota checks in front of WASI's `fd_write`, `fd_pwrite`,
/// `path_open`, `path_create_directory`, `path_symlink` and `path_link`;
/// a call they let through goes to wasmtime-wasi's own function.
pub(crate) fn add_to_linker(linker: &mut Linker<SciData>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let wasi = "wasi_snapshot_preview1";
    linker.func_wrap_async(
        wasi,
        "fd_write",
        |mut caller: Caller<'_, SciData>, (fd, iovs, n, out): (i32, i32, i32, i32)| {
            Box::new(async move {
                if let Some(errno) = charge_write(&mut caller, fd, iovs, n)? {
                    return Ok(errno);
                }
                let (mut memory, data) = guest(&mut caller)?;
                p1::fd_write(&mut data.wasi, &mut memory, fd, iovs, n, out).await
            })
        },
    )?;
    linker.func_wrap_async(
        wasi,
        "fd_pwrite",
        |mut caller: Caller<'_, SciData>, (fd, iovs, n, offset, out): (i32, i32, i32, i64, i32)| {
            Box::new(async move {
                if let Some(errno) = charge_write(&mut caller, fd, iovs, n)? {
                    return Ok(errno);
                }
                let (mut memory, data) = guest(&mut caller)?;
                let wasi = &mut data.wasi;
                p1::fd_pwrite(wasi, &mut memory, fd, iovs, n, offset, out).await
            })
        },
    )?;
    linker.func_wrap_async(
        wasi,
        "path_open",
        |mut caller: Caller<'_, SciData>,
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
        )| {
            Box::new(async move {
                let new = match check_new(&mut caller, path, len, oflags & O_CREAT != 0)? {
                    Checked::Refused(refusal) => return Ok(errno(refusal)),
                    Checked::New => true,
                    Checked::Named => false,
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
                count_new(&mut caller, new && errno == 0);
                Ok(errno)
            })
        },
    )?;
    linker.func_wrap_async(
        wasi,
        "path_create_directory",
        |mut caller: Caller<'_, SciData>, (fd, path, len): (i32, i32, i32)| {
            Box::new(async move {
                let new = match check_new(&mut caller, path, len, true)? {
                    Checked::Refused(refusal) => return Ok(errno(refusal)),
                    Checked::New => true,
                    Checked::Named => false,
                };
                let (mut memory, data) = guest(&mut caller)?;
                let wasi = &mut data.wasi;
                let errno = p1::path_create_directory(wasi, &mut memory, fd, path, len).await?;
                count_new(&mut caller, new && errno == 0);
                Ok(errno)
            })
        },
    )?;
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

/// The total length of the iovecs at `iovs` of a write to a file
/// (descriptors past stdout and stderr: the only writable files are the
/// workspace's), charged to the run's workspace; the errno that refuses it.
fn charge_write(
    caller: &mut Caller<'_, SciData>,
    fd: i32,
    iovs: i32,
    n: i32,
) -> wasmtime::Result<Option<i32>> {
    if fd <= 2 {
        return Ok(None);
    }
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
    Ok(caller
        .data_mut()
        .workspace
        .as_mut()
        .and_then(|run| run.charge_write(total))
        .map(errno))
}

/// The path the code names, checked by the run's workspace.
fn check_new(
    caller: &mut Caller<'_, SciData>,
    path: i32,
    len: i32,
    creates: bool,
) -> wasmtime::Result<Checked> {
    let memory = memory(caller)?;
    let start = path as u32 as usize;
    let name = memory
        .data(&*caller)
        .get(start..start.saturating_add(len.max(0) as usize))
        .map(|b| String::from_utf8_lossy(b).into_owned());
    Ok(match (caller.data_mut().workspace.as_mut(), name) {
        (Some(run), Some(name)) => run.check_new(&name, creates),
        _ => Checked::Named,
    })
}

/// Counts a file or folder a call created.
fn count_new(caller: &mut Caller<'_, SciData>, created: bool) {
    if let (true, Some(run)) = (created, caller.data_mut().workspace.as_mut()) {
        run.count_new();
    }
}
