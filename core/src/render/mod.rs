//! What the operator renders for a pipeline, and every decision of its reconcile, as pure functions
//! of what it observed.
//!
//! ```text
//! observe (I/O) ─> plan::decide ─┬─> Decision::Delete(Deletion)      delete managed topics, drop the finalizer
//!                                ├─> Decision::Refuse(Refusal)       events + status Failed, nothing applied
//!                                └─> Decision::Apply(ValidPipeline)
//!                                       │  describe its topics in Kafka (I/O)
//!                                       └─> ValidPipeline::build ─> Plan ─> apply (I/O) ─> status::finish
//! ```
//!
//! - [`plan`]: the entry point: inputs, the three decisions, the ordered [`plan::Action`]s.
//! - [`topics`]: what to do about each topic (resolved by [`crate::connection`]) given Kafka's view.
//! - [`owners`]: which topics the operator created for a resource, so that it deletes only those.
//! - [`conf`], [`secret`]: the per-streamlet Secret (`descriptor.json`, `streamlet.conf`) and the
//!   config hash.
//! - [`workload`]: the Deployment, the ServiceAccount, Role and RoleBinding.
//! - [`crate::names::objects`]: object names, labels, and the check that each fits Kubernetes'
//!   limits (the CLI runs it too, which is why it lives below both).
//! - [`refusal`]: why a resource is refused.
//! - [`status`]: phases, details, conditions.
//!
//! docs/rendering.md describes all of it for users.

pub mod applied;
pub mod conf;
pub mod owners;
pub mod plan;
pub mod refusal;
pub mod secret;
pub mod status;
pub mod topics;
pub mod workload;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube_core::Resource;

pub use crate::names::objects::streamlet_labels;

use crate::resource::AnkkaFlow;

/// The resource that owns what is rendered: every object lives in its namespace and carries a
/// controller owner reference to it, so that deleting the resource deletes them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    /// The resource's name.
    pub name: String,
    /// The resource's namespace, where everything is rendered.
    pub namespace: String,
    /// The resource's uid.
    pub uid: String,
}

impl Owner {
    /// The owner of `flow`'s objects; `None` when the resource lacks a namespace or a uid (one read
    /// from the API server always has both).
    pub fn of(flow: &AnkkaFlow) -> Option<Owner> {
        Some(Owner {
            name: flow.metadata.name.clone()?,
            namespace: flow.metadata.namespace.clone()?,
            uid: flow.metadata.uid.clone()?,
        })
    }

    /// The controller owner reference: `controller: true`, `blockOwnerDeletion: true`.
    pub fn reference(&self) -> OwnerReference {
        OwnerReference {
            api_version: AnkkaFlow::api_version(&()).into_owned(),
            kind: AnkkaFlow::kind(&()).into_owned(),
            name: self.name.clone(),
            uid: self.uid.clone(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }
}
