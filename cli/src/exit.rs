//! Exit codes of `flow`, in one place (reference.md §5), and what a command hands to the print site.

/// Success, and `--help`.
pub const SUCCESS: u8 = 0;
/// Refused or failed: every problem is on stderr, one per line.
pub const REFUSED: u8 = 1;
/// Usage error (unknown command or option, missing argument); clap exits with it itself.
#[allow(dead_code)]
pub const USAGE: u8 = 2;

/// What a command that succeeded prints: its result on stdout, and lines for stderr (notes such as
/// `note: Outlet router.review is not connected.`, or `wrote <file>`), which never change the exit
/// code.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Output {
    /// Text for stdout, printed as is.
    pub stdout: String,
    /// Lines for stderr, printed before stdout.
    pub stderr: Vec<String>,
}

impl From<String> for Output {
    fn from(stdout: String) -> Self {
        Output { stdout, stderr: Vec::new() }
    }
}

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

    /// A refusal with every problem found (exit 1).
    pub fn all(problems: impl IntoIterator<Item = impl ToString>) -> Self {
        Failure { problems: problems.into_iter().map(|p| p.to_string()).collect(), code: REFUSED }
    }
}
