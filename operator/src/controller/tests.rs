//! One reconcile of the example pipeline `cart`, below end to end: against a mocked API server that
//! checks every call, and an in-memory Kafka.

use std::sync::Arc;

use flow_core::render::topics::LiveTopic;
use flow_core::resource::AnkkaFlow;
use http::{Method, StatusCode};
use k8s_openapi::jiff::Timestamp;
use kube::core::DeserializeGuard;
use serde_json::json;

use super::*;
use crate::connections::fake::{FakeKafka, fake_topic_id};
use crate::fixtures::{self, ApiServer};

pub(crate) const SHOP: &str = "127.0.0.1:19092";

/// Where the operator keeps the record of the topics it created for `cart` (uid `5f0c1e2a-cart`).
const RECORD: &str = "/api/v1/namespaces/ankka-flow/configmaps/flow-topics-5f0c1e2a-cart";

/// The record that says the operator created `names` (with the in-memory cluster's topic ids).
fn record_of(names: &[&str]) -> serde_json::Value {
    let data: serde_json::Map<String, serde_json::Value> =
        names.iter().map(|n| (n.to_string(), json!(fake_topic_id(n)))).collect();
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "flow-topics-5f0c1e2a-cart", "namespace": "ankka-flow"}, "data": data})
}

fn not_found() -> serde_json::Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404})
}

pub(crate) fn clusters() -> serde_json::Value {
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
        LiveTopic {
            partitions: 3,
            replication: 1,
            configs: Default::default(),
            topic_id: Some(fake_topic_id("shop.cart-events.v1")),
        },
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
        // Fetch: the record of the topics the operator created for the resource: none yet.
        api.expect(Method::GET, RECORD, StatusCode::NOT_FOUND, not_found()).await;
        // Topics first: the intents, recorded in the operator's namespace before any creation.
        let created = api
            .expect_with(Method::POST, "/api/v1/namespaces/ankka-flow/configmaps", StatusCode::CREATED, Clone::clone)
            .await;
        assert_eq!(created.body["metadata"]["name"], "flow-topics-5f0c1e2a-cart");
        assert_eq!(created.body["metadata"]["labels"]["flow.ankka.thinkmorestupidless.com/owner-uid"], "5f0c1e2a-cart");
        assert_eq!(created.body["metadata"]["annotations"]["flow.ankka.thinkmorestupidless.com/owner"], "shop/cart");
        assert_eq!(created.body["data"], json!({"cart.review-carts": "creating", "cart.valid-carts": "creating"}));
        // Then each creation, its topic id recorded at once, and its event (review-carts, then
        // valid-carts).
        for (topic, partitions) in [("cart.review-carts", 3), ("cart.valid-carts", 6)] {
            let recorded = api.expect(Method::PATCH, RECORD, StatusCode::OK, json!({})).await;
            assert_eq!(recorded.body, json!({"data": {topic: fake_topic_id(topic)}}));
            let event = api
                .expect(Method::POST, "/apis/events.k8s.io/v1/namespaces/shop/events", StatusCode::CREATED, json!({}))
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
            conf.contains(r#"group = "cart.router.in""#) && conf.contains(&format!(r#"bootstrap.servers = "{SHOP}""#)),
            "{conf}"
        );
        let deployment =
            api.apply_deployment("/apis/apps/v1/namespaces/shop/deployments/flow-cart-router", "d-1", 1).await;
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
        assert_eq!(s["topics"][1]["ownership"], "Created", "{s}");
        assert!(s["topics"][0].get("ownership").is_none(), "an unmanaged topic: {s}");
        let applied: Vec<_> = s["conditions"].as_array().unwrap().iter().filter(|c| c["type"] == "Applied").collect();
        assert_eq!(applied[0]["status"], "True");
        // What was applied, for the next reconcile: every object, with the Deployment's uid and
        // generation.
        assert_eq!(s["applied"]["hash"].as_str().map(str::len), Some(64), "{s}");
        assert_eq!(s["applied"]["deployments"], json!({"router": {"uid": "d-1", "generation": 1}}));
        api.done().await;
        (deployment.body, status.body["status"].clone())
    });
    let action = tokio::time::timeout(Duration::from_secs(10), reconcile(flow, ctx)).await.expect("the reconcile ends");
    assert!(action.is_ok(), "{action:?}");
    let (deployment, status) = server.await.expect("the scenario holds");
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

    // A restarted operator's reconcile, with nothing changed since: no object is applied again, the
    // record stays as it is, and the reconcile comes back when the reapply interval (300 s) ends,
    // here 200 s after it, for a record of 100 s ago.
    let mut again = fixtures::cart();
    again.status = Some(serde_json::from_value(status).expect("the status written"));
    let record = again.status.as_mut().and_then(|s| s.applied.as_mut()).expect("a record");
    record.time = flow_core::render::status::api_time(Timestamp::now() - Duration::from_secs(100));
    let other_objects = {
        let mut other = again.clone();
        let record = other.status.as_mut().and_then(|s| s.applied.as_mut()).expect("a record");
        record.hash = "0".repeat(64);
        other
    };
    let (restarted, handle) = fixtures::context(kafka.clone());
    let stored = serde_json::to_value(&again).unwrap();
    let recorded = stored["status"]["applied"].clone();
    // The Deployment as the API server lists it: as applied, with its uid and generation.
    let mut listed = deployment;
    listed["metadata"]["uid"] = json!("d-1");
    listed["metadata"]["generation"] = json!(1);
    let (deployment, rendered_hash) = (listed.clone(), recorded["hash"].clone());
    let server = tokio::spawn(async move {
        let mut api = ApiServer(handle);
        reads_before_the_objects(&mut api, deployment).await;
        // Then the status, for the topics that exist now: with the record of the apply as it was.
        let written = api.status_write(&stored).await;
        assert_eq!(written.body["status"]["applied"], recorded);
        api.done().await;
    });
    let action = tokio::time::timeout(Duration::from_secs(10), reconcile(Arc::new(again), restarted.clone()))
        .await
        .expect("the reconcile ends");
    server.await.expect("the scenario holds");
    let requeue = action.expect("reconciled");
    // The record's time has whole seconds: 200 s, less at most a second or two.
    let after = format!("{requeue:?}");
    assert!(after.contains("Some(198.") || after.contains("Some(199.") || after.contains("Some(200s)"), "{after}");
    assert!(restarted.metrics.encode().contains("ankka_flow_object_applies_total{outcome=\"unchanged\"} 1"));

    // A record of other objects (another rendering): it is cleared before the first apply, so that
    // an apply stopped part-way never leaves a record that matches what it did not finish.
    let (ctx, handle) = fixtures::context(kafka.clone());
    let stored = serde_json::to_value(&other_objects).unwrap();
    let server = tokio::spawn(async move {
        let mut api = ApiServer(handle);
        reads_before_the_objects(&mut api, listed).await;
        api.clear_applied(&stored).await;
        api.apply("/api/v1/namespaces/shop/serviceaccounts/flow-cart").await;
        api.apply("/apis/rbac.authorization.k8s.io/v1/namespaces/shop/roles/flow-cart").await;
        api.apply("/apis/rbac.authorization.k8s.io/v1/namespaces/shop/rolebindings/flow-cart").await;
        api.apply("/api/v1/namespaces/shop/secrets/flow-cart-router").await;
        api.apply_deployment("/apis/apps/v1/namespaces/shop/deployments/flow-cart-router", "d-1", 1).await;
        let written = api.status_write(&stored).await;
        assert_eq!(written.body["status"]["applied"]["hash"], rendered_hash, "the hash of what is rendered");
        api.done().await;
    });
    let action = tokio::time::timeout(Duration::from_secs(10), reconcile(Arc::new(other_objects), ctx.clone()))
        .await
        .expect("the reconcile ends");
    server.await.expect("the scenario holds");
    assert!(action.is_ok(), "{action:?}");
    assert!(ctx.metrics.encode().contains("ankka_flow_object_applies_total{outcome=\"applied\"} 1"));
}

/// What a reconcile of `cart` reads before it decides on its objects, with its topics known: the
/// cluster Secrets, the pipeline's Deployments (here `deployment`), then the record of the topics
/// the operator created for it (its two managed topics).
async fn reads_before_the_objects(api: &mut ApiServer, deployment: serde_json::Value) {
    api.expect(Method::GET, "/api/v1/namespaces/ankka-flow/secrets", StatusCode::OK, clusters()).await;
    let list = json!({"apiVersion": "apps/v1", "kind": "DeploymentList", "metadata": {"resourceVersion": "2"}, "items": [deployment]});
    api.expect(Method::GET, "/apis/apps/v1/namespaces/shop/deployments", StatusCode::OK, list).await;
    api.expect(Method::GET, RECORD, StatusCode::OK, record_of(&["cart.review-carts", "cart.valid-carts"])).await;
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
        api.expect(Method::GET, "/api/v1/namespaces/ankka-flow/secrets", StatusCode::OK, clusters_without_shop()).await;
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
    let action = tokio::time::timeout(Duration::from_secs(10), reconcile(flow, ctx)).await.expect("the reconcile ends");
    assert!(action.is_ok(), "{action:?}");
    server.await.expect("the scenario holds");
    assert_eq!(kafka.calls.lock().unwrap().clone(), Vec::<String>::new(), "Kafka is never asked");
}

mod quiet {
    use kube::core::Status;
    use kube::runtime::controller::Error as C;
    use kube::runtime::watcher::Error as W;

    fn watch_error(code: u16) -> C<std::io::Error, W> {
        C::QueueError(W::WatchError(Box::new(Status { code, ..Status::default() })))
    }

    #[test]
    fn an_expired_watch_is_quiet_and_a_forbidden_one_is_not() {
        assert!(super::super::quiet(&watch_error(410)));
        assert!(!super::super::quiet(&watch_error(403)));
        assert!(!super::super::quiet(&C::<std::io::Error, W>::ReconcilerFailed(
            std::io::Error::other("apply failed"),
            Box::new(kube::runtime::reflector::ObjectRef::<flow_core::resource::AnkkaFlow>::new("cart").erase()),
        )));
    }
}

/// A status write alone does not wake a reconcile; a spec change, a reset request and a deletion do.
#[test]
fn only_what_a_reconcile_acts_on_wakes_one() {
    let acts_on = |f: &AnkkaFlow| acts_on(&DeserializeGuard(Ok(f.clone())));
    let flow = fixtures::cart();
    let before = acts_on(&flow);
    let mut status_only = flow.clone();
    status_only.status = Some(flow_core::resource::AnkkaFlowStatus { detail: "written".into(), ..Default::default() });
    status_only.metadata.resource_version = Some("101".into());
    assert_eq!(acts_on(&status_only), before, "a status write");
    let mut spec = flow.clone();
    spec.metadata.generation = Some(2);
    assert_ne!(acts_on(&spec), before, "a spec change");
    let mut request = flow.clone();
    request
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(flow_core::names::ANNOTATION_RESET.to_string(), "{}".into());
    assert_ne!(acts_on(&request), before, "a reset request");
    let mut deleted = flow.clone();
    deleted.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time("2026-12-01T00:00:00Z".parse().unwrap()));
    assert_ne!(acts_on(&deleted), before, "a deletion");
}

/// The controller's cache, as the lag sampler reads it: ready once the watch's first list is in.
#[tokio::test]
async fn the_cache_is_ready_after_the_first_list() {
    use futures::StreamExt;
    use kube::runtime::watcher::Event;
    let (store, writer) = reflector::store();
    let events = futures::stream::iter([
        Ok(Event::Init),
        Ok(Event::InitApply(DeserializeGuard(Ok(fixtures::cart())))),
        Ok(Event::InitDone),
    ]);
    let changes = reflector::reflector(writer, events.modify(forget_managed_fields))
        .applied_objects()
        .predicate_filter(acts_on, Default::default());
    let seen: Vec<_> = changes.collect().await;
    assert_eq!(seen.len(), 1);
    tokio::time::timeout(Duration::from_secs(1), store.wait_until_ready()).await.expect("ready").expect("writer");
    assert_eq!(store.state().len(), 1);
}

/// A reconcile that carries a pending reset request reads what the reset acts on before it lists or
/// applies the pipeline's objects: the apply waits until the drive sleeps in its settle or
/// returns. Here the stopped router still has a pod, so the request waits, and only then does the
/// apply start.
#[tokio::test]
async fn a_pending_reset_reads_before_the_apply_starts() {
    let kafka = Arc::new(FakeKafka::default());
    // Every topic exists as the pipeline sets it: the apply records no topic event.
    for (topic, partitions, configs) in [
        ("shop.cart-events.v1", 3, vec![]),
        ("cart.review-carts", 3, vec![]),
        ("cart.valid-carts", 6, vec![("retention.ms".to_string(), "86400000".to_string())]),
    ] {
        kafka.topics.lock().unwrap().insert(
            (SHOP.into(), topic.into()),
            LiveTopic {
                partitions,
                replication: 1,
                configs: configs.into_iter().collect(),
                topic_id: Some(fake_topic_id(topic)),
            },
        );
    }
    let (ctx, handle) = fixtures::context(kafka);
    let mut flow = fixtures::cart();
    for s in &mut flow.spec.streamlets {
        s.replicas = 0;
    }
    let id = "1b7c2f0e-9a4d-4d3e-8f55-2f1c0b6e9a71";
    flow.metadata.annotations = Some(
        [(
            flow_core::names::ANNOTATION_RESET.to_string(),
            flow_core::request::ResetRequest::new(id, vec![]).to_annotation(),
        )]
        .into(),
    );
    let flow = Arc::new(flow);
    let stored = serde_json::to_value(flow.as_ref()).unwrap();
    let server = tokio::spawn(async move {
        let mut api = ApiServer(handle);
        api.expect(Method::GET, "/api/v1/namespaces/ankka-flow/secrets", StatusCode::OK, clusters()).await;
        // The drive's fresh read and its pod list, at once, in either order; nothing of the apply.
        let read = "/apis/flow.ankka.thinkmorestupidless.com/v1alpha1/namespaces/shop/ankkaflows/cart";
        let pods = "/api/v1/namespaces/shop/pods";
        let mut seen = Vec::new();
        for _ in 0..2 {
            let (request, send) = tokio::time::timeout(Duration::from_secs(5), api.0.next_request())
                .await
                .expect("a request")
                .expect("the client is there");
            let path = request.uri().path().to_string();
            let answer = match path.as_str() {
                p if p == read => stored.clone(),
                p if p == pods => json!({
                    "apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "7"},
                    "items": [{
                        "metadata": {"name": "flow-cart-router-0", "namespace": "shop", "labels": {
                            flow_core::names::LABEL_PIPELINE: "cart", flow_core::names::LABEL_STREAMLET: "router"}},
                        "status": {"phase": "Running"}
                    }]
                }),
                other => panic!("{} {other} before the reset's reads were answered", request.method()),
            };
            send.send_response(
                http::Response::builder()
                    .status(StatusCode::OK)
                    .body(kube::client::Body::from(serde_json::to_vec(&answer).unwrap()))
                    .unwrap(),
            );
            seen.push(path);
        }
        seen.sort();
        assert_eq!(seen, [pods, read]);
        // The request waits for the router's pod, and says so; then the apply.
        let event = api
            .expect(Method::POST, "/apis/events.k8s.io/v1/namespaces/shop/events", StatusCode::CREATED, json!({}))
            .await;
        assert_eq!(event.body["reason"], "ResetRefused");
        assert_eq!(event.body["note"], format!("reset {id} waits: router still has 1 pod(s)"));
        api.expect(
            Method::GET,
            "/apis/apps/v1/namespaces/shop/deployments",
            StatusCode::OK,
            fixtures::empty_list("apps/v1", "DeploymentList"),
        )
        .await;
        // The operator created the managed topics: nothing to report about them.
        api.expect(Method::GET, RECORD, StatusCode::OK, record_of(&["cart.review-carts", "cart.valid-carts"])).await;
        api.apply("/api/v1/namespaces/shop/serviceaccounts/flow-cart").await;
        api.apply("/apis/rbac.authorization.k8s.io/v1/namespaces/shop/roles/flow-cart").await;
        api.apply("/apis/rbac.authorization.k8s.io/v1/namespaces/shop/rolebindings/flow-cart").await;
        api.apply("/api/v1/namespaces/shop/secrets/flow-cart-router").await;
        let deployment =
            api.apply_deployment("/apis/apps/v1/namespaces/shop/deployments/flow-cart-router", "d-1", 1).await;
        assert_eq!(deployment.body["spec"]["replicas"], 0);
        let status = api.status_write(&stored).await;
        assert_eq!(status.body["status"]["reset"]["id"], id);
        assert_eq!(status.body["status"]["reset"]["phase"], "Waiting");
        api.done().await;
    });
    let action = tokio::time::timeout(Duration::from_secs(10), reconcile(flow, ctx)).await.expect("the reconcile ends");
    assert!(action.is_ok(), "{action:?}");
    server.await.expect("the scenario holds");
}

/// A stop before the controller's cache has listed ends the controller at once: kube holds the
/// reconciles until that list, and its graceful shutdown ends the watch that would make it.
#[tokio::test]
async fn a_stop_before_the_first_list_ends_the_controller() {
    let (ctx, mut handle) = fixtures::context(Arc::new(FakeKafka::default()));
    let api: Api<Guarded> = Api::namespaced(ctx.client.clone(), "shop");
    let (store, writer) = reflector::store();
    let changes = reflector(writer, watcher(api, listing())).applied_objects();
    let controller = Controller::for_stream(changes, store);
    let (stop, stopped) = crate::leader::Stop::manual();
    let mut run = run_controller(controller, futures::stream::pending(), stopped, ctx);
    // The list comes and is never answered, as from an API server that is slow to answer.
    let runner = tokio::spawn(async move { while run.next().await.is_some() {} });
    let (list, _unanswered) =
        tokio::time::timeout(Duration::from_secs(5), handle.next_request()).await.expect("the list").expect("a client");
    assert!(list.uri().path().ends_with("/namespaces/shop/ankkaflows"), "{}", list.uri());
    stop.send(true).expect("the controller listens");
    tokio::time::timeout(Duration::from_secs(5), runner)
        .await
        .expect("the controller ends after the stop")
        .expect("the controller's task");
}
