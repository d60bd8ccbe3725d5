//! `flow`: the command-line tool of Ankka Flow.
//!
//! `main` only parses, dispatches and prints: each command returns an [`Output`] (its stdout text and
//! any notes for stderr) or a [`Failure`], which `main` hands to the one [`Reporter`] of the run
//! (stdout for results, stderr for notes and problems). The commands that follow a request over
//! time (`--wait`, `--watch`, `--dry-run`) are given the same reporter and print their progress
//! through it as they go: no command prints by itself.

mod cluster;
mod commands;
mod exit;
mod output;
mod reporter;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::exit::{Failure, Output};
use crate::reporter::Reporter;

/// Ankka Flow: streaming pipelines on Kubernetes.
///
/// Exit codes: 0 success; 1 refused or failed (every problem on stderr, one per line); 2 usage
/// error; 3, 4 and 5 how a reset that `flow reset --wait` waited for ended (refused, groups failed,
/// timed out). Installed as `kubectl-flow` on the PATH, it also runs as `kubectl flow`.
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
    Reset(Box<commands::reset::Args>),
    /// Rebuild a pipeline from the start in one request: stop, reset, start, catch up.
    ///
    /// The operator holds the target streamlets at 0 replicas itself (the resource is not edited),
    /// waits until their pods are gone and their consumer groups are empty, moves each group
    /// <pipeline>.<streamlet>.<inlet> to the earliest offsets, and runs the streamlets at the
    /// resource's replicas again. The streamlets may run when you ask. With --wait, follows the
    /// rebuild until every group it reset has caught up (lag 0).
    ///
    /// Or wait with: kubectl -n <ns> wait --for=condition=CaughtUp aflow/<pipeline>
    Rebuild(commands::rebuild::Args),
    /// Print the CLI version and the protocol version it speaks.
    Version(commands::VersionArgs),
    /// Print a shell completion script: bash, zsh or fish.
    ///
    /// Load it for the current shell with `source <(flow completion bash)` (or zsh), or
    /// `flow completion fish | source`; put the same line in your shell's start-up file to keep it.
    Completion {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), for `man`: `flow man > flow.1 && man ./flow.1`.
    Man,
}

/// The name the program was run as: `kubectl flow` when kubectl runs it as its plugin
/// `kubectl-flow`, else `flow`. Help and usage texts show it.
fn program_name() -> &'static str {
    let arg0 = std::env::args_os().next().unwrap_or_default();
    let file = std::path::Path::new(&arg0).file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    if file.starts_with("kubectl-flow") { "kubectl flow" } else { "flow" }
}

/// The command line definition, under the name the program runs as.
fn command(name: &'static str) -> clap::Command {
    Cli::command().bin_name(name)
}

/// `flow completion <shell>`. The script completes `flow` (kubectl completes its plugins' names
/// itself).
fn completion(shell: clap_complete::Shell) -> Output {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut command("flow"), "flow", &mut out);
    Output::from(String::from_utf8_lossy(&out).into_owned())
}

/// `flow man`.
fn man() -> Result<Output, Failure> {
    let mut out = Vec::new();
    clap_mangen::Man::new(command("flow"))
        .render(&mut out)
        .map_err(|e| Failure::refused(format!("cannot render the manual page: {e}")))?;
    Ok(Output::from(String::from_utf8_lossy(&out).into_owned()))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let name = program_name();
    let cli = match Cli::from_arg_matches(&command(name).get_matches()) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let out = Reporter::new();
    let result: Result<Output, Failure> = match cli.command {
        Command::Verify(args) => commands::verify::run(&args),
        Command::Generate(args) => commands::generate::run(args),
        Command::Reset(args) => commands::reset::run(*args, &out).await,
        Command::Rebuild(args) => commands::rebuild::run(args, &out).await,
        Command::Version(args) => commands::version(&args),
        Command::Completion { shell } => Ok(completion(shell)),
        Command::Man => man(),
    };
    ExitCode::from(out.finish(result))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn cli_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("flow").chain(args.iter().copied()))
    }

    /// Every command that talks to the cluster takes --kubeconfig, --context and -n.
    #[test]
    fn cluster_commands_take_kubeconfig_context_and_namespace() {
        for args in [
            &["reset", "cart", "--kubeconfig", "k", "--context", "c", "-n", "shop"][..],
            &["reset", "status", "u1", "--kubeconfig", "k", "--context", "c", "-n", "shop"],
        ] {
            parse(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        }
        parse(&["reset", "status", "u1", "-A"]).expect("-A where it lists");
        assert!(parse(&["reset", "status", "u1", "-A", "-n", "shop"]).is_err(), "-A and -n exclude each other");
    }

    #[test]
    fn o_is_the_output_format_everywhere() {
        for args in [
            &["verify", "b.conf", "-o", "json"][..],
            &["generate", "b.conf", "-o", "json"],
            &["generate", "b.conf", "-o", "yaml", "--output-file", "out.yaml"],
            &["reset", "cart", "-o", "yaml"],
            &["reset", "status", "u1", "-o", "json"],
            &["version", "-o", "json"],
        ] {
            parse(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        }
        // The old `-o <file>` of generate is refused with a pointer to --output-file, never taken
        // as a file name.
        let e = parse(&["generate", "b.conf", "-o", "cart.yaml"]).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::ValueValidation);
        assert!(e.to_string().contains("--output-file cart.yaml"), "{e}");
    }

    #[test]
    fn rebuild_takes_streamlets_and_a_timeout_only_with_wait() {
        assert!(matches!(
            parse(&["rebuild", "cart", "--streamlet", "router", "-n", "shop", "--wait", "--timeout", "5m"])
                .unwrap()
                .command,
            Command::Rebuild(_)
        ));
        assert!(parse(&["rebuild", "cart", "--timeout", "5m"]).is_err(), "--timeout needs --wait");
        assert!(parse(&["rebuild"]).is_err(), "the pipeline is required");
        assert!(parse(&["rebuild", "cart", "--dry-run"]).is_err(), "no dry run of a whole rebuild");
        assert!(parse(&["rebuild", "cart", "--to-datetime", "2026-11-29T16:00:00Z"]).is_err(), "nor a time");
    }

    #[test]
    fn a_rebuild_from_streamlets_takes_a_time_a_dry_run_or_a_plan() {
        for args in [
            &["rebuild", "chain", "--from", "middle", "--from", "other", "--wait", "--timeout", "5m"][..],
            &["rebuild", "chain", "--from", "middle", "--to-datetime", "2026-11-29T16:00:00Z"],
            &["rebuild", "chain", "--from", "middle", "--by-duration", "2h"],
            &[
                "rebuild",
                "chain",
                "--from",
                "middle",
                "--dry-run",
                "--plan-out",
                "p.json",
                "--timeout",
                "1m",
                "-o",
                "json",
            ],
            &["rebuild", "chain", "--plan", "p.json", "--wait"],
        ] {
            parse(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        }
        for (args, why) in [
            (&["rebuild", "chain", "--from", "middle", "--streamlet", "sink"][..], "--from or --streamlet"),
            (&["rebuild", "chain", "--from", "middle", "--dry-run", "--wait"], "a plan is waited for anyway"),
            (&["rebuild", "chain", "--plan", "p.json", "--from", "middle"], "the plan names what it is from"),
            (&["rebuild", "chain", "--plan-out", "p.json", "--from", "middle"], "--plan-out needs --dry-run"),
            (&["rebuild", "chain", "--from", "middle", "--to-datetime", "t", "--by-duration", "2h"], "one instant"),
        ] {
            assert!(parse(args).is_err(), "{why}: {args:?}");
        }
    }

    #[test]
    fn a_pipeline_named_status_can_be_reset() {
        let Command::Reset(args) = parse(&["reset", "-n", "shop", "--", "status"]).unwrap().command else {
            panic!("not reset")
        };
        assert_eq!(args.pipeline_name(), Some("status"));
        let Command::Reset(args) = parse(&["reset", "--pipeline", "status", "-n", "shop"]).unwrap().command else {
            panic!("not reset")
        };
        assert_eq!(args.pipeline_name(), Some("status"));
    }

    #[test]
    fn wait_takes_a_timeout() {
        parse(&["reset", "cart", "--wait", "--timeout", "90s"]).expect("--timeout with --wait");
        parse(&["reset", "cart", "--wait", "--timeout", "1m30s"]).expect("a compound duration");
        assert!(parse(&["reset", "cart", "--timeout", "90s"]).is_err(), "--timeout needs --wait");
        assert!(parse(&["reset", "cart", "--wait", "--timeout", "soon"]).is_err());
    }

    #[test]
    fn completion_and_man_page_name_the_commands() {
        for shell in [clap_complete::Shell::Bash, clap_complete::Shell::Zsh, clap_complete::Shell::Fish] {
            let out = completion(shell).stdout;
            assert!(out.contains("generate") && out.contains("kubeconfig"), "{shell}: {out}");
        }
        let page = man().unwrap().stdout;
        assert!(page.starts_with(".ie") || page.contains(".TH flow"), "{page}");
        assert!(page.contains("reset"), "{page}");
    }
}
