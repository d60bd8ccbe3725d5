//! One module per command; each returns what to print (an [`crate::exit::Output`], or the stdout
//! text alone), or a [`crate::exit::Failure`].

use serde::Serialize;

use crate::exit::{Failure, Output};
use crate::output::{self, Format};

pub mod generate;
mod inputs;
pub mod rebuild;
pub mod reset;
pub mod verify;

/// The protocol version this CLI speaks, `MAJOR.MINOR`.
pub const PROTOCOL_VERSION: &str = "1.0";

/// The git commit this binary was built from (`unknown` outside a git checkout); set by build.rs.
pub const GIT_COMMIT: &str = env!("FLOW_GIT_COMMIT");

/// Arguments of `flow version`.
#[derive(clap::Args, Debug)]
pub struct VersionArgs {
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t)]
    output: Format,
}

/// What `flow version -o json|yaml` prints.
#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
struct Version {
    version: &'static str,
    protocol: &'static str,
    commit: &'static str,
}

/// `flow version`: `flow <version>, protocol <major>.<minor>`, then the commit it was built from.
///
/// # Errors
/// Never in practice (rendering our own struct).
pub fn version(args: &VersionArgs) -> Result<Output, Failure> {
    let v = Version { version: env!("CARGO_PKG_VERSION"), protocol: PROTOCOL_VERSION, commit: GIT_COMMIT };
    let text = match args.output {
        Format::Text => format!("flow {}, protocol {}, commit {}\n", v.version, v.protocol, v.commit),
        other => output::render(&v, other)?,
    };
    Ok(Output::from(text))
}
