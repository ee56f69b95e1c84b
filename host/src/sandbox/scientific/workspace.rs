//! A chat's workspace: a folder the code sees at `/workspace` (its working
//! directory), kept across the runs of one chat and never another's, under
//! the operator's directory, within quotas on bytes, files and path length.
//!
//! The folder is `<root>/<hash of the context's namespace and chat key>`:
//! a chat cannot name another's. WASI's own checks (cap-std) keep the code
//! inside it: `..` past its top, absolute paths elsewhere and links that
//! lead out are refused. The host adds what WASI does not have:
//! - quotas, checked before the write that would pass them: the bytes a
//!   run writes (`fd_write`, `fd_pwrite` on a file) on top of what the
//!   workspace held, and the files a run creates (`path_open` with
//!   `O_CREAT` of a name not there yet); past one, the call fails with
//!   `ENOSPC` (Python raises `OSError`) and the run ends with the limit
//!   kind `workspace`, naming the quota;
//! - names: a path longer than the quota's length fails with
//!   `ENAMETOOLONG`; links (`path_symlink`, `path_link`) with `EPERM`.
//!
//! After the run, the files created or changed are listed (name, size).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use cap_std::ambient_authority;
use cap_std::fs::Dir;
use sha2::{Digest, Sha256};
use wasmtime::{Caller, Extern, Linker};
use wasmtime_wasi::p1::wasi_snapshot_preview1 as p1;
use wiggle::GuestMemory;

use super::state::SciData;
use crate::types::AgentCtx;

/// Where the code sees its workspace.
pub(crate) const GUEST_PATH: &str = "/workspace";
/// WASI preview 1's error numbers the quotas answer with.
const ENAMETOOLONG: i32 = 37;
const ENOSPC: i32 = 51;
const EPERM: i32 = 63;
/// `path_open`'s `O_CREAT`.
const O_CREAT: i32 = 1;

/// The operator's workspaces: where, and the quotas of each.
#[derive(Debug, Clone)]
pub struct WorkspaceOptions {
    root: PathBuf,
    max_bytes: u64,
    max_files: u64,
    max_path: usize,
}

impl WorkspaceOptions {
    /// Workspaces under `root` (made if missing), each at most 64 MiB in
    /// 1,000 files with paths of at most 255 bytes.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        WorkspaceOptions {
            root: root.into(),
            max_bytes: 64 << 20,
            max_files: 1_000,
            max_path: 255,
        }
    }

    /// The most bytes a workspace's files hold together.
    pub fn max_bytes(mut self, bytes: u64) -> Self {
        self.max_bytes = bytes;
        self
    }

    /// The most files (and folders) a workspace holds.
    pub fn max_files(mut self, files: u64) -> Self {
        self.max_files = files;
        self
    }

    /// The longest path, in bytes, the code may name.
    pub fn max_path(mut self, bytes: usize) -> Self {
        self.max_path = bytes;
        self
    }

    /// The name of `ctx`'s chat's folder under the root.
    fn name(ctx: &AgentCtx) -> String {
        let mut hash = Sha256::new();
        hash.update(ctx.namespace.as_deref().unwrap_or("").as_bytes());
        hash.update([0]);
        hash.update(ctx.chat_key.as_bytes());
        hash.finalize()[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// The files of `ctx`'s chat's workspace (none before its first run),
    /// links and folders left out.
    pub(crate) fn files(&self, ctx: &AgentCtx) -> std::io::Result<Vec<WorkspaceFile>> {
        let folder = self.root.join(Self::name(ctx));
        if !folder.is_dir() {
            return Ok(Vec::new());
        }
        let listed = listing(&folder).map_err(std::io::Error::other)?;
        let files = listed.into_iter().filter(|(_, (_, _, file))| *file);
        Ok(files
            .map(|(path, (size, _, _))| WorkspaceFile { path, size })
            .collect())
    }

    /// The bytes of the file `path` (`/`-separated, relative) of `ctx`'s
    /// chat's workspace, if it is a file of at most `max_bytes`: not a link,
    /// a folder, or a path outside (`NotFound`, `InvalidInput`,
    /// `PermissionDenied`).
    pub(crate) fn read(
        &self,
        ctx: &AgentCtx,
        path: &str,
        max_bytes: u64,
    ) -> std::io::Result<Vec<u8>> {
        use std::io::{Error, ErrorKind};
        if path.is_empty()
            || path.starts_with('/')
            || path.contains('\0')
            || path.len() > self.max_path
        {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                "not a path in a workspace",
            ));
        }
        let root = Dir::open_ambient_dir(self.root.join(Self::name(ctx)), ambient_authority())
            .map_err(|_| Error::new(ErrorKind::NotFound, "the chat has no workspace"))?;
        // cap-std refuses `..` past the folder and links that lead out;
        // the metadata is the path's own, not what a link names.
        let meta = root.symlink_metadata(path)?;
        if !meta.is_file() {
            return Err(Error::new(ErrorKind::NotFound, "not a file"));
        }
        if meta.len() > max_bytes {
            return Err(Error::new(
                ErrorKind::InvalidInput,
                "larger than the caller takes",
            ));
        }
        root.read(path)
    }

    /// The folder of `ctx`'s chat, made if missing.
    pub(crate) fn folder(&self, ctx: &AgentCtx) -> anyhow::Result<PathBuf> {
        let name = Self::name(ctx);
        std::fs::create_dir_all(&self.root)?;
        let root = Dir::open_ambient_dir(&self.root, ambient_authority())?;
        if !root.is_dir(&name) {
            root.create_dir(&name)?;
        }
        Ok(self.root.join(name))
    }
}

/// A file of a workspace, as a run left it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct WorkspaceFile {
    /// Its path in the workspace, `/`-separated.
    pub path: String,
    /// Its size in bytes.
    pub size: u64,
}

/// A run's use of its workspace.
pub(crate) struct WorkspaceRun {
    pub(crate) folder: PathBuf,
    options: WorkspaceOptions,
    /// What the workspace held when the run began.
    before: BTreeMap<String, Entry>,
    bytes: u64,
    files: u64,
    /// Set when a call ran into a quota: the run ends with it.
    pub(crate) hit: Option<String>,
}

impl WorkspaceRun {
    /// The run's view of `folder` under `options`.
    pub(crate) fn begin(folder: PathBuf, options: &WorkspaceOptions) -> anyhow::Result<Self> {
        let before = listing(&folder)?;
        let bytes = before.values().map(|(size, _, _)| size).sum();
        let files = before.len() as u64;
        Ok(WorkspaceRun {
            folder,
            options: options.clone(),
            before,
            bytes,
            files,
            hit: None,
        })
    }

    /// The files the run created or changed.
    /// (Files only, as [`WorkspaceOptions::files`] lists them: a folder's
    /// entry changes with every file made in it.)
    pub(crate) fn changes(&self) -> Vec<WorkspaceFile> {
        let after = listing(&self.folder).unwrap_or_default();
        after
            .into_iter()
            .filter(|(path, now)| now.2 && self.before.get(path) != Some(now))
            .map(|(path, (size, _, _))| WorkspaceFile { path, size })
            .collect()
    }

    fn refuse(&mut self, what: String) -> i32 {
        self.hit.get_or_insert(what);
        ENOSPC
    }
}

/// A listed entry: its size, modification time and whether it is a file.
type Entry = (u64, Option<SystemTime>, bool);

/// Every entry under `folder` (not following links), with size and
/// modification time.
fn listing(folder: &Path) -> anyhow::Result<BTreeMap<String, Entry>> {
    let mut found = BTreeMap::new();
    let mut stack = vec![(
        Dir::open_ambient_dir(folder, ambient_authority())?,
        String::new(),
    )];
    while let Some((dir, prefix)) = stack.pop() {
        for entry in dir.entries()? {
            let entry = entry?;
            let name = format!("{prefix}{}", entry.file_name().to_string_lossy());
            let meta = entry.metadata()?;
            if meta.is_dir() {
                stack.push((entry.open_dir()?, format!("{name}/")));
            }
            let modified = meta.modified().ok().map(|t| t.into_std());
            let size = if meta.is_file() { meta.len() } else { 0 };
            found.insert(name, (size, modified, meta.is_file()));
        }
    }
    Ok(found)
}

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
                    Checked::Refused(errno) => return Ok(errno),
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
                    Checked::Refused(errno) => return Ok(errno),
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

/// Charges a write of the iovecs at `iovs` to a file (descriptors past
/// stdout and stderr: the only writable files are the workspace's); the
/// errno that refuses it, if it passes the byte quota.
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
    let Some(run) = caller.data_mut().workspace.as_mut() else {
        return Ok(None);
    };
    if run.bytes.saturating_add(total) > run.options.max_bytes {
        let max = run.options.max_bytes;
        return Ok(Some(run.refuse(format!(
            "the workspace's files may hold {max} bytes together (its `max_bytes` quota)"
        ))));
    }
    run.bytes += total;
    Ok(None)
}

/// What [`check_new`] found of a path.
enum Checked {
    /// Refused with this errno.
    Refused(i32),
    /// A file or folder the call would create.
    New,
    /// One there already, or a call that creates nothing.
    Named,
}

/// Checks a path the code names (its length) and, when the call may
/// create it and it is not in the workspace yet, the file quota.
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
    let (Some(run), Some(name)) = (caller.data_mut().workspace.as_mut(), name) else {
        return Ok(Checked::Named);
    };
    if name.len() > run.options.max_path {
        run.hit.get_or_insert(format!(
            "a path of {} bytes is past the workspace's `max_path` quota of {} bytes",
            name.len(),
            run.options.max_path
        ));
        return Ok(Checked::Refused(ENAMETOOLONG));
    }
    // The interpreter names paths relative to a preopen, the workspace's
    // for its files; a name there already is not new.
    let exists = Dir::open_ambient_dir(&run.folder, ambient_authority())
        .is_ok_and(|dir| dir.symlink_metadata(&name).is_ok());
    if !creates || exists {
        return Ok(Checked::Named);
    }
    if run.files >= run.options.max_files {
        let max = run.options.max_files;
        let errno = run.refuse(format!(
            "the workspace may hold {max} files and folders (its `max_files` quota)"
        ));
        return Ok(Checked::Refused(errno));
    }
    Ok(Checked::New)
}

/// Counts a file or folder a call created.
fn count_new(caller: &mut Caller<'_, SciData>, created: bool) {
    if let (true, Some(run)) = (created, caller.data_mut().workspace.as_mut()) {
        run.files += 1;
    }
}
