//! A session as it is stored: the pages of its interpreter's memory that
//! differ from the base every session's interpreter starts as, compressed
//! (zstd) and signed (HMAC-SHA256 with the host's [`SessionKey`]).
//!
//! Layout: [`MAGIC`], the header's length (u32, little-endian), the header
//! (JSON: [`Header`]), the compressed pages (each page's index, u32 LE, then
//! every page's [`PAGE`] bytes in the same order) and the 32-byte MAC of
//! everything before it. [`open`] checks the MAC before it reads anything
//! else, so a blob changed by anyone without the key is refused before it
//! is parsed; then the header's format, versions and owner, then the pages'
//! bounds, decompressing into exactly the room the header announces.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ring::hmac;
use serde::{Deserialize, Serialize};

use sandwit_contract::limits::RunLimits;

/// The granularity of a saved memory: pages that differ from the base are
/// kept whole.
pub(crate) const PAGE: usize = 4096;
/// What every stored session starts with.
const MAGIC: &[u8; 8] = b"swsess\0\x01";
/// The format [`seal`] writes: a blob of another is refused by name.
pub(crate) const FORMAT: u32 = 1;
pub(crate) const MAC_BYTES: usize = 32;
/// The longest header [`open`] reads.
const MAX_HEADER_BYTES: usize = 16 << 10;

/// The key sessions kept in the store are signed with: a blob this key did
/// not sign (changed, or written by a host with another key) is refused,
/// never restored. Hosts that share a store (replicas) and hosts that
/// restart over the same store need the same key to resume each other's
/// sessions; a host given none makes one for its process alone.
#[derive(Clone)]
pub struct SessionKey(hmac::Key);

impl SessionKey {
    /// The fewest bytes a key has.
    pub const MIN_BYTES: usize = 32;

    /// A key of `bytes` (at least [`SessionKey::MIN_BYTES`] of them, e.g.
    /// from `openssl rand 32`).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, String> {
        if bytes.len() < Self::MIN_BYTES {
            return Err(format!(
                "a session key has at least {} bytes, this one {}",
                Self::MIN_BYTES,
                bytes.len()
            ));
        }
        Ok(SessionKey(hmac::Key::new(hmac::HMAC_SHA256, bytes)))
    }

    /// A new random key, for this process alone.
    pub fn generate() -> Self {
        let rng = ring::rand::SystemRandom::new();
        let key =
            hmac::Key::generate(hmac::HMAC_SHA256, &rng).expect("the system's random source works");
        SessionKey(key)
    }
}

impl SessionKey {
    /// The MAC of `data` under this key.
    pub(crate) fn sign(&self, data: &[u8]) -> [u8; MAC_BYTES] {
        let mut tag = [0; MAC_BYTES];
        tag.copy_from_slice(hmac::sign(&self.0, data).as_ref());
        tag
    }

    /// Whether `tag` is the MAC of `data` under this key (compared in
    /// constant time).
    pub(crate) fn verify(&self, data: &[u8], tag: &[u8]) -> bool {
        hmac::verify(&self.0, data, tag).is_ok()
    }
}

impl std::fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionKey(..)")
    }
}

/// What a stored session says of itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Header {
    pub(crate) format: u32,
    /// The version of sandwit that saved it.
    pub(crate) sandwit: String,
    /// The interpreter's component hash.
    pub(crate) interpreter: String,
    /// The SHA-256 of the base memory the pages differ from.
    pub(crate) base: String,
    /// That memory's size.
    pub(crate) base_bytes: u64,
    pub(crate) namespace: String,
    pub(crate) chat: String,
    pub(crate) name: String,
    /// Runs the session had when it was saved.
    pub(crate) runs: u32,
    /// The memory's size.
    pub(crate) memory_bytes: u64,
    /// Pages kept.
    pub(crate) pages: u32,
    /// When it was saved, in seconds since the Unix epoch.
    pub(crate) saved_at: u64,
    /// The limits of the run that saved it, which a session loaded from a
    /// dump runs under by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) limits: Option<SavedLimits>,
}

/// [`RunLimits`] as a header keeps them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SavedLimits {
    fuel: Option<u64>,
    time_ms: u64,
    memory_bytes: u64,
    max_output_bytes: u64,
    max_calls: u32,
    max_events: u64,
    max_event_bytes: u64,
}

impl From<&RunLimits> for SavedLimits {
    fn from(l: &RunLimits) -> Self {
        SavedLimits {
            fuel: l.fuel,
            time_ms: l.time.as_millis().min(u64::MAX as u128) as u64,
            memory_bytes: l.memory_bytes as u64,
            max_output_bytes: l.max_output_bytes as u64,
            max_calls: l.max_calls,
            max_events: l.max_events as u64,
            max_event_bytes: l.max_event_bytes as u64,
        }
    }
}

impl From<&SavedLimits> for RunLimits {
    fn from(l: &SavedLimits) -> Self {
        let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        RunLimits {
            fuel: l.fuel,
            time: Duration::from_millis(l.time_ms),
            memory_bytes: size(l.memory_bytes),
            max_output_bytes: size(l.max_output_bytes),
            max_calls: l.max_calls,
            max_events: size(l.max_events),
            max_event_bytes: size(l.max_event_bytes),
        }
    }
}

/// What a host expects of a blob it restores: what it runs and whose
/// session it is.
pub(crate) struct Expected<'a> {
    pub(crate) interpreter: &'a str,
    /// The base its pages must be over; `None` for any (the restoring host
    /// finds the base by the header's hash).
    pub(crate) base: Option<&'a str>,
    pub(crate) namespace: &'a str,
    pub(crate) chat: &'a str,
    pub(crate) name: &'a str,
    /// The largest memory it may restore.
    pub(crate) max_memory: u64,
}

/// A blob opened: its header, its pages' indices and their bytes.
pub(crate) struct Opened {
    pub(crate) header: Header,
    pub(crate) pages: Vec<u32>,
    pub(crate) contents: Vec<u8>,
}

/// The version of sandwit this host is, as blobs record it.
pub(crate) fn sandwit_version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// Seconds since the Unix epoch.
pub(crate) fn now_secs() -> u64 {
    (SystemTime::now().duration_since(UNIX_EPOCH)).map_or(0, |d| d.as_secs())
}

/// The blob of `header` with `pages` (indices, increasing) whose bytes are
/// `contents`, signed with `key`, compressed afresh ([`Packs::seal`]).
#[cfg(test)]
pub(crate) fn seal(
    key: &SessionKey,
    header: &Header,
    pages: &[u32],
    contents: &[u8],
) -> anyhow::Result<Vec<u8>> {
    Packs::default().seal(key, header, pages, contents)
}

/// Pages per region a blob's pages are compressed by.
const REGION_PAGES: usize = 16;

/// What one live session's last save compressed, by region of memory
/// (`REGION_PAGES` pages): the region's saved pages, their bytes, and
/// those compressed. A save compresses again only the regions whose pages
/// changed since the last, since a turn writes a few regions of a memory
/// whose saved pages are megabytes. Each region is a zstd frame of its own,
/// and concatenated frames decompress as one stream, so a blob reads the
/// same however its pages were compressed. It costs the saved pages' bytes
/// again per live session.
#[derive(Default)]
pub(crate) struct Packs {
    regions: Vec<Region>,
}

struct Region {
    index: usize,
    pages: Vec<u32>,
    plain: Vec<u8>,
    packed: Vec<u8>,
}

impl Packs {
    /// The blob of `header` with `pages` (indices, increasing) whose bytes
    /// are `contents`, signed with `key`: zstd's level 1, since the blob is
    /// written at the end of every run in the session.
    pub(crate) fn seal(
        &mut self,
        key: &SessionKey,
        header: &Header,
        pages: &[u32],
        contents: &[u8],
    ) -> anyhow::Result<Vec<u8>> {
        debug_assert_eq!(contents.len(), pages.len() * PAGE);
        let head = serde_json::to_vec(header)?;
        let indices: Vec<u8> = pages.iter().flat_map(|p| p.to_le_bytes()).collect();
        let mut zstd = zstd::bulk::Compressor::new(1)?;
        let mut packed = zstd.compress(&indices)?;
        let mut before = std::mem::take(&mut self.regions).into_iter().peekable();
        let mut from = 0;
        while from < pages.len() {
            let index = pages[from] as usize / REGION_PAGES;
            let to = from
                + (pages[from..].iter())
                    .take_while(|p| **p as usize / REGION_PAGES == index)
                    .count();
            let (these, plain) = (&pages[from..to], &contents[from * PAGE..to * PAGE]);
            while before.next_if(|r| r.index < index).is_some() {}
            let region = match before.next_if(|r| r.index == index) {
                Some(region) if region.pages == these && region.plain == plain => region,
                _ => Region {
                    index,
                    pages: these.to_vec(),
                    plain: plain.to_vec(),
                    packed: zstd.compress(plain)?,
                },
            };
            packed.extend_from_slice(&region.packed);
            self.regions.push(region);
            from = to;
        }
        Ok(signed(key, &head, &packed))
    }
}

/// The blob of a header's JSON `head` and compressed pages `packed`.
fn signed(key: &SessionKey, head: &[u8], packed: &[u8]) -> Vec<u8> {
    let mut blob = Vec::with_capacity(MAGIC.len() + 4 + head.len() + packed.len() + MAC_BYTES);
    blob.extend_from_slice(MAGIC);
    blob.extend_from_slice(&(head.len() as u32).to_le_bytes());
    blob.extend_from_slice(head);
    blob.extend_from_slice(packed);
    let tag = hmac::sign(&key.0, &blob);
    blob.extend_from_slice(tag.as_ref());
    blob
}

/// The header of `blob` and its compressed pages, if `key` signed it
/// (`label` names it in errors). Nothing else is read before the MAC is
/// checked.
pub(crate) fn signed_header<'b>(
    key: &SessionKey,
    blob: &'b [u8],
    label: &str,
) -> Result<(Header, &'b [u8]), Refused> {
    let unsigned = |why: &str| {
        Refused::Unsigned(format!(
            "{label} {why}: it was not restored (close the session to start it afresh)"
        ))
    };
    if blob.len() < MAGIC.len() + 4 + MAC_BYTES || &blob[..MAGIC.len()] != MAGIC {
        return Err(unsigned("is not a sandwit session"));
    }
    let (signed, tag) = blob.split_at(blob.len() - MAC_BYTES);
    if hmac::verify(&key.0, signed, tag).is_err() {
        return Err(unsigned(
            "is not signed by this host's session key (changed since it was saved, or saved by \
             a host with another key)",
        ));
    }
    let malformed = |why: String| Refused::Malformed(format!("{label} {why}"));
    let rest = &signed[MAGIC.len()..];
    let head_len = u32::from_le_bytes(rest[..4].try_into().expect("4 bytes")) as usize;
    if head_len > MAX_HEADER_BYTES || head_len > rest.len() - 4 {
        return Err(malformed(format!("has a header of {head_len} bytes")));
    }
    let (head, packed) = rest[4..].split_at(head_len);
    let header: Header = serde_json::from_slice(head)
        .map_err(|e| malformed(format!("has a header that does not parse: {e}")))?;
    Ok((header, packed))
}

/// A blob of `header` over the compressed pages `packed` of a blob
/// [`signed_header`] opened: the same session under another name or time.
pub(crate) fn resealed(key: &SessionKey, header: &Header, packed: &[u8]) -> Vec<u8> {
    let head = serde_json::to_vec(header).expect("a header serializes");
    signed(key, &head, packed)
}

/// Why a stored session was not restored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refused {
    /// Not signed by this host's key, or not a session at all.
    #[error("{0}")]
    Unsigned(String),
    /// Saved by another version of sandwit or of the interpreter.
    #[error("{0}")]
    Version(String),
    /// Signed, but not what it says (a host's bug, or an old key reused).
    #[error("{0}")]
    Malformed(String),
}

/// The session in `blob`, if `key` signed it and it is what `expected`
/// says: this host's sandwit and interpreter, the same base, the same
/// owner, pages within the memory.
pub(crate) fn open(
    key: &SessionKey,
    blob: &[u8],
    expected: &Expected<'_>,
) -> Result<Opened, Refused> {
    let name = expected.name;
    let (header, packed) = signed_header(key, blob, &format!("the stored session {name:?}"))?;
    let malformed = |why: String| Refused::Malformed(format!("the stored session {name:?} {why}"));
    check_binding(&header, expected)?;
    let pages = header.pages as usize;
    let memory_pages = (header.memory_bytes as usize).div_ceil(PAGE);
    if header.memory_bytes > expected.max_memory || pages > memory_pages {
        return Err(malformed(format!(
            "holds {pages} pages of a {} byte memory, past this host's {} byte limit",
            header.memory_bytes, expected.max_memory
        )));
    }
    let plain = zstd::bulk::decompress(packed, pages * (4 + PAGE))
        .map_err(|e| malformed(format!("does not decompress: {e}")))?;
    if plain.len() != pages * (4 + PAGE) {
        return Err(malformed(format!(
            "holds {} bytes, not {pages} pages",
            plain.len()
        )));
    }
    let (indices, contents) = plain.split_at(pages * 4);
    let indices: Vec<u32> = (indices.chunks_exact(4))
        .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
        .collect();
    let ordered = indices.windows(2).all(|w| w[0] < w[1]);
    if !ordered
        || indices
            .last()
            .is_some_and(|&last| last as usize >= memory_pages)
    {
        return Err(malformed(
            "lists pages out of order or past its memory".into(),
        ));
    }
    Ok(Opened {
        header,
        pages: indices,
        contents: contents.to_vec(),
    })
}

/// Checks that `header` is a session this host can restore for `expected`.
fn check_binding(header: &Header, expected: &Expected<'_>) -> Result<(), Refused> {
    let name = expected.name;
    if header.format != FORMAT {
        return Err(Refused::Version(format!(
            "the stored session {name:?} is in format {}, this host reads format {FORMAT}",
            header.format
        )));
    }
    let (ours, theirs) = (
        (sandwit_version(), expected.interpreter),
        (header.sandwit.as_str(), header.interpreter.as_str()),
    );
    if ours != theirs {
        return Err(Refused::Version(format!(
            "the stored session {name:?} was saved by sandwit {} with the interpreter {}, and \
             this host is sandwit {} with the interpreter {}: a session is restored only by the \
             versions that saved it (close it to start it afresh)",
            theirs.0,
            short(theirs.1),
            ours.0,
            short(ours.1)
        )));
    }
    if let Some(base) = expected.base
        && header.base != base
    {
        return Err(Refused::Version(format!(
            "the stored session {name:?} was saved over an interpreter prepared otherwise \
             (base {}, this host's {}): the host's workspaces or build differ",
            short(&header.base),
            short(base)
        )));
    }
    let owner = (
        header.namespace.as_str(),
        header.chat.as_str(),
        header.name.as_str(),
    );
    if owner != (expected.namespace, expected.chat, name) {
        return Err(Refused::Unsigned(format!(
            "the stored session {name:?} belongs to another chat or session: it was not restored"
        )));
    }
    Ok(())
}

/// The first 12 characters of a hash, as errors show it.
fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(pages: u32) -> Header {
        Header {
            format: FORMAT,
            sandwit: sandwit_version().into(),
            interpreter: "i".repeat(64),
            base: "b".repeat(64),
            base_bytes: (4 * PAGE) as u64,
            namespace: String::new(),
            chat: "chat".into(),
            name: "s".into(),
            runs: 3,
            memory_bytes: (16 * PAGE) as u64,
            pages,
            saved_at: 1,
            limits: None,
        }
    }

    fn expected() -> Expected<'static> {
        Expected {
            interpreter: "iiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiii",
            base: Some("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"),
            namespace: "",
            chat: "chat",
            name: "s",
            max_memory: 1 << 30,
        }
    }

    fn sealed(key: &SessionKey) -> Vec<u8> {
        let contents: Vec<u8> = (0..2 * PAGE).map(|i| (i % 251) as u8).collect();
        seal(key, &header(2), &[3, 9], &contents).unwrap()
    }

    #[test]
    fn pages_packed_by_region_open_as_one_and_only_changed_regions_are_packed_again() {
        let key = SessionKey::generate();
        // Pages in three regions (and two pages in the first).
        let pages = [3, 9, REGION_PAGES as u32 + 1, 5 * REGION_PAGES as u32];
        let mut contents: Vec<u8> = (0..pages.len() * PAGE).map(|i| (i % 251) as u8).collect();
        let mut packs = Packs::default();
        let over = |pages: usize| Header {
            memory_bytes: (6 * REGION_PAGES * PAGE) as u64,
            ..header(pages as u32)
        };
        let blob = packs.seal(&key, &over(4), &pages, &contents).unwrap();
        let opened = open(&key, &blob, &expected()).ok().unwrap();
        assert_eq!(
            (opened.pages, &opened.contents),
            (pages.to_vec(), &contents)
        );
        let packed: Vec<*const u8> = packs.regions.iter().map(|r| r.packed.as_ptr()).collect();
        assert_eq!(packed.len(), 3);

        // The third page changed: its region alone is packed again, and the
        // blob opens as the new pages.
        contents[2 * PAGE + 7] ^= 0xff;
        let blob = packs.seal(&key, &over(4), &pages, &contents).unwrap();
        let opened = open(&key, &blob, &expected()).ok().unwrap();
        assert_eq!(opened.contents, contents);
        let now: Vec<*const u8> = packs.regions.iter().map(|r| r.packed.as_ptr()).collect();
        assert_eq!((now[0], now[2]), (packed[0], packed[2]));
        assert_ne!(now[1], packed[1]);

        // A page gone from a region packs it again, too.
        let fewer = [3, REGION_PAGES as u32 + 1, 5 * REGION_PAGES as u32];
        let mut less = contents[..PAGE].to_vec();
        less.extend_from_slice(&contents[2 * PAGE..]);
        let blob = packs.seal(&key, &over(3), &fewer, &less).unwrap();
        let opened = open(&key, &blob, &expected()).ok().unwrap();
        assert_eq!((opened.pages, opened.contents), (fewer.to_vec(), less));
    }

    #[test]
    fn a_sealed_session_opens_as_it_was() {
        let key = SessionKey::generate();
        let opened = open(&key, &sealed(&key), &expected()).ok().unwrap();
        assert_eq!(opened.header, header(2));
        assert_eq!(opened.pages, [3, 9]);
        assert_eq!(opened.contents[PAGE + 1], ((PAGE + 1) % 251) as u8);
    }

    #[test]
    fn a_changed_or_foreign_blob_is_refused_before_it_is_read() {
        let key = SessionKey::generate();
        let blob = sealed(&key);
        for at in [0, 10, blob.len() / 2, blob.len() - 1] {
            let mut changed = blob.clone();
            changed[at] ^= 1;
            let refused = open(&key, &changed, &expected()).err().unwrap();
            assert!(
                matches!(refused, Refused::Unsigned(_)),
                "byte {at}: {refused}"
            );
        }
        let other = SessionKey::generate();
        let refused = open(&other, &blob, &expected()).err().unwrap();
        assert!(
            refused
                .to_string()
                .contains("not signed by this host's session key")
        );
        assert!(open(&key, b"short", &expected()).is_err());
    }

    #[test]
    fn another_version_or_owner_is_refused_by_name() {
        let key = SessionKey::generate();
        let contents = vec![0; PAGE];
        let mut old = header(1);
        old.sandwit = "0.0.1".into();
        let blob = seal(&key, &old, &[0], &contents).unwrap();
        let refused = open(&key, &blob, &expected()).err().unwrap().to_string();
        assert!(refused.contains("sandwit 0.0.1") && refused.contains(sandwit_version()));
        let blob = sealed(&key);
        let elsewhere = Expected {
            chat: "another",
            ..expected()
        };
        assert!(matches!(
            open(&key, &blob, &elsewhere),
            Err(Refused::Unsigned(_))
        ));
        let small = Expected {
            max_memory: PAGE as u64,
            ..expected()
        };
        assert!(matches!(
            open(&key, &blob, &small),
            Err(Refused::Malformed(_))
        ));
    }

    #[test]
    fn a_resealed_session_opens_under_its_new_name_with_the_same_pages() {
        let key = SessionKey::generate();
        let blob = sealed(&key);
        let (mut header, packed) = signed_header(&key, &blob, "the dump").ok().unwrap();
        header.name = "fork".into();
        header.limits = Some(SavedLimits::from(&RunLimits::default()));
        let fork = resealed(&key, &header, packed);
        let expected = Expected {
            name: "fork",
            ..expected()
        };
        let opened = open(&key, &fork, &expected).ok().unwrap();
        assert_eq!(opened.pages, [3, 9]);
        let limits = RunLimits::from(opened.header.limits.as_ref().unwrap());
        assert_eq!(limits, RunLimits::default());
        // Under its old name it is refused: the name is signed.
        assert!(matches!(
            open(&key, &fork, &super::tests::expected()),
            Err(Refused::Unsigned(_))
        ));
    }

    #[test]
    fn short_keys_are_refused() {
        assert!(SessionKey::from_bytes(&[7; 31]).is_err());
        assert!(SessionKey::from_bytes(&[7; 32]).is_ok());
    }
}
