//! Exit codes of `flow`, in one place (docs/cli.md lists them), and what a command hands to the
//! [`crate::reporter::Reporter`] that prints it.
//!
//! `0`, `1` and `2` are what every command uses. The codes from `3` up say how a reset that
//! `flow reset --wait` waited for ended, so that a script can tell "nothing to do" from "look at
//! it" without reading the output.

/// Success, and `--help`. For `flow reset --wait`: the request is done and every consumer group it
/// targeted was reset.
pub const SUCCESS: u8 = 0;
/// Refused or failed: every problem is on stderr, one per line. Nothing was requested or written.
pub const REFUSED: u8 = 1;
/// Usage error (unknown command or option, missing argument, a value of the wrong form); clap exits
/// with it itself.
#[allow(dead_code)]
pub const USAGE: u8 = 2;
/// `flow reset --wait`: the request was written, but the operator refused it, or a newer request
/// superseded it; no consumer group was moved by it.
pub const RESET_REFUSED: u8 = 3;
/// `flow reset --wait`: the request is done, but at least one consumer group could not be reset
/// (the status and the `ResetOffsetsFailed` events say why).
pub const GROUPS_FAILED: u8 = 4;
/// `flow reset --wait --timeout`: the time ran out before the request was finished. The request
/// stays; the operator carries it on.
pub const TIMED_OUT: u8 = 5;

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

/// A command that did not succeed: its problems, one per line, and the exit code; and what it has
/// to show on stdout all the same (the final status of a reset that `--wait` waited for).
#[derive(Debug)]
pub struct Failure {
    /// Text for stdout, printed before the problems.
    pub stdout: String,
    /// Lines for stderr.
    pub problems: Vec<String>,
    /// Exit code.
    pub code: u8,
}

impl Failure {
    /// A refusal with one problem (exit 1).
    pub fn refused(problem: impl Into<String>) -> Self {
        Failure { stdout: String::new(), problems: vec![problem.into()], code: REFUSED }
    }

    /// A refusal with every problem found (exit 1).
    pub fn all(problems: impl IntoIterator<Item = impl ToString>) -> Self {
        Failure {
            stdout: String::new(),
            problems: problems.into_iter().map(|p| p.to_string()).collect(),
            code: REFUSED,
        }
    }

    /// One problem with its own exit code, after `stdout`.
    pub fn with_code(code: u8, stdout: String, problem: impl Into<String>) -> Self {
        Failure { stdout, problems: vec![problem.into()], code }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_distinct() {
        let codes = [SUCCESS, REFUSED, USAGE, RESET_REFUSED, GROUPS_FAILED, TIMED_OUT];
        let unique: std::collections::BTreeSet<u8> = codes.iter().copied().collect();
        assert_eq!(unique.len(), codes.len());
    }
}
