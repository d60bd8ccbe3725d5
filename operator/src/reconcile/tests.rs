//! The reconcile's failures, below end to end (a mocked API server, the in-memory Kafka): the step
//! that failed is in the error's type, its category is the Warning event's reason and the metric's
//! label, and the `Applied` condition says why.

use std::sync::Arc;

use flow_core::render::plan::Incomplete;
use http::{Method, StatusCode};
use serde_json::json;

use super::*;
use crate::connections::fake::FakeKafka;
use crate::fixtures::{self, ApiServer};

const SECRETS: &str = "/api/v1/namespaces/ankka-flow/secrets";
const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/shop/events";

fn refused(code: u16, reason: &str, message: &str) -> serde_json::Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "message": message, "code": code})
}

fn status_of(code: u16) -> StatusCode {
    StatusCode::from_u16(code).expect("a status code")
}

/// The `Applied` condition of a status write's body.
fn applied(body: &serde_json::Value) -> serde_json::Value {
    body["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Applied"))
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn a_failed_fetch_is_reported_with_its_category_as_the_reason_and_retried() {
    let (ctx, handle) = fixtures::context(Arc::new(FakeKafka::default()));
    let flow = Arc::new(fixtures::cart());
    let stored = serde_json::to_value(flow.as_ref()).expect("JSON");
    let server = tokio::spawn(async move {
        let mut api = ApiServer(handle);
        api.expect(Method::GET, SECRETS, status_of(403), refused(403, "Forbidden", "secrets is forbidden")).await;
        // The stored status, with the failure in its Applied condition; then the event.
        let written = api.status_write(&stored).await;
        let condition = applied(&written.body);
        assert_eq!((condition["status"].as_str(), condition["reason"].as_str()), (Some("False"), Some("ApplyFailed")));
        let message = condition["message"].as_str().unwrap_or_default().to_string();
        assert!(message.starts_with("reconcile failed: cannot read the Kafka cluster Secrets"), "{message}");
        let event = api.expect(Method::POST, EVENTS, StatusCode::CREATED, json!({})).await;
        assert_eq!(
            (event.body["type"].as_str(), event.body["reason"].as_str()),
            (Some("Warning"), Some("KubernetesApiFailed"))
        );
        assert_eq!(event.body["note"].as_str(), Some(message.as_str()));
        api.done().await;
    });
    let result = tokio::time::timeout(Duration::from_secs(10), reconcile(flow, ctx)).await.expect("the reconcile ends");
    server.await.expect("the scenario holds");
    let e = result.expect_err("a failure");
    assert!(matches!(e, Error::Fetch(FetchError::ClusterSecrets(_))), "{e:?}");
    assert_eq!((e.step(), e.category(), e.permanent()), ("fetch", "KubernetesApiFailed", false));
}

#[tokio::test]
async fn a_failed_observe_is_reported_as_its_step_and_the_record_of_the_apply_is_kept_out() {
    let (ctx, handle) = fixtures::context(Arc::new(FakeKafka::default()));
    let flow = Arc::new(fixtures::cart());
    let stored = serde_json::to_value(flow.as_ref()).expect("JSON");
    let server = tokio::spawn(async move {
        let mut api = ApiServer(handle);
        api.expect(Method::GET, SECRETS, StatusCode::OK, crate::controller::tests::clusters()).await;
        api.expect(
            Method::GET,
            "/apis/apps/v1/namespaces/shop/deployments",
            status_of(500),
            refused(500, "InternalError", "etcd is down"),
        )
        .await;
        let written = api.status_write(&stored).await;
        let message = applied(&written.body)["message"].as_str().unwrap_or_default().to_string();
        assert!(message.starts_with("reconcile failed: cannot read the pipeline's objects"), "{message}");
        assert!(written.body["status"]["applied"].is_null(), "{}", written.body);
        let event = api.expect(Method::POST, EVENTS, StatusCode::CREATED, json!({})).await;
        assert_eq!(event.body["reason"], "KubernetesApiFailed");
        api.done().await;
    });
    let result = tokio::time::timeout(Duration::from_secs(10), reconcile(flow, ctx.clone())).await.expect("ends");
    server.await.expect("the scenario holds");
    let e = result.expect_err("a failure");
    assert!(matches!(e, Error::Observe(ObserveError::Objects(_))), "{e:?}");
    assert_eq!(e.step(), "observe");
}

#[tokio::test]
async fn a_rejected_step_of_the_plan_is_reported_once_where_it_failed() {
    let kafka = Arc::new(FakeKafka::default());
    let (ctx, handle) = fixtures::context(kafka);
    let flow = Arc::new(fixtures::cart());
    let stored = serde_json::to_value(flow.as_ref()).expect("JSON");
    let record = "/api/v1/namespaces/ankka-flow/configmaps/flow-topics-5f0c1e2a-cart";
    let server = tokio::spawn(async move {
        let mut api = ApiServer(handle);
        api.expect(Method::GET, SECRETS, StatusCode::OK, crate::controller::tests::clusters()).await;
        let none = fixtures::empty_list("apps/v1", "DeploymentList");
        api.expect(Method::GET, "/apis/apps/v1/namespaces/shop/deployments", StatusCode::OK, none).await;
        let gone = refused(404, "NotFound", "not found");
        api.expect(Method::GET, record, StatusCode::NOT_FOUND, gone).await;
        // The record of the topics' intents is refused: the plan stops there.
        let quota = refused(403, "Forbidden", "exceeded quota: configmaps");
        api.expect(Method::POST, "/api/v1/namespaces/ankka-flow/configmaps", status_of(403), quota).await;
        let event = api.expect(Method::POST, EVENTS, StatusCode::CREATED, json!({})).await;
        assert_eq!(event.body["reason"], "ApplyFailed");
        let written = api.status_write(&stored).await;
        assert_eq!(applied(&written.body)["reason"], "ApplyFailed");
        // No second event for the same failure.
        api.done().await;
    });
    let result = tokio::time::timeout(Duration::from_secs(10), reconcile(flow, ctx)).await.expect("ends");
    server.await.expect("the scenario holds");
    let e = result.expect_err("a failure");
    assert!(matches!(e, Error::Apply(ApplyError::Rejected(_))), "{e:?}");
    assert_eq!((e.step(), e.category()), ("apply", "ApplyFailed"));
}

/// Every step's error has its category, which is the event reason and the metric label; only what
/// a change of the resource can end is permanent.
#[test]
fn each_step_has_its_category_and_only_a_malformed_or_incomplete_resource_is_permanent() {
    let kube = || api::Error::Kube(kube::Error::Service("down".into()));
    let forbidden = || kube::Error::Service("down".into());
    let cases: Vec<(Error, &str, &str, bool)> = vec![
        (Error::Malformed("spec.streamlets: invalid type".into()), "read", "ResourceMalformed", true),
        (FetchError::ClusterSecrets(forbidden()).into(), "fetch", "KubernetesApiFailed", false),
        (Error::Decide(Incomplete("uid")), "decide", "ResourceIncomplete", true),
        (DeleteError::TopicDelete("could not delete topic 't'".into()).into(), "delete", "TopicDeleteFailed", false),
        (DeleteError::Finalizer(kube()).into(), "delete", "KubernetesApiFailed", false),
        (ObserveError::Record(kube()).into(), "observe", "KubernetesApiFailed", false),
        (ObserveError::Objects(api::Error::Incomplete("uid")).into(), "observe", "ResourceIncomplete", true),
        (ApplyError::Rejected("could not apply".into()).into(), "apply", "ApplyFailed", false),
        (ApplyError::ClearRecord(api::Error::LeaseLost).into(), "apply", "LeaseLost", false),
        (Error::Reset(kube()), "reset", "KubernetesApiFailed", false),
        (Error::Rebuild(api::Error::LeaseLost), "rebuild", "LeaseLost", false),
        (Error::Write(kube()), "write", "KubernetesApiFailed", false),
    ];
    for (e, step, category, permanent) in cases {
        assert_eq!((e.step(), e.category(), e.permanent()), (step, category, permanent), "{e}");
    }
}
