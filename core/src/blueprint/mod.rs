//! Blueprints: parse, verify, and generate the `AnkkaFlow` resource.
pub mod tree;
