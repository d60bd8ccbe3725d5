//! The reconcile's decision: from what the operator observed to an ordered plan.
//!
//! # Drive contract
//! 1. **Fetch** (I/O): the resource (with its uid, generation, finalizers, deletion timestamp), the
//!    cluster Secrets, and the Neo4j Secrets its built-ins name ([`stage_secrets_to_read`]: keys and
//!    `resourceVersion` only).
//! 2. **Validate** (pure): [`decide`] gives one of three decisions:
//!    - [`Decision::Delete`]: the resource is being deleted; carry out the [`Deletion`] and nothing else;
//!    - [`Decision::Refuse`]: record its events, write its status, apply nothing;
//!    - [`Decision::Apply`]: a [`ValidPipeline`], the only thing a [`Plan`] can be built from.
//! 3. **Fetch** (I/O): describe each of [`ValidPipeline::topics`] in Kafka, list the Deployments
//!    and Secrets labelled with the pipeline and owned by the resource, and read the record of the
//!    topics the operator created for the resource ([`super::owners`]) when it has managed topics.
//! 4. **Build** (pure, cannot fail): [`ValidPipeline::build`] gives the [`Plan`].
//! 5. **Apply** (I/O): carry out [`Plan::actions`] in order, each object by server-side apply with the
//!    operator's field manager; the objects are left out while they are as last applied
//!    ([`Plan::objects`], [`super::applied`]). An event that cannot be recorded is logged and
//!    skipped. Any other action that fails stops the plan: the actions after it are not carried
//!    out, and the failure is reported with [`apply_failed`] (a Warning event) and
//!    [`ApplyOutcome::Failed`] (the `Applied` condition). Actions of different streamlets may run
//!    concurrently; those of one streamlet run in their order.
//! 6. **Status** (I/O): the reset driver fills the reset part of [`Plan::status`],
//!    [`ObjectsStep::record`] its `applied` record, then [`status::finish`] adds the conditions and
//!    times, and it is written when [`status::needs_write`] says so.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::jiff::Timestamp;

use super::Owner;
use super::applied::{self, ObjectsStep};
use super::conf::{InletConf, NEO4J_CREDENTIALS_DIR, OutletConf, StageConf, StreamletConf};
use super::owners::{self, Ownership, Record};
use super::refusal::{Problem, REASON_REFUSED, REASON_SIDECAR_IMAGE_MISSING};
use super::secret::{config_hash, streamlet_secret};
use super::status::{self, ApplyOutcome, ObservedDeployment, Phase};
use super::topics::{self, KafkaTopic, TopicCreation};
use super::workload::{self, DeploymentParts};
use crate::blueprint::descriptor::{self, Descriptor, PortKind};
use crate::connection::{self, Clusters, ResolvedTopic};
use crate::events::{Event, EventType};
use crate::names::GroupId;
use crate::names::objects::{self as names, NamedStreamlet, STAGE_SECRET_PARAM, streamlet_object_name};
use crate::resource::{AnkkaFlow, AnkkaFlowStatus, AppliedObjects, ManagedTopicsPolicy, StreamletSpec};

mod build;
mod validate;

pub use validate::{decide, stage_secrets_to_read};

/// The finalizer that makes the operator delete the managed topics with the resource; present only
/// while `onDelete.managedTopics` is `Delete`.
pub const FINALIZER: &str = "flow.ankka.thinkmorestupidless.com/managed-topics";

/// The keys a built-in's Neo4j Secret must have (`database` is optional).
pub const STAGE_SECRET_KEYS: [&str; 3] = ["uri", "username", "password"];

/// What was observed of a built-in's Neo4j Secret, in the pipeline's namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StageSecret {
    /// No Secret of that name.
    Missing,
    /// It could not be read; the reason.
    Unreadable(String),
    /// It exists.
    Found {
        /// Its data keys (never its values).
        keys: BTreeSet<String>,
        /// Its `resourceVersion`.
        resource_version: String,
    },
}

/// What the operator observed before deciding.
#[derive(Clone, Copy, Debug)]
pub struct Inputs<'a> {
    /// The resource, as read from the API server.
    pub flow: &'a AnkkaFlow,
    /// `FLOW_SIDECAR_IMAGE`; `None` (or blank) when unset.
    pub sidecar_image: Option<&'a str>,
    /// The Kafka cluster Secrets, by cluster name.
    pub clusters: &'a Clusters,
    /// The OAuth token endpoints an administrator allows topics with their own brokers to use
    /// (`FLOW_OAUTH_TOKEN_ENDPOINTS`).
    pub token_endpoints: &'a crate::connection::TokenEndpoints,
    /// The Neo4j Secrets of [`stage_secrets_to_read`], by name.
    pub stage_secrets: &'a BTreeMap<String, StageSecret>,
}

/// A resource that cannot be decided about because it lacks a field the API server always sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the resource has no {0}")]
pub struct Incomplete(pub &'static str);

/// The reconcile's decision.
#[derive(Clone, Debug)]
pub enum Decision {
    /// The resource is being deleted.
    Delete(Deletion),
    /// The resource is refused.
    Refuse(Box<Refusal>),
    /// The resource is valid: describe its topics, then build the plan.
    Apply(Box<ValidPipeline>),
}

/// What to do while the resource is being deleted: with `onDelete.managedTopics: Delete` and the
/// finalizer present, delete every managed topic that resolves and that the operator created for
/// this resource ([`Deletion::topics`]; a topic already gone is fine), forget the record of what it
/// created, then remove the finalizer. Nothing else: the owner references let Kubernetes delete the
/// rest.
///
/// Drive contract: read the record ([`owners`]); describe [`Deletion::to_describe`] in Kafka; carry
/// out [`Deletion::topics`]; once every topic is deleted or kept, delete the record, then remove
/// the finalizer.
#[derive(Clone, Debug, PartialEq)]
pub struct Deletion {
    /// Managed topics that resolve, by topic id: deleted if the operator created them.
    pub candidates: Vec<ResolvedTopic>,
    /// Managed topics left alone because they do not resolve, with why (for the log).
    pub unresolved: Vec<String>,
    /// Whether the finalizer is present and must be removed once the topics are deleted.
    pub remove_finalizer: bool,
}

/// What happens to the managed topics of a resource being deleted.
#[derive(Clone, Debug, PartialEq)]
pub struct TopicDeletions<'a> {
    /// Topics to delete (the operator created them for this resource: their live topic id is
    /// recorded), each with the `TopicDeleted` event to record once it is deleted.
    pub delete: Vec<(&'a ResolvedTopic, Event)>,
    /// A `TopicKept` event for each managed topic left in Kafka, and why.
    pub kept: Vec<Event>,
    /// Topics Kafka could not be asked about, with why: the deletion waits for them (the finalizer
    /// stays), since a topic the operator created must not be left behind.
    pub unreachable: Vec<String>,
}

impl Deletion {
    /// The candidates to describe in Kafka: those the record names. The others are not the
    /// operator's to delete, and their deletion needs no Kafka at all.
    pub fn to_describe(&self, record: &Record) -> Vec<&ResolvedTopic> {
        self.candidates.iter().filter(|t| record.entry(&t.name).is_some()).collect()
    }

    /// What to delete, given the `record` of what the operator created for the resource and what
    /// Kafka said of each topic of [`Deletion::to_describe`], by topic id (one left out counts as
    /// unreachable).
    pub fn topics(&self, record: &Record, kafka: &BTreeMap<String, KafkaTopic>) -> TopicDeletions<'_> {
        let mut out = TopicDeletions { delete: Vec::new(), kept: Vec::new(), unreachable: Vec::new() };
        let kept = |name: &str, why: &str| {
            keyed(EventType::Normal, "TopicKept", format!("topic '{name}' is left in Kafka: {why}"))
        };
        for t in &self.candidates {
            let name = &t.name;
            if record.entry(name).is_none() {
                out.kept.push(kept(name, "the operator did not create it for this resource"));
                continue;
            }
            match kafka.get(&t.id) {
                Some(KafkaTopic::Missing) => {}
                Some(KafkaTopic::Exists(live)) => match owners::ownership(record, name, live.topic_id.as_deref()) {
                    Ownership::Created => out.delete.push((
                        t,
                        keyed(
                            EventType::Normal,
                            "TopicDeleted",
                            format!("deleted topic '{name}', which the operator created for this resource"),
                        ),
                    )),
                    Ownership::Adopted(why) => out.kept.push(kept(name, &why.why())),
                },
                Some(KafkaTopic::Unreachable(reason)) => {
                    out.unreachable.push(format!("cannot describe topic '{name}': {reason}"))
                }
                None => out.unreachable.push(format!("topic '{name}' was not described")),
            }
        }
        out
    }
}

/// A refused resource.
#[derive(Clone, Debug, PartialEq)]
pub struct Refusal {
    /// Every problem, in the order found.
    pub problems: Vec<Problem>,
    /// One Warning event per problem.
    pub events: Vec<Event>,
    /// The event reason: `SidecarImageMissing` while the operator has no sidecar image, else
    /// `Refused`.
    pub reason: &'static str,
    /// Phase `Failed`, the problems in the detail, no streamlets or topics (conditions are added by
    /// [`status::finish`] with [`Refusal::outcome`]).
    pub status: AnkkaFlowStatus,
}

impl Refusal {
    /// The outcome for the `Applied` condition.
    pub fn outcome(&self) -> ApplyOutcome {
        ApplyOutcome::Refused { reason: self.reason.to_string() }
    }
}

/// What is rendered for one streamlet, before anything was observed of its Deployment.
#[derive(Clone, Debug, PartialEq)]
pub struct RenderedStreamlet {
    /// Streamlet name.
    pub name: String,
    /// `descriptor.json`.
    pub descriptor_json: String,
    /// `streamlet.conf`.
    pub streamlet_conf: String,
    /// The config hash.
    pub config_hash: String,
    /// The image of its `process` container; `None` for a built-in.
    pub process_image: Option<String>,
    /// Its Secret.
    pub secret: Secret,
    /// Its Deployment.
    pub deployment: Deployment,
}

/// A resource that passed every check, with everything rendered from it. Only [`decide`] makes one.
#[derive(Clone, Debug, PartialEq)]
pub struct ValidPipeline {
    pipeline: String,
    generation: Option<i64>,
    finalizer: FinalizerChange,
    topics: Vec<ResolvedTopic>,
    service_account: ServiceAccount,
    role: Role,
    role_binding: RoleBinding,
    streamlets: Vec<(StreamletSpec, RenderedStreamlet)>,
}

/// What happens to the finalizer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinalizerChange {
    /// Nothing.
    Keep,
    /// Add it (`onDelete.managedTopics: Delete` and it is missing).
    Add,
    /// Remove it (`Keep`, and it is present).
    Remove,
}

/// What was observed after validation.
#[derive(Clone, Copy, Debug)]
pub struct Observed<'a> {
    /// What Kafka said of each topic, by topic id. A topic left out counts as unreachable.
    pub topics: &'a BTreeMap<String, KafkaTopic>,
    /// The Deployments labelled with the pipeline and owned by the resource, by streamlet label.
    pub deployments: &'a BTreeMap<String, ObservedDeployment>,
    /// The streamlet labels of the Secrets labelled with the pipeline and owned by the resource.
    pub secrets: &'a BTreeSet<String>,
    /// What the resource's status records of the last apply of its objects.
    pub applied: Option<&'a AppliedObjects>,
    /// The record of the topics the operator created for the resource ([`owners`]); empty when
    /// there is none.
    pub record: &'a Record,
    /// The time of the reconcile.
    pub now: Timestamp,
    /// How long objects applied once are left alone at most (`FLOW_OPERATOR_RESYNC_SECONDS`).
    pub reapply_after: Duration,
}

/// One streamlet of the plan.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamletStep {
    /// What is rendered for it.
    pub rendered: RenderedStreamlet,
    /// `StreamletRolled`, when its observed Deployment carries another config hash or image.
    pub rolled: Option<Event>,
}

impl StreamletStep {
    /// Its steps, in order: its Secret, its Deployment, and `StreamletRolled`. The steps of different
    /// streamlets may run concurrently.
    pub fn actions(&self) -> Vec<Action<'_>> {
        let mut a =
            vec![Action::ApplySecret(&self.rendered.secret), Action::ApplyDeployment(&self.rendered.deployment)];
        a.extend(self.rolled.iter().map(Action::Record));
        a
    }
}

/// A streamlet no longer in the resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Removal {
    /// Streamlet name.
    pub streamlet: String,
    /// Its Deployment, if observed.
    pub deployment: Option<String>,
    /// Its Secret, if observed.
    pub secret: Option<String>,
    /// `StreamletRemoved`.
    pub event: Event,
}

/// Everything one reconcile applies, in order.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The finalizer.
    pub finalizer: FinalizerChange,
    /// The record of the topics the operator created for the resource, to write before any topic
    /// is created: with an intent for each creation, without intents reported unproven. `None`
    /// when it is the record observed.
    pub record: Option<Record>,
    /// Per topic (by id): its creation if any, then its events.
    pub topics: Vec<(Option<TopicCreation>, Vec<Event>)>,
    /// Whether the ServiceAccount, Role, RoleBinding and the streamlets' Secrets and Deployments are
    /// applied, or left as they are ([`super::applied`]).
    pub objects: ObjectsStep,
    /// `flow-<pipeline>`.
    pub service_account: ServiceAccount,
    /// `flow-<pipeline>`.
    pub role: Role,
    /// `flow-<pipeline>`.
    pub role_binding: RoleBinding,
    /// Per streamlet (by name): Secret, then Deployment, then `StreamletRolled`.
    pub streamlets: Vec<StreamletStep>,
    /// Streamlets no longer in the resource (by name).
    pub removals: Vec<Removal>,
    /// The status, without conditions, times or reset (see [`status::finish`]).
    pub status: AnkkaFlowStatus,
}

/// One step of a plan.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Action<'a> {
    /// Add the finalizer.
    AddFinalizer,
    /// Remove the finalizer.
    RemoveFinalizer,
    /// Write the record of the topics the operator created for the resource ([`owners`]).
    WriteRecord(&'a Record),
    /// Create a topic; once Kafka created it, record its topic id in the record at once. A topic
    /// that already exists was not created: its intent is dropped.
    CreateTopic(&'a TopicCreation),
    /// Record an event; a failure is logged, never stops the plan.
    Record(&'a Event),
    /// Apply the ServiceAccount.
    ApplyServiceAccount(&'a ServiceAccount),
    /// Apply the Role.
    ApplyRole(&'a Role),
    /// Apply the RoleBinding.
    ApplyRoleBinding(&'a RoleBinding),
    /// Apply a streamlet's Secret.
    ApplySecret(&'a Secret),
    /// Apply a streamlet's Deployment.
    ApplyDeployment(&'a Deployment),
    /// Delete a Deployment by name (one already gone is fine).
    DeleteDeployment(&'a str),
    /// Delete a Secret by name (one already gone is fine).
    DeleteSecret(&'a str),
}

impl Action<'_> {
    /// What the action is about, for messages: `Deployment 'flow-cart-router'`, `topic 'cart.valid-carts'`.
    pub fn subject(&self) -> String {
        let name = |m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| m.name.clone().unwrap_or_default();
        match self {
            Action::AddFinalizer | Action::RemoveFinalizer => format!("finalizer '{FINALIZER}'"),
            Action::WriteRecord(_) => "the record of the topics the operator created".to_string(),
            Action::CreateTopic(t) => format!("topic '{}'", t.name),
            Action::Record(e) => format!("event {}", e.reason),
            Action::ApplyServiceAccount(o) => format!("ServiceAccount '{}'", name(&o.metadata)),
            Action::ApplyRole(o) => format!("Role '{}'", name(&o.metadata)),
            Action::ApplyRoleBinding(o) => format!("RoleBinding '{}'", name(&o.metadata)),
            Action::ApplySecret(o) => format!("Secret '{}'", name(&o.metadata)),
            Action::ApplyDeployment(o) => format!("Deployment '{}'", name(&o.metadata)),
            Action::DeleteDeployment(n) => format!("Deployment '{n}'"),
            Action::DeleteSecret(n) => format!("Secret '{n}'"),
        }
    }
}

/// Event reason of a reconcile that could not apply a step.
pub const REASON_APPLY_FAILED: &str = "ApplyFailed";

/// The Warning event and the `Applied` outcome of a plan whose `action` failed with `message` (the
/// API server's or Kafka's words; they never hold the content of a Secret).
pub fn apply_failed(action: &Action<'_>, message: &str) -> (Event, ApplyOutcome) {
    let verb = match action {
        Action::CreateTopic(_) => "create",
        Action::DeleteDeployment(_) | Action::DeleteSecret(_) => "delete",
        Action::AddFinalizer => "add",
        Action::RemoveFinalizer => "remove",
        Action::WriteRecord(_) => "write",
        _ => "apply",
    };
    let note = format!("could not {verb} {}: {message}", action.subject());
    (keyed(EventType::Warning, REASON_APPLY_FAILED, note.clone()), ApplyOutcome::Failed { message: note })
}

impl Plan {
    /// The steps in the order they must be carried out: finalizer, the record of the topics created,
    /// topics (each creation followed by its `TopicCreated`, then the topic's warnings), the
    /// ServiceAccount, Role and RoleBinding, per
    /// streamlet its Secret, Deployment and `StreamletRolled`, and per removed streamlet its
    /// Deployment, Secret and `StreamletRemoved`.
    pub fn actions(&self) -> Vec<Action<'_>> {
        let mut a = self.setup_actions();
        a.extend(self.pipeline_object_stages().into_iter().flatten());
        a.extend(self.streamlet_steps().iter().flat_map(StreamletStep::actions));
        a.extend(self.removal_actions());
        a
    }

    /// The first steps, in order: the finalizer, the record of the topics created (its intents
    /// written before any creation), the topics (each creation followed by its `TopicCreated`, then
    /// the topic's warnings).
    pub fn setup_actions(&self) -> Vec<Action<'_>> {
        let mut a = Vec::new();
        match self.finalizer {
            FinalizerChange::Add => a.push(Action::AddFinalizer),
            FinalizerChange::Remove => a.push(Action::RemoveFinalizer),
            FinalizerChange::Keep => {}
        }
        if let Some(r) = &self.record {
            a.push(Action::WriteRecord(r));
        }
        for (create, events) in &self.topics {
            if let Some(c) = create {
                a.push(Action::CreateTopic(c));
                a.push(Action::Record(&c.event));
            }
            a.extend(events.iter().map(Action::Record));
        }
        a
    }

    /// The steps after the setup's and before any streamlet's, in stages whose steps may be
    /// carried out at once: the ServiceAccount and the Role, then the RoleBinding. The RoleBinding
    /// waits for its Role: an operator that may bind a Role only because it holds the Role's rights
    /// (no `bind` verb) can create the binding only once the API server can read those rights. The
    /// streamlets' Deployments need the ServiceAccount, so they wait for every stage. None when the
    /// objects are left as they are.
    pub fn pipeline_object_stages(&self) -> Vec<Vec<Action<'_>>> {
        if !self.objects.applies() {
            return Vec::new();
        }
        vec![
            vec![Action::ApplyServiceAccount(&self.service_account), Action::ApplyRole(&self.role)],
            vec![Action::ApplyRoleBinding(&self.role_binding)],
        ]
    }

    /// The streamlets whose steps are carried out: every one, unless the objects are left as they
    /// are (then none has a step: a streamlet that rolls makes the objects applied).
    pub fn streamlet_steps(&self) -> &[StreamletStep] {
        if self.objects.applies() { &self.streamlets } else { &[] }
    }

    /// The steps after every streamlet's: per removed streamlet its Deployment, Secret and
    /// `StreamletRemoved`.
    pub fn removal_actions(&self) -> Vec<Action<'_>> {
        let mut a = Vec::new();
        for r in &self.removals {
            if let Some(d) = &r.deployment {
                a.push(Action::DeleteDeployment(d));
            }
            if let Some(s) = &r.secret {
                a.push(Action::DeleteSecret(s));
            }
            a.push(Action::Record(&r.event));
        }
        a
    }
}

fn keyed(type_: EventType, reason: &str, note: String) -> Event {
    let key = note.clone();
    Event::new(type_, reason, note, key)
}

#[cfg(test)]
mod tests;
