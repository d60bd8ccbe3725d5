//! Thin I/O adapters of Ankka Flow. They observe Kubernetes and Kafka, carry out the effects that
//! `flow-core` decides, and report results back as data. No decision is taken here.
//!
//! Kubernetes (`kube`, `owned`) is always there; Kafka (`kafka`, `topics`) and the reset ledger
//! (`ledger`) come with the features of those names, so that the CLI, which talks to Kubernetes
//! alone, links neither librdkafka nor sled.

#[cfg(feature = "kafka")]
pub mod kafka;
pub mod kube;
#[cfg(feature = "ledger")]
pub mod ledger;
pub mod owned;
#[cfg(feature = "kafka")]
pub mod topics;
