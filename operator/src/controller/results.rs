//! What becomes of a reconcile's result: an object that cannot be read as an `AnkkaFlow` is listed
//! with the others and reported on itself, a permanent failure waits for a change, any other is
//! retried with backoff.

use std::sync::Arc;

use http::{Method, StatusCode};
use kube::core::DeserializeGuard;
use serde_json::json;

use super::*;
use crate::connections::fake::FakeKafka;
use crate::fixtures::{self, ApiServer};

/// `cart` with a field of another type than the CRD's: it cannot be read as an `AnkkaFlow`.
fn malformed() -> serde_json::Value {
    let mut bad = serde_json::to_value(fixtures::cart()).expect("JSON");
    bad["metadata"]["name"] = json!("broken");
    bad["metadata"]["uid"] = json!("uid-broken");
    bad["spec"]["streamlets"] = json!("not a list");
    bad
}

#[tokio::test]
async fn a_malformed_ankkaflow_is_listed_with_the_others_reported_and_left_until_it_changes() {
    let (ctx, mut handle) = fixtures::context(Arc::new(FakeKafka::default()));
    // The watch's list holds a malformed object beside a good one: both come through.
    let api: Api<Guarded> = Api::namespaced(ctx.client.clone(), "shop");
    let (_store, writer) = reflector::store();
    let seen = reflector(writer, watcher(api, listing())).applied_objects().take(2).collect::<Vec<_>>();
    let list = json!({
        "apiVersion": "flow.ankka.thinkmorestupidless.com/v1alpha1", "kind": "AnkkaFlowList",
        "metadata": {"resourceVersion": "5"},
        "items": [malformed(), serde_json::to_value(fixtures::cart()).expect("JSON")]
    });
    let answer = async {
        let (request, send) = handle.next_request().await.expect("the list");
        assert!(request.uri().path().ends_with("/namespaces/shop/ankkaflows"), "{}", request.uri());
        send.send_response(
            http::Response::builder()
                .status(StatusCode::OK)
                .body(kube::client::Body::from(serde_json::to_vec(&list).expect("JSON")))
                .expect("a response"),
        );
        handle
    };
    let (seen, handle) = tokio::time::timeout(Duration::from_secs(5), futures::future::join(seen, answer))
        .await
        .expect("the list is taken in");
    let seen: Vec<Arc<Guarded>> = seen.into_iter().map(|r| Arc::new(r.expect("no watch error"))).collect();
    assert_eq!(seen.len(), 2);
    assert!(seen[0].0.is_err() && seen[1].0.is_ok(), "the malformed one is kept as such, the other read");

    // Its reconcile reports it on itself, once per generation, and does nothing else.
    let broken = Arc::clone(&seen[0]);
    let server = tokio::spawn(async move {
        let mut api = ApiServer(handle);
        let event = api
            .expect(Method::POST, "/apis/events.k8s.io/v1/namespaces/shop/events", StatusCode::CREATED, json!({}))
            .await;
        assert_eq!(
            (event.body["type"].as_str(), event.body["reason"].as_str()),
            (Some("Warning"), Some("ResourceMalformed"))
        );
        assert_eq!(event.body["regarding"]["name"], "broken");
        assert_eq!(event.body["regarding"]["uid"], "uid-broken");
        let note = event.body["note"].as_str().unwrap_or_default();
        assert!(
            note.contains("the resource cannot be read as an AnkkaFlow")
                && note.contains("not reconciled until it changes"),
            "{note}"
        );
        api.done().await;
    });
    let result = reconcile_measured(Arc::clone(&broken), ctx.clone()).await;
    server.await.expect("the scenario holds");
    let e = result.expect_err("reported as a failure");
    assert!(matches!(e, Error::Malformed(_)), "{e:?}");
    assert!(ctx.metrics.encode().contains("ankka_flow_reconciles_total{outcome=\"ResourceMalformed\"} 1"));
    // Not retried: the controller waits for a change of it, and goes on with the others.
    assert_eq!(error_policy(broken, &e, ctx.clone()), Action::await_change());
    assert!(ctx.failures.lock().expect("the map").is_empty(), "no backoff counted");
}

#[tokio::test]
async fn a_permanent_failure_waits_for_a_change_and_a_transient_one_is_retried_with_backoff() {
    let (ctx, _handle) = fixtures::context(Arc::new(FakeKafka::default()));
    let flow = Arc::new(DeserializeGuard(Ok(fixtures::cart())));
    let incomplete = Error::Decide(flow_core::render::plan::Incomplete("uid"));
    assert_eq!(error_policy(Arc::clone(&flow), &incomplete, ctx.clone()), Action::await_change());
    let transient = Error::Write(crate::api::Error::Kube(kube::Error::Service("down".into())));
    let first = error_policy(Arc::clone(&flow), &transient, ctx.clone());
    let second = error_policy(Arc::clone(&flow), &transient, ctx.clone());
    assert_eq!(first, Action::requeue(ctx.settings.retry_backoff(1)));
    assert_eq!(second, Action::requeue(ctx.settings.retry_backoff(2)));
    assert_ne!(first, second, "the backoff grows");
}
