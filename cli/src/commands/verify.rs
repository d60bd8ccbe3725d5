//! `flow verify <blueprint.conf> [--descriptors <dir>] [--conf <file>]...` (reference.md §5.1).

use flow_core::blueprint;

use super::inputs::BlueprintArgs;
use crate::exit::{Failure, Output};

/// Arguments of `flow verify`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    blueprint: BlueprintArgs,
}

/// Runs the command: `verified: <n> streamlets, <m> topics` on stdout, notes on stderr.
///
/// # Errors
/// Every problem of the descriptors, the blueprint and the `--conf` files, in that order (exit 1).
pub fn run(args: &Args) -> Result<Output, Failure> {
    let v = blueprint::verify(&args.blueprint.read()).map_err(Failure::all)?;
    Ok(Output { stdout: format!("{}\n", v.summary()), stderr: v.notes.iter().map(ToString::to_string).collect() })
}
