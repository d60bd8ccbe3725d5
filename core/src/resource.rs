//! The `AnkkaFlow` custom resource as Rust types (docs/blueprint.md, "The generated resource").
//!
//! `deploy/crd.yaml` is generated from these types (`flow-operator crd`), and a test fails when the two
//! drift. Field names are camelCase on the wire, as Kubernetes API conventions ask.

// kube-derive takes one `printcolumn(...)` per column, which clippy reads as a repeated attribute.
#![allow(clippy::duplicated_attributes)]

use std::collections::BTreeMap;

use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::pod::PodSettings;

/// Desired state of one pipeline: its streamlets and the Kafka topics between them.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "flow.ankka.thinkmorestupidless.com",
    version = "v1alpha1",
    kind = "AnkkaFlow",
    plural = "ankkaflows",
    singular = "ankkaflow",
    shortname = "aflow",
    namespaced,
    status = "AnkkaFlowStatus",
    label("app.kubernetes.io/managed-by", "ankka-flow"),
    doc = "A streaming pipeline: streamlets (Deployments) joined by Kafka topics.",
    printcolumn(name = "Pipeline", type_ = "string", json_path = ".spec.pipeline"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Reset", type_ = "string", json_path = ".status.reset.phase", priority = "1"),
    printcolumn(name = "Detail", type_ = "string", json_path = ".status.detail", priority = "1"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    crates(
        kube_core = "::kube_core",
        k8s_openapi = "::k8s_openapi",
        schemars = "::schemars",
        serde = "::serde",
        serde_json = "::serde_json"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct AnkkaFlowSpec {
    /// Pipeline id: 1-40 of `[a-z0-9-]`, not starting or ending with `-`.
    #[schemars(regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"), length(max = 40))]
    pub pipeline: String,
    /// Informational version of the pipeline; the operator ignores it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Protocol version of the platform that generated the resource, `MAJOR.MINOR`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    /// What happens to managed topics when the resource is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_delete: Option<OnDelete>,
    /// The streamlets, one Deployment each.
    pub streamlets: Vec<StreamletSpec>,
    /// The Kafka topics the streamlets read and write.
    #[serde(default)]
    pub topics: Vec<TopicSpec>,
    /// Settings of every streamlet's pods (resources, pull secrets, scheduling, labels and
    /// annotations, ids); a streamlet's own `pod` is laid over them (docs/blueprint.md, "Pod
    /// settings").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<Box<PodSettings>>,
}

/// Deletion policy of the pipeline's managed topics.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OnDelete {
    /// `Keep` (default) or `Delete`.
    #[serde(default)]
    pub managed_topics: ManagedTopicsPolicy,
}

/// `Keep` leaves managed topics in Kafka when the resource goes; `Delete` deletes them.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum ManagedTopicsPolicy {
    /// Leave the topics.
    #[default]
    Keep,
    /// Delete the topics with the resource.
    Delete,
}

/// One streamlet of the pipeline.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StreamletSpec {
    /// Streamlet name, a DNS label.
    #[schemars(regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"), length(max = 63))]
    pub name: String,
    /// Container image of the streamlet's process; empty for built-ins.
    #[serde(default)]
    pub image: String,
    /// Desired replicas; 0 stops the streamlet but keeps it.
    #[serde(default = "one")]
    #[schemars(range(min = 0))]
    pub replicas: i32,
    /// Resolved, typed parameter values.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    #[schemars(schema_with = "preserve_unknown_object")]
    pub config: serde_json::Map<String, serde_json::Value>,
    /// Inlet name -> topic id.
    #[serde(default)]
    pub inlets: BTreeMap<String, String>,
    /// Outlet name -> topic id.
    #[serde(default)]
    pub outlets: BTreeMap<String, String>,
    /// The descriptor's `streamlet` object, in its canonical snake_case form.
    #[schemars(schema_with = "preserve_unknown_object")]
    pub descriptor: serde_json::Map<String, serde_json::Value>,
    /// Whether the streamlet is built into the sidecar.
    #[serde(default)]
    pub builtin: bool,
    /// Settings of this streamlet's pods, laid over the pipeline's `pod`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<Box<PodSettings>>,
}

fn one() -> i32 {
    1
}

/// One Kafka topic of the pipeline.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopicSpec {
    /// Topic id inside the pipeline.
    pub id: String,
    /// Kafka topic name.
    pub name: String,
    /// Whether the platform owns (creates) the topic.
    #[serde(default = "yes")]
    pub managed: bool,
    /// Kafka cluster name: its connection is the Secret `kafka-cluster-<cluster>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// Brokers, replacing the cluster's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_servers: Option<String>,
    /// Partition count used when the operator creates a managed topic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub partitions: Option<i32>,
    /// Replication factor used when the operator creates a managed topic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub replicas: Option<i32>,
    /// Client properties for every client of the topic (`security.protocol`, `sasl.*`, `ssl.*`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub connection_config: BTreeMap<String, String>,
    /// Producer properties.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub producer_config: BTreeMap<String, String>,
    /// Consumer properties.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub consumer_config: BTreeMap<String, String>,
    /// Topic-level Kafka configuration used when creating a managed topic.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub topic_config: BTreeMap<String, String>,
    /// Batch limits of every inlet reading the topic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<Batch>,
}

fn yes() -> bool {
    true
}

/// Batch limits of an inlet.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Batch {
    /// Records per batch (default 100).
    #[serde(default = "default_max_records")]
    pub max_records: i64,
    /// Bytes per batch (default 1048576 = 1 MiB).
    #[serde(default = "default_max_bytes")]
    pub max_bytes: i64,
}

impl Default for Batch {
    /// 100 records, 1 MiB: what an inlet takes when its topic sets no limits.
    fn default() -> Self {
        Batch { max_records: default_max_records(), max_bytes: default_max_bytes() }
    }
}

fn default_max_records() -> i64 {
    100
}
fn default_max_bytes() -> i64 {
    1_048_576
}

/// Observed state, written by the operator only.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnkkaFlowStatus {
    /// `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Pending`, `Ready`, `Degraded` or `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Reasons for the phase, joined with `; `; empty when Ready.
    #[serde(default)]
    pub detail: String,
    /// When `phase` last changed (RFC 3339); kept while the phase stays the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    /// Per streamlet: desired and ready replicas.
    #[serde(default)]
    pub streamlets: Vec<StreamletStatus>,
    /// Per topic: whether it exists in Kafka.
    #[serde(default)]
    pub topics: Vec<TopicStatus>,
    /// `Ready`, `Applied` and (once a reset was requested) `ResetComplete`, as the Kubernetes API
    /// conventions define conditions (docs/rendering.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The latest reset request and where it stands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset: Option<ResetStatus>,
    /// Earlier reset requests, newest first (at most 10).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reset_history: Vec<ResetHistoryEntry>,
    /// What the operator last applied of the pipeline's objects, so that a reconcile with nothing
    /// to change applies nothing (docs/rendering.md, "Applied objects").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied: Option<AppliedObjects>,
}

/// The pipeline's objects as the operator last applied them all: the ServiceAccount, Role and
/// RoleBinding, and each streamlet's Secret and Deployment.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppliedObjects {
    /// SHA-256 (hex) of the objects as rendered; a Secret's values count through the config hash
    /// its Deployment carries.
    pub hash: String,
    /// When they were applied (RFC 3339).
    pub time: String,
    /// Per streamlet, its Deployment as the apply left it.
    #[serde(default)]
    pub deployments: BTreeMap<String, AppliedDeployment>,
}

/// A streamlet's Deployment as an apply left it: which object, and at which generation.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppliedDeployment {
    /// Its `metadata.uid`: a Deployment deleted and created again is another object, whatever its
    /// generation.
    pub uid: String,
    /// Its `metadata.generation` after the apply.
    pub generation: i64,
}

/// An earlier reset request: its id and how it ended.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResetHistoryEntry {
    /// The request id.
    pub id: String,
    /// `Done`, `Refused`, or `Superseded` (replaced by a newer request before it finished).
    pub phase: RequestPhase,
    /// A dry run (`flow reset --dry-run`): it is kept apart from the requests that moved offsets,
    /// so that plans never push a reset that can be undone out of the history.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
}

/// Where a reset request stands.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum RequestPhase {
    /// Written; the operator has not checked it against the resource yet.
    #[default]
    Requested,
    /// Approval is required (docs/governance.md) and nobody has approved it yet; nothing is
    /// touched until someone does.
    AwaitingApproval,
    /// A target streamlet still runs; nothing is touched until it stops.
    Waiting,
    /// Its consumer groups are being reset.
    Resetting,
    /// Every group finished (reset or failed); the done annotation holds its id.
    Done,
    /// Refused as a whole (malformed, or naming streamlets that cannot be reset).
    Refused,
    /// Replaced by a newer request before it finished (history only).
    Superseded,
    /// Denied by an approver before anything was touched; the done annotation holds its id.
    Denied,
    /// Not approved in time; nothing was touched; the done annotation holds its id.
    Expired,
}

impl RequestPhase {
    /// Whether nothing more happens for a request in this phase.
    pub fn finished(self) -> bool {
        matches!(
            self,
            RequestPhase::Done
                | RequestPhase::Refused
                | RequestPhase::Superseded
                | RequestPhase::Denied
                | RequestPhase::Expired
        )
    }

    /// The phase as the status writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            RequestPhase::Requested => "Requested",
            RequestPhase::AwaitingApproval => "AwaitingApproval",
            RequestPhase::Waiting => "Waiting",
            RequestPhase::Resetting => "Resetting",
            RequestPhase::Done => "Done",
            RequestPhase::Refused => "Refused",
            RequestPhase::Superseded => "Superseded",
            RequestPhase::Denied => "Denied",
            RequestPhase::Expired => "Expired",
        }
    }
}

impl std::fmt::Display for RequestPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where one consumer group of a reset request stands: its outcome so far.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum GroupStage {
    /// Not started, being inspected or fenced, or waiting for its next attempt.
    #[default]
    Pending,
    /// Intent recorded, commit under way.
    Committing,
    /// Intent recorded, and whether its commit landed is unknown (after an operator restart or a
    /// failed commit): the committed offsets and their markers are read to learn it, never committed
    /// blindly. Read as well from `Settling`, which older operators wrote.
    #[serde(alias = "Settling")]
    Recovering,
    /// The commit read back; its offsets are read again after the settle delay, to verify that no
    /// consumer overwrote them.
    Verifying,
    /// Reset: committed at the log start offsets and verified.
    Reset,
    /// Failed for a reason that is final.
    Failed,
    /// Planned by a dry run: where it would go; nothing was committed.
    Planned,
}

impl GroupStage {
    /// Whether the group has an intent recorded and no outcome yet.
    pub fn has_intent(self) -> bool {
        matches!(self, GroupStage::Committing | GroupStage::Recovering | GroupStage::Verifying)
    }

    /// The stage as the status writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            GroupStage::Pending => "Pending",
            GroupStage::Committing => "Committing",
            GroupStage::Recovering => "Recovering",
            GroupStage::Verifying => "Verifying",
            GroupStage::Reset => "Reset",
            GroupStage::Failed => "Failed",
            GroupStage::Planned => "Planned",
        }
    }
}

impl std::fmt::Display for GroupStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Observed state of one streamlet.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StreamletStatus {
    /// Streamlet name.
    pub name: String,
    /// The resource's replicas.
    pub desired: i32,
    /// Ready replicas of its Deployment.
    pub ready: i32,
    /// `rolling out`, `<ready> of <desired> ready`, or empty.
    #[serde(default)]
    pub detail: String,
}

/// Observed state of one topic.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopicStatus {
    /// Topic id.
    pub id: String,
    /// Whether the topic exists in Kafka (a managed topic counts as existing once the operator
    /// created it).
    pub exists: bool,
    /// Empty, `created by the operator`, `adopted read-only: <why>`, `topic '<kafka-name>' does not
    /// exist`, or `Kafka unreachable: <reason>`.
    #[serde(default)]
    pub detail: String,
    /// For a managed topic, who owns it: `Created` (the operator created it for this resource, and
    /// deletes it with it under `onDelete.managedTopics: Delete`) or `Adopted` (it existed before,
    /// or the operator cannot prove it created it: never altered, never deleted). Absent for an
    /// unmanaged topic, and while Kafka cannot be asked (docs/rendering.md, "Who owns a topic").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ownership: Option<TopicOwnership>,
}

/// Who owns a managed topic, as the operator can prove it.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum TopicOwnership {
    /// The operator created it for this resource.
    Created,
    /// It is used read-only: never altered, never deleted.
    Adopted,
}

/// One condition, as the Kubernetes API conventions define it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The condition's type, CamelCase: `Ready`, `Applied`, `ResetComplete`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Why, in one CamelCase word.
    pub reason: String,
    /// Why, for people; may be empty.
    #[serde(default)]
    pub message: String,
    /// When `status` last changed (RFC 3339).
    pub last_transition_time: String,
    /// The `metadata.generation` the condition was set from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// The latest reset request, as the operator last saw it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResetStatus {
    /// The request id (a UUID), or empty when the annotation did not parse.
    pub id: String,
    /// The `metadata.uid` of the object the request was taken up for. A request belongs to one
    /// object: progress recorded for another uid (an object of the same name, deleted since) is
    /// never taken as this one's (docs/reset.md, "A request belongs to its object"). Absent in a
    /// status written before requests were bound to the uid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// Where the groups go when not to the earliest offsets: an RFC 3339 instant, `the offsets
    /// before reset <id>` or `the offsets of plan <id>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// A dry run (`flow reset --dry-run`): its groups are `Planned`, nothing was committed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// `Requested`, `Waiting`, `Resetting`, `Done` or `Refused`.
    pub phase: RequestPhase,
    /// Why the request waits or was refused; empty otherwise.
    #[serde(default)]
    pub detail: String,
    /// Per consumer group: its outcome.
    #[serde(default)]
    pub groups: Vec<GroupStatus>,
    /// When the request was written, as the API server recorded it: the time of the
    /// `metadata.managedFields` entry of whoever wrote the request annotation (RFC 3339, to the
    /// second). Absent when the API server did not say, and in a status written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub written_at: Option<String>,
    /// When the operator took the request up: first saw it, from a fresh read (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_at: Option<String>,
    /// Who wrote the request, as the API server authenticated them (the annotation
    /// `reset-requested-by`, stamped at admission; docs/governance.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_by: Option<String>,
    /// How the request was approved, denied or left to expire, when approval applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<Approval>,
    /// When the request finished (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
}

/// The approval of a reset request (docs/governance.md).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Approval {
    /// `Approved`, `Denied` or `Expired`.
    pub decision: ApprovalDecision,
    /// The user who approved or denied it, as the API server authenticated them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// The administrator's policy that approved it without a person: `dry-run`, or
    /// `records-at-most-<n>` for a plan that reprocesses at most that many records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
}

/// What became of a request that needed approval.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum ApprovalDecision {
    /// Approved by a person or a policy.
    #[default]
    Approved,
    /// Denied by a person.
    Denied,
    /// Nobody decided in time.
    Expired,
}

/// Outcome of one consumer group of a reset request.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GroupStatus {
    /// `<pipeline>.<streamlet>.<inlet>`.
    pub group: String,
    /// Kafka topic name the group reads.
    pub topic: String,
    /// `Pending`, `Committing`, `Recovering`, `Verifying`, `Reset` or `Failed` (see [`GroupStage`]).
    pub outcome: GroupStage,
    /// The event note of the outcome, or why the group is still pending. For a group the status sums
    /// up (more than 16 partitions, or a request of more than 16 groups) only what the other fields do
    /// not tell: Kafka's last error while it retries, a failure's reason, a reset's notes;
    /// `flow reset status` spells the whole text out.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Committed offsets before the reset, by partition; a partition without one is absent.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub offsets_before: BTreeMap<String, i64>,
    /// The offsets committed (or being committed): each partition's log start offset.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub offsets_after: BTreeMap<String, i64>,
    /// Partitions of the topic reset.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub partitions: u32,
    /// Partitions added to the topic during the reset, found by the read after the settle delay: not
    /// reset.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub added_partitions: Vec<i32>,
    /// Records between the log start offsets and the high watermarks at the reset: what the
    /// streamlet reads again.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub records_to_reprocess: i64,
    /// While the group retries transient Kafka failures: when the first of them came (RFC 3339). The
    /// group fails once the retry time (`FLOW_RESET_RETRY_SECONDS`) has passed since, however often
    /// the operator restarts meanwhile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failing_since: Option<String>,
    /// Records the group still has to read (high watermark minus committed offset, summed over its
    /// partitions), measured after the reset until it reaches 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag: Option<i64>,
    /// When the lag was first seen at 0 after the reset (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caught_up_at: Option<String>,
    /// For a `Planned` group: each partition's high watermark when planned, so that the records to
    /// reprocess per partition are its high watermark minus its new offset (listed as the offsets
    /// are: only for groups of a few partitions).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub high_watermarks: BTreeMap<String, i64>,
    /// For a `Planned` group: what to know before carrying the plan out (trimmed history, a
    /// compacted topic, a moving log start, a running streamlet).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Where this group goes when not where the request's `to` says: in a rebuild from streamlets,
    /// a group downstream of them goes to `the end (it reads only what <writers> write again)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// For a group a rebuild from streamlets puts at the end of its topic: the records of the topic
    /// before the replay that it does not read (from its committed offsets to the end).
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub records_to_skip: i64,
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

fn is_zero_i64(n: &i64) -> bool {
    *n == 0
}

fn preserve_unknown_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true
    })
}

impl AnkkaFlowSpec {
    /// The streamlet of that name, if any.
    pub fn streamlet(&self, name: &str) -> Option<&StreamletSpec> {
        self.streamlets.iter().find(|s| s.name == name)
    }

    /// The topic of that id, if any.
    pub fn topic(&self, id: &str) -> Option<&TopicSpec> {
        self.topics.iter().find(|t| t.id == id)
    }
}
