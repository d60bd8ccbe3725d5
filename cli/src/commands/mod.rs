//! One module per command; each returns what to print (an [`crate::exit::Output`], or the stdout
//! text alone), or a [`crate::exit::Failure`].

pub mod generate;
mod inputs;
pub mod reset;
pub mod verify;

/// The protocol version this CLI speaks, `MAJOR.MINOR`.
pub const PROTOCOL_VERSION: &str = "1.0";

/// `flow version`: `flow <version>, protocol <major>.<minor>`.
pub fn version() -> String {
    format!("flow {}, protocol {PROTOCOL_VERSION}\n", env!("CARGO_PKG_VERSION"))
}
