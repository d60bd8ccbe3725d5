//! The reconcile of one `AnkkaFlow`: a pipeline of named steps, each a function with its own error
//! type, and a note of what it needs (a Kubernetes client, Kafka, or nothing: a pure decision of
//! `flow-core`):
//!
//! ```text
//! fetch (client) -> decide (pure) -> delete (Kafka, client)                          -> done
//!                                  | refuse (client)                                   -> status
//!                                  | [observe (Kafka, client) -> build (pure) -> apply (Kafka, client)]
//!                                    beside reset (Kafka, client)
//!                                    -> follow (Kafka) -> rebuild (client) -> status
//! status: assemble (pure) -> write (client, one write when it changed)
//! ```
//!
//! The apply and the reset run side by side: a pending request's reset goes first, and the apply
//! waits until the reset's Kafka work is under its settle (see [`steps`]). The pipeline's objects
//! wait for Kafka's description of the topics only when a running streamlet uses a managed topic
//! that may have to be created first (`ValidPipeline::objects_wait_for_topics`, docs/operator.md,
//! "What one reconcile does", steps 3 and 4); otherwise they are applied while Kafka is asked
//! ([`apply_objects_first`]). What is applied and in
//! which order is `flow_core::render::plan`'s decision; what the status says is [`status::assemble`]'s,
//! from what the steps saw and did. A failed step is reported (a Warning event whose reason is its
//! error's category, and the `Applied` condition), never only in the log.

use std::sync::Arc;
use std::time::Duration;

use flow_core::events::{Event, EventType};
use flow_core::render::plan::{self, Decision, Deletion, Inputs, Observed, Plan, Refusal, ValidPipeline};
use flow_core::render::status::ApplyOutcome;
use flow_core::resource::{AnkkaFlow, AnkkaFlowStatus};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::controller::Action;

use crate::api::{self, kube_reason};
use crate::apply::{self, DeleteError, Rejected};
use crate::context::Context;
use crate::observe::{self, Fetched, Owned};
use crate::owners;
use crate::writes::Object;

mod status;

pub use status::{Pipeline, Report};

/// Why a reconcile failed: the step that failed, with its own error. Each shows in the resource's
/// `Applied` condition and in a Warning event whose reason is its [`Error::category`]; it is retried
/// with backoff, unless it is [`Error::permanent`].
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The object cannot be read as an `AnkkaFlow` (reported by `crate::controller`).
    #[error("the resource cannot be read as an AnkkaFlow: {0}")]
    Malformed(String),
    /// Step fetch.
    #[error(transparent)]
    Fetch(#[from] FetchError),
    /// Step decide: the resource lacks a field the API server always sets.
    #[error("the resource has no {}", .0.0)]
    Decide(plan::Incomplete),
    /// Step delete.
    #[error(transparent)]
    Delete(#[from] DeleteError),
    /// Step observe.
    #[error(transparent)]
    Observe(#[from] ObserveError),
    /// Step apply.
    #[error(transparent)]
    Apply(#[from] ApplyError),
    /// Step reset: carrying out the reset request (`crate::reset`).
    #[error("reset: {0}")]
    Reset(#[source] api::Error),
    /// Step rebuild: its events may not be recorded (the Lease).
    #[error("rebuild: {0}")]
    Rebuild(#[source] api::Error),
    /// Step write: the status write.
    #[error("cannot write the status: {0}")]
    Write(#[source] api::Error),
}

impl Error {
    /// The step that failed, for the log.
    pub fn step(&self) -> &'static str {
        match self {
            Error::Malformed(_) => "read",
            Error::Fetch(_) => "fetch",
            Error::Decide(_) => "decide",
            Error::Delete(_) => "delete",
            Error::Observe(_) => "observe",
            Error::Apply(_) => "apply",
            Error::Reset(_) => "reset",
            Error::Rebuild(_) => "rebuild",
            Error::Write(_) => "write",
        }
    }

    /// A stable CamelCase category, from the failed step's error: the reason of the Warning event a
    /// failed reconcile records, and the value of the `outcome` label of the reconcile metrics. Never
    /// holds a value, so its cardinality is the number of kinds of failure. A call to the API
    /// server that failed is `KubernetesApiFailed` in whichever step (the log and the note say
    /// which).
    pub fn category(&self) -> &'static str {
        match self {
            Error::Malformed(_) => "ResourceMalformed",
            Error::Fetch(e) => e.category(),
            Error::Decide(_) => "ResourceIncomplete",
            Error::Delete(e) => e.category(),
            Error::Observe(e) => e.api().category(),
            Error::Apply(e) => e.category(),
            Error::Reset(e) | Error::Rebuild(e) | Error::Write(e) => e.category(),
        }
    }

    /// Whether only a change of the resource can end it: it is not retried, the controller waits
    /// for a change instead (kube's `Action::await_change`). An object that cannot be read, or
    /// lacks a field the API server always sets, stays so until someone changes it.
    pub fn permanent(&self) -> bool {
        matches!(self.category(), "ResourceMalformed" | "ResourceIncomplete")
    }

    /// Whether the failure was reported where it happened, or may not be: a rejected step of the
    /// plan recorded its `ApplyFailed` event; an instance that lost the Lease records nothing more;
    /// a malformed object is reported by the controller.
    fn reported(&self) -> bool {
        matches!(self, Error::Apply(ApplyError::Rejected(_)) | Error::Malformed(_)) || self.category() == "LeaseLost"
    }
}

/// Why step fetch failed.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The Kafka cluster Secrets could not be listed.
    #[error("cannot read the Kafka cluster Secrets: Kubernetes API: {}", kube_reason(.0))]
    ClusterSecrets(#[source] kube::Error),
}

impl FetchError {
    /// See [`Error::category`].
    pub fn category(&self) -> &'static str {
        match self {
            FetchError::ClusterSecrets(_) => "KubernetesApiFailed",
        }
    }
}

/// Why step observe failed.
#[derive(Debug, thiserror::Error)]
pub enum ObserveError {
    /// The pipeline's Deployments, or the Secrets of its removed streamlets, could not be read.
    #[error("cannot read the pipeline's objects: {0}")]
    Objects(#[source] api::Error),
    /// The record of the topics the operator created for the resource could not be read.
    #[error("cannot read the record of the topics the operator created: {0}")]
    Record(#[source] api::Error),
}

impl ObserveError {
    fn api(&self) -> &api::Error {
        match self {
            ObserveError::Objects(e) | ObserveError::Record(e) => e,
        }
    }
}

/// Why step apply failed.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The record of the last apply could not be cleared before an apply of other objects.
    #[error("cannot clear the record of the last apply: {0}")]
    ClearRecord(#[source] api::Error),
    /// The record of the topics the operator creates could not be written to (it has no owner).
    #[error("cannot write the record of the topics the operator created: {0}")]
    Record(#[source] api::Error),
    /// A step of the plan was rejected (by the API server: a quota, an admission webhook,
    /// validation, RBAC; or by Kafka); the steps after it were not carried out. Already reported
    /// (its `ApplyFailed` event and the `Applied` condition).
    #[error("{0}")]
    Rejected(String),
}

impl ApplyError {
    /// See [`Error::category`].
    pub fn category(&self) -> &'static str {
        match self {
            ApplyError::ClearRecord(e) | ApplyError::Record(e) => e.category(),
            ApplyError::Rejected(_) => plan::REASON_APPLY_FAILED,
        }
    }
}

/// One reconcile: its steps, then the status they lead to, assembled and written once, then, for a
/// failure, a Warning event whose reason is the error's category.
///
/// Its API work runs in a reconcile slot, its Kafka waits in none (see `crate::slots`): the slot is
/// taken for the read and the decision, given back for the Kafka work (the reset request's, the
/// topics' describe and creation, the catch-up's lag), taken again for the apply, and for the status
/// write.
pub async fn reconcile(flow: Arc<AnkkaFlow>, ctx: Arc<Context>) -> Result<Action, Error> {
    let Ending { report, result } = steps(&flow, &ctx).await;
    let _slot = ctx.slots.resume().await;
    let result = match report.and_then(status::assemble) {
        Some(status) => {
            let written = write(&ctx, &flow, &status).await;
            result.and_then(|action| written.map(|()| action))
        }
        None => result,
    };
    if let Err(e) = &result {
        report_failure(&ctx, &flow, e).await;
    }
    result
}

/// What a reconcile's steps end with: what they saw and did, for the status (none while the
/// resource is deleted, or when this instance may no longer act), and what to return.
struct Ending<'f> {
    report: Option<Report<'f>>,
    result: Result<Action, Error>,
}

impl<'f> Ending<'f> {
    /// Steps that stopped at `e` before a status was computed: the stored status is written with the
    /// failure in its `Applied` condition (and with the reset's part as `reset` left it, when it
    /// ran), unless the resource is being deleted.
    fn stopped(flow: &'f AnkkaFlow, e: Error, reset: Option<AnkkaFlowStatus>) -> Self {
        let report = (flow.metadata.deletion_timestamp.is_none() && flow.namespace().is_some()).then(|| {
            let pipeline = Pipeline::Stopped { message: format!("reconcile failed: {e}"), reset_ran: reset.is_some() };
            Report::of(flow, pipeline, reset)
        });
        Ending { report, result: Err(e) }
    }
}

async fn steps<'f>(flow: &'f AnkkaFlow, ctx: &Context) -> Ending<'f> {
    let resync = Action::requeue(Duration::from_secs(ctx.settings.resync_seconds));

    // In a reconcile slot until its Kafka work (see [`reconcile`]).
    let slot = ctx.slots.start().await;
    let fetched = match fetch(ctx, flow).await {
        Ok(fetched) => fetched,
        Err(e) => return Ending::stopped(flow, e.into(), None),
    };
    let valid = match decide(ctx, flow, &fetched) {
        Err(e) => return Ending::stopped(flow, Error::Decide(e), None),
        Ok(Decision::Delete(deletion)) => {
            // Its topics are deleted in Kafka: without the slot, which the finalizer's removal takes again.
            drop(slot);
            let result = delete(ctx, flow, &deletion).await.map(|()| Action::await_change());
            return Ending { report: None, result: result.map_err(Error::from) };
        }
        Ok(Decision::Refuse(refusal)) => {
            refuse(ctx, flow, &refusal).await;
            let pipeline = Pipeline::Refused { status: refusal.status.clone(), outcome: refusal.outcome() };
            return Ending { report: Some(Report::of(flow, pipeline, None)), result: Ok(resync) };
        }
        Ok(Decision::Apply(valid)) => valid,
    };
    // From here, Kafka work: the slot is given back, and the apply takes one again.
    drop(slot);

    // A reset request being carried out comes first: the apply waits until the reset's Kafka work
    // is under its settle (or the drive returned), so that its server-side applies do not compete
    // with the reset's reads and writes on the API server's critical path. It changes nothing the
    // reset acts on: a reset acts only on streamlets stopped already (docs/performance.md, "One
    // status write per step, a lane per group").
    let (annotation, done) = flow_adapters::kube::reset_annotations(flow);
    let (quiet, reset_quiet) = tokio::sync::oneshot::channel::<()>();
    let reset_first = flow_core::request::pending(annotation, done);
    let pipeline = async {
        if reset_first {
            // Sent, or dropped when the drive ends: either way the apply goes on.
            let _ = reset_quiet.await;
        }
        // Kafka's answer for the topics, asked at once; the objects wait for it only when they
        // depend on it ([`ValidPipeline::objects_wait_for_topics`]).
        let described = describe(ctx, flow, &valid, &fetched);
        if valid.objects_wait_for_topics() {
            let topics = described.await;
            let seen = observe(ctx, flow, &valid, topics).await?;
            let plan = build(ctx, flow, &valid, &seen);
            apply(ctx, flow, &valid, plan, seen).await
        } else {
            apply_objects_first(ctx, flow, &valid, described).await
        }
    };
    // Beside observe, build and apply, so that a request waits neither for the pipeline's objects to
    // be read nor applied (a reset acts only on the spec's stopped streamlets, which the apply cannot
    // start).
    let (pipeline, reset) = tokio::join!(pipeline, reset(ctx, flow, quiet));
    let (mut reset, recheck) = match reset {
        Ok((reset, recheck)) => (reset, Ok(recheck)),
        Err((e, reset)) => (reset, Err(e)),
    };
    // A failure here keeps what the drive made of the reset in the status written, without the
    // record of the last apply of the pipeline's objects: an apply may have stopped part-way.
    let (built, applied) = match pipeline {
        Ok(done) => done,
        Err(e) => return Ending::stopped(flow, e, Some(reset)),
    };
    let recheck = match recheck {
        Ok(recheck) => recheck,
        Err(e) => return Ending::stopped(flow, e, Some(reset)),
    };
    let follow = crate::lag::follow_catch_up(ctx, flow, &mut reset).await;
    let rebuild = match rebuild(ctx, flow, &reset).await {
        Ok(conditions) => conditions,
        // No event, and no status write either: another instance may hold the Lease by now.
        Err(e) => return Ending { report: None, result: Err(e) },
    };
    let ledger = ctx.ledger.problem().await;

    let (outcome, result) = match applied {
        Ok(reapply) => {
            let resync = Duration::from_secs(ctx.settings.resync_seconds);
            let next = [recheck, follow, reapply].into_iter().flatten().min().map_or(resync, |r| r.min(resync));
            (ApplyOutcome::Applied, Ok(Action::requeue(next)))
        }
        Err(Rejected { note, outcome }) => (outcome, Err(ApplyError::Rejected(note).into())),
    };
    let mut report = Report::of(flow, Pipeline::Built { status: built, outcome }, Some(reset));
    report.rebuild = rebuild;
    report.ledger = ledger;
    Ending { report: Some(report), result }
}

/// Step fetch (needs a client): the Kafka cluster Secrets, the Secrets the built-ins name.
async fn fetch(ctx: &Context, flow: &AnkkaFlow) -> Result<Fetched, FetchError> {
    observe::fetch(ctx, flow).await.map_err(FetchError::ClusterSecrets)
}

/// Step decide (pure): delete, refuse, or a valid pipeline.
fn decide(ctx: &Context, flow: &AnkkaFlow, fetched: &Fetched) -> Result<Decision, plan::Incomplete> {
    plan::decide(&Inputs {
        flow,
        sidecar_image: ctx.settings.sidecar_image(),
        clusters: &fetched.clusters,
        token_endpoints: &ctx.token_endpoints,
        stage_secrets: &fetched.stage_secrets,
    })
}

/// Step delete (needs Kafka and a client): the managed topics, then the finalizer. Nothing else,
/// and no status.
async fn delete(ctx: &Context, flow: &AnkkaFlow, deletion: &Deletion) -> Result<(), DeleteError> {
    apply::deletion(ctx, flow, deletion).await
}

/// Step refuse (needs a client): one Warning event per problem; nothing applied, no reset carried
/// out.
async fn refuse(ctx: &Context, flow: &AnkkaFlow, refusal: &Refusal) {
    apply::refusal(ctx, flow, refusal).await;
}

/// What step observe saw.
struct Seen {
    /// What Kafka said of each topic, by topic id.
    topics: std::collections::BTreeMap<String, flow_core::render::topics::KafkaTopic>,
    /// The pipeline's objects in Kubernetes.
    owned: Owned,
    /// The record of the topics the operator created for the resource.
    record: owners::Stored,
    /// The reconcile slot, taken again for the API work.
    slot: crate::slots::Slot,
}

/// What Kafka said of each topic, by topic id.
type Described = std::collections::BTreeMap<String, flow_core::render::topics::KafkaTopic>;

/// Step observe, its Kafka part (needs Kafka, in no reconcile slot): the consumer groups this
/// pipeline shares with another on the same Kafka cluster (a warning only; Kafka for the cluster
/// ids), then each topic described in Kafka.
async fn describe(ctx: &Context, flow: &AnkkaFlow, valid: &ValidPipeline, fetched: &Fetched) -> Described {
    crate::tenancy::warn_shared_groups(ctx, flow, &fetched.clusters).await;
    observe::describe_topics(ctx, valid.topics()).await
}

/// Step observe, its client part (needs a client): in a reconcile slot again, the pipeline's objects
/// and the record of the topics the operator created for it; `topics` is what [`describe`] gave
/// (empty while it is not known yet).
async fn observe(ctx: &Context, flow: &AnkkaFlow, valid: &ValidPipeline, topics: Described) -> Result<Seen, Error> {
    let slot = ctx.slots.resume().await;
    let owned = observe::owned(ctx, flow).await.map_err(ObserveError::Objects)?;
    // Who owns the managed topics: the record the operator keeps in its own namespace.
    let record = if valid.topics().iter().any(|t| t.managed) {
        owners::read(ctx, flow).await.map_err(ObserveError::Record)?
    } else {
        owners::Stored::default()
    };
    Ok(Seen { topics, owned, record, slot })
}

/// Step build (pure, cannot fail): the ordered plan, and the status it leads to.
fn build(ctx: &Context, flow: &AnkkaFlow, valid: &ValidPipeline, seen: &Seen) -> Plan {
    valid.build(&Observed {
        topics: &seen.topics,
        deployments: &seen.owned.deployments,
        secrets: &seen.owned.secrets,
        applied: flow.status.as_ref().and_then(|s| s.applied.as_ref()),
        record: &seen.record.record,
        now: Timestamp::now(),
        reapply_after: Duration::from_secs(ctx.settings.resync_seconds),
    })
}

/// What step apply did: the plan's status with the record of what was applied, and when to apply
/// the objects again (or the rejected step, already reported).
type Applied = (AnkkaFlowStatus, Result<Option<Duration>, Rejected>);

/// Step apply (needs Kafka and a client): topics before Deployments, per-pipeline objects, each
/// streamlet's Secret then Deployment, removals (`crate::apply::plan`). A rejected step stops the
/// plan; it is reported there, and the reset and status steps still run.
async fn apply(
    ctx: &Context,
    flow: &AnkkaFlow,
    valid: &ValidPipeline,
    plan: Plan,
    seen: Seen,
) -> Result<Applied, Error> {
    let Seen { record, slot, .. } = seen;
    let stored = flow.status.as_ref().and_then(|s| s.applied.as_ref());
    clear_record_first(ctx, flow, &plan.objects, stored).await?;
    let owners = owners::Writer::new(ctx, flow, record).map_err(ApplyError::Record)?;
    let applied = apply::plan(ctx, flow, &plan, &connections(valid), &owners, slot, apply::Steps::All).await;
    let mut status = plan.status;
    status.applied = plan.objects.record(applied.as_ref().ok().cloned(), stored, Timestamp::now());
    Ok((status, applied.map(|_| plan.objects.reapply_in())))
}

/// Removes the record of the last apply before `objects` are applied, when they say it must go
/// first (`ObjectsStep::clears_record_first`).
async fn clear_record_first(
    ctx: &Context,
    flow: &AnkkaFlow,
    objects: &flow_core::render::applied::ObjectsStep,
    stored: Option<&flow_core::resource::AppliedObjects>,
) -> Result<(), Error> {
    if objects.clears_record_first(stored) {
        let object = Object::of(ctx, flow).map_err(ApplyError::ClearRecord)?;
        object.clear_applied().await.map_err(ApplyError::ClearRecord)?;
    }
    Ok(())
}

/// The Kafka connection of each topic, by topic id.
fn connections(valid: &ValidPipeline) -> apply::Connections {
    valid.topics().iter().map(|t| (t.id.clone(), t.kafka_connection().clone())).collect()
}

/// Steps observe, build and apply when the pipeline's objects do not wait for Kafka
/// ([`ValidPipeline::objects_wait_for_topics`]): the objects are read, built and applied while
/// `described` asks Kafka, so that a replicas change (a stop before a reset above all) never waits
/// for a Kafka cluster that is slow, unreachable or refuses the operator; then, once Kafka answered,
/// the plan is built again with its answer and its setup carried out (the finalizer, the record of
/// the topics created, the topics), and the status comes from that plan. Nothing of the objects
/// depends on the answer, so both builds render them alike; their record is the first build's.
/// The setup is carried out after a rejected objects' step too, and the first failure reported.
async fn apply_objects_first(
    ctx: &Context,
    flow: &AnkkaFlow,
    valid: &ValidPipeline,
    described: impl std::future::Future<Output = Described>,
) -> Result<Applied, Error> {
    let stored = flow.status.as_ref().and_then(|s| s.applied.as_ref());
    let objects = async {
        let seen = observe(ctx, flow, valid, Described::new()).await?;
        let early = build(ctx, flow, valid, &seen);
        let Seen { record, slot, .. } = seen;
        clear_record_first(ctx, flow, &early.objects, stored).await?;
        let owners = owners::Writer::new(ctx, flow, record.clone()).map_err(ApplyError::Record)?;
        let conns = connections(valid);
        let applied = apply::plan(ctx, flow, &early, &conns, &owners, slot, apply::Steps::Objects).await;
        Ok::<_, Error>((early.objects, applied, record, seen.owned))
    };
    let (topics, objects) = tokio::join!(described, objects);
    let (objects, applied, record, owned) = objects?;
    let slot = ctx.slots.resume().await;
    let seen = Seen { topics, owned, record, slot };
    let plan = build(ctx, flow, valid, &seen);
    let Seen { record, slot, .. } = seen;
    // The setup goes on after a rejected objects' step too: the finalizer (with onDelete: Delete)
    // must not wait for an object the API server keeps refusing. The first failure is reported.
    let owners = owners::Writer::new(ctx, flow, record).map_err(ApplyError::Record)?;
    let setup = apply::plan(ctx, flow, &plan, &connections(valid), &owners, slot, apply::Steps::Setup).await;
    let applied = match (applied, setup) {
        (Ok(deployments), Ok(_)) => Ok(deployments),
        (Err(rejected), _) | (Ok(_), Err(rejected)) => Err(rejected),
    };
    let mut status = plan.status;
    status.applied = objects.record(applied.as_ref().ok().cloned(), stored, Timestamp::now());
    Ok((status, applied.map(|_| objects.reapply_in())))
}

/// Step reset (needs Kafka and a client): the reset request as far as it can go now, then the
/// catch-up of a finished one (`crate::reset::drive`). The driver writes the status itself while it
/// runs, ahead of each Kafka effect (its write-ahead persists, see docs/reset.md), through the one
/// writer (`crate::writes::Object`), on top of the stored status; the reconcile's own write comes
/// after it ended, with the reset's part of it. Returns the status holding the reset's part, and when
/// to look again; or the error with the reset's part as far as it got.
async fn reset(
    ctx: &Context,
    flow: &AnkkaFlow,
    quiet: tokio::sync::oneshot::Sender<()>,
) -> Result<(AnkkaFlowStatus, Option<Duration>), (Error, AnkkaFlowStatus)> {
    let mut reset = flow.status.clone().unwrap_or_default();
    match crate::reset::drive(ctx, flow, &mut reset, quiet).await {
        Ok(recheck) => Ok((reset, recheck)),
        Err(e) => Err((Error::Reset(e), reset)),
    }
}

/// Step rebuild (needs a client): whether a rebuild holds streamlets at 0 replicas (the plan
/// rendered them so), and whether its groups caught up, as conditions and, when that changes, an
/// event. Returns the conditions.
///
/// # Errors
/// [`Error::Rebuild`] when there are events to record and this instance may no longer act.
async fn rebuild(
    ctx: &Context,
    flow: &AnkkaFlow,
    reset: &AnkkaFlowStatus,
) -> Result<Vec<flow_core::resource::Condition>, Error> {
    let (annotation, done) = flow_adapters::kube::reset_annotations(flow);
    let held = flow_core::rebuild::held(&flow.spec, annotation, done);
    let conditions = flow_core::rebuild::conditions(annotation, &held, reset.reset.as_ref(), flow.metadata.generation);
    let before = flow.status.as_ref().map_or(&[][..], |s| s.conditions.as_slice());
    let events = flow_core::rebuild::events(annotation, &conditions, before);
    if !events.is_empty() {
        ctx.may_act.check().map_err(Error::Rebuild)?;
    }
    for event in events {
        ctx.events.record(flow, &event).await;
    }
    Ok(conditions)
}

/// Step write (needs a client): the assembled status, through the one writer
/// (`crate::writes::Object`), on the object read only and only while this instance may act.
async fn write(ctx: &Context, flow: &AnkkaFlow, status: &AnkkaFlowStatus) -> Result<(), Error> {
    Object::of(ctx, flow).map_err(Error::Write)?.status(status).await.map_err(Error::Write)
}

/// Reports a failed reconcile on the resource (needs a client): a Warning event whose reason is the
/// error's category (the `Applied` condition was set by the reconcile's status write), unless it
/// was reported where it failed ([`Error::reported`]). An event that cannot be recorded is logged.
async fn report_failure(ctx: &Context, flow: &AnkkaFlow, e: &Error) {
    if e.reported() || flow.namespace().is_none() {
        return;
    }
    let note = format!("reconcile failed: {e}");
    ctx.events.record(flow, &Event::new(EventType::Warning, e.category(), note.clone(), note)).await;
}

#[cfg(test)]
mod tests;
