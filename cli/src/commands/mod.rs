//! One module per command; each returns what to print on stdout, or a [`crate::exit::Failure`].

pub mod reset;

/// The protocol version this CLI speaks, `MAJOR.MINOR`.
pub const PROTOCOL_VERSION: &str = "1.0";

/// `flow version`: `flow <version>, protocol <major>.<minor>`.
pub fn version() -> String {
    format!(
        "flow {}, protocol {PROTOCOL_VERSION}\n",
        env!("CARGO_PKG_VERSION")
    )
}
