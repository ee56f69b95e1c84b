//! Writing to stdout without panicking when it is closed.
//!
//! `println!` panics when stdout is a pipe whose reader has gone (`sandwit
//! run --json x.py | head`). These end the process quietly instead, with the
//! status a SIGPIPE would give (141), as shell tools do.

use std::fmt;
use std::io::{self, Write};

/// Like `println!`, through [`write_fmt`].
macro_rules! outln {
    () => {
        $crate::stdout::write_fmt(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::stdout::write_fmt(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// Like `print!`, through [`write_fmt`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::stdout::write_fmt(format_args!($($arg)*))
    };
}

/// Writes to stdout; if stdout is closed, exits with status 141, and on any
/// other error exits with status 1 naming it.
pub fn write_fmt(args: fmt::Arguments<'_>) {
    if let Err(e) = io::stdout().lock().write_fmt(args) {
        if e.kind() == io::ErrorKind::BrokenPipe {
            std::process::exit(141);
        }
        eprintln!("error: writing to stdout: {e}");
        std::process::exit(1);
    }
}
