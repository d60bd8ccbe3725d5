//! The reconcile loop: fetch (I/O) -> decide (pure, in `flow-core`) -> apply (I/O) -> status (I/O).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flow_adapters::kafka::Deadlines;
use flow_adapters::ledger::Ledger;
use flow_core::names::{LABEL_MANAGED_BY, LABEL_PIPELINE, LABEL_STREAMLET, MANAGED_BY, OPERATOR_FIELD_MANAGER};
use flow_core::render::{self, DeploymentView};
use flow_core::resource::AnkkaFlow;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};

use crate::context::{Context, Error};
use crate::leader::{Leadership, Stop};
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
    let client = Client::try_default().await.map_err(|e| format!("cannot reach Kubernetes: {e}"))?;
    tracing::info!(
        ledger = %settings.ledger_dir.display(),
        clusters_namespace = %settings.clusters_namespace(),
        watch_namespace = settings.watch_namespace.as_deref().unwrap_or("(all)"),
        leader_election = settings.leader_election,
        "starting"
    );
    // Served before the Lease is held, so that a waiting instance answers its probes.
    let metrics = Arc::new(crate::metrics::Metrics::default());
    crate::metrics::serve_in_background(settings.metrics_address, metrics.clone());
    crate::metrics::watch_apiserver(client.clone(), metrics.clone());
    let leadership = if settings.leader_election {
        match Leadership::acquire(client.clone(), &settings, stop.clone()).await? {
            Some(held) => Some(held),
            None => return Ok(()),
        }
    } else {
        None
    };
    // Opened only by the Lease holder: a waiting instance touches nothing.
    let ledger = Ledger::open(&settings.ledger_dir)?;
    let (flows, deployments): (Api<AnkkaFlow>, Api<Deployment>) = match &settings.watch_namespace {
        Some(ns) => (Api::namespaced(client.clone(), ns), Api::namespaced(client.clone(), ns)),
        None => (Api::all(client.clone()), Api::all(client.clone())),
    };
    let controller = Controller::new(flows, watcher::Config::default())
        .owns(deployments, watcher::Config::default().labels(&format!("{LABEL_MANAGED_BY}={MANAGED_BY}")))
        .with_config(kube::runtime::controller::Config::default().concurrency(settings.max_concurrent_reconciles));
    // Every AnkkaFlow of every namespace, for the consumer groups they may share: the controller's
    // own cache when it watches every namespace, else a cache of its own.
    let all_flows = match &settings.watch_namespace {
        None => controller.store(),
        Some(_) => spawn_all_flows_cache(client.clone()),
    };
    let ctx = Arc::new(Context {
        client,
        ledger,
        deadlines: Deadlines { request: Duration::from_secs(settings.kafka_request_timeout_seconds) },
        settings: settings.clone(),
        failures: Mutex::new(HashMap::new()),
        metrics,
        flows: all_flows,
        recorded: Mutex::new(HashMap::new()),
        lag_measured: Mutex::new(HashMap::new()),
    });
    ctx.metrics.leader.set(1);
    crate::lag::spawn_sampler(ctx.clone());
    let controller = controller
        .graceful_shutdown_on(stop.requested())
        .run(reconcile_measured, error_policy, ctx)
        .for_each(|res| async move {
            match res {
                Ok((obj, _)) => tracing::debug!(object = %obj, "reconciled"),
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

/// [`reconcile`], counted and timed by outcome for the metrics.
async fn reconcile_measured(flow: Arc<AnkkaFlow>, ctx: Arc<Context>) -> Result<Action, Error> {
    let started = std::time::Instant::now();
    let result = reconcile(flow, ctx.clone()).await;
    ctx.metrics.reconciled(result.as_ref().map_or_else(Error::category, |_| "success"), started.elapsed());
    result
}

/// A cache of every `AnkkaFlow` in every namespace, kept by a watch of its own (for an operator that
/// reconciles one namespace only). Without the right to list them everywhere it stays empty and
/// says so in the log, with the watch's backoff.
fn spawn_all_flows_cache(client: Client) -> Store<AnkkaFlow> {
    let (store, writer) = reflector::store();
    let stream = reflector::reflector(writer, watcher::watcher(Api::<AnkkaFlow>::all(client), watcher::Config::default()))
        .default_backoff()
        .for_each(|event| async move {
            if let Err(e) = event {
                tracing::warn!(error = %e, "cannot watch the AnkkaFlows of every namespace; consumer groups shared with other namespaces go unnoticed until it can");
            }
        });
    tokio::spawn(stream);
    store
}

/// Deployment applies of one reconcile in flight at once.
const APPLY_CONCURRENCY: usize = 8;

fn error_policy(flow: Arc<AnkkaFlow>, err: &Error, ctx: Arc<Context>) -> Action {
    let key = ObjectRef::from_obj(flow.as_ref());
    let attempt = {
        let mut f = ctx.failures.lock().unwrap_or_else(|p| p.into_inner());
        let n = f.entry(key).or_insert(0);
        *n += 1;
        *n
    };
    // 1 s doubling per attempt up to 300 s (reference.md §8.2).
    let delay = Duration::from_secs(1u64 << (attempt - 1).min(9)).min(Duration::from_secs(300));
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

async fn reconcile(flow: Arc<AnkkaFlow>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ns = flow.namespace().ok_or(Error::Incomplete("namespace"))?;
    let name = flow.name_any();
    let owner = flow.controller_owner_ref(&()).ok_or(Error::Incomplete("uid"))?;
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), &ns);
    let spec = &flow.spec;

    // Refusals first: a pipeline whose topics do not resolve gets nothing applied and no reset.
    let Some(clusters) = crate::tenancy::refuse_unresolvable(&ctx, &flow).await? else {
        ctx.failures.lock().unwrap_or_else(|p| p.into_inner()).remove(&ObjectRef::from_obj(flow.as_ref()));
        return Ok(Action::requeue(Duration::from_secs(ctx.settings.resync_seconds)));
    };
    crate::tenancy::warn_shared_groups(&ctx, &flow, &clusters).await;

    // Apply: one Deployment per streamlet, server-side, forcing our fields back (a `kubectl scale`
    // of the Deployment is reverted to the resource's replicas).
    let pp = PatchParams::apply(OPERATOR_FIELD_MANAGER).force();
    let rendered: Vec<(String, Deployment)> =
        spec.streamlets.iter().map(|s| (s.name.clone(), render::deployment(spec, s, &ns, owner.clone()))).collect();
    let applies = rendered.into_iter().map(|(streamlet, d)| {
        let (deployments, pp) = (deployments.clone(), pp.clone());
        async move { Ok::<_, kube::Error>((streamlet, deployments.patch(&d.name_any(), &pp, &Patch::Apply(&d)).await?)) }
    });
    // A few at a time: a pipeline of many streamlets costs a few round trips, not one per streamlet.
    let applied: Vec<(String, Deployment)> =
        futures::stream::iter(applies).buffer_unordered(APPLY_CONCURRENCY).try_collect().await?;
    let mut views = BTreeMap::new();
    for (streamlet, applied) in applied {
        let st = applied.status.unwrap_or_default();
        views.insert(
            streamlet,
            DeploymentView {
                generation: applied.metadata.generation.unwrap_or(0),
                observed_generation: st.observed_generation.unwrap_or(0),
                updated: st.updated_replicas.unwrap_or(0),
                ready: st.ready_replicas.unwrap_or(0),
            },
        );
    }
    // Deployments of streamlets no longer in the resource go.
    let owned = deployments
        .list(
            &ListParams::default()
                .labels(&format!("{LABEL_MANAGED_BY}={MANAGED_BY},{LABEL_PIPELINE}={}", spec.pipeline)),
        )
        .await?;
    for d in owned.items {
        let ours = d.owner_references().iter().any(|o| Some(&o.uid) == flow.uid().as_ref());
        let streamlet = d.labels().get(LABEL_STREAMLET).cloned().unwrap_or_default();
        if ours && spec.streamlet(&streamlet).is_none() {
            deployments.delete(&d.name_any(), &DeleteParams::background()).await?;
            tracing::info!(namespace = %ns, name = %name, streamlet, "removed the Deployment of a streamlet no longer in the pipeline");
        }
    }

    let mut status = render::status(spec, flow.metadata.generation, &views);
    let recheck = crate::reset::drive(&ctx, &flow, &mut status).await?;
    let follow = crate::lag::follow_catch_up(&ctx, &flow, &mut status).await;
    let recheck = match (recheck, follow) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };

    let api: Api<AnkkaFlow> = Api::namespaced(ctx.client.clone(), &ns);
    if flow.status.as_ref() != Some(&status) {
        flow_adapters::kube::write_status(&api, &name, &status).await?;
    }
    ctx.failures.lock().unwrap_or_else(|p| p.into_inner()).remove(&ObjectRef::from_obj(flow.as_ref()));
    let resync = Duration::from_secs(ctx.settings.resync_seconds);
    Ok(Action::requeue(recheck.map_or(resync, |r| r.min(resync))))
}
