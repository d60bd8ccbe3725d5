//! A mocked API server for the test of one reconcile below end to end: the test drives the real
//! `reconcile` against a `kube::Client` whose every request goes to a scenario that asserts, call by
//! call, the method, the path, the query and the body, and answers as the API server would. A
//! missing call, or one too many, fails the test (a timeout catches the first). Kafka's side is the
//! in-memory cluster of `crate::connections::fake`, which logs every call.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Parser;
use flow_core::blueprint::{DescriptorSource, GenerateInput, Source, VerifyInput, generate};
use flow_core::resource::AnkkaFlow;
use http::{Method, Request, Response, StatusCode};
use kube::client::Body;
use serde_json::{Value, json};

use crate::connections::{Kafka, fake::FakeKafka};
use crate::context::Context;
use crate::settings::Cli;

type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

/// The example pipeline `cart` (examples/cart, as docs/rebuild-from-the-start.md deploys it) in
/// namespace `shop`, as `flow generate` writes it and the API server returns it.
pub fn cart() -> AnkkaFlow {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/cart");
    let read = |p: &str| std::fs::read_to_string(format!("{root}/{p}")).expect("example file");
    let input = GenerateInput {
        verify: VerifyInput {
            descriptors: DescriptorSource::Directory {
                dir: "flow".into(),
                files: vec![Source::text("cart-router.json", read("flow/cart-router.json"))],
            },
            blueprint: Source::text("blueprint.conf", read("blueprint.conf")),
            confs: vec![Source::text("prod.conf", read("prod.conf"))],
            env: HashMap::new(),
        },
        images_file: None,
        images: vec!["router=registry.example.com/cart-router:1.2".into()],
        pipeline: None,
        version: "1.2".into(),
        namespace: Some("shop".into()),
        delete_managed_topics: false,
    };
    let mut flow = generate(&input).expect("the example generates").resource;
    flow.metadata.uid = Some("5f0c1e2a-cart".into());
    flow.metadata.generation = Some(1);
    flow.metadata.resource_version = Some("100".into());
    flow
}

/// A context whose client talks to the returned handle, whose Kafka is `kafka`, with a sidecar
/// image and a ledger in a fresh directory.
pub fn context(kafka: Arc<FakeKafka>) -> (Arc<Context>, Handle) {
    context_with(kafka, &ledger_dir(), &[])
}

/// A directory for a ledger, fresh and empty.
pub fn ledger_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("flow-operator-fixture-{}-{}", std::process::id(), next()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// [`context`] with its ledger in `dir`, and the operator's flags `args` besides.
pub fn context_with(kafka: Arc<FakeKafka>, dir: &std::path::Path, args: &[&str]) -> (Arc<Context>, Handle) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = kube::Client::new(service, "default");
    let settings = Cli::parse_from(
        [
            "flow-operator",
            "--sidecar-image",
            "ghcr.io/thinkmorestupidless/ankka-flow-sidecar:0.1.0",
            "--kafka-clusters-namespace",
            "ankka-flow",
            "--ledger-dir",
            dir.to_str().expect("UTF-8 path"),
        ]
        .iter()
        .chain(args),
    )
    .settings;
    let settings_slots = settings.max_concurrent_reconciles;
    let metrics = Arc::new(crate::metrics::Metrics::default());
    let ctx = Context {
        may_act: crate::api::MayAct::always(),
        events: crate::api::Recorder::new(client.clone(), &settings.instance, metrics.clone()),
        clusters: crate::clusters::ClusterSecrets::new(client.clone(), settings.clusters_namespace(), None),
        client,
        ledger: crate::ledger::Ledger::open(dir, Arc::new(crate::metrics::Metrics::default())),
        kafka: Kafka::Fake(kafka),
        token_endpoints: settings.token_endpoints(),
        settings,
        failures: Mutex::new(HashMap::new()),
        metrics,
        flows: vec![kube::runtime::reflector::store().0],
        deployments: Vec::new(),
        lag_measured: Mutex::new(HashMap::new()),
        slots: crate::slots::Slots::new(usize::from(settings_slots)),
        cluster_ids: Default::default(),
        stop: crate::leader::Stop::never(),
    };
    (Arc::new(ctx), handle)
}

fn next() -> u32 {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    N.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
}

/// What the scenarios answer and check, call by call.
pub struct ApiServer(pub Handle);

/// One request as the scenario saw it.
pub struct Seen {
    /// `path?query`.
    pub uri: String,
    /// The body as JSON (`Null` when empty).
    pub body: Value,
}

impl ApiServer {
    /// Takes the next request, asserts its method and path, answers `status` with `answer`.
    pub async fn expect(&mut self, method: Method, path: &str, status: StatusCode, answer: Value) -> Seen {
        self.expect_with(method, path, status, |_| answer).await
    }

    /// As [`ApiServer::expect`], answering what `answer` makes of the request's body.
    pub async fn expect_with(
        &mut self,
        method: Method,
        path: &str,
        status: StatusCode,
        answer: impl FnOnce(&Value) -> Value,
    ) -> Seen {
        let (request, send) = tokio::time::timeout(Duration::from_secs(5), self.0.next_request())
            .await
            .unwrap_or_else(|_| panic!("no {method} {path} came"))
            .unwrap_or_else(|| panic!("the client went away before {method} {path}"));
        assert_eq!((request.method(), request.uri().path()), (&method, path), "{}", request.uri());
        let uri = request.uri().to_string();
        let bytes = request.into_body().collect_bytes().await.expect("a request body");
        let body = if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).expect("a JSON body") };
        let response = Response::builder()
            .status(status)
            .body(Body::from(serde_json::to_vec(&answer(&body)).expect("JSON")))
            .expect("a response");
        send.send_response(response);
        Seen { uri, body }
    }

    /// A server-side apply of `path`: asserts the operator's field manager and forced conflicts, and
    /// answers with the applied object as it was sent.
    pub async fn apply(&mut self, path: &str) -> Seen {
        self.apply_answering(path, Value::clone).await
    }

    /// A server-side apply of the Deployment at `path`, answered as the API server does: the applied
    /// object with its `metadata.uid` and the `metadata.generation` it gave it.
    pub async fn apply_deployment(&mut self, path: &str, uid: &str, generation: i64) -> Seen {
        self.apply_answering(path, |body| {
            let mut answer = body.clone();
            answer["metadata"]["uid"] = uid.into();
            answer["metadata"]["generation"] = generation.into();
            answer
        })
        .await
    }

    /// The status write of AnkkaFlow `shop`/`cart` that clears the record of the last apply of its
    /// objects, and nothing else (a JSON merge patch).
    pub async fn clear_applied(&mut self, stored: &Value) -> Seen {
        let seen = self
            .expect_with(
                Method::PATCH,
                "/apis/flow.ankka.thinkmorestupidless.com/v1alpha1/namespaces/shop/ankkaflows/cart/status",
                StatusCode::OK,
                |_| stored.clone(),
            )
            .await;
        assert_eq!(seen.body, json!({"status": {"applied": null}}));
        assert!(seen.uri.contains("fieldManager=ankka-flow-operator"), "{}", seen.uri);
        seen
    }

    async fn apply_answering(&mut self, path: &str, answer: impl FnOnce(&Value) -> Value) -> Seen {
        let seen = self.expect_with(Method::PATCH, path, StatusCode::OK, answer).await;
        assert!(
            seen.uri.contains("fieldManager=ankka-flow-operator") && seen.uri.contains("force=true"),
            "{}",
            seen.uri
        );
        seen
    }

    /// The status write of AnkkaFlow `shop`/`cart`: answered with `stored` carrying the status sent,
    /// as the API server returns the object.
    pub async fn status_write(&mut self, stored: &Value) -> Seen {
        self.expect_with(
            Method::PATCH,
            "/apis/flow.ankka.thinkmorestupidless.com/v1alpha1/namespaces/shop/ankkaflows/cart/status",
            StatusCode::OK,
            |body| {
                let mut answer = stored.clone();
                answer["status"] = body["status"].clone();
                answer
            },
        )
        .await
    }

    /// Asserts that no request is left.
    pub async fn done(mut self) {
        let more = tokio::time::timeout(Duration::from_millis(200), self.0.next_request()).await;
        if let Ok(Some((r, _))) = more {
            panic!("an unexpected request: {} {}", r.method(), r.uri());
        }
    }
}

/// A Secret list as the API server returns it.
pub fn secret_list(items: Vec<Value>) -> Value {
    json!({"apiVersion": "v1", "kind": "SecretList", "metadata": {"resourceVersion": "1"}, "items": items})
}

/// A Secret with `stringData`-like `data` (values base64-encoded here), serving the namespaces
/// `allowed` (its tenancy annotation).
pub fn secret(ns: &str, name: &str, allowed: &str, data: &[(&str, &str)]) -> Value {
    use base64::Engine;
    let data: serde_json::Map<String, Value> = data
        .iter()
        .map(|(k, v)| (k.to_string(), Value::String(base64::engine::general_purpose::STANDARD.encode(v))))
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": ns,
            "resourceVersion": "7",
            "annotations": {"flow.ankka.thinkmorestupidless.com/allowed-namespaces": allowed}
        },
        "data": data
    })
}

/// An empty list of `kind`.
pub fn empty_list(api_version: &str, kind: &str) -> Value {
    json!({"apiVersion": api_version, "kind": kind, "metadata": {"resourceVersion": "1"}, "items": []})
}
