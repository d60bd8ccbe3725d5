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
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::reflector::{self, Store};
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
        watch_namespace = settings.watch_namespace.as_deref().unwrap_or("(all)"),
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
    crate::metrics::watch_apiserver(client.clone(), metrics.clone());
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
    let (flows, deployments): (Api<AnkkaFlow>, Api<Deployment>) = match &settings.watch_namespace {
        Some(ns) => (Api::namespaced(watches.clone(), ns), Api::namespaced(watches.clone(), ns)),
        None => (Api::all(watches.clone()), Api::all(watches.clone())),
    };
    let controller = Controller::new(flows, watcher::Config::default())
        .owns(deployments, watcher::Config::default().labels(&format!("{LABEL_MANAGED_BY}={MANAGED_BY}")))
        .with_config(kube::runtime::controller::Config::default().concurrency(settings.max_concurrent_reconciles));
    // Every AnkkaFlow of every namespace, for the consumer groups they may share: the controller's
    // own cache when it watches every namespace, else a cache of its own.
    let all_flows = match &settings.watch_namespace {
        None => controller.store(),
        Some(_) => spawn_all_flows_cache(watches.clone()),
    };
    let ctx = Arc::new(Context {
        client,
        ledger,
        deadlines: Deadlines { request: Duration::from_secs(settings.kafka_request_timeout_seconds) },
        kafka: crate::topics::Kafka::new(Deadlines {
            request: Duration::from_secs(settings.kafka_request_timeout_seconds),
        }),
        settings: settings.clone(),
        failures: Mutex::new(HashMap::new()),
        metrics,
        flows: all_flows,
        recorded: Mutex::new(HashMap::new()),
        lag_measured: Mutex::new(HashMap::new()),
        clients: crate::connections::Clients::default(),
    });
    ctx.metrics.leader.set(1);
    crate::lag::spawn_sampler(ctx.clone());
    let controller = controller
        .reconcile_all_on(cluster_secret_changes(watches, ctx.settings.clusters_namespace()))
        .graceful_shutdown_on(stop.requested())
        .run(reconcile_measured, error_policy, ctx)
        .for_each(|res| async move {
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

/// A tick whenever a Kafka cluster Secret (`kafka-cluster-<name>`) of the clusters namespace is
/// created, changed or deleted, so that every pipeline is reconciled and the streamlets whose
/// rendered configuration changed roll (the periodic resync would notice too, later). Watches the
/// Secrets' metadata only: their values never reach this watch.
fn cluster_secret_changes(client: Client, namespace: &str) -> impl futures::Stream<Item = ()> + Send + 'static {
    let secrets: Api<PartialObjectMeta<Secret>> = Api::namespaced(client, namespace);
    watcher(secrets, watcher::Config::default()).default_backoff().touched_objects().filter_map(|seen| async move {
        match seen {
            Ok(meta) if meta.name_any().starts_with(CLUSTER_SECRET_PREFIX) => {
                tracing::debug!(secret = %meta.name_any(), "cluster Secret changed: reconciling every pipeline");
                Some(())
            }
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch the Kafka cluster Secrets; edits are noticed at the next resync");
                None
            }
        }
    })
}

fn error_policy(flow: Arc<AnkkaFlow>, err: &Error, ctx: Arc<Context>) -> Action {
    let key = ObjectRef::from_obj(flow.as_ref());
    let attempt = {
        let mut f = ctx.failures.lock().unwrap_or_else(|p| p.into_inner());
        let n = f.entry(key).or_insert(0);
        *n += 1;
        *n
    };
    // 1 s doubling per attempt up to 300 s.
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

/// One reconcile; a failure is reported on the resource (a Warning event whose reason is the
/// error's category, and the `Applied` condition) before it is returned for a retry.
pub async fn reconcile(flow: Arc<AnkkaFlow>, ctx: Arc<Context>) -> Result<Action, Error> {
    match steps(&flow, &ctx).await {
        Ok(action) => {
            ctx.failures.lock().unwrap_or_else(|p| p.into_inner()).remove(&ObjectRef::from_obj(flow.as_ref()));
            Ok(action)
        }
        Err(e) => {
            report_failure(&ctx, &flow, &e).await;
            Err(e)
        }
    }
}

async fn steps(flow: &AnkkaFlow, ctx: &Context) -> Result<Action, Error> {
    let resync = Action::requeue(Duration::from_secs(ctx.settings.resync_seconds));

    // 1. Fetch (needs a client): the Kafka cluster Secrets, the Secrets the built-ins name.
    let fetched = observe::fetch(ctx, flow).await?;

    // 2. Decide (pure): delete, refuse, or a valid pipeline.
    let inputs = Inputs {
        flow,
        sidecar_image: ctx.settings.sidecar_image(),
        clusters: &fetched.clusters,
        stage_secrets: &fetched.stage_secrets,
    };
    let valid = match plan::decide(&inputs)? {
        // 2a. Deletion (needs Kafka and a client): managed topics, then the finalizer. Nothing else.
        Decision::Delete(deletion) => {
            apply::deletion(ctx, flow, &deletion).await?;
            return Ok(Action::await_change());
        }
        // 2b. Refusal (needs a client): one Warning event per problem, status Failed, nothing
        // applied, no reset carried out.
        Decision::Refuse(refusal) => {
            apply::refusal(ctx, flow, &refusal).await;
            let mut status = refusal.status.clone();
            keep_reset(flow, &mut status);
            write_status(ctx, flow, status, &refusal.outcome()).await?;
            return Ok(resync);
        }
        Decision::Apply(valid) => valid,
    };
    // 2c. Consumer groups this pipeline shares with another (needs a client): a warning only.
    crate::tenancy::warn_shared_groups(ctx, flow, &fetched.clusters).await;

    // 3. Fetch (needs Kafka and a client): each topic described in Kafka, the pipeline's objects.
    let topics = observe::describe_topics(ctx, &valid).await;
    let owned = observe::owned(ctx, flow).await?;

    // 4. Build (pure, cannot fail): the ordered plan and the status it leads to.
    let plan = valid.build(&Observed { topics: &topics, deployments: &owned.deployments, secrets: &owned.secrets });

    // 5. Apply (needs Kafka and a client): topics before Deployments, per-pipeline objects, each
    // streamlet's Secret then Deployment, removals. A failed step stops the plan; it is reported,
    // and the reset and status steps still run.
    // 6. Reset (needs Kafka and a client): the reset request as far as it can go now, beside the
    // apply, so that a request does not wait for a pipeline's objects to be applied (a reset acts
    // only on the spec's stopped streamlets, which the apply cannot start); then the catch-up of a
    // finished one.
    let conns: apply::Connections =
        valid.topics().iter().map(|t| (t.id.clone(), t.kafka_connection().clone())).collect();
    let mut status = plan.status.clone();
    let (applied, recheck) =
        tokio::join!(apply::plan(ctx, flow, &plan, &conns), crate::reset::drive(ctx, flow, &mut status));
    let recheck = recheck?;
    let follow = crate::lag::follow_catch_up(ctx, flow, &mut status).await;
    // A rebuild: whether it holds streamlets at 0 replicas (the plan above rendered them so), and
    // whether its groups caught up, as conditions and, when that changes, an event.
    let (annotation, done) = flow_adapters::kube::reset_annotations(flow);
    let held = flow_core::rebuild::held(&flow.spec, annotation, done);
    let rebuild = flow_core::rebuild::conditions(annotation, &held, status.reset.as_ref(), flow.metadata.generation);
    let before = flow.status.as_ref().map_or(&[][..], |s| s.conditions.as_slice());
    let events = flow_core::rebuild::events(annotation, &rebuild, before);
    if !events.is_empty() && !crate::leader::may_act() {
        return Err(Error::LeaseLost);
    }
    for event in events {
        apply::record(ctx, flow, &event).await;
    }
    status.conditions.extend(rebuild);
    if let Some(problem) = ctx.ledger.problem().await {
        status.conditions.push(status::ledger_condition(&problem, flow.metadata.generation));
    }

    // 7. Status (needs a client): one write, when it changed.
    let outcome = applied.as_ref().map_or_else(|(_, o)| o.clone(), |()| ApplyOutcome::Applied);
    write_status(ctx, flow, status, &outcome).await?;
    if let Err((e, _)) = applied {
        return Err(e);
    }
    let resync = Duration::from_secs(ctx.settings.resync_seconds);
    let next = [recheck, follow].into_iter().flatten().min().map_or(resync, |r| r.min(resync));
    Ok(Action::requeue(next))
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
/// error's category, and the `Applied` condition set to it. A failed step of the plan was reported
/// where it failed. A report that cannot be written is logged.
async fn report_failure(ctx: &Context, flow: &AnkkaFlow, e: &Error) {
    if matches!(e, Error::Apply(_)) || flow.namespace().is_none() {
        return;
    }
    let note = format!("reconcile failed: {e}");
    apply::record(ctx, flow, &Event::new(EventType::Warning, e.category(), note.clone(), note.clone())).await;
    if flow.metadata.deletion_timestamp.is_some() {
        return;
    }
    let status = flow.status.clone().unwrap_or_default();
    if let Err(w) = write_status(ctx, flow, status, &ApplyOutcome::Failed { message: note }).await {
        tracing::warn!(namespace = flow.namespace(), name = %flow.name_any(), error = %w, "could not write the failure into the status");
    }
}

/// One reconcile of the example pipeline `cart`, below end to end: against a mocked API server that
/// checks every call, and an in-memory Kafka.
#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use flow_core::render::topics::LiveTopic;
    use http::{Method, StatusCode};
    use serde_json::json;

    use super::*;
    use crate::fixtures::{self, ApiServer};
    use crate::topics::fake::FakeKafka;

    const SHOP: &str = "127.0.0.1:19092";

    fn clusters() -> serde_json::Value {
        fixtures::secret_list(vec![
            fixtures::secret(
                "ankka-flow",
                "kafka-cluster-shop",
                "shop",
                &[("bootstrap.servers", SHOP), ("connection-config", "security.protocol=PLAINTEXT\n")],
            ),
            fixtures::secret(
                "ankka-flow",
                "kafka-cluster-default",
                "shop",
                &[("bootstrap.servers", SHOP), ("partitions", "3"), ("replicas", "1")],
            ),
            fixtures::secret("ankka-flow", "unrelated", "", &[("x", "y")]),
        ])
    }

    #[tokio::test]
    async fn the_cart_example_first_reconcile() {
        let kafka = Arc::new(FakeKafka::default());
        // The input topic exists; the managed ones do not yet.
        kafka.topics.lock().unwrap().insert(
            (SHOP.into(), "shop.cart-events.v1".into()),
            LiveTopic { partitions: 3, replication: 1, configs: Default::default() },
        );
        let (ctx, handle) = fixtures::context(kafka.clone());
        let flow = Arc::new(fixtures::cart());
        let stored = serde_json::to_value(flow.as_ref()).unwrap();
        let server = tokio::spawn(async move {
            let mut api = ApiServer(handle);
            // Fetch: the cluster Secrets.
            api.expect(Method::GET, "/api/v1/namespaces/ankka-flow/secrets", StatusCode::OK, clusters()).await;
            // Fetch: the pipeline's Deployments, by its labels.
            let listed = api
                .expect(
                    Method::GET,
                    "/apis/apps/v1/namespaces/shop/deployments",
                    StatusCode::OK,
                    fixtures::empty_list("apps/v1", "DeploymentList"),
                )
                .await;
            assert!(listed.uri.contains("labelSelector=app.kubernetes.io%2Fmanaged-by%3Dankka-flow%2Cflow.ankka.thinkmorestupidless.com%2Fpipeline%3Dcart"), "{}", listed.uri);
            // Topics first: each created managed topic's event (review-carts, then valid-carts).
            for (topic, partitions) in [("cart.review-carts", 3), ("cart.valid-carts", 6)] {
                let event = api
                    .expect(
                        Method::POST,
                        "/apis/events.k8s.io/v1/namespaces/shop/events",
                        StatusCode::CREATED,
                        json!({}),
                    )
                    .await;
                assert_eq!(event.body["reason"], "TopicCreated");
                assert_eq!(event.body["note"], format!("created topic '{topic}' with {partitions} partitions"));
                assert_eq!(event.body["type"], "Normal");
                assert_eq!(event.body["regarding"]["uid"], "5f0c1e2a-cart");
            }
            // The pipeline's identity, then the streamlet's Secret and Deployment.
            let sa = api.apply("/api/v1/namespaces/shop/serviceaccounts/flow-cart").await;
            assert_eq!(sa.body["automountServiceAccountToken"], false);
            assert_eq!(sa.body["metadata"]["ownerReferences"][0]["uid"], "5f0c1e2a-cart");
            let role = api.apply("/apis/rbac.authorization.k8s.io/v1/namespaces/shop/roles/flow-cart").await;
            assert_eq!(
                role.body["rules"],
                json!([{"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create"]}])
            );
            let binding = api.apply("/apis/rbac.authorization.k8s.io/v1/namespaces/shop/rolebindings/flow-cart").await;
            assert_eq!(binding.body["roleRef"]["name"], "flow-cart");
            assert_eq!(binding.body["subjects"][0]["name"], "flow-cart");
            let secret = api.apply("/api/v1/namespaces/shop/secrets/flow-cart-router").await;
            let conf = secret.body["stringData"]["streamlet.conf"].as_str().unwrap_or_default().to_string();
            assert!(
                conf.contains(r#"group = "cart.router.in""#)
                    && conf.contains(&format!(r#"bootstrap.servers = "{SHOP}""#)),
                "{conf}"
            );
            let deployment = api.apply("/apis/apps/v1/namespaces/shop/deployments/flow-cart-router").await;
            let containers: Vec<&str> = deployment.body["spec"]["template"]["spec"]["containers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["name"].as_str().unwrap())
                .collect();
            assert_eq!(containers, ["sidecar", "process"]);
            assert_eq!(deployment.body["spec"]["replicas"], 1);
            // Status: one write, Pending while the Deployment rolls out.
            let status = api.status_write(&stored).await;
            let s = &status.body["status"];
            assert_eq!(s["phase"], "Pending");
            assert_eq!(s["detail"], "router: rolling out");
            assert_eq!(s["topics"].as_array().map(Vec::len), Some(3));
            let applied: Vec<_> =
                s["conditions"].as_array().unwrap().iter().filter(|c| c["type"] == "Applied").collect();
            assert_eq!(applied[0]["status"], "True");
            api.done().await;
        });
        let action =
            tokio::time::timeout(Duration::from_secs(10), reconcile(flow, ctx)).await.expect("the reconcile ends");
        assert!(action.is_ok(), "{action:?}");
        server.await.expect("the scenario holds");
        // One describe per connection (cluster `shop` has its own connection settings, so it is
        // another connection than `default`, on the same brokers), asked concurrently; then the
        // creations, in topic order.
        let mut calls = kafka.calls.lock().unwrap().clone();
        calls[..2].sort();
        assert_eq!(
            calls,
            [
                format!("describe {SHOP} cart.review-carts,cart.valid-carts"),
                format!("describe {SHOP} shop.cart-events.v1"),
                format!("create {SHOP} cart.review-carts"),
                format!("create {SHOP} cart.valid-carts"),
            ]
        );
        let created = kafka.topics.lock().unwrap()[&(SHOP.to_string(), "cart.valid-carts".to_string())].clone();
        assert_eq!((created.partitions, created.replication), (6, 1));
        assert_eq!(created.configs.get("retention.ms").map(String::as_str), Some("86400000"));
    }

    /// The cluster Secrets without `kafka-cluster-shop`: the input topic's cluster has no Secret.
    fn clusters_without_shop() -> serde_json::Value {
        fixtures::secret_list(vec![fixtures::secret(
            "ankka-flow",
            "kafka-cluster-default",
            "shop",
            &[("bootstrap.servers", SHOP), ("partitions", "3"), ("replicas", "1")],
        )])
    }

    #[tokio::test]
    async fn a_refused_pipeline_records_its_problem_writes_failed_and_applies_nothing() {
        let kafka = Arc::new(FakeKafka::default());
        let (ctx, handle) = fixtures::context(kafka.clone());
        let flow = Arc::new(fixtures::cart());
        let stored = serde_json::to_value(flow.as_ref()).unwrap();
        let server = tokio::spawn(async move {
            let mut api = ApiServer(handle);
            // Fetch: the cluster Secrets, without the input topic's.
            api.expect(Method::GET, "/api/v1/namespaces/ankka-flow/secrets", StatusCode::OK, clusters_without_shop())
                .await;
            // Refuse: one Warning event for the problem, then one status write; nothing applied.
            let event = api
                .expect(Method::POST, "/apis/events.k8s.io/v1/namespaces/shop/events", StatusCode::CREATED, json!({}))
                .await;
            assert_eq!(event.body["type"], "Warning");
            assert_eq!(event.body["regarding"]["uid"], "5f0c1e2a-cart");
            let note = event.body["note"].as_str().unwrap_or_default();
            assert!(note.contains("kafka-cluster-shop"), "{note}");
            let status = api.status_write(&stored).await;
            assert_eq!(status.body["status"]["phase"], "Failed");
            api.done().await;
        });
        let action =
            tokio::time::timeout(Duration::from_secs(10), reconcile(flow, ctx)).await.expect("the reconcile ends");
        assert!(action.is_ok(), "{action:?}");
        server.await.expect("the scenario holds");
        assert_eq!(kafka.calls.lock().unwrap().clone(), Vec::<String>::new(), "Kafka is never asked");
    }
}

#[cfg(test)]
mod quiet_tests {
    use kube::core::Status;
    use kube::runtime::controller::Error as C;
    use kube::runtime::watcher::Error as W;

    fn watch_error(code: u16) -> C<std::io::Error, W> {
        C::QueueError(W::WatchError(Box::new(Status { code, ..Status::default() })))
    }

    #[test]
    fn an_expired_watch_is_quiet_and_a_forbidden_one_is_not() {
        assert!(super::quiet(&watch_error(410)));
        assert!(!super::quiet(&watch_error(403)));
        assert!(!super::quiet(&C::<std::io::Error, W>::ReconcilerFailed(
            std::io::Error::other("apply failed"),
            Box::new(kube::runtime::reflector::ObjectRef::<flow_core::resource::AnkkaFlow>::new("cart").erase()),
        )));
    }
}
