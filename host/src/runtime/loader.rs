//! The steps loading shares for both worlds (a plugin, the Python sandbox):
//! reading a component within the size cap, telling it from a core module,
//! compiling it or finding it in the compiled-code cache, checking what it
//! imports and exports, and linking it.

use std::path::Path;

use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, InstancePre, Linker};

use sandwit_contract::signing::component_hash;

use crate::runtime::Runtime;
use crate::runtime::cache::CodeSource;
use sandwit_contract::error::LoadError;
use sandwit_contract::limits::MAX_COMPONENT_BYTES;
use sandwit_contract::manifest;
use sandwit_contract::text::{cut, quote};

/// Where a component comes from.
#[derive(Clone, Copy)]
pub(crate) enum Source<'a> {
    /// Bytes in memory; `label` (e.g. a file name) names them in errors.
    Bytes { label: &'a str, bytes: &'a [u8] },
    /// Bytes whose SHA-256 is known ahead (computed when they were embedded
    /// in a binary): cached code is found without hashing them. The hash is
    /// checked whenever they are compiled.
    Hashed {
        label: &'a str,
        bytes: &'a [u8],
        sha256: &'a str,
    },
    /// A file, named by its path.
    File(&'a Path),
}

/// A compiled component, where its code came from, and its SHA-256.
pub(crate) struct Compiled {
    /// What names it in errors until it names itself.
    pub(crate) label: String,
    pub(crate) component: Component,
    pub(crate) code_source: CodeSource,
    pub(crate) hash: String,
}

/// What a world asks of a component.
pub(crate) struct World {
    /// The world's name, e.g. `sandbox-method`.
    pub(crate) name: &'static str,
    /// What a component of it is, for errors: "a sandwit plugin".
    pub(crate) what: &'static str,
    /// The interface it must export, by its name up to the version's minor.
    pub(crate) export_prefix: &'static str,
    /// The interfaces it may import beyond WASI 0.2, by name prefix.
    pub(crate) imports: &'static [&'static str],
}

/// WASI 0.2, which every world may import: linked closed (no files, env,
/// network or clocks beyond reading the time).
const WASI_IMPORTS: &[&str] = &[
    "wasi:cli/",
    "wasi:clocks/",
    "wasi:filesystem/",
    "wasi:io/",
    "wasi:random/",
    "wasi:sockets/",
];

/// A check of a component's SHA-256 (hex) before it is compiled.
pub(crate) type HashCheck<'a> = &'a dyn Fn(&str) -> Result<(), LoadError>;

/// Accepts every hash.
fn any_hash(_: &str) -> Result<(), LoadError> {
    Ok(())
}

/// The component from `source`, compiled: from the cache without reading a
/// file unchanged since it was last loaded, else read, checked and compiled
/// (or found in the cache by its hash).
pub(crate) fn compile(host: &Runtime, source: Source<'_>) -> Result<Compiled, LoadError> {
    match source {
        Source::Bytes { label, bytes } => compile_bytes(host, label, bytes, &any_hash),
        Source::Hashed {
            label,
            bytes,
            sha256,
        } => match host
            .cache
            .lookup(&host.engine, &sha256.to_ascii_lowercase())
        {
            Some((component, code_source)) => Ok(Compiled {
                label: label.to_string(),
                component,
                code_source,
                hash: sha256.to_string(),
            }),
            None => {
                let compiled = compile_bytes(host, label, bytes, &any_hash)?;
                if !compiled.hash.eq_ignore_ascii_case(sha256) {
                    return Err(compiled.rejected(vec![format!(
                        "has the SHA-256 {}, not the {} it was given with",
                        compiled.hash,
                        quote(sha256, 80)
                    )]));
                }
                Ok(compiled)
            }
        },
        Source::File(path) => compile_file(host, path, &any_hash),
    }
}

/// The component file at `path`, compiled as [`compile`] does, once
/// `check` has accepted its SHA-256.
pub(crate) fn compile_file(
    host: &Runtime,
    path: &Path,
    check: HashCheck<'_>,
) -> Result<Compiled, LoadError> {
    let label = path.display().to_string();
    let io = |error| LoadError::Io {
        plugin: label.clone(),
        error,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if let Some(hash) = host.cache.file_hash(path, &meta)
        && let Some((component, code_source)) = host.cache.lookup(&host.engine, &hash)
    {
        check(&hash)?;
        return Ok(Compiled {
            label,
            component,
            code_source,
            hash,
        });
    }
    // Refuse a file over the size cap before reading it.
    if meta.len() > MAX_COMPONENT_BYTES as u64 {
        return Err(too_big(&label, meta.len() as usize));
    }
    let bytes = std::fs::read(path).map_err(io)?;
    let compiled = compile_bytes(host, &label, &bytes, check)?;
    host.cache.remember_file(path, &meta, &compiled.hash);
    Ok(compiled)
}

fn compile_bytes(
    host: &Runtime,
    label: &str,
    bytes: &[u8],
    check: HashCheck<'_>,
) -> Result<Compiled, LoadError> {
    let reject = |problem: String| LoadError::Rejected {
        plugin: label.to_string(),
        problems: vec![problem],
    };
    if bytes.len() > MAX_COMPONENT_BYTES {
        return Err(too_big(label, bytes.len()));
    }
    let hash = component_hash(bytes);
    check(&hash)?;
    check_header(bytes).map_err(reject)?;
    let (component, code_source) = host
        .cache
        .get(&host.engine, &hash, bytes)
        .map_err(|source| LoadError::Host {
            plugin: label.to_string(),
            source,
        })?
        .map_err(|e| reject(format!("not a valid component: {e:#}")))?;
    Ok(Compiled {
        label: label.to_string(),
        component,
        code_source,
        hash,
    })
}

impl Compiled {
    /// The rejection of this component for `problems`.
    pub(crate) fn rejected(&self, problems: Vec<String>) -> LoadError {
        LoadError::Rejected {
            plugin: self.label.clone(),
            problems,
        }
    }

    /// The component's imports, by name.
    pub(crate) fn imports(&self, host: &Runtime) -> Vec<String> {
        self.component
            .component_type()
            .imports(&host.engine)
            .map(|(name, _)| name.to_string())
            .collect()
    }

    /// Checks that the component is one of `world` (what it imports and
    /// exports, every problem listed) and links it with `linker`; `typed`
    /// makes the world's typed instance-pre of it.
    pub(crate) fn link<T: 'static, P>(
        &self,
        host: &Runtime,
        world: &World,
        linker: &Linker<T>,
        typed: impl FnOnce(InstancePre<T>) -> wasmtime::Result<P>,
    ) -> Result<P, LoadError> {
        let mut problems: Vec<String> = self
            .imports(host)
            .iter()
            .filter(|name| {
                !WASI_IMPORTS
                    .iter()
                    .chain(world.imports)
                    .any(|p| name.starts_with(p))
            })
            .take(manifest::MAX_PROBLEMS)
            .map(|name| {
                format!(
                    "imports {}, which sandwit does not provide",
                    quote(name, 120)
                )
            })
            .collect();
        let exported = self
            .component
            .component_type()
            .exports(&host.engine)
            .any(|(name, item)| {
                name.starts_with(world.export_prefix)
                    && matches!(item.ty, ComponentItem::ComponentInstance(_))
            });
        if !exported {
            problems.push(format!(
                "does not export `{}x`: it is not {} (world `{}`)",
                world.export_prefix, world.what, world.name
            ));
        }
        if !problems.is_empty() {
            return Err(self.rejected(problems));
        }
        let problem = |text: String| self.rejected(vec![cut(text, 2_000)]);
        let pre = linker
            .instantiate_pre(&self.component)
            .map_err(|e| problem(format!("cannot be linked: {e:#}")))?;
        typed(pre).map_err(|e| problem(format!("does not match the world `{}`: {e:#}", world.name)))
    }
}

fn too_big(label: &str, len: usize) -> LoadError {
    LoadError::Rejected {
        plugin: label.to_string(),
        problems: vec![format!(
            "is {len} bytes, more than the limit of {MAX_COMPONENT_BYTES} bytes"
        )],
    }
}

/// Tells a component from a core module or something that is not wasm, by the
/// binary's preamble: magic, then version and layer.
fn check_header(bytes: &[u8]) -> Result<(), String> {
    const MAGIC: &[u8] = b"\0asm";
    if bytes.len() < 8 || &bytes[..4] != MAGIC {
        return Err("is not a WebAssembly binary (no `\\0asm` header)".to_string());
    }
    match bytes[6..8] {
        [1, 0] => Ok(()),
        [0, 0] => Err(
            "is a core WebAssembly module, not a component: build it for wasm32-wasip2 (or wrap it with `wasm-tools component new`)"
                .to_string(),
        ),
        _ => Err(format!(
            "has an unknown WebAssembly layer {:?}",
            &bytes[4..8]
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_check() {
        assert!(
            check_header(b"hello world")
                .unwrap_err()
                .contains("not a WebAssembly")
        );
        assert!(
            check_header(b"\0asm\x01\0\0\0")
                .unwrap_err()
                .contains("core WebAssembly module")
        );
        assert!(check_header(b"\0asm\x0d\0\x01\0").is_ok());
        assert!(
            check_header(b"\0asm\x0d\0\x02\0")
                .unwrap_err()
                .contains("unknown")
        );
    }
}
