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
//! 3. **Fetch** (I/O): describe each of [`ValidPipeline::topics`] in Kafka, and list the Deployments
//!    and Secrets labelled with the pipeline and owned by the resource.
//! 4. **Build** (pure, cannot fail): [`ValidPipeline::build`] gives the [`Plan`].
//! 5. **Apply** (I/O): carry out [`Plan::actions`] in order, each object by server-side apply with the
//!    operator's field manager. An event that cannot be recorded is logged and skipped. Any other
//!    action that fails stops the plan: the actions after it are not carried out, and the failure
//!    is reported with [`apply_failed`] (a Warning event) and [`ApplyOutcome::Failed`] (the
//!    `Applied` condition). Actions of different streamlets may run concurrently; those of one
//!    streamlet run in their order.
//! 6. **Status** (I/O): the reset driver fills the reset part of [`Plan::status`], then
//!    [`status::finish`] adds the conditions and times, and it is written when
//!    [`status::needs_write`] says so.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};

use super::Owner;
use super::conf::{InletConf, NEO4J_CREDENTIALS_DIR, OutletConf, StageConf, StreamletConf};
use super::names::{self, NamedStreamlet, streamlet_object_name};
use super::refusal::{Problem, REASON_REFUSED, REASON_SIDECAR_IMAGE_MISSING};
use super::secret::{config_hash, streamlet_secret};
use super::status::{self, ApplyOutcome, ObservedDeployment, Phase};
use super::topics::{self, KafkaTopic, TopicCreation};
use super::workload::{self, DeploymentParts};
use crate::blueprint::descriptor::{self, Descriptor, PortKind};
use crate::connection::{self, Clusters, ResolvedTopic};
use crate::events::{Event, EventType};
use crate::names::GroupId;
use crate::resource::{AnkkaFlow, AnkkaFlowStatus, ManagedTopicsPolicy, StreamletSpec};

/// The finalizer that makes the operator delete the managed topics with the resource; present only
/// while `onDelete.managedTopics` is `Delete`.
pub const FINALIZER: &str = "flow.ankka.thinkmorestupidless.com/managed-topics";

/// The keys a built-in's Neo4j Secret must have (`database` is optional).
pub const STAGE_SECRET_KEYS: [&str; 3] = ["uri", "username", "password"];

/// The parameter of a built-in that names its Neo4j Secret.
pub const STAGE_SECRET_PARAM: &str = "secret";

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
/// finalizer present, delete every managed topic that resolves (a topic already gone is fine), then
/// remove the finalizer. Nothing else: the owner references let Kubernetes delete the rest.
#[derive(Clone, Debug, PartialEq)]
pub struct Deletion {
    /// Managed topics to delete, by topic id.
    pub delete_topics: Vec<ResolvedTopic>,
    /// Managed topics left alone because they do not resolve, with why (for the log).
    pub unresolved: Vec<String>,
    /// Whether the finalizer is present and must be removed once the topics are deleted.
    pub remove_finalizer: bool,
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
}

/// One streamlet of the plan.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamletStep {
    /// What is rendered for it.
    pub rendered: RenderedStreamlet,
    /// `StreamletRolled`, when its observed Deployment carries another config hash or image.
    pub rolled: Option<Event>,
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
    /// Per topic (by id): its creation if any, then its events.
    pub topics: Vec<(Option<TopicCreation>, Vec<Event>)>,
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
    /// Create a topic; a topic that already exists counts as created.
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
        _ => "apply",
    };
    let note = format!("could not {verb} {}: {message}", action.subject());
    (keyed(EventType::Warning, REASON_APPLY_FAILED, note.clone()), ApplyOutcome::Failed { message: note })
}

impl Plan {
    /// The steps in the order they must be carried out: finalizer, topics (each creation followed by
    /// its `TopicCreated`, then the topic's warnings), the ServiceAccount, Role and RoleBinding, per
    /// streamlet its Secret, Deployment and `StreamletRolled`, and per removed streamlet its
    /// Deployment, Secret and `StreamletRemoved`.
    pub fn actions(&self) -> Vec<Action<'_>> {
        let mut a = Vec::new();
        match self.finalizer {
            FinalizerChange::Add => a.push(Action::AddFinalizer),
            FinalizerChange::Remove => a.push(Action::RemoveFinalizer),
            FinalizerChange::Keep => {}
        }
        for (create, events) in &self.topics {
            if let Some(c) = create {
                a.push(Action::CreateTopic(c));
                a.push(Action::Record(&c.event));
            }
            a.extend(events.iter().map(Action::Record));
        }
        a.push(Action::ApplyServiceAccount(&self.service_account));
        a.push(Action::ApplyRole(&self.role));
        a.push(Action::ApplyRoleBinding(&self.role_binding));
        for s in &self.streamlets {
            a.push(Action::ApplySecret(&s.rendered.secret));
            a.push(Action::ApplyDeployment(&s.rendered.deployment));
            if let Some(e) = &s.rolled {
                a.push(Action::Record(e));
            }
        }
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

/// The Neo4j Secrets the built-ins of `flow` name, to read before [`decide`].
pub fn stage_secrets_to_read(flow: &AnkkaFlow) -> BTreeSet<String> {
    flow.spec.streamlets.iter().filter(|s| s.builtin).filter_map(stage_secret_name).map(str::to_string).collect()
}

fn stage_secret_name(s: &StreamletSpec) -> Option<&str> {
    s.config.get(STAGE_SECRET_PARAM).and_then(|v| v.as_str()).filter(|v| !v.trim().is_empty())
}

fn sorted_streamlets(flow: &AnkkaFlow) -> Vec<&StreamletSpec> {
    let mut s: Vec<&StreamletSpec> = flow.spec.streamlets.iter().collect();
    s.sort_by(|a, b| a.name.cmp(&b.name));
    s
}

/// Decides what to do with `inputs.flow`.
///
/// # Errors
/// [`Incomplete`] when the resource has no name, namespace or uid.
pub fn decide(inputs: &Inputs<'_>) -> Result<Decision, Incomplete> {
    let flow = inputs.flow;
    let owner = Owner::of(flow).ok_or_else(|| {
        Incomplete(if flow.metadata.namespace.is_none() {
            "namespace"
        } else if flow.metadata.uid.is_none() {
            "uid"
        } else {
            "name"
        })
    })?;
    let spec = &flow.spec;
    let policy = spec.on_delete.as_ref().map(|o| o.managed_topics).unwrap_or_default();
    let has_finalizer = flow.metadata.finalizers.iter().flatten().any(|f| f == FINALIZER);

    if flow.metadata.deletion_timestamp.is_some() {
        let mut deletion =
            Deletion { delete_topics: Vec::new(), unresolved: Vec::new(), remove_finalizer: has_finalizer };
        if has_finalizer && policy == ManagedTopicsPolicy::Delete {
            let mut managed: Vec<_> = spec.topics.iter().filter(|t| t.managed).collect();
            managed.sort_by(|a, b| a.id.cmp(&b.id));
            for t in managed {
                match connection::resolve_topic(t, &owner.namespace, inputs.clusters) {
                    Ok(r) => deletion.delete_topics.push(r),
                    Err(problems) => deletion.unresolved.extend(problems.iter().map(ToString::to_string)),
                }
            }
        }
        return Ok(Decision::Delete(deletion));
    }

    let sidecar_image = inputs.sidecar_image.map(str::trim).filter(|s| !s.is_empty());
    let mut problems = Vec::new();
    if sidecar_image.is_none() {
        problems.push(Problem::NoSidecarImage);
    }

    // Topics.
    let mut topic_counts: BTreeMap<&str, usize> = BTreeMap::new();
    for t in &spec.topics {
        *topic_counts.entry(&t.id).or_default() += 1;
    }
    for (id, count) in topic_counts.iter().filter(|(_, n)| **n > 1) {
        problems.push(Problem::TopicDeclaredTwice { topic: id.to_string(), count: *count });
    }
    let resolution = connection::resolve_pipeline(spec, &owner.namespace, inputs.clusters);
    problems.extend(resolution.problems.into_iter().map(Problem::Topic));
    let mut resolved: BTreeMap<String, ResolvedTopic> = BTreeMap::new();
    for t in resolution.topics {
        resolved.entry(t.id.clone()).or_insert(t);
    }

    // Streamlets.
    let streamlets = sorted_streamlets(flow);
    let mut streamlet_counts: BTreeMap<&str, usize> = BTreeMap::new();
    for s in &streamlets {
        *streamlet_counts.entry(&s.name).or_default() += 1;
    }
    for (name, count) in streamlet_counts.iter().filter(|(_, n)| **n > 1) {
        problems.push(Problem::StreamletDeclaredTwice { streamlet: name.to_string(), count: *count });
    }
    let builtins = descriptor::builtins();
    let mut descriptors: BTreeMap<&str, Descriptor> = BTreeMap::new();
    let mut stage_versions: BTreeMap<&str, String> = BTreeMap::new();
    for s in &streamlets {
        let name = s.name.clone();
        let parsed = if s.descriptor.is_empty() {
            problems.push(Problem::NoDescriptor(name.clone()));
            None
        } else {
            match Descriptor::from_streamlet_object(&s.descriptor) {
                Ok(d) => Some(d),
                Err(rejected) => {
                    problems.extend(rejected.problems.into_iter().map(|problem| {
                        if problem.is_shape() {
                            Problem::DescriptorParse { streamlet: name.clone(), problem }
                        } else {
                            Problem::Descriptor { streamlet: name.clone(), problem }
                        }
                    }));
                    None
                }
            }
        };
        if let Some(d) = &parsed {
            for inlet in d.inlets().iter().filter(|p| !s.inlets.contains_key(p.name.as_str())) {
                problems.push(Problem::InletNotBound { streamlet: name.clone(), inlet: inlet.name.to_string() });
            }
            for (kind, bound) in [(PortKind::Inlet, &s.inlets), (PortKind::Outlet, &s.outlets)] {
                for port in bound.keys() {
                    if d.port(port).is_none_or(|(k, _)| k != kind) {
                        problems.push(Problem::UndeclaredPort { streamlet: name.clone(), kind, port: port.clone() });
                    }
                }
            }
        }
        if s.builtin {
            if !s.image.trim().is_empty() {
                problems.push(Problem::BuiltinImage(name.clone()));
            }
            let builtin_name = s.descriptor.get("name").and_then(|v| v.as_str()).unwrap_or_default();
            if !builtins.iter().any(|b| b.name().as_str() == builtin_name) {
                problems.push(Problem::UnknownBuiltin { streamlet: name.clone(), builtin: builtin_name.to_string() });
            } else {
                match stage_secret_name(s) {
                    None => problems.push(Problem::NoStageSecret(name.clone())),
                    Some(secret) => match inputs.stage_secrets.get(secret) {
                        None | Some(StageSecret::Missing) => problems.push(Problem::StageSecretMissing {
                            streamlet: name.clone(),
                            secret: secret.to_string(),
                            namespace: owner.namespace.clone(),
                        }),
                        Some(StageSecret::Unreadable(reason)) => problems.push(Problem::StageSecretUnreadable {
                            streamlet: name.clone(),
                            secret: secret.to_string(),
                            reason: reason.clone(),
                        }),
                        Some(StageSecret::Found { keys, resource_version }) => {
                            for key in STAGE_SECRET_KEYS.iter().filter(|k| !keys.contains(**k)) {
                                problems.push(Problem::StageSecretKey {
                                    streamlet: name.clone(),
                                    secret: secret.to_string(),
                                    key: key.to_string(),
                                });
                            }
                            stage_versions.insert(&s.name, resource_version.clone());
                        }
                    },
                }
            }
        } else if s.image.trim().is_empty() {
            problems.push(Problem::NoImage(name.clone()));
        }
        for (port, topic) in s.inlets.iter().chain(&s.outlets) {
            if spec.topic(topic).is_none() {
                problems.push(Problem::UndeclaredTopic {
                    streamlet: name.clone(),
                    port: port.clone(),
                    topic: topic.clone(),
                });
            }
        }
        if let Some(d) = parsed {
            descriptors.insert(&s.name, d);
        }
    }

    // Names.
    let named: Vec<NamedStreamlet<'_>> = streamlets
        .iter()
        .map(|s| NamedStreamlet { name: &s.name, stage_secret: if s.builtin { stage_secret_name(s) } else { None } })
        .collect();
    problems.extend(names::check(&spec.pipeline, &named).into_iter().map(Problem::Name));

    let sidecar_image = match sidecar_image {
        Some(image) if problems.is_empty() => image,
        _ => {
            let reason = if sidecar_image.is_none() { REASON_SIDECAR_IMAGE_MISSING } else { REASON_REFUSED };
            let events = problems.iter().map(|p| keyed(EventType::Warning, reason, p.to_string())).collect();
            let status = AnkkaFlowStatus {
                observed_generation: flow.metadata.generation,
                phase: Some(Phase::Failed.as_str().into()),
                detail: problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "),
                ..AnkkaFlowStatus::default()
            };
            return Ok(Decision::Refuse(Box::new(Refusal { problems, events, reason, status })));
        }
    };

    // Render: nothing below can fail.
    let pipeline = spec.pipeline.as_str();
    let mut rendered = Vec::new();
    for s in streamlets {
        let Some(d) = descriptors.get(s.name.as_str()) else { continue };
        let descriptor_json = d.canonical_json();
        let conf = streamlet_conf(pipeline, s, d, &resolved);
        let stage_version = stage_versions.get(s.name.as_str()).map(String::as_str);
        let hash = config_hash(&descriptor_json, &conf, stage_version);
        let process_image = (!s.builtin).then(|| s.image.clone());
        let secret = streamlet_secret(pipeline, &s.name, &descriptor_json, &conf, &owner);
        let deployment = workload::deployment(
            &DeploymentParts {
                pipeline,
                streamlet: &s.name,
                replicas: s.replicas,
                sidecar_image,
                process_image: process_image.as_deref(),
                stage_secret: if s.builtin { stage_secret_name(s) } else { None },
                config_hash: &hash,
            },
            &owner,
        );
        rendered.push((
            s.clone(),
            RenderedStreamlet {
                name: s.name.clone(),
                descriptor_json,
                streamlet_conf: conf,
                config_hash: hash,
                process_image,
                secret,
                deployment,
            },
        ));
    }
    let finalizer = match (policy, has_finalizer) {
        (ManagedTopicsPolicy::Delete, false) => FinalizerChange::Add,
        (ManagedTopicsPolicy::Keep, true) => FinalizerChange::Remove,
        _ => FinalizerChange::Keep,
    };
    Ok(Decision::Apply(Box::new(ValidPipeline {
        pipeline: pipeline.to_string(),
        generation: flow.metadata.generation,
        finalizer,
        topics: resolved.into_values().collect(),
        service_account: workload::service_account(pipeline, &owner),
        role: workload::role(pipeline, &owner),
        role_binding: workload::role_binding(pipeline, &owner),
        streamlets: rendered,
    })))
}

/// The `streamlet.conf` of one streamlet: its bound ports, each with its topic's resolved settings.
fn streamlet_conf(
    pipeline: &str,
    s: &StreamletSpec,
    d: &Descriptor,
    resolved: &BTreeMap<String, ResolvedTopic>,
) -> String {
    let inlets = s
        .inlets
        .iter()
        .filter_map(|(port, id)| resolved.get(id).map(|t| (port, t)))
        .map(|(port, t)| {
            let id = GroupId::new(pipeline, &s.name, port).to_string();
            InletConf {
                name: port.clone(),
                topic: t.name.clone(),
                group: id.clone(),
                client_id: id,
                bootstrap_servers: t.bootstrap_servers.clone(),
                connection_config: t.connection_config.clone(),
                consumer_config: t.consumer_config.clone(),
                max_records: t.batch.max_records,
                max_bytes: t.batch.max_bytes,
            }
        })
        .collect();
    let outlets = s
        .outlets
        .iter()
        .filter_map(|(port, id)| resolved.get(id).map(|t| (port, t)))
        .map(|(port, t)| OutletConf {
            name: port.clone(),
            topic: t.name.clone(),
            client_id: format!("{pipeline}.{}.{port}", s.name),
            bootstrap_servers: t.bootstrap_servers.clone(),
            connection_config: t.connection_config.clone(),
            producer_config: t.producer_config.clone(),
        })
        .collect();
    StreamletConf {
        pipeline: pipeline.to_string(),
        streamlet: s.name.clone(),
        config: s.config.clone(),
        stage: s
            .builtin
            .then(|| StageConf { name: d.name().to_string(), credentials_dir: NEO4J_CREDENTIALS_DIR.into() }),
        inlets,
        outlets,
    }
    .render()
}

impl ValidPipeline {
    /// The pipeline id.
    pub fn pipeline(&self) -> &str {
        &self.pipeline
    }

    /// Every topic of the resource, resolved, sorted by id: describe each in Kafka (partitions,
    /// replication of the first partition, and the live values of its `topicConfig` keys).
    pub fn topics(&self) -> &[ResolvedTopic] {
        &self.topics
    }

    /// What is rendered per streamlet, sorted by name.
    pub fn streamlets(&self) -> impl Iterator<Item = &RenderedStreamlet> {
        self.streamlets.iter().map(|(_, r)| r)
    }

    /// The plan, given what was observed of the topics and of the pipeline's objects.
    pub fn build(&self, observed: &Observed<'_>) -> Plan {
        let mut topic_steps = Vec::new();
        let mut topic_status = Vec::new();
        for t in &self.topics {
            let kafka = observed
                .topics
                .get(&t.id)
                .cloned()
                .unwrap_or_else(|| KafkaTopic::Unreachable("the topic was not described".into()));
            let d = topics::decide(t, &kafka);
            topic_steps.push((d.create, d.events));
            topic_status.push(d.status);
        }
        let mut steps = Vec::new();
        let mut streamlet_status = Vec::new();
        for (spec, r) in &self.streamlets {
            let seen = observed.deployments.get(&r.name);
            let rolled = seen
                .filter(|d| {
                    d.config_hash.as_deref() != Some(r.config_hash.as_str()) || d.process_image != r.process_image
                })
                .map(|_| {
                    let note =
                        format!("streamlet '{}' rolls out: its image, descriptor or configuration changed", r.name);
                    let key =
                        format!("{}/{}/{}", r.name, r.config_hash, r.process_image.as_deref().unwrap_or_default());
                    Event::new(EventType::Normal, "StreamletRolled", note, key)
                });
            streamlet_status.push(status::streamlet_status(spec, &r.config_hash, seen));
            steps.push(StreamletStep { rendered: r.clone(), rolled });
        }
        let wanted: BTreeSet<&str> = self.streamlets.iter().map(|(s, _)| s.name.as_str()).collect();
        let gone: BTreeSet<&str> = observed
            .deployments
            .keys()
            .chain(observed.secrets)
            .map(String::as_str)
            .filter(|s| !wanted.contains(s))
            .collect();
        let removals = gone
            .into_iter()
            .map(|s| {
                let object = streamlet_object_name(&self.pipeline, s);
                Removal {
                    streamlet: s.to_string(),
                    deployment: observed.deployments.contains_key(s).then(|| object.clone()),
                    secret: observed.secrets.contains(s).then_some(object),
                    event: keyed(
                        EventType::Normal,
                        "StreamletRemoved",
                        format!("streamlet '{s}' is no longer in the pipeline"),
                    ),
                }
            })
            .collect();
        let (phase, detail) = status::phase(&streamlet_status, &topic_status);
        Plan {
            finalizer: self.finalizer,
            topics: topic_steps,
            service_account: self.service_account.clone(),
            role: self.role.clone(),
            role_binding: self.role_binding.clone(),
            streamlets: steps,
            removals,
            status: AnkkaFlowStatus {
                observed_generation: self.generation,
                phase: Some(phase.as_str().into()),
                detail,
                streamlets: streamlet_status.into_iter().map(|(s, _)| s).collect(),
                topics: topic_status,
                ..AnkkaFlowStatus::default()
            },
        }
    }
}

#[cfg(test)]
mod tests;
