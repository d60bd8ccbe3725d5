//! Exit codes of `flow`, in one place (reference.md §5).

/// Success, and `--help`.
pub const SUCCESS: u8 = 0;
/// Refused or failed: every problem is on stderr, one per line.
pub const REFUSED: u8 = 1;
/// Usage error (unknown command or option, missing argument); clap exits with it itself.
#[allow(dead_code)]
pub const USAGE: u8 = 2;

/// A command that did not succeed: its problems, one per line, and the exit code.
#[derive(Debug)]
pub struct Failure {
    /// Lines for stderr.
    pub problems: Vec<String>,
    /// Exit code.
    pub code: u8,
}

impl Failure {
    /// A refusal with one problem (exit 1).
    pub fn refused(problem: impl Into<String>) -> Self {
        Failure { problems: vec![problem.into()], code: REFUSED }
    }
}
