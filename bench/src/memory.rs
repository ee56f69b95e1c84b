//! Memory of this process, from /proc (Linux only): the private dirty total
//! (`smaps_rollup`) and the anonymous memory per mapping (`smaps`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;

/// Peak growth of private memory while `live` runs, each the future `run`
/// makes, are alive at once, sampled every 2 ms by a thread of its own.
/// The outer error is a failed run; the inner one, memory that could not be
/// read.
pub async fn peak_growth<F>(live: usize, run: impl Fn() -> F) -> anyhow::Result<anyhow::Result<u64>>
where
    F: Future<Output = anyhow::Result<()>> + Send + 'static,
{
    let base = match private_bytes() {
        Ok(base) => base,
        Err(e) => return Ok(Err(e)),
    };
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut peak = base;
            while !done.load(Ordering::Relaxed) {
                peak = peak.max(private_bytes()?);
                std::thread::sleep(Duration::from_millis(2));
            }
            anyhow::Ok(peak)
        })
    };
    let tasks: Vec<_> = (0..live).map(|_| tokio::spawn(run())).collect();
    for t in tasks {
        t.await??;
    }
    done.store(true, Ordering::Relaxed);
    let peak = sampler.join().expect("the memory sampler panicked");
    Ok(peak.map(|peak| peak.saturating_sub(base)))
}

/// The private dirty memory of this process (pages it wrote: heap, and the
/// copy-on-write copies of image pages), from /proc (Linux only).
pub fn private_bytes() -> anyhow::Result<u64> {
    const ROLLUP: &str = "/proc/self/smaps_rollup";
    let rollup =
        std::fs::read_to_string(ROLLUP).with_context(|| format!("cannot read {ROLLUP}"))?;
    rollup
        .lines()
        .find_map(|l| l.strip_prefix("Private_Dirty:"))
        .and_then(kib_bytes)
        .with_context(|| format!("no `Private_Dirty: <n> kB` line in {ROLLUP}"))
}

/// The bytes of a `/proc` value of the form `<n> kB`.
fn kib_bytes(value: &str) -> Option<u64> {
    let kib = value
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse::<u64>()
        .ok()?;
    kib.checked_mul(1024)
}

const SMAPS: &str = "/proc/self/smaps";

/// This process's mappings, from /proc/self/smaps (Linux only): each one's
/// address range and the anonymous memory in it (the pages written there:
/// a copy-on-write copy of a file's page counts, the page of a memory
/// image a slot only read does not), resident or swapped out.
pub struct Mappings(Vec<(std::ops::Range<u64>, u64)>);

impl Mappings {
    pub fn read() -> anyhow::Result<Self> {
        let smaps =
            std::fs::read_to_string(SMAPS).with_context(|| format!("cannot read {SMAPS}"))?;
        Self::parse(&smaps)
    }

    /// The mappings of `smaps`, in the format of /proc/PID/smaps.
    fn parse(smaps: &str) -> anyhow::Result<Self> {
        let mut mappings: Vec<(std::ops::Range<u64>, u64)> = Vec::new();
        for line in smaps.lines() {
            let (key, value) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
            if let Some((start, end)) = key.split_once('-')
                && let (Ok(start), Ok(end)) =
                    (u64::from_str_radix(start, 16), u64::from_str_radix(end, 16))
            {
                mappings.push((start..end, 0));
            } else if let ("Anonymous:" | "Swap:", Some(last)) = (key, mappings.last_mut()) {
                last.1 += kib_bytes(value)
                    .with_context(|| format!("`{line}` in {SMAPS} is not `{key} <n> kB`"))?;
            }
        }
        anyhow::ensure!(!mappings.is_empty(), "no mappings in {SMAPS}");
        mappings.sort_by_key(|(range, _)| range.start);
        Ok(Mappings(mappings))
    }

    /// Bytes of anonymous memory in the mappings that start outside every
    /// mapping of `earlier`: those made since (a mapping only resized or
    /// re-protected since starts inside one of `earlier`'s).
    pub fn anonymous_outside(&self, earlier: &Mappings) -> u64 {
        let existed = |at: u64| {
            let i = earlier.0.partition_point(|(range, _)| range.start <= at);
            i > 0 && earlier.0[i - 1].0.contains(&at)
        };
        self.0
            .iter()
            .filter(|(range, _)| !existed(range.start))
            .map(|(_, bytes)| bytes)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn smaps(mappings: &[(&str, u64, u64)]) -> String {
        mappings
            .iter()
            .map(|(range, anonymous, swap)| {
                format!(
                    "{range} rw-p 00000000 00:00 0\nSize: 4 kB\nPrivate_Dirty: 999 kB\n\
                     Anonymous: {anonymous} kB\nAnonHugePages: 0 kB\nSwap: {swap} kB\n\
                     SwapPss: 0 kB\nVmFlags: rd wr mr mw me ac\n"
                )
            })
            .collect()
    }

    #[test]
    fn only_mappings_made_since_count_with_their_swapped_pages() {
        let before = Mappings::parse(&smaps(&[("1000-3000", 1, 0), ("5000-6000", 2, 0)])).unwrap();
        // 1000-2000 and 2000-3000 were 1000-3000, split; 3000-4000 and
        // 7000-8000 are new, the second partly swapped out.
        let after = Mappings::parse(&smaps(&[
            ("7000-8000", 8, 16),
            ("1000-2000", 4, 0),
            ("2000-3000", 4, 0),
            ("3000-4000", 2, 0),
            ("5000-6000", 100, 0),
        ]))
        .unwrap();
        assert_eq!(after.anonymous_outside(&before), (8 + 16 + 2) * 1024);
        assert_eq!(before.anonymous_outside(&before), 0);
    }

    #[test]
    fn a_malformed_smaps_is_an_error_naming_the_line() {
        let parse = |text| Mappings::parse(text).map(|_| ());
        let e = parse("1000-2000 rw-p 0 00:00 0\nAnonymous: many kB\n").unwrap_err();
        assert!(e.to_string().contains("`Anonymous: many kB`"), "{e}");
        assert!(parse("").is_err());
    }
}
