//! The reconcile's apply steps: carrying out what `flow-core` decided, against Kubernetes and Kafka.
//! No decision is taken here; what to apply, in which order, and what to record comes from the
//! plan, the refusal or the deletion.

use std::collections::BTreeMap;

use flow_adapters::owned;
use flow_adapters::topics::{Created, Deleted};
use flow_core::connection::KafkaConnection;
use flow_core::render::plan::{self, Action, Deletion, FINALIZER, Plan, Refusal, StreamletStep};
use flow_core::render::status::ApplyOutcome;
use flow_core::resource::{AnkkaFlow, AppliedDeployment};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;

use crate::api;
use crate::context::Context;
use crate::owners::Writer;

/// The Kafka connection of each topic of the pipeline, by topic id.
pub type Connections = BTreeMap<String, KafkaConnection>;

/// Streamlets whose Secret and Deployment are applied at once: a pipeline of many streamlets costs
/// a few round trips, not one per streamlet.
const STREAMLET_CONCURRENCY: usize = 8;

/// A refused resource (needs a client): one Warning event per problem. Nothing else is applied.
pub async fn refusal(ctx: &Context, flow: &AnkkaFlow, refusal: &Refusal) {
    for event in &refusal.events {
        ctx.events.record(flow, event).await;
    }
}

/// Why the deletion of a resource failed: the finalizer stays, and the deletion is tried again.
#[derive(Debug, thiserror::Error)]
pub enum DeleteError {
    /// A managed topic could not be described or deleted (`onDelete.managedTopics: Delete`).
    #[error("{0}")]
    TopicDelete(String),
    /// The record of the topics the operator created could not be read.
    #[error("cannot read the record of the topics the operator created: {0}")]
    Record(#[source] api::Error),
    /// The finalizer could not be removed.
    #[error("cannot remove the finalizer: {0}")]
    Finalizer(#[source] api::Error),
}

impl DeleteError {
    /// See `crate::reconcile::Error::category`.
    pub fn category(&self) -> &'static str {
        match self {
            DeleteError::TopicDelete(_) => "TopicDeleteFailed",
            DeleteError::Record(e) | DeleteError::Finalizer(e) => e.category(),
        }
    }
}

/// A resource being deleted (needs Kafka and a client): deletes the managed topics that resolve and
/// that the operator created for it (a topic already gone is fine; see [`Deletion`]), records a
/// `TopicKept` event for each other one, removes the finalizer, then forgets the record of what it
/// created. Nothing else: the owner references let Kubernetes delete the rest.
///
/// # Errors
/// [`DeleteError::TopicDelete`] when a topic the record names could not be described or deleted (the
/// finalizer stays, and the deletion is tried again); the record's read or the finalizer's removal
/// failing.
pub async fn deletion(ctx: &Context, flow: &AnkkaFlow, d: &Deletion) -> Result<(), DeleteError> {
    let (ns, name) = (flow.namespace().unwrap_or_default(), flow.name_any());
    for why in &d.unresolved {
        tracing::warn!(namespace = %ns, name = %name, reason = %why, "managed topic left in Kafka: it does not resolve");
    }
    let stored = if d.candidates.is_empty() {
        crate::owners::Stored::default()
    } else {
        crate::owners::read(ctx, flow).await.map_err(DeleteError::Record)?
    };
    let described = crate::observe::describe_topics(ctx, d.to_describe(&stored.record)).await;
    let topics = d.topics(&stored.record, &described);
    for event in &topics.kept {
        ctx.events.record(flow, event).await;
    }
    if !topics.unreachable.is_empty() {
        return Err(DeleteError::TopicDelete(topics.unreachable.join("; ")));
    }
    let mut failures = Vec::new();
    for (t, event) in &topics.delete {
        for (topic, result) in ctx.kafka.delete(t.kafka_connection(), std::slice::from_ref(&t.name)).await {
            match result {
                Ok(Deleted::Deleted) => {
                    ctx.events.record(flow, event).await;
                }
                Ok(Deleted::Missing) => {
                    tracing::info!(namespace = %ns, name = %name, %topic, "managed topic already gone")
                }
                Err(f) => failures.push(format!("could not delete topic '{topic}': {}", f.reason)),
            }
        }
    }
    if !failures.is_empty() {
        return Err(DeleteError::TopicDelete(failures.join("; ")));
    }
    if d.remove_finalizer {
        // Back from Kafka: the API writes take a reconcile slot again (`crate::slots`).
        let _slot = ctx.slots.resume().await;
        owned::remove_finalizer(&ctx.client, flow, FINALIZER).await.map_err(|e| DeleteError::Finalizer(e.into()))?;
        // The record goes after the finalizer: while the finalizer stays (its removal failed, and
        // the deletion is tried again), the record must still prove which topics were the
        // resource's, or a retry would report them as someone else's. A record left behind (the
        // API server refused its deletion) names a resource that is gone: the sweep forgets it.
        if let Some(uid) = flow.uid()
            && let Err(e) = crate::owners::forget(ctx, &uid).await
        {
            tracing::warn!(namespace = %ns, name = %name, error = %e, "the record of the topics the operator created for this resource is left for the sweep");
        }
    }
    Ok(())
}

/// A step of a plan that was rejected, already reported: the note of its `ApplyFailed` event, and
/// the outcome for the `Applied` condition.
#[derive(Debug)]
pub struct Rejected {
    /// The event's note: what failed and why.
    pub note: String,
    /// The outcome for the `Applied` condition.
    pub outcome: ApplyOutcome,
}

/// Each streamlet's Deployment as its apply left it, by streamlet, for the status's record of the
/// apply ([`flow_core::render::applied`]).
pub type Applied = BTreeMap<String, AppliedDeployment>;

/// Which steps of a plan [`plan`] carries out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Steps {
    /// Every one, in [`Plan::actions`]' order.
    All,
    /// The setup's only: the finalizer, the record of the topics created, the topics.
    Setup,
    /// The pipeline's objects only: the per-pipeline objects, the streamlets, the removals.
    Objects,
}

/// Carries out a plan (needs Kafka and a client): the finalizer, the topics and their events, the
/// per-pipeline objects (a stage's at once), each streamlet's Secret, Deployment and `StreamletRolled` (streamlets
/// several at a time, each one's steps in order), and the removals, in [`Plan::actions`]' order.
/// Everything is applied server-side with the operator's field manager. The objects are left out
/// when the plan leaves them as they are ([`Plan::objects`]). `slot` is the reconcile's slot: given
/// back while a topic is created in Kafka, taken again after (`crate::slots`). `steps` picks the
/// setup's steps, the objects' or both; a plan carried out in two parts gives its Deployments from
/// the objects' part.
///
/// # Errors
/// The first step that failed ([`Rejected`]), already recorded as a Warning event
/// ([`plan::apply_failed`]); the steps after it were not carried out. The outcome goes into the
/// `Applied` condition.
pub async fn plan(
    ctx: &Context,
    flow: &AnkkaFlow,
    p: &Plan,
    conns: &Connections,
    owners: &Writer,
    slot: crate::slots::Slot,
    steps: Steps,
) -> Result<Applied, Rejected> {
    let on = On { ctx, flow, conns, owners };
    let mut held = ctx.slots.held(slot);
    let outcome: Result<Applied, (Action<'_>, String)> = async {
        if steps != Steps::Objects {
            for action in p.setup_actions() {
                if matches!(action, Action::CreateTopic(_)) {
                    held.give_back();
                } else {
                    held.take_back().await;
                }
                step(&on, action).await?;
            }
        }
        held.take_back().await;
        if steps == Steps::Setup {
            return Ok(Applied::new());
        }
        for stage in p.pipeline_object_stages() {
            futures::future::try_join_all(stage.into_iter().map(|a| step(&on, a))).await?;
        }
        // Collected first: a stream over a lazy map of borrowing futures trips the compiler's
        // higher-ranked lifetime check.
        let each: Vec<_> = p.streamlet_steps().iter().map(|s| streamlet(&on, s)).collect();
        let deployments: Applied = futures::stream::iter(each)
            .buffer_unordered(STREAMLET_CONCURRENCY)
            .try_collect::<Vec<_>>()
            .await?
            .into_iter()
            .flatten()
            .collect();
        for action in p.removal_actions() {
            step(&on, action).await?;
        }
        Ok(deployments)
    }
    .await;
    if steps != Steps::Setup {
        ctx.metrics.objects(match (&outcome, p.objects.applies()) {
            (Err(_), _) => "failed",
            (Ok(_), true) => "applied",
            (Ok(_), false) => "unchanged",
        });
    }
    match outcome {
        Ok(deployments) => Ok(deployments),
        Err((action, message)) => {
            let (event, outcome) = plan::apply_failed(&action, &message);
            ctx.events.record(flow, &event).await;
            Err(Rejected { note: event.note.clone(), outcome })
        }
    }
}

/// What every step of one plan works on.
struct On<'a> {
    ctx: &'a Context,
    flow: &'a AnkkaFlow,
    conns: &'a Connections,
    owners: &'a Writer,
}

/// One streamlet's steps, in order: its Secret, its Deployment, and `StreamletRolled`. Returns the
/// streamlet with its Deployment as the apply left it.
async fn streamlet<'p>(
    on: &On<'_>,
    s: &'p StreamletStep,
) -> Result<Option<(String, AppliedDeployment)>, (Action<'p>, String)> {
    let mut deployment = None;
    for action in s.actions() {
        deployment = deployment.or(step(on, action).await?);
    }
    Ok(deployment.map(|d| (s.rendered.name.clone(), d)))
}

/// One step of a plan, which comes back with the error when it fails; a Deployment's apply gives
/// the Deployment as it left it.
async fn step<'p>(on: &On<'_>, action: Action<'p>) -> Result<Option<AppliedDeployment>, (Action<'p>, String)> {
    carry_out(on, &action).await.map_err(|message| (action, message))
}

/// One step of a plan, with the Deployment it applied as it left it, if it applied one; the
/// error is the API server's or Kafka's words (never a Secret's content).
async fn carry_out(on: &On<'_>, action: &Action<'_>) -> Result<Option<AppliedDeployment>, String> {
    let On { ctx, flow, conns, owners } = *on;
    let ns = flow.namespace().unwrap_or_default();
    let c = &ctx.client;
    let api = |e: kube::Error| match e {
        kube::Error::Api(s) => s.message,
        other => other.to_string(),
    };
    match action {
        Action::AddFinalizer => owned::add_finalizer(c, flow, FINALIZER).await.map(|()| None).map_err(api),
        Action::RemoveFinalizer => owned::remove_finalizer(c, flow, FINALIZER).await.map(|()| None).map_err(api),
        Action::WriteRecord(r) => owners.write(r).await.map(|()| None).map_err(|e| e.to_string()),
        Action::CreateTopic(t) => {
            let Some(conn) = conns.get(&t.id) else {
                return Err("the topic has no connection".into());
            };
            let name = flow.name_any();
            match ctx.kafka.create(conn, t).await {
                // Recorded at once: until then, the operator could not prove it created the topic.
                Ok(Created::Created(Some(id))) => {
                    owners.created(&t.name, &id).await.map(|()| None).map_err(|e| e.to_string())
                }
                Ok(Created::Created(None)) => {
                    tracing::warn!(namespace = %ns, %name, topic = %t.name, "created the topic, but Kafka gave no topic id for it: it is adopted read-only");
                    Ok(None)
                }
                Ok(Created::AlreadyExisted) => {
                    tracing::info!(namespace = %ns, %name, topic = %t.name, "topic appeared before the operator created it: it is adopted read-only");
                    owners.drop_intent(&t.name).await.map(|()| None).map_err(|e| e.to_string())
                }
                Err(f) => Err(f.reason),
            }
        }
        Action::Record(e) => {
            ctx.events.record(flow, e).await;
            Ok(None)
        }
        Action::ApplyServiceAccount(o) => owned::apply(c, &ns, *o).await.map(|_| None).map_err(api),
        Action::ApplyRole(o) => owned::apply(c, &ns, *o).await.map(|_| None).map_err(api),
        Action::ApplyRoleBinding(o) => owned::apply(c, &ns, *o).await.map(|_| None).map_err(api),
        Action::ApplySecret(o) => owned::apply(c, &ns, *o).await.map(|_| None).map_err(api),
        Action::ApplyDeployment(o) => owned::apply(c, &ns, *o)
            .await
            .map(|d| {
                let (uid, generation) = (d.metadata.uid?, d.metadata.generation?);
                Some(AppliedDeployment { uid, generation })
            })
            .map_err(api),
        Action::DeleteDeployment(n) => owned::delete::<Deployment>(c, &ns, n).await.map(|_| None).map_err(api),
        Action::DeleteSecret(n) => owned::delete::<Secret>(c, &ns, n).await.map(|_| None).map_err(api),
    }
}
