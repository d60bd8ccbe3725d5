//! Helpers for end-to-end tests on the real test bed (a Kafka broker and a Kubernetes control plane
//! started by `testbed/tb up`; see docs/testbed.md).
//!
//! Tests read the test bed's coordinates from the environment that `eval "$(testbed/tb env)"` sets
//! (`make test` does it). Nothing here is a mock: every call goes to the real broker, the real API
//! server, or the real `flow` and `flow-operator` binaries built from this workspace.
//!
//! - `bed`: the coordinates, [`serial`] (an end-to-end test alone) and [`side_by_side`] (isolated
//!   tests together), [`bin`], [`wait_until`];
//! - `kube`: `kubectl` and what tests read from the API server;
//! - `operator`: a running [`Operator`] and its `/metrics`;
//! - [`kafka`], [`groups`]: topics, records and consumer groups on the broker;
//! - [`standin`]: the stand-in streamlet consumer, and a [`Container`] playing a pod's container;
//! - [`cart`]: the example pipeline and a ready scenario around it;
//! - `pipeline`: pipelines of a test's own, from the real `flow generate`;
//! - `rights`: the operator's shipped rights, and a kubeconfig that logs in with them.

mod bed;
pub mod cart;
pub mod groups;
pub mod kafka;
mod kube;
pub mod offsets_log;
mod operator;
mod pipeline;
mod rights;
pub mod standin;

pub use bed::{
    Bed, OneAtATime, Serial, SideBySide, bed, bin, fresh_dir, kafka_autocreate, kafka_pair, serial, show, side_by_side,
    side_by_side_one_at_a_time, wait_until,
};
pub use cart::{Cart, cart_scenario, cart_yaml, cart_yaml_with, conf_file, install_cluster_secret};
pub use kube::*;
pub use operator::{Operator, SIDECAR_IMAGE, group_series, http_get, lag_in_metrics, metrics_address};
pub use pipeline::{
    Streamlet, apply_own_pipeline, apply_pipeline, flow, flow_reset, inlets_pipeline_yaml, inlets_pipeline_yaml_at,
    own_pipeline_yaml, pipeline_yaml, wait_done,
};
pub use rights::{install_operator_rights, shipped_rights_kubeconfig};
pub use standin::Container;
