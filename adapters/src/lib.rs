//! Thin I/O adapters of Ankka Flow. They observe Kubernetes and Kafka, carry out the effects that
//! `flow-core` decides, and report results back as data. No decision is taken here.

pub mod kafka;
pub mod kube;
pub mod ledger;
pub mod owned;
pub mod topics;
