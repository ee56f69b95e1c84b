//! A chat's workspace: a folder the code sees at `/workspace` (its working
//! directory), kept across the runs of one chat and never another's, under
//! the operator's directory, within quotas on bytes, files and path length.
//!
//! The folder is `<root>/<hash of the context's namespace and chat key>`:
//! a chat cannot name another's. WASI's own checks (cap-std) keep the code
//! inside it: `..` past its top, absolute paths elsewhere and links that
//! lead out are refused. The host adds what WASI does not have:
//! - quotas, checked before the write that would pass them: the bytes a
//!   run writes to files on top of what the workspace held, and the files
//!   a run creates (an open that creates a name not there yet); past one,
//!   the call fails with "no space" (Python raises `OSError`) and the run
//!   ends with the limit kind `workspace`, naming the quota;
//! - names: a path longer than the quota's length fails with "name too
//!   long"; links with "not permitted".
//!
//! After the run, the files created or changed are listed (name, size).
//! Each interpreter puts these checks in front of its WASI's functions:
//! `scientific/wasi_checks.rs` (preview 1), `sandbox/small/workspace_checks.rs`
//! (preview 2).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use wasmtime_wasi::filesystem::{Dir as PreopenDir, FsPerms, OpenMode};

use crate::sandbox::small::outcome::WorkspaceFile;
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
        let listed = listing(&Dir::open_ambient_dir(&folder, ambient_authority())?)?;
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
        if !root.is_dir(&name) {
            root.create_dir(&name)?;
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

/// A run's use of its workspace.
pub(crate) struct WorkspaceRun {
    pub(crate) folder: PathBuf,
    /// The folder, open for the run's checks of names in it.
    dir: Dir,
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
        let dir = Dir::open_ambient_dir(&folder, ambient_authority())?;
        let before = listing(&dir)?;
        let bytes = before.values().map(|(size, _, _)| size).sum();
        let files = before.len() as u64;
        Ok(WorkspaceRun {
            folder,
            dir,
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
        let after = listing(&self.dir).unwrap_or_default();
        after
            .into_iter()
            .filter(|(path, now)| now.2 && self.before.get(path) != Some(now))
            .map(|(path, (size, _, _))| WorkspaceFile { path, size })
            .collect()
    }

    fn refuse(&mut self, what: String) -> Refusal {
        self.hit.get_or_insert(what);
        Refusal::NoSpace
    }

    /// Charges a write of `bytes` to a file; why it is refused, if it
    /// passes the byte quota.
    pub(crate) fn charge_write(&mut self, bytes: u64) -> Option<Refusal> {
        if self.bytes.saturating_add(bytes) > self.options.max_bytes {
            let max = self.options.max_bytes;
            return Some(self.refuse(format!(
                "the workspace's files may hold {max} bytes together (its `max_bytes` quota)"
            )));
        }
        self.bytes += bytes;
        None
    }

    /// Checks a path the code names (its length) and, when the call may
    /// create it and it is not in the workspace yet, the file quota.
    pub(crate) fn check_new(&mut self, name: &str, creates: bool) -> Checked {
        if name.len() > self.options.max_path {
            self.hit.get_or_insert(format!(
                "a path of {} bytes is past the workspace's `max_path` quota of {} bytes",
                name.len(),
                self.options.max_path
            ));
            return Checked::Refused(Refusal::NameTooLong);
        }
        // The interpreter names paths relative to a preopen, the
        // workspace's for its files; a name there already is not new.
        if !creates || self.dir.symlink_metadata(name).is_ok() {
            return Checked::Named;
        }
        if self.files >= self.options.max_files {
            let max = self.options.max_files;
            let refusal = self.refuse(format!(
                "the workspace may hold {max} files and folders (its `max_files` quota)"
            ));
            return Checked::Refused(refusal);
        }
        Checked::New
    }

    /// Counts a file or folder a call created.
    pub(crate) fn count_new(&mut self) {
        self.files += 1;
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

/// What [`WorkspaceRun::check_new`] found of a path.
pub(crate) enum Checked {
    /// Refused, for this reason.
    Refused(Refusal),
    /// A file or folder the call would create.
    New,
    /// One there already, or a call that creates nothing.
    Named,
}

/// A listed entry: its size, modification time and whether it is a file.
type Entry = (u64, Option<SystemTime>, bool);

/// Every entry under `folder` (not following links), with size and
/// modification time.
fn listing(folder: &Dir) -> std::io::Result<BTreeMap<String, Entry>> {
    let mut found = BTreeMap::new();
    let mut stack = vec![(folder.try_clone()?, String::new())];
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
