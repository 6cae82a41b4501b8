//! Writing a command's output to stdout. A reader that stops early
//! (`nicbench runs | head`) closes the pipe: that ends the output, it is
//! not an error and never a panic (`println!` panics on a closed pipe).

use std::io::Write;

use anyhow::Context;

/// Runs `f` on a buffered stdout and flushes it; a closed pipe is not an error.
pub fn write_out(f: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> anyhow::Result<()> {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
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
