//! `flow verify <blueprint.conf> [--descriptors <dir>] [--conf <file>]... [-o text|json|yaml]`.

use flow_core::blueprint;
use serde::Serialize;

use super::inputs::BlueprintArgs;
use crate::exit::{Failure, Output};
use crate::output::{self, Format};

/// Arguments of `flow verify`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    blueprint: BlueprintArgs,
    /// Output format: text (the `verified:` line), json or yaml.
    #[arg(short = 'o', long = "output", value_enum, default_value_t)]
    output: Format,
}

/// What `flow verify -o json|yaml` prints.
#[derive(Serialize, Debug)]
struct Summary {
    /// Streamlets in the blueprint.
    streamlets: usize,
    /// Topics with at least one port.
    topics: usize,
}

/// Runs the command: `verified: <n> streamlets, <m> topics` on stdout, notes on stderr.
///
/// # Errors
/// Every problem of the descriptors, the blueprint and the `--conf` files, in that order (exit 1).
pub fn run(args: &Args) -> Result<Output, Failure> {
    let v = blueprint::verify(&args.blueprint.read()).map_err(Failure::all)?;
    let stdout = match args.output {
        Format::Text => format!("{}\n", v.summary()),
        other => output::render(
            &Summary { streamlets: v.blueprint.streamlets.len(), topics: v.blueprint.topics.len() },
            other,
        )?,
    };
    Ok(Output { stdout, stderr: v.notes.iter().map(ToString::to_string).collect() })
}
