//! The small interpreter's workspace: a chat's folder at `/workspace`, with
//! the quotas and refusals of `sandbox/workspace.rs` put in front of
//! wasmtime-wasi's `wasi:filesystem` (preview 2, which the component's
//! preview 1 adapter calls).
//!
//! An interpreter is prepared before its run's chat is known, and its
//! adapter asks for the preopens once, while prepared: its memory, restored
//! after every run, keeps the handles it was given. So `get-directories`
//! hands out descriptors of an empty, read-only placeholder folder, and a
//! run points those same descriptors at its chat's folder for the run's
//! length, then back at the placeholder. An interpreter instantiated by its
//! run asks during the run, and gets the chat's folder at once.
//!
//! Between runs no resource reaches a chat's folder: those a run left open
//! (a file, a listing, a stream) are deleted before the interpreter serves
//! again ([`RunState::sever`], from [`Prepared::reusable`]).
//!
//! [`Prepared::reusable`]: super::prepared::Prepared::reusable

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource, ResourceType};
use wasmtime_wasi::WasiView;
use wasmtime_wasi::filesystem::{
    Descriptor, Dir, FsPerms, WasiFilesystemCtxView, WasiFilesystemView,
};
use wasmtime_wasi::p2::bindings::filesystem::types::Host as _;
use wasmtime_wasi::p2::bindings::filesystem::types::{
    DescriptorFlags, ErrorCode, Filesize, HostDescriptor, OpenFlags, PathFlags,
};
use wasmtime_wasi::p2::{
    DynInputStream, DynOutputStream, FsError, OutputStream, Pollable, ReaddirIterator, StreamError,
};

use crate::sandbox::run::outcome::WorkspaceFile;
use crate::sandbox::run::state::RunState;
use crate::sandbox::workspace::{
    Checked, Creates, GUEST_PATH, Refusal, Reserved, WorkspaceRun, grow_charge, preopen_dir,
    write_charge,
};
use sandwit_contract::types::AgentCtx;

/// The `wasi:filesystem` wasmtime-wasi defines (the interpreter's imports of
/// earlier 0.2 versions resolve to it).
const TYPES: &str = "wasi:filesystem/types@0.2.12";
const PREOPENS: &str = "wasi:filesystem/preopens@0.2.12";

impl RunState {
    /// Points the preopens at `ctx`'s chat's folder (made if missing) for
    /// the run about to start; nothing without workspaces.
    pub(crate) fn open_workspace(&mut self, ctx: &AgentCtx) -> anyhow::Result<()> {
        let Some(workspaces) = self.workspaces.as_mut() else {
            return Ok(());
        };
        let folder = workspaces.options.folder(ctx)?;
        let run = WorkspaceRun::begin(folder.clone(), &workspaces.options)?;
        let dir = preopen_dir(&folder, FsPerms::ReadWrite)?;
        workspaces.run = Some((dir.clone(), Arc::new(Mutex::new(run))));
        self.point_preopens(dir);
        Ok(())
    }

    /// Points the preopens back at the placeholder; the quota the run hit,
    /// if one, and the files it created or changed.
    pub(crate) fn close_workspace(&mut self) -> Option<(Option<String>, Vec<WorkspaceFile>)> {
        let (_, run) = self.workspaces.as_mut()?.run.take()?;
        let placeholder = self.workspaces.as_ref()?.placeholder.clone();
        self.point_preopens(placeholder);
        let run = run.lock().unwrap_or_else(|p| p.into_inner());
        Some((run.hit.clone(), run.changes()))
    }

    fn point_preopens(&mut self, dir: Dir) {
        let reps = self
            .workspaces
            .as_ref()
            .map(|w| w.preopens.clone())
            .unwrap_or_default();
        let table = self.ctx().table;
        for rep in reps {
            if let Ok(descriptor) = table.get_mut(&Resource::<Descriptor>::new_own(rep)) {
                *descriptor = Descriptor::Dir(dir.clone());
            }
        }
    }

    /// Deletes the resources a run left that may reach its chat's folder
    /// (descriptors, directory listings, streams), all but those held since
    /// the interpreter was prepared: the next run, maybe another chat's,
    /// cannot name them by their handles. Whether every one of them went
    /// (one with a child, a stream's pollable, does not).
    pub(crate) fn sever(&mut self) -> bool {
        let kept = self.prepared_handles.clone();
        let left: Vec<u32> = (self.occupied().into_iter())
            .filter(|rep| !kept.contains(rep))
            .collect();
        let table = self.ctx().table;
        let mut severed = 0;
        let all = left.into_iter().all(|rep| {
            let Ok(entry) = table.get_any_mut(rep) else {
                return true;
            };
            let deleted = if entry.is::<Descriptor>() {
                table.delete(Resource::<Descriptor>::new_own(rep)).is_ok()
            } else if entry.is::<ReaddirIterator>() {
                table
                    .delete(Resource::<ReaddirIterator>::new_own(rep))
                    .is_ok()
            } else if entry.is::<DynOutputStream>() {
                table
                    .delete(Resource::<DynOutputStream>::new_own(rep))
                    .is_ok()
            } else if entry.is::<DynInputStream>() {
                table
                    .delete(Resource::<DynInputStream>::new_own(rep))
                    .is_ok()
            } else {
                return true;
            };
            severed += usize::from(deleted);
            deleted
        });
        if let Some(workspaces) = self.workspaces.as_mut() {
            workspaces.severed += severed;
        }
        all
    }

    /// The resources runs left that [`RunState::sever`] deleted, all told.
    pub(crate) fn severed(&self) -> usize {
        self.workspaces.as_ref().map_or(0, |w| w.severed)
    }

    /// The run's workspace use, while it has one.
    fn workspace_run(&self) -> Option<Arc<Mutex<WorkspaceRun>>> {
        Some(self.workspaces.as_ref()?.run.as_ref()?.1.clone())
    }
}

/// Shadows `get-directories` and the `wasi:filesystem/types` functions
/// that write, create or link, on a linker that has wasmtime-wasi's.
pub(crate) fn add_to_linker(linker: &mut Linker<RunState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    linker
        .instance(PREOPENS)?
        .func_wrap("get-directories", get_directories)?;
    let mut types = linker.instance(TYPES)?;
    let descriptor = ResourceType::host::<Descriptor>();
    types.resource_async("descriptor", descriptor, |store, rep| {
        Box::new(drop_descriptor(store, rep))
    })?;
    types.func_wrap_async("[method]descriptor.open-at", |store, args| {
        Box::new(open_at(store, args))
    })?;
    types.func_wrap_async("[method]descriptor.create-directory-at", |store, args| {
        Box::new(create_directory_at(store, args))
    })?;
    types.func_wrap_async("[method]descriptor.rename-at", |store, args| {
        Box::new(rename_at(store, args))
    })?;
    types.func_wrap_async("[method]descriptor.write", |store, args| {
        Box::new(write(store, args))
    })?;
    types.func_wrap_async("[method]descriptor.set-size", |store, args| {
        Box::new(set_size(store, args))
    })?;
    types.func_wrap_async("[method]descriptor.write-via-stream", |store, args| {
        Box::new(write_via_stream(store, args))
    })?;
    types.func_wrap_async("[method]descriptor.append-via-stream", |store, args| {
        Box::new(append_via_stream(store, args))
    })?;
    // Links: none in a workspace (one could point at another chat's files
    // through a path the host would follow later).
    types.func_wrap(
        "[method]descriptor.symlink-at",
        |_: StoreContextMut<'_, RunState>, _: (Resource<Descriptor>, String, String)| {
            Ok((Err::<(), _>(ErrorCode::NotPermitted),))
        },
    )?;
    types.func_wrap(
        "[method]descriptor.link-at",
        |_: StoreContextMut<'_, RunState>,
         _: (
            Resource<Descriptor>,
            PathFlags,
            String,
            Resource<Descriptor>,
            String,
        )| { Ok((Err::<(), _>(ErrorCode::NotPermitted),)) },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// What a shadowed `wasi:filesystem/types` function returns: its result
/// for the guest, or a trap.
type Answer<T> = wasmtime::Result<(Result<T, ErrorCode>,)>;

/// A preopen as `get-directories` gives it: its descriptor and path.
type Preopen = (Resource<Descriptor>, String);

/// `get-directories`: the workspace's one preopen, the run's chat's folder
/// or (while prepared) the placeholder, its handle noted; none without
/// workspaces.
fn get_directories(
    mut store: StoreContextMut<'_, RunState>,
    (): (),
) -> wasmtime::Result<(Vec<Preopen>,)> {
    let data = store.data_mut();
    let Some(workspaces) = data.workspaces.as_ref() else {
        return Ok((Vec::new(),));
    };
    let dir = match &workspaces.run {
        Some((dir, _)) => dir.clone(),
        None => workspaces.placeholder.clone(),
    };
    let descriptor = data.ctx().table.push(Descriptor::Dir(dir))?;
    let rep = descriptor.rep();
    if let Some(workspaces) = data.workspaces.as_mut() {
        workspaces.preopens.push(rep);
    }
    Ok((vec![(descriptor, GUEST_PATH.to_string())],))
}

/// A descriptor's drop, noted: a preopen's descriptor dropped by the code
/// is one the restored memory still refers to, and the interpreter is not
/// reused after.
async fn drop_descriptor(
    mut store: StoreContextMut<'_, RunState>,
    rep: u32,
) -> wasmtime::Result<()> {
    let data = store.data_mut();
    data.note_drop(rep);
    HostDescriptor::drop(&mut data.filesystem(), Resource::new_own(rep))
}

/// `open-at`: a file it would create checked against the run's workspace
/// first (its name, the quota of entries).
async fn open_at(
    mut store: StoreContextMut<'_, RunState>,
    (fd, path_flags, path, open_flags, flags): (
        Resource<Descriptor>,
        PathFlags,
        String,
        OpenFlags,
        DescriptorFlags,
    ),
) -> Answer<Resource<Descriptor>> {
    let run = store.data_mut().workspace_run();
    let mut fs = store.data_mut().filesystem();
    let (creates, exists) = match open_flags.contains(OpenFlags::CREATE) {
        // Whether the name is there, where the call names it:
        // relative to `fd`, as wasmtime-wasi resolves it.
        true if run.is_some() => {
            let dir = Resource::new_borrow(fd.rep());
            let found = fs.stat_at(dir, PathFlags::empty(), path.clone()).await;
            (Creates::File, found.is_ok())
        }
        _ => (Creates::Nothing, false),
    };
    let new = match check_new(run.as_ref(), &path, creates, exists) {
        Ok(new) => new,
        Err(code) => return Ok((Err(code),)),
    };
    let opened = fs.open_at(fd, path_flags, path, open_flags, flags).await;
    settle_new(run.as_ref(), new, opened.is_ok());
    Ok((answer(&mut fs, opened)?,))
}

/// `create-directory-at`, checked against the run's workspace first.
async fn create_directory_at(
    mut store: StoreContextMut<'_, RunState>,
    (fd, path): (Resource<Descriptor>, String),
) -> Answer<()> {
    let run = store.data_mut().workspace_run();
    // A name there already fails the call, which gives back
    // what was reserved.
    let new = match check_new(run.as_ref(), &path, Creates::Folder, false) {
        Ok(new) => new,
        Err(code) => return Ok((Err(code),)),
    };
    let mut fs = store.data_mut().filesystem();
    let made = fs.create_directory_at(fd, path).await;
    settle_new(run.as_ref(), new, made.is_ok());
    Ok((answer(&mut fs, made)?,))
}

/// `rename-at`, its new name checked against the run's workspace first.
async fn rename_at(
    mut store: StoreContextMut<'_, RunState>,
    (fd, old, new_fd, new): (Resource<Descriptor>, String, Resource<Descriptor>, String),
) -> Answer<()> {
    let run = store.data_mut().workspace_run();
    if let Err(code) = check_new(run.as_ref(), &new, Creates::Nothing, false) {
        return Ok((Err(code),));
    }
    let mut fs = store.data_mut().filesystem();
    let renamed = fs.rename_at(fd, old, new_fd, new).await;
    Ok((answer(&mut fs, renamed)?,))
}

/// `write`, charged to the run's workspace first (its bytes, and a hole it
/// leaves past the file's end).
async fn write(
    mut store: StoreContextMut<'_, RunState>,
    (fd, buffer, offset): (Resource<Descriptor>, Vec<u8>, Filesize),
) -> Answer<Filesize> {
    let run = store.data_mut().workspace_run();
    let mut fs = store.data_mut().filesystem();
    if run.is_some() {
        let size = match fs.stat(Resource::new_borrow(fd.rep())).await {
            Ok(stat) => stat.size,
            Err(e) => return Ok((Err(fs.convert_error_code(e)?),)),
        };
        let bytes = write_charge(size, offset, buffer.len() as u64);
        if let Some(refusal) = charge(run.as_ref(), bytes) {
            return Ok((Err(code(refusal)),));
        }
    }
    let written = fs.write(fd, buffer, offset).await;
    Ok((answer(&mut fs, written)?,))
}

/// `set-size`, what it grows the file by charged to the run's workspace
/// first.
async fn set_size(
    mut store: StoreContextMut<'_, RunState>,
    (fd, size): (Resource<Descriptor>, Filesize),
) -> Answer<()> {
    let run = store.data_mut().workspace_run();
    let mut fs = store.data_mut().filesystem();
    let now = match fs.stat(Resource::new_borrow(fd.rep())).await {
        Ok(stat) => stat.size,
        Err(e) => return Ok((Err(fs.convert_error_code(e)?),)),
    };
    if let Some(refusal) = charge(run.as_ref(), grow_charge(now, size)) {
        return Ok((Err(code(refusal)),));
    }
    let set = fs.set_size(fd, size).await;
    Ok((answer(&mut fs, set)?,))
}

/// `write-via-stream`: a stream whose writes are charged to the run's
/// workspace ([`Charged`]), from `offset`.
async fn write_via_stream(
    mut store: StoreContextMut<'_, RunState>,
    (fd, offset): (Resource<Descriptor>, Filesize),
) -> Answer<Resource<DynOutputStream>> {
    let run = store.data_mut().workspace_run();
    let mut fs = store.data_mut().filesystem();
    let file = os_file(&fs, &fd);
    let stream = fs.write_via_stream(fd, offset);
    let at = file.map(|file| (file, offset));
    Ok((charged(&mut fs, stream, run, at)?,))
}

/// `append-via-stream`: a stream whose writes are charged to the run's
/// workspace ([`Charged`]).
async fn append_via_stream(
    mut store: StoreContextMut<'_, RunState>,
    (fd,): (Resource<Descriptor>,),
) -> Answer<Resource<DynOutputStream>> {
    let run = store.data_mut().workspace_run();
    let mut fs = store.data_mut().filesystem();
    let stream = fs.append_via_stream(fd);
    Ok((charged(&mut fs, stream, run, None)?,))
}

/// wasmtime-wasi's answer as the guest gets it: its error code, or a trap.
fn answer<T>(
    fs: &mut WasiFilesystemCtxView<'_>,
    result: Result<T, FsError>,
) -> wasmtime::Result<Result<T, ErrorCode>> {
    match result {
        Ok(value) => Ok(Ok(value)),
        Err(e) => Ok(Err(fs.convert_error_code(e)?)),
    }
}

/// The operating system's file `fd` names, if it is a file.
fn os_file(
    fs: &WasiFilesystemCtxView<'_>,
    fd: &Resource<Descriptor>,
) -> Option<Arc<std::fs::File>> {
    match fs.table.get(fd) {
        Ok(Descriptor::File(file)) => Some(file.file.clone()),
        _ => None,
    }
}

/// A file's output stream as the guest gets it, its writes charged to the
/// run's workspace (under the same handle); `at`, the file and the offset
/// the stream writes from, unless it appends.
fn charged(
    fs: &mut WasiFilesystemCtxView<'_>,
    stream: Result<Resource<DynOutputStream>, FsError>,
    run: Option<Arc<Mutex<WorkspaceRun>>>,
    at: Option<(Arc<std::fs::File>, Filesize)>,
) -> wasmtime::Result<Result<Resource<DynOutputStream>, ErrorCode>> {
    let stream = match (stream, run) {
        (Ok(stream), Some(run)) => {
            let inner = fs.table.delete(stream)?;
            let charged: DynOutputStream = Box::new(Charged { inner, run, at });
            Ok(fs.table.push(charged)?)
        }
        (stream, _) => stream,
    };
    answer(fs, stream)
}

/// Preview 2's error code for `refusal`.
fn code(refusal: Refusal) -> ErrorCode {
    match refusal {
        Refusal::NoSpace => ErrorCode::InsufficientSpace,
        Refusal::NameTooLong => ErrorCode::NameTooLong,
    }
}

/// Checks a path the code names against the run's workspace
/// ([`WorkspaceRun::check_new`]): what it reserved for a file or folder
/// the call would create, or the code that refuses it.
fn check_new(
    run: Option<&Arc<Mutex<WorkspaceRun>>>,
    path: &str,
    creates: Creates,
    exists: bool,
) -> Result<Option<Reserved>, ErrorCode> {
    let Some(run) = run else { return Ok(None) };
    match run
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .check_new(path, creates, exists)
    {
        Checked::Refused(refusal) => Err(code(refusal)),
        Checked::New(reserved) => Ok(Some(reserved)),
        Checked::Named => Ok(None),
    }
}

/// Settles what [`check_new`] reserved, if anything: kept if the call
/// `created` it.
fn settle_new(run: Option<&Arc<Mutex<WorkspaceRun>>>, new: Option<Reserved>, created: bool) {
    if let (Some(reserved), Some(run)) = (new, run) {
        run.lock()
            .unwrap_or_else(|p| p.into_inner())
            .settle_new(reserved, created);
    }
}

fn charge(run: Option<&Arc<Mutex<WorkspaceRun>>>, bytes: u64) -> Option<Refusal> {
    run?.lock().unwrap_or_else(|p| p.into_inner()).charge(bytes)
}

/// A file's output stream whose writes are charged to the run's workspace
/// before they are made.
struct Charged {
    inner: DynOutputStream,
    run: Arc<Mutex<WorkspaceRun>>,
    /// The file and where the next write lands, unless the stream appends
    /// (at the end: no hole). The position advances by what is charged,
    /// never less than the stream's own.
    at: Option<(Arc<std::fs::File>, Filesize)>,
}

impl Charged {
    /// Charges a write of `len` bytes: its bytes and, at a position past
    /// the file's end (as it is now, whoever set it), the hole.
    fn charge(&mut self, len: usize) -> Result<(), StreamError> {
        let len = len as u64;
        let bytes = match &mut self.at {
            None => len,
            Some((file, position)) => {
                // A size it cannot say counts as 0: the most.
                let size = file.metadata().map_or(0, |meta| meta.len());
                let bytes = write_charge(size, *position, len);
                *position = position.saturating_add(len);
                bytes
            }
        };
        match charge(Some(&self.run), bytes) {
            None => Ok(()),
            Some(_) => Err(StreamError::LastOperationFailed(wasmtime::format_err!(
                "the workspace's quota is reached"
            ))),
        }
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for Charged {
    async fn ready(&mut self) {
        self.inner.ready().await
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for Charged {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.charge(bytes.len())?;
        self.inner.write(bytes)
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        self.inner.flush()
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        self.inner.check_write()
    }

    async fn blocking_write_and_flush(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.charge(bytes.len())?;
        self.inner.blocking_write_and_flush(bytes).await
    }

    fn write_zeroes(&mut self, nelem: usize) -> Result<(), StreamError> {
        self.charge(nelem)?;
        self.inner.write_zeroes(nelem)
    }

    async fn write_ready(&mut self) -> Result<usize, StreamError> {
        self.inner.write_ready().await
    }

    async fn cancel(&mut self) {
        self.inner.cancel().await
    }
}
