//! `host.call`: the scientific interpreter's one import besides WASI, the
//! way its runs get their code and call plugin methods.
//!
//! The guest passes a frame (`interpreter/scientific.py` describes them)
//! and the host answers with bytes it writes into memory the guest's
//! `host_alloc` export allocates, storing their address and length at the
//! two out-pointers. A method call goes through the same dispatch as the
//! component interpreter's (`sandbox/run/calls.rs`): everything a call is
//! checked for there, it is here.

use wasmtime::error::Context as _;
use wasmtime::{AsContextMut, Caller, Extern, Linker, Memory};

use super::state::SciData;
use crate::bindings::python::exports::sandwit::interpreter::runner;
use crate::sandbox::run::calls;
use sandwit_contract::text::cut;
use sandwit_contract::types::Value;
use sandwit_value::DecodeLimits;

/// Adds `host.call` to the interpreter's linker.
pub(crate) fn add_to_linker(linker: &mut Linker<SciData>) -> wasmtime::Result<()> {
    linker.func_wrap_async(
        "host",
        "call",
        |mut caller: Caller<'_, SciData>, (req, len, out_ptr, out_len): (u32, u32, u32, u32)| {
            Box::new(async move { call(&mut caller, req, len, out_ptr, out_len).await })
        },
    )?;
    Ok(())
}

async fn call(
    caller: &mut Caller<'_, SciData>,
    req: u32,
    len: u32,
    out_ptr: u32,
    out_len: u32,
) -> wasmtime::Result<i32> {
    let memory = export(caller, "memory")?
        .into_memory()
        .context("the interpreter's `memory` is not a memory")?;
    let start = req as usize;
    let frame = memory
        .data(&caller)
        .get(start..start.saturating_add(len as usize))
        .context("a `host.call` frame outside the interpreter's memory")?
        .to_vec();
    // The end frame is the turn's last: one sent before it is the code's
    // own (it can import `_host` as the module does), which would set the
    // outcome and leave the real one to be ignored. A frame after it ends
    // the run as an error instead. (Code that also keeps the module's own
    // end frame from being sent claims no more than it could by catching
    // its own exception and setting its own result.)
    if caller.data().ended.is_some() {
        wasmtime::bail!(
            "a `host.call` frame came after the end frame: the code sent an end frame of its \
             own before it finished"
        );
    }
    let answer = match frame.split_first() {
        Some((b'b', _)) => {
            let pending = caller.data_mut().pending.take();
            // Asked again (by the code itself): nothing.
            pending.unwrap_or_else(|| Value::Null.to_marshal())
        }
        Some((b'c', rest)) => {
            let split = rest.iter().position(|&b| b == 0);
            let (name, args) = split
                .map(|i| (&rest[..i], &rest[i + 1..]))
                .context("a method call frame without its name's end")?;
            let name = String::from_utf8(name.to_vec()).context("a method name is not UTF-8")?;
            calls::answer(calls::call(caller.as_context_mut(), name, args).await?)
        }
        Some((b'e', rest)) => {
            caller.data_mut().ended = Some(outcome(rest)?);
            Vec::new()
        }
        _ => wasmtime::bail!("the interpreter sent an unknown `host.call` frame"),
    };
    caller
        .data_mut()
        .run
        .meter
        .charge(frame.len() + answer.len());
    write_answer(caller, memory, &answer, out_ptr, out_len).await?;
    Ok(0)
}

fn export(caller: &mut Caller<'_, SciData>, name: &str) -> wasmtime::Result<Extern> {
    caller
        .get_export(name)
        .with_context(|| format!("the interpreter has no `{name}` export"))
}

/// Puts `answer` into memory from the guest's allocator and its address and
/// length at the out-pointers.
async fn write_answer(
    caller: &mut Caller<'_, SciData>,
    memory: Memory,
    answer: &[u8],
    out_ptr: u32,
    out_len: u32,
) -> wasmtime::Result<()> {
    let alloc = export(caller, "host_alloc")?
        .into_func()
        .context("the interpreter's `host_alloc` is not a function")?
        .typed::<u32, u32>(&caller)?;
    let len = u32::try_from(answer.len()).context("an answer past 4 GiB")?;
    let ptr = alloc.call_async(&mut *caller, len.max(1)).await?;
    wasmtime::ensure!(
        ptr != 0,
        "the interpreter could not allocate {len} bytes for an answer"
    );
    memory.write(&mut *caller, ptr as usize, answer)?;
    memory.write(&mut *caller, out_ptr as usize, &ptr.to_le_bytes())?;
    memory.write(&mut *caller, out_len as usize, &len.to_le_bytes())?;
    Ok(())
}

/// The code's outcome from an `e` frame: marshal of `(error, result)`,
/// `error` None or the escaped exception's `(type, message, line,
/// traceback)` and `result` None or the marshalled result.
fn outcome(bytes: &[u8]) -> wasmtime::Result<runner::Outcome> {
    // The result is one bytes node, decoded under the host's value limits
    // after this; the frame is already in the host's memory.
    let limits = DecodeLimits {
        max_nodes: 12,
        max_depth: 3,
        max_bytes: usize::MAX,
    };
    let value = Value::from_marshal(bytes, &limits).context("an end frame that is not marshal")?;
    let Value::List(ended) = value else {
        wasmtime::bail!("an end frame that is not a tuple");
    };
    let items = match <[Value; 2]>::try_from(ended) {
        Ok([Value::Null, Value::Null]) => return Ok(runner::Outcome::Ok(None)),
        Ok([Value::Null, Value::Bytes(result)]) => return Ok(runner::Outcome::Ok(Some(result))),
        Ok([Value::List(items), Value::Null]) => items,
        _ => wasmtime::bail!("an end frame that is not (None, result) or (error, None)"),
    };
    let text = |v: &Value| match v {
        Value::Text(t) => Ok(t.clone()),
        _ => Err(wasmtime::format_err!(
            "an end frame whose error fields are not strings"
        )),
    };
    let [type_name, message, line, traceback] = &items[..] else {
        wasmtime::bail!("an end frame whose error has {} fields, not 4", items.len());
    };
    let line = match line {
        Value::Int(n) => u32::try_from(*n).ok(),
        _ => None,
    };
    Ok(runner::Outcome::Error(runner::ErrorInfo {
        type_name: cut(text(type_name)?, 200),
        message: text(message)?,
        line,
        traceback: text(traceback)?,
    }))
}
