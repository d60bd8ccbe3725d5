//! Pure core of Ankka Flow: the domain model, naming rules, and the reset machine.
//!
//! This crate does no I/O, runs no async code and reads no clock: time and ids come in as inputs,
//! and decisions go out as data (see [`reset`] for the drive contract of the reset machine). The CLI
//! and the operator share every rule here, so the two never disagree about names, targets or guards.
//! CI checks with `cargo tree` that no I/O or async crate creeps in.

pub mod blueprint;
pub mod closure;
pub mod connection;
pub mod events;
pub mod names;
pub mod rebuild;
pub mod redact;
pub mod render;
pub mod request;
pub mod reset;
pub mod resource;
pub mod targets;
pub mod tenancy;
