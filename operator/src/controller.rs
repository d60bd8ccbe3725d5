//! The controllers of `AnkkaFlow`s: their watches and caches, what wakes a reconcile, and what
//! becomes of each reconcile's result. The reconcile itself, a pipeline of named steps, is in
//! `crate::reconcile`: read it there.
//!
//! An object that cannot be read as an `AnkkaFlow` stays in the watch as such
//! ([`crate::context::Guarded`]): it never stops the watch of the others, and is reported on itself
//! (a Warning event `ResourceMalformed`) instead of reconciled. Every result is reported: a success
//! in the log, a failure as a Warning event whose reason is its category (`crate::reconcile::Error`),
//! in the `Applied` condition and in the metrics; a permanent failure waits for a change of the
//! resource, any other is retried with backoff ([`error_policy`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flow_adapters::kafka::Deadlines;
use flow_core::connection::CLUSTER_SECRET_PREFIX;
use flow_core::events::{Event, EventType};
use flow_core::names::{LABEL_MANAGED_BY, MANAGED_BY};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store, reflector};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};

use crate::api::{MayAct, Recorder};
use crate::context::{Context, Guarded};
use crate::leader::{Leadership, Stop};
use crate::observe;
use crate::reconcile::{Error, reconcile};
use crate::settings::Settings;

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
    // Every call but the watches has a timeout (see `crate::api::clients`).
    let (client, watches) = crate::api::clients().await.map_err(|e| format!("cannot reach Kubernetes: {e}"))?;
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
    // Served before the Lease is held, so that a waiting instance answers its probes; an address
    // that cannot be bound stops the operator here, before it takes the Lease.
    let metrics = Arc::new(crate::metrics::Metrics::default());
    crate::metrics::serve_in_background(settings.metrics_address, metrics.clone())
        .await
        .map_err(|e| format!("cannot serve /metrics, /healthz and /readyz on {}: {e}", settings.metrics_address))?;
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
    let (flows, deployments) = (scope.apis::<Guarded>(&watches), scope.apis::<Deployment>(&watches));
    // The pipelines' pods: when each streamlet stopped, which the reset's settle counts from.
    crate::stopped::spawn(scope.apis::<Pod>(&watches));
    let mut deployment_stores = Vec::new();
    let controllers: Vec<Controller<Guarded>> = flows
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
    let may_act = leadership.as_ref().map_or_else(MayAct::always, Leadership::may_act);
    let ctx = Arc::new(Context {
        events: Recorder::new(client.clone(), &settings.instance, metrics.clone()),
        may_act,
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
        lag_measured: Mutex::new(HashMap::new()),
        slots: crate::slots::Slots::new(usize::from(settings.max_concurrent_reconciles)),
        cluster_ids: Default::default(),
        stop: stop.clone(),
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
            Ok((obj, action)) => tracing::debug!(object = %obj, ?action, "reconciled"),
            Err(e) if quiet(&e) => tracing::debug!(error = %e, "watch restarted or object gone"),
            // A reconcile's own failure was reported on its resource and logged by `error_policy`.
            Err(kube::runtime::controller::Error::ReconcilerFailed(e, obj)) => {
                tracing::debug!(object = %obj, step = e.step(), category = e.category(), "reconcile failed")
            }
            Err(e) => tracing::warn!(error = %e, "the controller failed"),
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
    controller: Controller<Guarded>,
    ticks: impl futures::Stream<Item = ()> + Send + Sync + 'static,
    stop: Stop,
    ctx: Arc<Context>,
) -> futures::stream::BoxStream<'static, Reconciled> {
    let store = controller.store();
    let unlisted_at_stop = {
        let stop = stop.clone();
        async move {
            stop.requested().await;
            if crate::api::listed(&store) {
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
    Result<(ObjectRef<Guarded>, Action), kube::runtime::controller::Error<Error, kube::runtime::watcher::Error>>;

/// [`reconcile`] of an object that could be read as an `AnkkaFlow`, else the report of one that
/// could not ([`malformed`]); counted and timed by outcome for the metrics.
async fn reconcile_measured(guarded: Arc<Guarded>, ctx: Arc<Context>) -> Result<Action, Error> {
    let started = std::time::Instant::now();
    let result = match &guarded.0 {
        Ok(flow) => {
            let flow = Arc::new(flow.clone());
            let result = reconcile(flow.clone(), ctx.clone()).await;
            // The Kafka clients a reset would use, built in the background once the pipeline is applied.
            if result.is_ok() {
                crate::warm::ahead(&ctx, &flow);
            }
            result
        }
        Err(invalid) => Err(malformed(&ctx, guarded.as_ref(), invalid).await),
    };
    ctx.metrics.reconciled(result.as_ref().map_or_else(Error::category, |_| "success"), started.elapsed());
    if result.is_ok() {
        ctx.failures.lock().unwrap_or_else(|p| p.into_inner()).remove(&ObjectRef::from_obj(guarded.as_ref()));
    }
    result
}

/// Reports an object that cannot be read as an `AnkkaFlow` (needs a client): a Warning event
/// `ResourceMalformed` on it, saying why, once per generation of it. Nothing else is done for it:
/// the controller waits for a change of it ([`error_policy`]), and goes on with the others.
async fn malformed(ctx: &Context, guarded: &Guarded, invalid: &kube::core::error_boundary::InvalidObject) -> Error {
    let e = Error::Malformed(invalid.error.clone());
    if guarded.namespace().is_some() && ctx.may_act.now() {
        let generation = guarded.meta().generation.unwrap_or_default();
        let note = format!("{e}; it is not reconciled until it changes");
        let event = Event::new(EventType::Warning, e.category(), note, format!("malformed/{generation}"));
        ctx.events.record(guarded, &event).await;
    }
    e
}

/// What of an `AnkkaFlow` a reconcile acts on, hashed: its generation (the spec; the API server also
/// bumps it when deletion starts), its annotations (the reset and rebuild requests, and their done
/// marks), its finalizers and its deletion. A change of anything else, the status above all, does
/// not wake a reconcile: every reconcile writes the status, and without this filter each write woke
/// one more reconcile that had nothing to do (see docs/performance.md, "1,000 AnkkaFlows").
fn acts_on(flow: &Guarded) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    flow.meta().generation.hash(&mut h);
    flow.annotations().hash(&mut h);
    flow.finalizers().hash(&mut h);
    flow.meta().deletion_timestamp.as_ref().map(|t| t.0.to_string()).hash(&mut h);
    Some(h.finish())
}

/// Drops an `AnkkaFlow`'s `metadata.managedFields` before it is cached: the operator never reads
/// them (it writes with server-side apply), and they are a good part of each cached resource.
fn forget_managed_fields(flow: &mut Guarded) {
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

/// What follows a failed reconcile: a permanent failure ([`Error::permanent`]) waits for a change
/// of the resource; any other is retried, after a backoff that doubles with each failure in a row.
fn error_policy(flow: Arc<Guarded>, err: &Error, ctx: Arc<Context>) -> Action {
    if err.permanent() {
        tracing::warn!(
            namespace = flow.namespace(),
            name = %flow.name_any(),
            step = err.step(),
            category = err.category(),
            error = %err,
            "waits for a change of the resource"
        );
        return Action::await_change();
    }
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
        step = err.step(),
        category = err.category(),
        error = %err,
        attempt,
        ?delay,
        "will retry"
    );
    Action::requeue(delay)
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

#[cfg(test)]
mod results;
#[cfg(test)]
pub(crate) mod tests;
