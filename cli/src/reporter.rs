//! Every byte `flow` prints goes through one [`Reporter`]: results on stdout, everything said to the
//! person at the terminal (progress of a wait, notes, transient failures tried again, problems) on
//! stderr. So stdout holds only what a script reads: with `-o json|yaml`, JSON or YAML and nothing
//! else, however long a `--wait` or `--watch` runs.
//!
//! Most commands return their whole answer (an [`Output`] or a [`Failure`]) and `main` hands it to
//! [`Reporter::finish`]. The commands that follow a request over time (`--wait`, `--watch`,
//! `--dry-run`) also print as they go, through the same reporter they are given.
//!
//! A reader of stdout that goes away (`flow ... | head`) is no error: what is left to print is
//! dropped, the exit code stays the command's, and a `--watch` stops (see [`Reporter::closed`]).

use std::cell::{Cell, RefCell};
use std::io::{self, IsTerminal, Write};

use crate::exit::{self, Failure, Output};

/// Clears a terminal and puts the cursor at its top left (ANSI: erase display, cursor home).
const CLEAR_SCREEN: &str = "\x1b[2J\x1b[H";

/// Where `flow` prints. Shared by reference: the commands run on one thread.
pub struct Reporter {
    stdout: RefCell<Box<dyn Write>>,
    stderr: RefCell<Box<dyn Write>>,
    /// Stdout is a terminal, where a `--watch` redraws in place.
    terminal: bool,
    /// A write to stdout failed: its reader is gone.
    closed: Cell<bool>,
}

impl Reporter {
    /// The process's stdout and stderr.
    pub fn new() -> Self {
        Reporter::to(Box::new(io::stdout()), Box::new(io::stderr()), io::stdout().is_terminal())
    }

    /// `stdout` and `stderr`; `terminal`: stdout is a terminal.
    fn to(stdout: Box<dyn Write>, stderr: Box<dyn Write>, terminal: bool) -> Self {
        Reporter { stdout: RefCell::new(stdout), stderr: RefCell::new(stderr), terminal, closed: Cell::new(false) }
    }

    /// One line for the person at the terminal, on stderr: progress, a note, a problem.
    pub fn say(&self, line: &str) {
        // One write per line, so that lines never interleave with another process's. Nothing is
        // left to tell when stderr itself is gone.
        let _ = self.stderr.borrow_mut().write_all(format!("{line}\n").as_bytes());
    }

    /// Result text on stdout, as is, at once (a `--watch` prints one document per change).
    pub fn show(&self, text: &str) {
        if self.closed.get() {
            return;
        }
        let mut out = self.stdout.borrow_mut();
        if out.write_all(text.as_bytes()).and_then(|()| out.flush()).is_err() {
            self.closed.set(true);
        }
    }

    /// Result text that replaces the last one: on a terminal, the screen is cleared first; elsewhere
    /// (a file, a pipe) it follows the last one, as [`Reporter::show`].
    pub fn redraw(&self, text: &str) {
        if self.terminal {
            self.show(CLEAR_SCREEN);
        }
        self.show(text);
    }

    /// Stdout's reader is gone: nothing more shown reaches anyone.
    pub fn closed(&self) -> bool {
        self.closed.get()
    }

    /// Prints how a command ended and returns its exit code: for a success, its notes on stderr,
    /// then its result on stdout; for a failure, what it has for stdout, then its problems on stderr,
    /// one per line.
    pub fn finish(&self, result: Result<Output, Failure>) -> u8 {
        match result {
            Ok(Output { stdout, stderr }) => {
                for line in &stderr {
                    self.say(line);
                }
                self.show(&stdout);
                exit::SUCCESS
            }
            Err(Failure { stdout, problems, code }) => {
                self.show(&stdout);
                for problem in &problems {
                    self.say(problem);
                }
                code
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::rc::Rc;

    use super::*;

    /// What a [`Reporter`] made by [`captured`] printed.
    #[derive(Clone, Default)]
    pub(crate) struct Sink(Rc<RefCell<Vec<u8>>>);

    impl Sink {
        pub(crate) fn text(&self) -> String {
            String::from_utf8_lossy(&self.0.borrow()).into_owned()
        }
    }

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.borrow_mut().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// A reporter into two buffers: (reporter, stdout, stderr).
    pub(crate) fn captured(terminal: bool) -> (Reporter, Sink, Sink) {
        let (out, err) = (Sink::default(), Sink::default());
        (Reporter::to(Box::new(out.clone()), Box::new(err.clone()), terminal), out, err)
    }

    /// A stdout whose reader is gone.
    struct Gone;

    impl Write for Gone {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> io::Result<()> {
            Err(io::ErrorKind::BrokenPipe.into())
        }
    }

    #[test]
    fn a_success_prints_its_notes_on_stderr_and_its_result_on_stdout() {
        let (r, out, err) = captured(false);
        r.say("reset 1 of 'cart': Resetting");
        let code = r.finish(Ok(Output { stdout: "{}\n".into(), stderr: vec!["note: a".into(), "wrote f".into()] }));
        assert_eq!(code, exit::SUCCESS);
        assert_eq!(out.text(), "{}\n");
        assert_eq!(err.text(), "reset 1 of 'cart': Resetting\nnote: a\nwrote f\n");
    }

    #[test]
    fn a_failure_prints_its_status_on_stdout_and_its_problems_on_stderr() {
        let (r, out, err) = captured(false);
        let code = r.finish(Err(Failure::with_code(exit::TIMED_OUT, "status\n".into(), "timed out")));
        assert_eq!(code, exit::TIMED_OUT);
        assert_eq!((out.text().as_str(), err.text().as_str()), ("status\n", "timed out\n"));
    }

    #[test]
    fn only_a_terminal_is_cleared_before_a_redraw() {
        let (r, out, _) = captured(false);
        r.redraw("a\n");
        r.redraw("b\n");
        assert_eq!(out.text(), "a\nb\n");
        let (r, out, _) = captured(true);
        r.redraw("a\n");
        assert_eq!(out.text(), format!("{CLEAR_SCREEN}a\n"));
    }

    #[test]
    fn a_reader_that_went_away_closes_stdout_without_changing_the_exit_code() {
        let err = Sink::default();
        let r = Reporter::to(Box::new(Gone), Box::new(err.clone()), false);
        assert!(!r.closed());
        r.show("x\n");
        assert!(r.closed());
        assert_eq!(r.finish(Err(Failure::refused("no"))), exit::REFUSED);
        assert_eq!(err.text(), "no\n");
    }
}
