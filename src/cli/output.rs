//! Writing what a command prints. A reader that closed the pipe (`wattline collect |
//! head`) has all it wants: that ends the printing quietly, never a panic.

use std::io::{self, Write};

/// Writes `text` to standard output.
pub fn print_stdout(text: &str) -> Result<(), String> {
    write_all(&mut io::stdout().lock(), text, "standard output")
}

/// Writes `text` to standard error (the report table beside a command's own output).
pub fn print_stderr(text: &str) -> Result<(), String> {
    write_all(&mut io::stderr().lock(), text, "standard error")
}

fn write_all(stream: &mut impl Write, text: &str, name: &str) -> Result<(), String> {
    match stream
        .write_all(text.as_bytes())
        .and_then(|()| stream.flush())
    {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(error) => Err(format!("cannot write to {name}: {error}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream whose reader went away.
    struct ClosedPipe;

    impl Write for ClosedPipe {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::Error::from(io::ErrorKind::BrokenPipe))
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    struct Full;

    impl Write for Full {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::Error::from_raw_os_error(libc::ENOSPC))
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_closed_pipe_ends_printing_quietly_and_other_failures_are_named() {
        assert_eq!(write_all(&mut ClosedPipe, "x", "standard output"), Ok(()));
        let error = write_all(&mut Full, "x", "standard output").unwrap_err();
        assert!(
            error.starts_with("cannot write to standard output: "),
            "{error}"
        );
    }
}
