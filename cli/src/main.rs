//! `flow`: the command-line tool of Ankka Flow.
//!
//! `main` only parses, dispatches and prints: each command returns its stdout text or a [`Failure`],
//! and the single print site below writes it (stdout for results, stderr for problems).

mod commands;
mod exit;

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::exit::Failure;

/// Ankka Flow: streaming pipelines on Kubernetes.
///
/// Exit codes: 0 success; 1 refused or failed (every problem on stderr, one per line); 2 usage error.
#[derive(Parser, Debug)]
#[command(name = "flow", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Request that a pipeline's consumer groups go back to the earliest offsets.
    ///
    /// Every target streamlet must be stopped first: replicas 0 in the resource (set them with
    /// `flow generate --conf` and apply) and no pods left. The request is written as an annotation
    /// on the AnkkaFlow; the operator then moves each target inlet's consumer group
    /// <pipeline>.<streamlet>.<inlet> to the log start offset of every partition of the topic it
    /// reads, records one event per group, and writes the request id to the done annotation.
    /// Nothing changes when a guard refuses.
    ///
    /// Check it with: kubectl -n <ns> get events --field-selector involvedObject.kind=AnkkaFlow,reason=ResetOffsets
    Reset(commands::reset::Args),
    /// Print the CLI version and the protocol version it speaks.
    Version,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Reset(args) => commands::reset::run(args).await,
        Command::Version => Ok(commands::version()),
    };
    match result {
        Ok(out) => {
            // A closed pipe (`flow ... | head`) is not an error.
            let _ = std::io::stdout().write_all(out.as_bytes());
            ExitCode::from(exit::SUCCESS)
        }
        Err(Failure { problems, code }) => {
            let mut err = std::io::stderr().lock();
            for p in problems {
                let _ = writeln!(err, "{p}");
            }
            ExitCode::from(code)
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
