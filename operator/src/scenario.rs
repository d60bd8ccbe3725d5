//! A whole reset in the mocked-API reconcile tests: the real `reconcile`, run as the controller
//! would run it, against an API server that keeps the objects it is sent (not a script of calls)
//! and the in-memory Kafka of [`crate::connections::fake`], under a paused tokio clock, so that a
//! settle, a retry and a Kafka deadline take no real time.
//!
//! A test reads as a scenario:
//!
//! ```text
//! let world = World::cart().stopped().request(ID);   // given: the pipeline, its state, a request
//! let end = world.run();                              // reconcile until the request is done
//! end.expect(&[intent(GROUP), commit(GROUP, ..), read_back(GROUP), outcome(GROUP, Reset), done(ID)]);
//! ```
//!
//! Every write that lands (an API write, a Kafka commit) is a step of [`World::trace`]. A restart
//! ([`World::run_crashing_after`]) stops the operator's process right after its n-th write landed:
//! its tokio runtime is dropped with every task of it, as a process ends, and nothing more of it
//! is answered; the next process starts with a fresh context (and, when asked, a lost ledger) on
//! the same objects and the same Kafka.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flow_core::reset::Timestamp;
use flow_core::resource::AnkkaFlow;
use http::{Method, Request, Response, StatusCode};
use kube::client::Body;
use serde_json::{Value, json};

use crate::connections::fake::FakeKafka;
use crate::fixtures;

#[cfg(test)]
mod tests;

/// The example pipeline's consumer group: streamlet `router`, inlet `in`.
pub const GROUP: &str = "cart.router.in";
/// The topic it reads.
pub const TOPIC: &str = "shop.cart-events.v1";

const FLOW: &str = "/apis/flow.ankka.thinkmorestupidless.com/v1alpha1/namespaces/shop/ankkaflows/cart";

/// How many reconciles one process runs at most before the test calls it stuck.
const RECONCILES: usize = 30;

/// A world in which to run the operator: its API server's objects, its Kafka, its settings.
pub struct World {
    /// The Kafka cluster(s).
    pub kafka: Arc<FakeKafka>,
    /// The bootstrap servers of cluster `shop`: one of its own per world, so that what one test's
    /// process keeps per cluster (a group's pinned connection) never meets another's.
    pub servers: String,
    api: Arc<Api>,
    args: Vec<String>,
    ledger: PathBuf,
    /// The wall clock where the last process stopped: the next one goes on from there.
    wall: Timestamp,
}

/// The API server's side, shared by the processes of a world.
#[derive(Default)]
struct Api {
    state: Mutex<State>,
    /// Wakes the test when the process is stopped (see [`World::run_crashing_after`]).
    crashed: tokio::sync::Notify,
}

#[derive(Default)]
struct State {
    flow: Value,
    version: u64,
    clusters: Value,
    pods: Vec<Value>,
    deployments: BTreeMap<String, Value>,
    config_maps: BTreeMap<String, Value>,
    events: BTreeMap<String, Value>,
    /// Every write that landed, in order, and the Kafka calls between them (see [`World::trace`]).
    trace: Vec<String>,
    /// Requests the API server does not serve.
    unexpected: Vec<String>,
    /// Writes that landed.
    writes: usize,
    /// Stop the process once this many writes landed.
    crash_after: Option<usize>,
    /// Stop the process once this write landed.
    crash_at: Option<String>,
    /// The copy of the resource the next reconcile is given instead of the one stored.
    stale: Option<Value>,
    halted: bool,
    /// Answers never sent: a halted process waits for them for ever.
    unanswered: Vec<tower_test::mock::SendResponse<Response<Body>>>,
}

fn next() -> u32 {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    N.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
}

/// One test at a time runs a world: a group's Kafka calls are claimed process-wide
/// (`crate::reset`), and a paused clock waiting on another test's claim would move on its own.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

impl World {
    /// The example pipeline `cart` deployed in namespace `shop` (see [`fixtures::cart`]), its topics
    /// in Kafka: the input topic with 3 partitions whose logs hold offsets 5 to 40, and its group
    /// at offset 30 everywhere (committed by the router before it stopped).
    pub fn cart() -> World {
        let servers = format!("127.0.0.1:{}", 20000 + next());
        let kafka = Arc::new(FakeKafka::default());
        kafka.topic(&servers, TOPIC, &[(5, 40), (5, 40), (5, 40)]);
        kafka.topic(&servers, "cart.review-carts", &[(0, 0); 3]);
        kafka.topic(&servers, "cart.valid-carts", &[(0, 0); 6]);
        kafka.commit(&servers, GROUP, TOPIC, &[(0, 30), (1, 30), (2, 30)], "");
        let clusters = fixtures::secret_list(vec![
            fixtures::secret(
                "ankka-flow",
                "kafka-cluster-shop",
                "shop",
                &[("bootstrap.servers", &servers), ("connection-config", "security.protocol=PLAINTEXT\n")],
            ),
            fixtures::secret(
                "ankka-flow",
                "kafka-cluster-default",
                "shop",
                &[("bootstrap.servers", &servers), ("partitions", "3"), ("replicas", "1")],
            ),
        ]);
        let mut flow = serde_json::to_value(fixtures::cart()).expect("JSON");
        flow["metadata"]["resourceVersion"] = json!("1");
        let api = Api { state: Mutex::new(State { flow, version: 1, clusters, ..State::default() }), ..Api::default() };
        World {
            kafka,
            servers,
            api: Arc::new(api),
            // A settle long enough to show that it passes in no real time.
            args: vec!["--reset-settle-seconds".into(), "30".into()],
            ledger: fixtures::ledger_dir(),
            wall: Timestamp(1_780_000_000_000),
        }
    }

    /// Every streamlet stopped (0 replicas), and no pod left.
    pub fn stopped(self) -> World {
        {
            let mut s = self.state();
            for streamlet in s.flow["spec"]["streamlets"].as_array_mut().into_iter().flatten() {
                streamlet["replicas"] = json!(0);
            }
            s.pods.clear();
        }
        self
    }

    /// A pod of streamlet `router` still runs.
    pub fn router_running(self) -> World {
        self.state().pods.push(json!({
            "metadata": {"name": "flow-cart-router-0", "namespace": "shop", "labels": {
                flow_core::names::LABEL_PIPELINE: "cart", flow_core::names::LABEL_STREAMLET: "router"}},
            "status": {"phase": "Running"}
        }));
        self
    }

    /// The pods are gone.
    pub fn pods_gone(&self) {
        self.state().pods.clear();
    }

    /// Reset request `id` written (as `flow reset` writes it), for every streamlet.
    pub fn request(self, id: &str) -> World {
        let annotation = flow_core::request::ResetRequest::new(id, vec![]).to_annotation();
        self.state().flow["metadata"]["annotations"][flow_core::names::ANNOTATION_RESET] = json!(annotation);
        self
    }

    /// The next process opens an empty ledger (its disk was lost).
    pub fn lose_ledger(&mut self) {
        self.ledger = fixtures::ledger_dir();
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.api.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The notes of the events recorded with reason `reason`.
    pub fn event_notes(&self, reason: &str) -> Vec<String> {
        let s = self.state();
        let notes = s.events.values().filter(|e| e["reason"] == reason);
        notes.map(|e| e["note"].as_str().unwrap_or_default().to_string()).collect()
    }

    /// The copy of the resource the controller's cache holds now (the next reconcile may be given
    /// it, see [`World::reconcile_stale`]).
    pub fn copy(&self) -> Value {
        self.state().flow.clone()
    }

    /// The next process's first reconcile is given `copy` (an older one from the watch cache),
    /// whatever the API server holds now.
    pub fn reconcile_stale(&mut self, copy: Value) -> Ran {
        self.state().stale = Some(copy);
        self.process(None, 2)
    }

    /// Every write that landed, in order, with the Kafka calls between them: `status <phase>
    /// <group>=<stage>,..` (a status write with a request), `status` (one without), `event
    /// <reason>`, `done <id>`, `apply <kind> <name>`, `record <config map>`, and Kafka's `inspect
    /// <group>`, `commit <group> <p>=<offset>,.. <metadata>`, `read-back <group>`, `read <group>`;
    /// `restart` where a process stopped.
    pub fn trace(&self) -> Vec<String> {
        self.state().trace.clone()
    }

    /// Runs one operator process until the request is done, or it waits for something the world
    /// must change (its reconciles ask to be run again later and nothing changes).
    pub fn run(&mut self) -> Ran {
        self.process(None, RECONCILES)
    }

    /// Runs one operator process for at most `n` reconciles (for a request that waits).
    pub fn run_reconciles(&mut self, n: usize) -> Ran {
        self.process(None, n)
    }

    /// Runs one operator process that stops right after its `n`-th write landed (no answer reaches
    /// it); returns whether it stopped there (else it finished first).
    pub fn run_crashing_after(&mut self, n: usize) -> bool {
        let ran = self.process(Some(n), RECONCILES);
        self.state().trace.push("restart".into());
        ran.crashed
    }

    /// Runs one operator process that stops right after write `step` (of [`World::trace`]) landed;
    /// returns whether it stopped there.
    pub fn run_crashing_at(&mut self, step: &str) -> bool {
        self.state().crash_at = Some(step.to_string());
        let ran = self.process(None, RECONCILES);
        let mut s = self.state();
        s.crash_at = None;
        s.trace.push("restart".into());
        ran.crashed
    }

    fn process(&mut self, crash_after: Option<usize>, reconciles: usize) -> Ran {
        {
            let mut s = self.state();
            s.crash_after = crash_after.map(|n| s.writes + n);
            s.halted = false;
            s.unanswered.clear();
        }
        self.kafka.resume();
        // Kafka's calls go into the trace as they are made; its commits once they landed.
        let (api, kafka) = (Arc::clone(&self.api), Arc::downgrade(&self.kafka));
        self.kafka.on_call(move |line, landed| match (landed, kafka.upgrade()) {
            (true, Some(kafka)) => Api::landed(&api, &kafka, line.to_string()),
            _ => api.state.lock().unwrap_or_else(|p| p.into_inner()).trace.push(line.to_string()),
        });
        let runtime =
            tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().expect("a runtime");
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        let (api, kafka, ledger, wall) =
            (Arc::clone(&self.api), Arc::clone(&self.kafka), self.ledger.clone(), self.wall);
        let ran = runtime.block_on(async move {
            crate::clock::start_at(wall);
            let (ctx, handle) = fixtures::context_with(Arc::clone(&kafka), &ledger, &args);
            tokio::spawn(Api::serve(Arc::clone(&api), Arc::clone(&kafka), handle));
            let crashed = api.crashed.notified();
            let reconciles = async {
                let mut results = Vec::new();
                for _ in 0..reconciles {
                    let copy = api.state.lock().unwrap_or_else(|p| p.into_inner()).stale.take();
                    let flow = copy.unwrap_or_else(|| api.flow());
                    let flow = Arc::new(serde_json::from_value::<AnkkaFlow>(flow).expect("an AnkkaFlow"));
                    let before = api.writes();
                    let result = crate::reconcile::reconcile(flow, Arc::clone(&ctx)).await;
                    results.push(result.map_err(|e| e.category()));
                    let flow: AnkkaFlow = serde_json::from_value(api.flow()).expect("an AnkkaFlow");
                    let (request, done) = flow_adapters::kube::reset_annotations(&flow);
                    if request.zip(done).is_some_and(|(request, done)| request.contains(done)) {
                        break;
                    }
                    // Nothing changes any more: the request waits for the world.
                    if api.writes() == before && results.len() > 1 {
                        break;
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                results
            };
            let outcome = tokio::select! {
                results = reconciles => Ran { crashed: false, results },
                () = crashed => Ran { crashed: true, results: Vec::new() },
                () = tokio::time::sleep(Duration::from_secs(24 * 3600)) => panic!("the operator hangs"),
            };
            (outcome, crate::context::now())
        });
        // Every task of the process ends with its runtime, as they end with a process.
        runtime.shutdown_background();
        let (ran, wall) = ran;
        self.wall = Timestamp(wall.0 + 1000);
        ran
    }

    /// What a finished request leaves: the done annotation, the request's status, the group's
    /// committed offsets, and the reasons of the events recorded (each once).
    pub fn end(&self) -> End {
        let s = self.state();
        let flow: AnkkaFlow = serde_json::from_value(s.flow.clone()).expect("an AnkkaFlow");
        let reset = flow.status.as_ref().and_then(|st| st.reset.clone());
        End {
            done: flow_adapters::kube::reset_annotations(&flow).1.map(String::from),
            phase: reset.as_ref().map(|r| format!("{:?}", r.phase)),
            groups: reset
                .iter()
                .flat_map(|r| &r.groups)
                .map(|g| (g.group.clone(), format!("{:?}", g.outcome), g.offsets_after.clone()))
                .collect(),
            committed: self
                .kafka
                .committed(&self.servers, GROUP, TOPIC)
                .into_iter()
                .map(|(p, x)| (p, (x.offset, x.metadata)))
                .collect(),
            events: s.events.values().map(|e| e["reason"].as_str().unwrap_or_default().to_string()).collect(),
            unexpected: s.unexpected.clone(),
        }
    }
}

/// Steps of [`World::trace`], for [`World::expect`].
pub mod step {
    use super::GROUP;

    /// The group inspected.
    pub fn inspect() -> String {
        format!("inspect {GROUP}")
    }

    /// Request `id`'s fence: the group's own offsets (30 on each partition) committed again.
    pub fn fence(id: &str) -> String {
        format!("commit {GROUP} 0=30,1=30,2=30 ankka-flow/reset/{id}/fence")
    }

    /// Request `id`'s commit at the log start offsets (5 on each partition).
    pub fn commit_at_log_start(id: &str) -> String {
        format!("commit {GROUP} 0=5,1=5,2=5 ankka-flow/reset/{id}")
    }

    /// The status write that makes the intent durable, before the commit.
    pub fn intent() -> String {
        format!("status Resetting {GROUP}=Committing")
    }

    /// The committed offsets read back right after the commit.
    pub fn read_back() -> String {
        format!("read-back {GROUP}")
    }

    /// The committed offsets read once more after the settle.
    pub fn settled_read() -> String {
        format!("read {GROUP}")
    }

    /// A status write of the request still under way, its group at `stage`.
    pub fn stage(stage: &str) -> String {
        format!("status Resetting {GROUP}={stage}")
    }

    /// The status write of the request done, its group at `stage`.
    pub fn finished(stage: &str) -> String {
        format!("status Done {GROUP}={stage}")
    }

    /// An event with reason `reason`.
    pub fn event(reason: &str) -> String {
        format!("event {reason}")
    }

    /// Request `id`'s done annotation.
    pub fn done(id: &str) -> String {
        format!("done {id}")
    }
}

impl World {
    /// Asserts that `steps` happened in this order (other steps may come between them).
    pub fn expect(&self, steps: &[String]) {
        let trace = self.trace();
        let mut rest = trace.iter();
        for s in steps {
            assert!(rest.any(|t| t == s), "no `{s}` where expected in:\n{}", trace.join("\n"));
        }
    }

    /// How many times `step` happened.
    pub fn count(&self, step: &str) -> usize {
        self.trace().iter().filter(|t| *t == step).count()
    }

    /// The wall clock of the processes so far (see [`clock`]).
    pub fn wall(&self) -> Timestamp {
        self.wall
    }
}

/// What a process did.
#[derive(Debug)]
pub struct Ran {
    /// Whether it was stopped before it finished.
    pub crashed: bool,
    /// Each reconcile's result (a failure by its category).
    pub results: Vec<Result<kube::runtime::controller::Action, &'static str>>,
}

/// The state a request leaves (see [`World::end`]).
#[derive(Debug, PartialEq, Eq)]
pub struct End {
    /// The done annotation.
    pub done: Option<String>,
    /// The request's phase in the status.
    pub phase: Option<String>,
    /// Each group of the status: its stage and the offsets committed.
    pub groups: Vec<(String, String, BTreeMap<String, i64>)>,
    /// The group's committed offsets in Kafka, with their metadata.
    pub committed: BTreeMap<i32, (i64, String)>,
    /// The reasons of the events recorded.
    pub events: BTreeSet<String>,
    /// Requests the API server did not expect.
    pub unexpected: Vec<String>,
}

impl Api {
    fn flow(&self) -> Value {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).flow.clone()
    }

    fn writes(&self) -> usize {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).writes
    }

    /// A write landed: traced, counted, and the process stopped there when the test asked.
    fn landed(api: &Api, kafka: &FakeKafka, line: String) {
        let mut s = api.state.lock().unwrap_or_else(|p| p.into_inner());
        s.trace.push(line);
        s.writes += 1;
        if s.crash_after == Some(s.writes) || s.crash_at.as_deref() == s.trace.last().map(String::as_str) {
            s.halted = true;
            kafka.halt();
            api.crashed.notify_one();
        }
    }

    /// Serves the process's requests until it ends.
    async fn serve(
        api: Arc<Api>,
        kafka: Arc<FakeKafka>,
        mut handle: tower_test::mock::Handle<Request<Body>, Response<Body>>,
    ) {
        while let Some((request, send)) = handle.next_request().await {
            let (parts, body) = request.into_parts();
            let bytes = body.collect_bytes().await.unwrap_or_default();
            let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let mut s = api.state.lock().unwrap_or_else(|p| p.into_inner());
            if s.halted {
                s.unanswered.push(send);
                continue;
            }
            let (status, answer, wrote) = s.answer(&parts.method, parts.uri.path(), &body);
            if let Some(line) = wrote {
                drop(s);
                Api::landed(&api, &kafka, line);
                s = api.state.lock().unwrap_or_else(|p| p.into_inner());
                if s.halted {
                    s.unanswered.push(send);
                    continue;
                }
            }
            let response = Response::builder()
                .status(status)
                .body(Body::from(serde_json::to_vec(&answer).unwrap_or_default()))
                .expect("a response");
            send.send_response(response);
        }
    }
}

fn list(kind: &str, items: Vec<Value>) -> Value {
    json!({"apiVersion": "v1", "kind": kind, "metadata": {"resourceVersion": "1"}, "items": items})
}

fn refused(code: u16, reason: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "code": code, "message": reason})
}

/// `status <phase> <group>=<stage>,..`, of a status with a request; `status` otherwise.
fn status_line(status: &Value) -> String {
    let reset = &status["reset"];
    if reset.is_null() {
        return "status".into();
    }
    let groups: Vec<String> = reset["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|g| format!("{}={}", g["group"].as_str().unwrap_or_default(), g["outcome"].as_str().unwrap_or_default()))
        .collect();
    format!("status {} {}", reset["phase"].as_str().unwrap_or_default(), groups.join(",")).trim_end().to_string()
}

impl State {
    /// The API server's answer to `method` `path` with `body`, and the trace line of a write that
    /// landed.
    fn answer(&mut self, method: &Method, path: &str, body: &Value) -> (StatusCode, Value, Option<String>) {
        let flows = "/apis/flow.ankka.thinkmorestupidless.com/v1alpha1";
        match (method.clone(), path) {
            (Method::GET, FLOW) => (StatusCode::OK, self.flow.clone(), None),
            (Method::GET, p)
                if p == format!("{flows}/ankkaflows") || p == format!("{flows}/namespaces/shop/ankkaflows") =>
            {
                (StatusCode::OK, list("AnkkaFlowList", vec![self.flow.clone()]), None)
            }
            (Method::PATCH, p) if p == format!("{FLOW}/status") => {
                let wanted = body["metadata"]["resourceVersion"].as_str();
                if wanted.is_some_and(|v| v != self.version.to_string()) {
                    return (StatusCode::CONFLICT, refused(409, "Conflict"), None);
                }
                let line = if body.get("apiVersion").is_some() {
                    self.flow["status"] = body["status"].clone();
                    status_line(&body["status"])
                } else {
                    // The JSON merge patch that clears the record of the last apply.
                    self.flow["status"]["applied"] = Value::Null;
                    "status applied cleared".into()
                };
                (StatusCode::OK, self.bump(), Some(line))
            }
            (Method::PATCH, FLOW) => {
                let mut line = "annotate".to_string();
                for (k, v) in body["metadata"]["annotations"].as_object().into_iter().flatten() {
                    self.flow["metadata"]["annotations"][k] = v.clone();
                    if k == flow_core::names::ANNOTATION_RESET_DONE {
                        line = format!("done {}", v.as_str().unwrap_or_default());
                    }
                }
                (StatusCode::OK, self.bump(), Some(line))
            }
            (Method::GET, "/api/v1/namespaces/ankka-flow/secrets") => (StatusCode::OK, self.clusters.clone(), None),
            (Method::GET, "/api/v1/namespaces/shop/pods") => (StatusCode::OK, list("PodList", self.pods.clone()), None),
            (Method::GET, "/apis/apps/v1/namespaces/shop/deployments") => {
                (StatusCode::OK, list("DeploymentList", self.deployments.values().cloned().collect()), None)
            }
            (Method::PATCH, p) if p.starts_with("/apis/apps/v1/namespaces/shop/deployments/") => {
                let mut d = body.clone();
                d["metadata"]["uid"] = json!(format!("uid-{p}"));
                d["metadata"]["generation"] = json!(1);
                self.deployments.insert(p.to_string(), d.clone());
                (
                    StatusCode::OK,
                    d,
                    Some(format!("apply Deployment {}", body["metadata"]["name"].as_str().unwrap_or(""))),
                )
            }
            (Method::GET, p) if p.starts_with("/api/v1/namespaces/ankka-flow/configmaps/") => {
                match self.config_maps.get(p) {
                    Some(c) => (StatusCode::OK, c.clone(), None),
                    None => (StatusCode::NOT_FOUND, refused(404, "NotFound"), None),
                }
            }
            (Method::POST, "/api/v1/namespaces/ankka-flow/configmaps") => {
                let name = body["metadata"]["name"].as_str().unwrap_or_default().to_string();
                self.config_maps.insert(format!("/api/v1/namespaces/ankka-flow/configmaps/{name}"), body.clone());
                (StatusCode::CREATED, body.clone(), Some(format!("record {name}")))
            }
            (Method::PATCH, p) if p.starts_with("/api/v1/namespaces/ankka-flow/configmaps/") => {
                let stored = self.config_maps.entry(p.to_string()).or_insert_with(|| json!({"data": {}}));
                for (k, v) in body["data"].as_object().into_iter().flatten() {
                    stored["data"][k] = v.clone();
                }
                (StatusCode::OK, stored.clone(), Some(format!("record {}", p.rsplit('/').next().unwrap_or(""))))
            }
            (Method::POST, "/apis/events.k8s.io/v1/namespaces/shop/events") => {
                let name = body["metadata"]["name"].as_str().unwrap_or_default().to_string();
                if self.events.contains_key(&name) {
                    return (StatusCode::CONFLICT, refused(409, "AlreadyExists"), None);
                }
                self.events.insert(name, body.clone());
                (StatusCode::CREATED, body.clone(), Some(format!("event {}", body["reason"].as_str().unwrap_or(""))))
            }
            // The server-side applies of the pipeline's other objects: answered as applied.
            (Method::PATCH, p)
                if p.starts_with("/api/v1/namespaces/shop/")
                    || p.starts_with("/apis/rbac.authorization.k8s.io/v1/namespaces/shop/") =>
            {
                let kind = body["kind"].as_str().unwrap_or_default();
                (
                    StatusCode::OK,
                    body.clone(),
                    Some(format!("apply {kind} {}", body["metadata"]["name"].as_str().unwrap_or(""))),
                )
            }
            (m, p) => {
                self.unexpected.push(format!("{m} {p}"));
                (StatusCode::NOT_FOUND, refused(404, "NotFound"), None)
            }
        }
    }

    /// A write to the resource: its new resourceVersion, and the object as the API server returns it.
    fn bump(&mut self) -> Value {
        self.version += 1;
        self.flow["metadata"]["resourceVersion"] = json!(self.version.to_string());
        self.flow.clone()
    }
}
