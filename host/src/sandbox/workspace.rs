//! A chat's workspace: a folder the code sees at `/workspace` (its working
//! directory), kept across the runs of one chat and never another's, under
//! the operator's directory, within quotas on bytes, files and path length.
//!
//! The folder is `<root>/<hash of the context's namespace and chat key>`:
//! a chat cannot name another's. WASI's own checks (cap-std) keep the code
//! inside it: `..` past its top, absolute paths elsewhere and links that
//! lead out are refused. The host adds what WASI does not have:
//! - quotas, checked before the call that would pass them: the bytes
//!   written to files on top of what the workspace held, and the files
//!   created (an open that creates a name not there yet); past one, the
//!   call fails with "no space" (Python raises `OSError`) and the run ends
//!   with the limit kind `workspace`, naming the quota. What a call is
//!   charged is at least what it can add to the files' sizes: a write its
//!   bytes and the hole it leaves past the file's end ([`write_charge`]),
//!   a size set the growth ([`grow_charge`]), a folder [`FOLDER_BYTES`];
//!   a name counts as new by where the call names it (the folder of the
//!   descriptor it is relative to), as the interpreter's WASI resolves it;
//!   nothing is given back while
//!   the chat has a run (a file overwritten, shrunk or removed still
//!   counts until its next run lists the folder), so the files' sizes
//!   together never pass the quota. The chat's runs live at once share
//!   one count ([`WorkspaceRun::begin`]);
//! - names: a path longer than the quota's length fails with "name too
//!   long"; links with "not permitted".
//!
//! After the run, the files created or changed are listed (name, size).
//! Each interpreter puts these checks in front of its WASI's functions:
//! `scientific/wasi_checks.rs` (preview 1), `sandbox/small/workspace.rs`
//! (preview 2).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::SystemTime;

use wasmtime_wasi::filesystem::{Dir as PreopenDir, FsPerms, OpenMode};

use crate::sandbox::run::outcome::WorkspaceFile;
use cap_std::ambient_authority;
use cap_std::fs::Dir;
use sandwit_contract::types::AgentCtx;
use sha2::{Digest, Sha256};

/// Where the code sees its workspace.
pub(crate) const GUEST_PATH: &str = "/workspace";

/// The operator's workspaces: where, and the quotas of each.
#[derive(Debug, Clone)]
pub struct WorkspaceOptions {
    root: PathBuf,
    max_bytes: u64,
    max_files: u64,
    max_path: usize,
    /// The chats with a run now; one for all the clones, as each of a
    /// host's interpreters has one.
    live: LiveChats,
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
            live: LiveChats::default(),
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
        let listed = listing(&Dir::open_ambient_dir(&folder, ambient_authority())?, self)?;
        let files = listed.entries.into_iter().filter(|(_, (_, _, file))| *file);
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

    /// An empty folder beside the chats' (made if missing), which no chat
    /// is given: what the small interpreter's preopen shows between runs.
    pub(crate) fn placeholder(&self) -> std::io::Result<PathBuf> {
        // Chats' folders are named in hex: no chat's is this one.
        let path = self.root.join(".between-runs");
        std::fs::create_dir_all(&path)?;
        Ok(path)
    }

    /// The folder of `ctx`'s chat, made if missing.
    pub(crate) fn folder(&self, ctx: &AgentCtx) -> anyhow::Result<PathBuf> {
        let name = Self::name(ctx);
        std::fs::create_dir_all(&self.root)?;
        let root = Dir::open_ambient_dir(&self.root, ambient_authority())?;
        // The chat's first runs at once race to make it: one that finds it
        // made already by another has it.
        match root.create_dir(&name) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && root.is_dir(&name) => {}
            made => made?,
        }
        Ok(self.root.join(name))
    }
}

/// A sandbox's workspaces, as its interpreters' stores see them.
/// (The small interpreter's, which reaches its workspace through WASI
/// preview 2's preopens: `sandbox/small/workspace.rs`.)
pub(crate) struct Workspaces {
    pub(crate) options: WorkspaceOptions,
    /// The empty, read-only folder the preopens show between runs.
    pub(crate) placeholder: PreopenDir,
    /// The descriptors `get-directories` handed out (resource reps).
    pub(crate) preopens: Vec<u32>,
    /// The run's chat's folder and its use, while a run has one.
    pub(crate) run: Option<(PreopenDir, Arc<Mutex<WorkspaceRun>>)>,
    /// The resources runs left that were deleted: each still has a handle
    /// in the instance's own table.
    pub(crate) severed: usize,
}

/// A host's workspaces: their options and the placeholder folder, open.
#[derive(Clone)]
pub(crate) struct HostWorkspaces {
    pub(crate) options: WorkspaceOptions,
    placeholder: PreopenDir,
}

impl HostWorkspaces {
    /// The workspaces `options` describe; their root and placeholder made
    /// if missing.
    pub(crate) fn new(options: WorkspaceOptions) -> anyhow::Result<Self> {
        let placeholder = preopen_dir(&options.placeholder()?, FsPerms::ReadOnly)?;
        Ok(HostWorkspaces {
            options,
            placeholder,
        })
    }
}

impl Workspaces {
    /// The host's workspaces, for one interpreter's store.
    pub(crate) fn new(host: &HostWorkspaces) -> Self {
        Workspaces {
            options: host.options.clone(),
            placeholder: host.placeholder.clone(),
            preopens: Vec::new(),
            run: None,
            severed: 0,
        }
    }

    /// How many descriptors the store holds for the preopen.
    pub(crate) fn preopens(&self) -> usize {
        self.preopens.len()
    }
}

/// Opens `folder` as a preopen's directory with `perms`.
pub(crate) fn preopen_dir(folder: &std::path::Path, perms: FsPerms) -> anyhow::Result<PreopenDir> {
    let file = Dir::open_ambient_dir(folder, ambient_authority())?.into_std_file();
    let open_mode = match perms {
        FsPerms::ReadOnly => OpenMode::READ,
        FsPerms::ReadWrite => OpenMode::READ | OpenMode::WRITE,
    };
    Ok(PreopenDir::new(file, perms, open_mode, false))
}

/// What a write of `len` bytes at `offset` into a file of `size` bytes is
/// charged: its bytes, and the hole it leaves past the end (a sparse file's
/// size is what the host lists and reads, and what the next run counts).
pub(crate) fn write_charge(size: u64, offset: u64, len: u64) -> u64 {
    len.saturating_add(offset.saturating_sub(size))
}

/// What setting a file of `size` bytes to `new` bytes is charged: what it
/// grows by (shrinking gives nothing back, as a write overwritten does not).
pub(crate) fn grow_charge(size: u64, new: u64) -> u64 {
    new.saturating_sub(size)
}

/// A workspace's use: the bytes charged and the files counted.
struct Usage {
    bytes: u64,
    files: u64,
    /// Whether it was counted from a listing that stopped short
    /// ([`Listing::complete`]): then it is full, saying why.
    unlisted: bool,
}

impl Usage {
    /// What the listed files and folders hold.
    fn held(listed: &Listing) -> Self {
        let bytes = listed.entries.values().map(|&(size, _, file)| match file {
            true => size,
            false => FOLDER_BYTES,
        });
        Usage {
            bytes: bytes.sum(),
            files: listed.entries.len() as u64,
            unlisted: false,
        }
    }

    /// The use of a workspace whose listing stopped short
    /// ([`Listing::complete`]): its quotas are full, so the run can make
    /// nothing until the code removes what it cannot list.
    fn full(options: &WorkspaceOptions) -> Self {
        Usage {
            bytes: options.max_bytes,
            files: options.max_files,
            unlisted: true,
        }
    }
}

/// The chats' folders that have a run now, each with the use its runs
/// share. Weak: an entry outlives no run (the last one to end removes it),
/// and a chat's first run counts from the folder's listing.
#[derive(Clone, Default)]
struct LiveChats(Arc<Mutex<HashMap<PathBuf, Weak<Mutex<Usage>>>>>);

impl std::fmt::Debug for LiveChats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveChats").finish_non_exhaustive()
    }
}

impl LiveChats {
    fn map(&self) -> MutexGuard<'_, HashMap<PathBuf, Weak<Mutex<Usage>>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The listing of `folder` (open as `dir`) for a run about to begin,
    /// and the use its live runs share, else a new one, of what the
    /// listing holds. That listing is made under the lock: a run of the
    /// chat that left before it has written all it will.
    fn join(
        &self,
        folder: &std::path::Path,
        dir: &Dir,
        options: &WorkspaceOptions,
    ) -> std::io::Result<(Listing, Arc<Mutex<Usage>>)> {
        let mut map = self.map();
        if let Some(usage) = map.get(folder).and_then(Weak::upgrade) {
            drop(map);
            return Ok((listing(dir, options)?, usage));
        }
        let before = listing(dir, options)?;
        let held = match before.complete {
            true => Usage::held(&before),
            false => Usage::full(options),
        };
        let usage = Arc::new(Mutex::new(held));
        map.insert(folder.to_path_buf(), Arc::downgrade(&usage));
        Ok((before, usage))
    }

    /// A run of `folder` that had `usage` ended: the entry goes with the
    /// last. (Strong references are made only under the map's lock, by
    /// [`LiveChats::join`], so the count cannot grow meanwhile.)
    fn leave(&self, folder: &std::path::Path, usage: &Arc<Mutex<Usage>>) {
        let mut map = self.map();
        if Arc::strong_count(usage) == 1 {
            map.remove(folder);
        }
    }
}

/// A run's use of its workspace.
pub(crate) struct WorkspaceRun {
    pub(crate) folder: PathBuf,
    /// The folder, open for the run's checks of names in it.
    dir: Dir,
    options: WorkspaceOptions,
    /// What the workspace held when the run began.
    before: Listing,
    /// The workspace's use, shared with the chat's other live runs.
    usage: Arc<Mutex<Usage>>,
    /// Set when a call ran into a quota: the run ends with it.
    pub(crate) hit: Option<String>,
}

impl WorkspaceRun {
    /// The run's view of `folder` under `options`. The chat's runs live at
    /// once share one use, counted from the folder's listing when the
    /// first of them began: together they stay within the quotas.
    pub(crate) fn begin(folder: PathBuf, options: &WorkspaceOptions) -> anyhow::Result<Self> {
        let dir = Dir::open_ambient_dir(&folder, ambient_authority())?;
        let (before, usage) = options.live.join(&folder, &dir, options)?;
        Ok(WorkspaceRun {
            folder,
            dir,
            options: options.clone(),
            before,
            usage,
            hit: None,
        })
    }

    fn usage(&self) -> MutexGuard<'_, Usage> {
        self.usage.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The files the run created or changed.
    /// (Files only, as [`WorkspaceOptions::files`] lists them: a folder's
    /// entry changes with every file made in it.)
    pub(crate) fn changes(&self) -> Vec<WorkspaceFile> {
        let after = listing(&self.dir, &self.options).unwrap_or_default();
        after
            .entries
            .into_iter()
            .filter(|(path, now)| now.2 && self.before.entries.get(path) != Some(now))
            .map(|(path, (size, _, _))| WorkspaceFile { path, size })
            .collect()
    }

    fn refuse(&mut self, what: String) -> Refusal {
        let what = match self.usage().unlisted {
            true => format!(
                "the workspace holds entries past its quotas (more than {} files and folders, \
                 or a folder moved deeper than its `max_path` of {} bytes): it takes nothing \
                 more until they are removed",
                self.options.max_files, self.options.max_path
            ),
            false => what,
        };
        self.hit.get_or_insert(what);
        Refusal::NoSpace
    }

    /// Charges `bytes` a call may add to the workspace's files
    /// ([`write_charge`], [`grow_charge`]); why it is refused, if it
    /// passes the byte quota.
    pub(crate) fn charge(&mut self, bytes: u64) -> Option<Refusal> {
        let max = self.options.max_bytes;
        {
            let mut usage = self.usage();
            if usage.bytes.saturating_add(bytes) <= max {
                usage.bytes += bytes;
                return None;
            }
        }
        Some(self.refuse(bytes_quota(max)))
    }

    /// Checks a path the code names (its length) and, when the call
    /// `creates` something the descriptor it names the path relative to
    /// does not hold yet (`exists`, as the interpreter's WASI resolved it
    /// there), the file quota, and for a folder the bytes it takes
    /// ([`FOLDER_BYTES`]). What a new one takes is reserved now, before the
    /// call, so that the chat's runs live at once cannot each take the
    /// last ([`WorkspaceRun::settle_new`] gives it back if the call made
    /// nothing).
    pub(crate) fn check_new(&mut self, name: &str, creates: Creates, exists: bool) -> Checked {
        if name.len() > self.options.max_path {
            self.hit.get_or_insert(format!(
                "a path of {} bytes is past the workspace's `max_path` quota of {} bytes",
                name.len(),
                self.options.max_path
            ));
            return Checked::Refused(Refusal::NameTooLong);
        }
        let bytes = match creates {
            _ if exists => return Checked::Named,
            Creates::Nothing => return Checked::Named,
            Creates::File => 0,
            Creates::Folder => FOLDER_BYTES,
        };
        let (max_files, max_bytes) = (self.options.max_files, self.options.max_bytes);
        let refused = {
            let mut usage = self.usage();
            if usage.files >= max_files {
                Some(format!(
                    "the workspace may hold {max_files} files and folders (its `max_files` quota)"
                ))
            } else if usage.bytes.saturating_add(bytes) > max_bytes {
                Some(bytes_quota(max_bytes))
            } else {
                usage.files += 1;
                usage.bytes += bytes;
                None
            }
        };
        match refused {
            Some(why) => Checked::Refused(self.refuse(why)),
            None => Checked::New(Reserved { bytes }),
        }
    }

    /// Settles what [`WorkspaceRun::check_new`] reserved for a call: given
    /// back unless the call `created` it.
    pub(crate) fn settle_new(&mut self, reserved: Reserved, created: bool) {
        if !created {
            let mut usage = self.usage();
            usage.files = usage.files.saturating_sub(1);
            usage.bytes = usage.bytes.saturating_sub(reserved.bytes);
        }
    }
}

impl Drop for WorkspaceRun {
    fn drop(&mut self) {
        self.options.live.leave(&self.folder, &self.usage);
    }
}

/// Why a call is refused: each interpreter's WASI answers with its own
/// error code for it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Refusal {
    /// A quota on bytes or files.
    NoSpace,
    /// A path longer than the quota's length.
    NameTooLong,
}

/// What a call may create at a path.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Creates {
    /// Nothing (an open without `O_CREAT`, a rename's new name).
    Nothing,
    /// A file.
    File,
    /// A folder.
    Folder,
}

/// What [`WorkspaceRun::check_new`] reserved for a file or folder a call
/// would create: a place in the file quota, and these bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reserved {
    bytes: u64,
}

/// What a folder takes of the byte quota: about what it takes on disk (a
/// block), so that folders alone cannot fill a disk the quota bounds.
pub(crate) const FOLDER_BYTES: u64 = 4096;

/// Why a call past the byte quota is refused.
fn bytes_quota(max: u64) -> String {
    format!(
        "the workspace's files and folders may hold {max} bytes together (its `max_bytes` quota)"
    )
}

/// What [`WorkspaceRun::check_new`] found of a path.
pub(crate) enum Checked {
    /// Refused, for this reason.
    Refused(Refusal),
    /// A file or folder the call would create, reserved (settled by
    /// [`WorkspaceRun::settle_new`]).
    New(Reserved),
    /// One there already, or a call that creates nothing.
    Named,
}

/// A listed entry: its size, modification time and whether it is a file.
type Entry = (u64, Option<SystemTime>, bool);

/// A folder's entries by path.
#[derive(Default)]
struct Listing {
    entries: BTreeMap<String, Entry>,
    /// Whether it holds every entry: the walk stops past `max_files`
    /// entries, and at a folder whose path leaves no room under
    /// `max_path` for what it holds (a path the code named within the
    /// quota, then made longer by moving its folder). What a workspace
    /// could hold within its quotas is always listed whole; past them the
    /// cost of a listing, and of what it answers, stays bounded.
    complete: bool,
}

/// Every entry under `folder` (not following links), with size and
/// modification time, within `options`' quotas ([`Listing::complete`]).
fn listing(folder: &Dir, options: &WorkspaceOptions) -> std::io::Result<Listing> {
    let mut found = BTreeMap::new();
    let mut complete = true;
    let mut stack = vec![(folder.try_clone()?, String::new())];
    'walk: while let Some((dir, prefix)) = stack.pop() {
        for entry in dir.entries()? {
            let entry = entry?;
            if found.len() as u64 >= options.max_files {
                complete = false;
                break 'walk;
            }
            let name = format!("{prefix}{}", entry.file_name().to_string_lossy());
            let meta = entry.metadata()?;
            if meta.is_dir() {
                // No entry of a path within `max_path` can be under it.
                if name.len() + 1 >= options.max_path {
                    complete &= entry.open_dir()?.entries()?.next().is_none();
                } else {
                    stack.push((entry.open_dir()?, format!("{name}/")));
                }
            }
            let modified = meta.modified().ok().map(|t| t.into_std());
            let size = if meta.is_file() { meta.len() } else { 0 };
            found.insert(name, (size, modified, meta.is_file()));
        }
    }
    Ok(Listing {
        entries: found,
        complete,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chats_first_runs_at_once_both_get_its_folder() {
        let root = std::env::temp_dir().join(format!("sandwit-ws-race-{}", std::process::id()));
        let options = WorkspaceOptions::new(&root);
        for i in 0..200 {
            let ctx = AgentCtx::new(format!("chat-{i}"));
            let start = std::sync::Barrier::new(2);
            let make = || {
                start.wait();
                options.folder(&ctx).map_err(|e| e.to_string())
            };
            let (a, b) = std::thread::scope(|s| {
                let a = s.spawn(make);
                let b = s.spawn(make);
                (a.join().unwrap(), b.join().unwrap())
            });
            assert_eq!(a, b, "chat {i}");
            assert!(a.is_ok(), "chat {i}: {a:?}");
        }
        let _ = std::fs::remove_dir_all(&root);
    }
}
