//! `flow`: the command-line tool of Ankka Flow.
//!
//! `main` only parses, dispatches and prints: each command returns an [`Output`] (its stdout text and
//! any notes for stderr) or a [`Failure`], and the single print site below writes it (stdout for
//! results, stderr for notes and problems).

mod commands;
mod exit;

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::exit::{Failure, Output};

/// Ankka Flow: streaming pipelines on Kubernetes.
///
/// Exit codes: 0 success; 1 refused or failed (every problem on stderr, one per line); 2 usage error.
#[derive(Parser, Debug)]
// `version` is not propagated: `flow generate --version <v>` is an option of its own.
#[command(name = "flow", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Check a blueprint against its streamlet descriptors and deploy-time configuration.
    ///
    /// Reads the blueprint (HOCON), every *.json descriptor directly in --descriptors, and the
    /// --conf files, and checks them together without touching any network: every streamlet names a
    /// known descriptor or built-in, every port path points at a real inlet or outlet of the right
    /// kind, every inlet is bound to exactly one topic, the contracts on each topic agree, topic and
    /// cluster names are valid, unmanaged topics are only read, and every parameter gets a value of
    /// its type. Every problem is reported at once, one per line on stderr (exit 1); notes such as an
    /// unconnected outlet go to stderr without failing. On success it prints
    /// `verified: <n> streamlets, <m> topics`.
    Verify(commands::verify::Args),
    /// Write the AnkkaFlow resource of a blueprint as YAML, for `kubectl apply -f -`.
    ///
    /// Verifies exactly as `flow verify` does, then merges the --conf files in (later wins), adds
    /// each streamlet's image (--images file, --image overrides), and writes one AnkkaFlow with
    /// every streamlet's replicas, typed configuration, port bindings and descriptor, and every
    /// topic's Kafka name, connection and batch limits. Nothing is written when anything is
    /// refused. Example, from the pipeline's directory:
    ///
    ///   flow generate blueprint.conf --descriptors flow --conf prod.conf --image router=registry.example.com/cart-router:1.2 -n shop | kubectl apply -f -
    Generate(commands::generate::Args),
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
    let result: Result<Output, Failure> = match cli.command {
        Command::Verify(args) => commands::verify::run(&args),
        Command::Generate(args) => commands::generate::run(args),
        Command::Reset(args) => commands::reset::run(args).await.map(Output::from),
        Command::Version => Ok(Output::from(commands::version())),
    };
    match result {
        Ok(Output { stdout, stderr }) => {
            // A closed pipe (`flow ... | head`) is not an error.
            let mut err = std::io::stderr().lock();
            for line in stderr {
                let _ = writeln!(err, "{line}");
            }
            let _ = std::io::stdout().write_all(stdout.as_bytes());
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
