//! Writing a command's output to stdout (and its messages to stderr). A
//! reader that stops early (`nicbench runs | head`, `nicbench run plan.toml
//! 2>&1 | head -3`) closes the pipe: that ends the output, it is not an
//! error and never a panic (`println!` and `eprintln!` panic on a closed
//! pipe). The command itself goes on to its end and its exit code: a plan
//! still runs its cases, `watch` still passes on its command's status.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context;

/// Set once a write to stdout found the pipe closed: later output is dropped.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Stdout, locked, on which a closed pipe ends the output: the write that
/// finds it closed and every one after it succeed without writing.
pub struct Out(std::io::StdoutLock<'static>);

/// The process's stdout as an [`Out`].
pub fn out() -> Out {
    Out(std::io::stdout().lock())
}

/// A write's result, with a closed pipe counted as written (and remembered).
fn unless_closed<T>(result: std::io::Result<T>, written: T) -> std::io::Result<T> {
    match result {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            STDOUT_CLOSED.store(true, Ordering::Relaxed);
            Ok(written)
        }
        other => other,
    }
}

impl Write for Out {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if STDOUT_CLOSED.load(Ordering::Relaxed) {
            return Ok(buf.len());
        }
        unless_closed(self.0.write(buf), buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if STDOUT_CLOSED.load(Ordering::Relaxed) {
            return Ok(());
        }
        unless_closed(self.0.flush(), ())
    }
}

/// One line on stdout, `println!` that a closed pipe does not panic. Any
/// other failure to write (a full disk) is not worth ending the command for
/// either: its results are in the database.
pub fn line(text: impl std::fmt::Display) {
    let mut out = out();
    let _ = writeln!(out, "{text}").and_then(|_| out.flush());
}

/// One line on stderr, `eprintln!` that a closed pipe (`2>&1 | head`) does
/// not panic.
pub fn err_line(text: impl std::fmt::Display) {
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

/// Runs `f` on a buffered stdout and flushes it; a closed pipe is not an error.
pub fn write_out(f: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> anyhow::Result<()> {
    let mut out = std::io::BufWriter::new(out());
    let written = f(&mut out).and_then(|_| out.flush());
    closed_pipe_is_the_end(written, "writing to stdout")
}

/// Writes `text` to stdout as it is (add the newline yourself).
pub fn print_out(text: &str) -> anyhow::Result<()> {
    write_out(|out| out.write_all(text.as_bytes()))
}

/// The end of a write to stdout: Ok if it went through or the reader closed
/// the pipe, else the error with `what` as its context.
pub fn closed_pipe_is_the_end(written: std::io::Result<()>, what: &'static str) -> anyhow::Result<()> {
    match written {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e).context(what),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_pipe_ends_the_output_without_an_error() {
        let closed = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        assert!(closed_pipe_is_the_end(Err(closed), "writing").is_ok());
        let full = std::io::Error::from(std::io::ErrorKind::StorageFull);
        let e = closed_pipe_is_the_end(Err(full), "writing the table").unwrap_err();
        assert_eq!(e.to_string(), "writing the table");
        assert!(closed_pipe_is_the_end(Ok(()), "writing").is_ok());
    }
}
