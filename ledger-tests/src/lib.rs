//! A deterministic simulation of the world `flow_core::reset::ResetMachine` runs in, for the
//! model-based tests in `tests/`.
//!
//! - [`world`]: a simulated clock; Kafka per group and topic (log start offsets, high watermarks,
//!   committed offsets with their commit metadata, members, and a queue of faults); Kubernetes (the
//!   `cart` resource's replicas and pods, the request and done annotations, `status.reset`, and the
//!   events by name, refusing duplicates as the API server does); and a ledger that can be lost.
//! - [`driver`]: the operator's reconcile: the operator's own intake and effect ordering from
//!   `flow_core::reset`, with the I/O simulated: calls and writes complete in an order the history
//!   chooses, writes fail, and the operator crashes after any piece of work.
//! - [`invariants`]: the reset's guarantees (docs/reset.md), read off the log of everything that happened.
//! - [`coverage`]: the states a history reached, for the test that the generator reaches them.
//!
//! Nothing here reads a clock or a random source: a history of transitions replays exactly.

pub mod coverage;
pub mod driver;
pub mod invariants;
pub mod world;

pub use driver::{Reconciled, Schedule};
pub use invariants::KnownIssue;
pub use world::{Ask, During, Fault, Init, KubeFault, Streamlet, TopicInit, World};
