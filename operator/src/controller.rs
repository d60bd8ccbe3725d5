//! The reconcile of one `AnkkaFlow`: a short list of steps, each saying whether it needs a client
//! (Kubernetes, Kafka) or is pure (a decision of `flow-core`):
//!
//! ```text
//! fetch (I/O) -> decide (pure) -> [delete | refuse | fetch topics and objects (I/O) -> build (pure)
//!   -> apply (I/O)] -> reset (I/O) -> status (I/O, one write)
//! ```
//!
//! What is applied and in which order is `flow_core::render::plan`'s decision; this module wires the
//! steps and reports every failure (a Warning event whose reason is the error's category, and the
//! `Applied` condition), never only in the log.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flow_adapters::kafka::Deadlines;
use flow_core::connection::CLUSTER_SECRET_PREFIX;
use flow_core::events::{Event, EventType};
use flow_core::names::{LABEL_MANAGED_BY, MANAGED_BY};
use flow_core::render::plan::{self, Decision, Inputs, Observed};
use flow_core::render::status::{self, ApplyOutcome};
use flow_core::resource::{AnkkaFlow, AnkkaFlowStatus};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::jiff::Timestamp;
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store, reflector};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};

use crate::context::{Context, Error};
use crate::leader::{Leadership, Stop};
use crate::settings::Settings;
use crate::{apply, observe};

/// Starts the controller and runs until SIGTERM or Ctrl-C.
///
/// With leader election on (the default), it first waits until this instance holds the Lease
/// (see [`crate::leader`]), reconciles only while it holds it, ends the process at once if it loses
/// it, and gives it back when it stops.
///
/// # Errors
/// When no Kubernetes client can be built, the Lease cannot be used, or the ledger cannot be opened.
pub async fn run(settings: Settings) -> Result<(), Box<dyn std::error::Error>> {
    let stop = Stop::listen().map_err(|e| format!("cannot listen for SIGTERM: {e}"))?;
    // Every call but the watches has a timeout (see `crate::leader::clients`).
    let (client, watches) = crate::leader::clients().await.map_err(|e| format!("cannot reach Kubernetes: {e}"))?;
    tracing::info!(
        ledger = %settings.ledger_dir.display(),
        clusters_namespace = %settings.clusters_namespace(),
        watch_namespace = %crate::scope::Scope::of(&settings).shown(),
        leader_election = settings.leader_election,
        "starting"
    );
    match settings.sidecar_image() {
        Some(image) => tracing::info!(image, "sidecar image {image}"),
        None => tracing::warn!("sidecar image (not configured: every pipeline will be refused)"),
    }
    // Served before the Lease is held, so that a waiting instance answers its probes.
    let metrics = Arc::new(crate::metrics::Metrics::default());
    crate::metrics::serve_in_background(settings.metrics_address, metrics.clone());
    crate::probe::spawn(client.clone(), metrics.clone());
    let leadership = if settings.leader_election {
        match Leadership::acquire(client.clone(), &settings, stop.clone()).await? {
            Some(held) => Some(held),
            None => return Ok(()),
        }
    } else {
        None
    };
    // Opened only by the Lease holder: a waiting instance touches nothing. A ledger that cannot be
    // opened is reported and tried again at each use, never a reason to stop.
    let ledger = crate::ledger::Ledger::open(&settings.ledger_dir, metrics.clone());
    // One controller per watched namespace (one of every namespace by default): a watch covers one
    // namespace or all of them, and the operator's rights may be bound in the watched ones alone.
    let scope = crate::scope::Scope::of(&settings);
    let (flows, deployments) = (scope.apis::<AnkkaFlow>(&watches), scope.apis::<Deployment>(&watches));
    // The pipelines' pods: when each streamlet stopped, which the reset's settle counts from.
    crate::stopped::spawn(scope.apis::<Pod>(&watches));
    let mut deployment_stores = Vec::new();
    let controllers: Vec<Controller<AnkkaFlow>> = flows
        .into_iter()
        .zip(deployments)
        .map(|(flows, deployments)| {
            // The controller's cache of AnkkaFlows, and what wakes a reconcile of one: a change the
            // reconcile has to act on (see [`acts_on`]), never a status write alone (its own, mostly).
            let (store, writer) = reflector::store();
            let changes = reflector(writer, watcher(flows, listing()).modify(forget_managed_fields))
                .applied_objects()
                .predicate_filter(acts_on, Default::default());
            // The Deployments it manages: what wakes their resource's reconcile, and a cache of them
            // (see `crate::observe::owned`).
            let (owned, owned_writer) = reflector::store();
            deployment_stores.push(owned);
            let managed = listing().labels(&format!("{LABEL_MANAGED_BY}={MANAGED_BY}"));
            let owned_changes = reflector(
                owned_writer,
                watcher(deployments, managed).default_backoff().modify(observe::slim_deployment),
            )
            .touched_objects();
            // kube's own limit is off (0: every reconcile that is due starts; never two of one
            // resource): the shared reconcile slots bound them instead, held while a reconcile works
            // with the API server, not while it waits for Kafka (see `crate::slots`).
            Controller::for_stream(changes, store)
                .owns_stream(owned_changes)
                .with_config(kube::runtime::controller::Config::default().concurrency(0))
        })
        .collect();
    // The controllers' caches: every AnkkaFlow the operator watches, for the lag sampler and the
    // consumer groups they may share.
    let all_flows = controllers.iter().map(Controller::store).collect();
    let (cluster_secrets, cluster_ticks) =
        watch_cluster_secrets(watches.clone(), settings.clusters_namespace(), controllers.len());
    let ctx = Arc::new(Context {
        clusters: crate::clusters::ClusterSecrets::new(
            client.clone(),
            settings.clusters_namespace(),
            Some(cluster_secrets),
        ),
        client,
        ledger,
        kafka: crate::connections::Kafka::new(crate::connections::Pool::new(
            Deadlines { request: Duration::from_secs(settings.kafka_request_timeout_seconds) },
            crate::connections::Bulkhead {
                calls: usize::from(settings.kafka_calls_per_cluster),
                wait: Duration::from_secs(settings.kafka_request_timeout_seconds),
            },
        )),
        token_endpoints: settings.token_endpoints(),
        settings: settings.clone(),
        failures: Mutex::new(HashMap::new()),
        metrics,
        flows: all_flows,
        deployments: deployment_stores,
        recorded: Mutex::new(HashMap::new()),
        lag_measured: Mutex::new(HashMap::new()),
        slots: crate::slots::Slots::new(usize::from(settings.max_concurrent_reconciles)),
        cluster_ids: Default::default(),
    });
    let counted = Arc::downgrade(&ctx);
    ctx.metrics.count_kafka_requests(Box::new(move || {
        counted.upgrade().map(|ctx| ctx.kafka.requests_sent()).unwrap_or_default()
    }));
    ctx.metrics.leader.set(1);
    crate::lag::spawn_sampler(ctx.clone());
    crate::owners::spawn_sweeper(ctx.clone());
    let runs = controllers
        .into_iter()
        .zip(cluster_ticks)
        .map(|(controller, ticks)| run_controller(controller, ticks, stop.clone(), ctx.clone()));
    let controller = futures::stream::select_all(runs).for_each(|res| async move {
        match res {
            Ok((obj, _)) => tracing::debug!(object = %obj, "reconciled"),
            Err(e) if quiet(&e) => tracing::debug!(error = %e, "watch restarted or object gone"),
            Err(e) => tracing::warn!(error = %e, "reconcile failed"),
        }
    });
    match leadership {
        None => controller.await,
        Some(mut held) => {
            tokio::select! {
                () = controller => held.release().await,
                () = held.lost() => {
                    // Not a return: the runtime's shutdown would wait for Kafka calls that run on
                    // blocking threads, and meanwhile another instance may already reconcile.
                    std::process::exit(1);
                }
            }
        }
    }
    tracing::info!("stopped");
    Ok(())
}

/// Reconciles with `controller` until `stop`: then the running reconciles finish (kube's graceful
/// shutdown) and the stream ends.
///
/// kube holds every reconcile until the controller's cache has listed once, and its graceful
/// shutdown ends the watch that would list it: a stop that came before the list would wait forever.
/// Then no reconcile can have started, so the stream ends at once.
fn run_controller(
    controller: Controller<AnkkaFlow>,
    ticks: impl futures::Stream<Item = ()> + Send + Sync + 'static,
    stop: Stop,
    ctx: Arc<Context>,
) -> futures::stream::BoxStream<'static, Reconciled> {
    let store = controller.store();
    let unlisted_at_stop = {
        let stop = stop.clone();
        async move {
            stop.requested().await;
            if crate::context::listed(&store) {
                std::future::pending::<()>().await;
            }
        }
    };
    controller
        .reconcile_all_on(ticks)
        .graceful_shutdown_on(stop.requested())
        .run(reconcile_measured, error_policy, ctx)
        .take_until(unlisted_at_stop)
        .boxed()
}

/// What a controller's stream yields for each reconcile.
type Reconciled =
    Result<(ObjectRef<AnkkaFlow>, Action), kube::runtime::controller::Error<Error, kube::runtime::watcher::Error>>;

/// [`reconcile`], counted and timed by outcome for the metrics.
async fn reconcile_measured(flow: Arc<AnkkaFlow>, ctx: Arc<Context>) -> Result<Action, Error> {
    let started = std::time::Instant::now();
    let result = reconcile(flow.clone(), ctx.clone()).await;
    ctx.metrics.reconciled(result.as_ref().map_or_else(Error::category, |_| "success"), started.elapsed());
    // The Kafka clients a reset would use, built in the background once the pipeline is applied.
    if result.is_ok() {
        crate::warm::ahead(&ctx, &flow);
    }
    result
}

/// What of an `AnkkaFlow` a reconcile acts on, hashed: its generation (the spec; the API server also
/// bumps it when deletion starts), its annotations (the reset and rebuild requests, and their done
/// marks), its finalizers and its deletion. A change of anything else, the status above all, does
/// not wake a reconcile: every reconcile writes the status, and without this filter each write woke
/// one more reconcile that had nothing to do (see docs/performance.md, "1,000 AnkkaFlows").
fn acts_on(flow: &AnkkaFlow) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    flow.metadata.generation.hash(&mut h);
    flow.annotations().hash(&mut h);
    flow.finalizers().hash(&mut h);
    flow.metadata.deletion_timestamp.as_ref().map(|t| t.0.to_string()).hash(&mut h);
    Some(h.finish())
}

/// Drops an `AnkkaFlow`'s `metadata.managedFields` before it is cached: the operator never reads
/// them (it writes with server-side apply), and they are a good part of each cached resource.
fn forget_managed_fields(flow: &mut AnkkaFlow) {
    flow.managed_fields_mut().clear();
}

/// Watches the Secrets of the clusters namespace, metadata only (their values never reach this
/// watch), and returns the store it fills, for [`crate::clusters::ClusterSecrets`], and for each of
/// `controllers` controllers a stream that ticks whenever a Kafka cluster Secret
/// (`kafka-cluster-<name>`) is created, changed or deleted, so that every pipeline is reconciled and
/// the streamlets whose rendered configuration changed roll (the periodic resync would notice too,
/// later). The store is updated before the tick.
fn watch_cluster_secrets(
    client: Client,
    namespace: &str,
    controllers: usize,
) -> (Store<PartialObjectMeta<Secret>>, Vec<futures::channel::mpsc::Receiver<()>>) {
    let secrets: Api<PartialObjectMeta<Secret>> = Api::namespaced(client, namespace);
    let (store, writer) = reflector::store();
    let (mut ticks, receivers): (Vec<_>, Vec<_>) = (0..controllers).map(|_| futures::channel::mpsc::channel(1)).unzip();
    let changes = reflector(
        writer,
        watcher(secrets, watcher::Config::default()).default_backoff().modify(|m| m.managed_fields_mut().clear()),
    )
    .touched_objects();
    tokio::spawn(async move {
        let mut changes = std::pin::pin!(changes);
        while let Some(seen) = changes.next().await {
            match seen {
                Ok(meta) if meta.name_any().starts_with(CLUSTER_SECRET_PREFIX) => {
                    tracing::debug!(secret = %meta.name_any(), "cluster Secret changed: reconciling every pipeline");
                    // A full channel already holds a tick that has not been taken yet: one is enough.
                    for tick in &mut ticks {
                        let _ = tick.try_send(());
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "cannot watch the Kafka cluster Secrets; edits are noticed at the next resync");
                }
            }
        }
    });
    (store, receivers)
}

fn error_policy(flow: Arc<AnkkaFlow>, err: &Error, ctx: Arc<Context>) -> Action {
    let key = ObjectRef::from_obj(flow.as_ref());
    let attempt = {
        let mut f = ctx.failures.lock().unwrap_or_else(|p| p.into_inner());
        let n = f.entry(key).or_insert(0);
        *n += 1;
        *n
    };
    let delay = ctx.settings.retry_backoff(attempt);
    tracing::warn!(
        namespace = flow.namespace(),
        name = %flow.name_any(),
        category = err.category(),
        error = %err,
        attempt,
        ?delay,
        "will retry"
    );
    Action::requeue(delay)
}

/// One reconcile: its steps, then its one status write, then, for a failure, a Warning event whose
/// reason is the error's category. A failure also shows in the `Applied` condition: the status
/// written is the computed one when the steps got that far (a failed step of the plan), else the
/// stored one with the failure. It is returned for a retry with backoff.
///
/// Its API work runs in a reconcile slot, its Kafka waits in none (see `crate::slots`): the slot is
/// taken for the read and the decision, given back for the Kafka work (the reset request's, the
/// topics' describe and creation, the catch-up's lag), taken again for the apply, and for the status
/// write.
pub async fn reconcile(flow: Arc<AnkkaFlow>, ctx: Arc<Context>) -> Result<Action, Error> {
    let Ending { status, result } = steps(&flow, &ctx).await;
    let _slot = ctx.slots.resume().await;
    let result = match status {
        Some(status) => {
            let written = write_status(&ctx, &flow, status.status, &status.outcome).await;
            result.and_then(|action| written.map(|()| action))
        }
        None => result,
    };
    match &result {
        Ok(_) => {
            ctx.failures.lock().unwrap_or_else(|p| p.into_inner()).remove(&ObjectRef::from_obj(flow.as_ref()));
        }
        Err(e) => report_failure(&ctx, &flow, e).await,
    }
    result
}

/// What a reconcile's steps end with: the status to write (none while the resource is deleted), and
/// what to return.
struct Ending {
    status: Option<Status>,
    result: Result<Action, Error>,
}

/// A status to write, and the outcome of the apply for its `Applied` condition.
struct Status {
    status: AnkkaFlowStatus,
    outcome: ApplyOutcome,
}

impl Ending {
    /// Steps that stopped at `e` before computing a status: the stored status is written with the
    /// failure in its `Applied` condition, unless the resource is being deleted.
    fn failed(flow: &AnkkaFlow, e: Error) -> Self {
        let status = (flow.metadata.deletion_timestamp.is_none() && flow.namespace().is_some()).then(|| Status {
            status: flow.status.clone().unwrap_or_default(),
            outcome: ApplyOutcome::Failed { message: format!("reconcile failed: {e}") },
        });
        Ending { status, result: Err(e) }
    }
}

/// `result?` for [`steps`]: a failure ends the steps with [`Ending::failed`].
macro_rules! step {
    ($flow:expr, $result:expr) => {
        match $result {
            Ok(v) => v,
            Err(e) => return Ending::failed($flow, Error::from(e)),
        }
    };
}

async fn steps(flow: &AnkkaFlow, ctx: &Context) -> Ending {
    let resync = Action::requeue(Duration::from_secs(ctx.settings.resync_seconds));

    // In a reconcile slot until its Kafka work (see [`reconcile`]).
    let slot = ctx.slots.start().await;

    // 1. Fetch (needs a client): the Kafka cluster Secrets, the Secrets the built-ins name.
    let fetched = step!(flow, observe::fetch(ctx, flow).await);

    // 2. Decide (pure): delete, refuse, or a valid pipeline.
    let inputs = Inputs {
        flow,
        sidecar_image: ctx.settings.sidecar_image(),
        clusters: &fetched.clusters,
        token_endpoints: &ctx.token_endpoints,
        stage_secrets: &fetched.stage_secrets,
    };
    let valid = match step!(flow, plan::decide(&inputs)) {
        // 2a. Deletion (needs Kafka and a client): managed topics, then the finalizer. Nothing else,
        // and no status.
        Decision::Delete(deletion) => {
            // Its topics are deleted in Kafka: without the slot, which the finalizer's removal takes again.
            drop(slot);
            let result = apply::deletion(ctx, flow, &deletion).await.map(|()| Action::await_change());
            return Ending { status: None, result };
        }
        // 2b. Refusal (needs a client): one Warning event per problem, status Failed, nothing
        // applied, no reset carried out.
        Decision::Refuse(refusal) => {
            apply::refusal(ctx, flow, &refusal).await;
            let mut status = refusal.status.clone();
            keep_reset(flow, &mut status);
            return Ending { status: Some(Status { status, outcome: refusal.outcome() }), result: Ok(resync) };
        }
        Decision::Apply(valid) => valid,
    };
    // From here, Kafka work: the slot is given back, and the apply takes one again.
    drop(slot);

    // 3. Fetch (needs Kafka and a client): each topic described in Kafka, the pipeline's objects.
    // 4. Build (pure, cannot fail): the ordered plan and the status it leads to.
    // 5. Apply (needs Kafka and a client): topics before Deployments, per-pipeline objects, each
    // streamlet's Secret then Deployment, removals. A failed step stops the plan; it is reported,
    // and the reset and status steps still run.
    let conns: apply::Connections =
        valid.topics().iter().map(|t| (t.id.clone(), t.kafka_connection().clone())).collect();
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
        // 2c. Consumer groups this pipeline shares with another on the same Kafka cluster (needs
        // Kafka, for the cluster ids, and a client): a warning only.
        crate::tenancy::warn_shared_groups(ctx, flow, &fetched.clusters).await;
        let topics = observe::describe_topics(ctx, valid.topics()).await;
        let slot = ctx.slots.resume().await;
        let owned = observe::owned(ctx, flow).await?;
        // Who owns the managed topics: the record the operator keeps in its own namespace.
        let record = if valid.topics().iter().any(|t| t.managed) {
            crate::owners::read(ctx, flow).await?
        } else {
            crate::owners::Stored::default()
        };
        let now = Timestamp::now();
        let stored = flow.status.as_ref().and_then(|s| s.applied.as_ref());
        let plan = valid.build(&Observed {
            topics: &topics,
            deployments: &owned.deployments,
            secrets: &owned.secrets,
            applied: stored,
            record: &record.record,
            now,
            reapply_after: Duration::from_secs(ctx.settings.resync_seconds),
        });
        if plan.objects.clears_record_first(stored) {
            crate::writes::Object::of(&ctx.client, flow)?.clear_applied().await?;
        }
        let owners = crate::owners::Writer::new(ctx, flow, record)?;
        let applied = apply::plan(ctx, flow, &plan, &conns, &owners, slot).await;
        let mut status = plan.status;
        status.applied = plan.objects.record(applied.as_ref().ok().cloned(), stored, now);
        Ok::<_, Error>((status, applied.map(|_| plan.objects.reapply_in())))
    };
    // 6. Reset (needs Kafka and a client): the reset request as far as it can go now, beside steps
    // 3-5, so that a request waits neither for the pipeline's objects to be read nor applied (a reset
    // acts only on the spec's stopped streamlets, which the apply cannot start); then the catch-up of
    // a finished one. The driver writes the status itself while it runs, ahead of each Kafka effect
    // (its write-ahead persists, see docs/reset.md), on top of the stored status; the reconcile's own
    // write comes after, with the reset's part of it.
    let mut reset = flow.status.clone().unwrap_or_default();
    let (pipeline, recheck) = tokio::join!(pipeline, crate::reset::drive(ctx, flow, &mut reset, quiet));
    // A failure here keeps what the drive made of the reset in the status written, without the
    // record of the last apply of the pipeline's objects: an apply may have stopped part-way.
    let failed = |e: Error, reset: AnkkaFlowStatus| {
        let mut ending = Ending::failed(flow, e);
        if let Some(s) = ending.status.as_mut() {
            s.status = AnkkaFlowStatus { applied: None, ..reset };
        }
        ending
    };
    let (mut status, applied) = match pipeline {
        Ok(done) => done,
        Err(e) => return failed(e, reset),
    };
    let recheck = match recheck {
        Ok(r) => r,
        Err(e) => return failed(e, reset),
    };
    status.reset = reset.reset;
    status.reset_history = reset.reset_history;
    let follow = crate::lag::follow_catch_up(ctx, flow, &mut status).await;
    // A rebuild: whether it holds streamlets at 0 replicas (the plan above rendered them so), and
    // whether its groups caught up, as conditions and, when that changes, an event.
    let held = flow_core::rebuild::held(&flow.spec, annotation, done);
    let rebuild = flow_core::rebuild::conditions(annotation, &held, status.reset.as_ref(), flow.metadata.generation);
    let before = flow.status.as_ref().map_or(&[][..], |s| s.conditions.as_slice());
    let events = flow_core::rebuild::events(annotation, &rebuild, before);
    if !events.is_empty() && !crate::leader::may_act() {
        // No event, and no status write either: another instance may hold the Lease by now.
        return Ending { status: None, result: Err(Error::LeaseLost) };
    }
    for event in events {
        apply::record(ctx, flow, &event).await;
    }
    status.conditions.extend(rebuild);
    if let Some(problem) = ctx.ledger.problem().await {
        status.conditions.push(status::ledger_condition(&problem, flow.metadata.generation));
    }

    // 7. Status (needs a client): one write, when it changed, done by [`reconcile`].
    let (outcome, result) = match applied {
        Ok(reapply) => {
            let resync = Duration::from_secs(ctx.settings.resync_seconds);
            let next = [recheck, follow, reapply].into_iter().flatten().min().map_or(resync, |r| r.min(resync));
            (ApplyOutcome::Applied, Ok(Action::requeue(next)))
        }
        Err((e, outcome)) => (outcome, Err(e)),
    };
    Ending { status: Some(Status { status, outcome }), result }
}

/// The reset part of the stored status, for a status the reset driver does not fill in (a refused
/// resource): kept as it is, since the server-side apply of the status would remove it otherwise.
fn keep_reset(flow: &AnkkaFlow, status: &mut AnkkaFlowStatus) {
    if let Some(stored) = &flow.status {
        status.reset.clone_from(&stored.reset);
        status.reset_history.clone_from(&stored.reset_history);
    }
}

/// Adds the conditions and transition times to `status` and writes it when it differs from the
/// stored one (needs a client).
async fn write_status(
    ctx: &Context,
    flow: &AnkkaFlow,
    status: AnkkaFlowStatus,
    outcome: &ApplyOutcome,
) -> Result<(), Error> {
    let status = status::finish(status, flow.status.as_ref(), outcome, Timestamp::now());
    if status::needs_write(flow.status.as_ref(), &status) {
        // On the object read only, and only while this instance holds the Lease (`crate::writes`).
        crate::writes::Object::of(&ctx.client, flow)?.status(&status).await?;
    }
    Ok(())
}

/// How the watches list what they watch, at a start and after a watch expired: in pages of
/// [`LIST_PAGE`] objects.
fn listing() -> watcher::Config {
    watcher::Config::default().page_size(LIST_PAGE)
}

/// Objects per page of a watch's list (docs/performance.md, "The memory after a burst"). Each page
/// is held whole, as JSON and as objects, until its objects are cached: with kube's default of 500
/// a restart with 1,000 AnkkaFlows and their Deployments left about 30 MiB that the allocator kept.
const LIST_PAGE: u32 = 100;

/// Controller errors that are part of normal operation and need no one's attention: a watch whose
/// resourceVersion expired (410 Gone; the watcher lists again by itself, see the Kubernetes API
/// concepts, "Efficient detection of changes"), and a queued reconcile of an object deleted since.
fn quiet<R>(e: &kube::runtime::controller::Error<R, kube::runtime::watcher::Error>) -> bool {
    use kube::runtime::controller::Error as C;
    use kube::runtime::watcher::Error as W;
    match e {
        C::QueueError(W::WatchError(status)) => status.code == 410,
        C::ObjectNotFound(_) => true,
        _ => false,
    }
}

/// Reports a failed reconcile on the resource (needs a client): a Warning event whose reason is the
/// error's category (the `Applied` condition was set by the reconcile's status write). A failed
/// step of the plan was reported where it failed. An event that cannot be recorded is logged.
async fn report_failure(ctx: &Context, flow: &AnkkaFlow, e: &Error) {
    // An apply reports itself; an instance that lost the Lease records nothing more.
    if matches!(e, Error::Apply(_) | Error::LeaseLost) || flow.namespace().is_none() {
        return;
    }
    let note = format!("reconcile failed: {e}");
    apply::record(ctx, flow, &Event::new(EventType::Warning, e.category(), note.clone(), note)).await;
}

#[cfg(test)]
mod tests;
