//! The operator's room for the Kubernetes API server: its two clients and their deadlines
//! ([`clients`], [`API_TIMEOUT`], [`timed`]), whether this instance may act now ([`MayAct`], which
//! the Lease's renewals keep up to date), the one event recorder ([`Recorder`]), and the error of a
//! call ([`Error`]). Everything here reaches a reconcile through its context
//! (`crate::context::Context`), never through a static. The typed writes to an `AnkkaFlow` it read
//! are in `crate::writes`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flow_adapters::kube as k;
use flow_core::events::{Event, EventType};
use kube::{Client, Resource, ResourceExt};

use crate::metrics::Metrics;

/// The longest any call to the API server may take, watches aside: no answer by then is a failure.
pub const API_TIMEOUT: Duration = Duration::from_secs(10);

/// The clients of the operator: one for its calls, which fail when the API server sends nothing for
/// [`API_TIMEOUT`] (counted from when the request was sent), and one for its watches, whose streams
/// stay quiet for minutes when nothing changes (the watcher has its own idle timeout).
///
/// A call's deadlines are layers around the request, not read timeouts on the connection: a read
/// timeout also runs while a kept-alive connection waits in the pool, and closed every connection
/// idle for [`API_TIMEOUT`], so that a burst of calls (a reset's events, one per consumer group)
/// opened new TLS connections on its critical path (docs/performance.md, "Connections kept").
///
/// # Errors
/// When no Kubernetes configuration is found, or no client can be built from it.
pub async fn clients() -> Result<(Client, Client), kube::Error> {
    let config = kube::Config::infer().await.map_err(kube::Error::InferConfig)?;
    let watches = Client::try_from(config.clone())?;
    Ok((calls_client(config, API_TIMEOUT)?, watches))
}

/// A client whose calls fail when the API server sends nothing for `timeout`: the response's head
/// within `timeout` of sending the request (connecting included), then each part of its body within
/// `timeout` of the one before. Its kept-alive connections wait in the pool without a deadline.
fn calls_client(mut config: kube::Config, timeout: Duration) -> Result<Client, kube::Error> {
    config.connect_timeout = Some(timeout);
    config.write_timeout = Some(timeout);
    config.read_timeout = None;
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&tower_http::timeout::ResponseBodyTimeoutLayer::new(timeout))
        .with_layer(&tower::timeout::TimeoutLayer::new(timeout))
        .build())
}

/// `call` with [`API_TIMEOUT`] (the client's own deadlines bound the answer's head and each part of
/// its body; this bounds the whole call, retries included).
pub async fn timed<T>(call: impl Future<Output = Result<T, kube::Error>>) -> Result<T, kube::Error> {
    tokio::time::timeout(API_TIMEOUT, call).await.unwrap_or_else(|_| Err(no_answer()))
}

/// The error of a call the API server did not answer in time.
pub fn no_answer() -> kube::Error {
    kube::Error::Service("the API server did not answer in time".into())
}

/// Whether this instance may act now: commit in Kafka, record events, write a status or the done
/// annotation. Always, without leader election; with it, while the last renewal of the Lease that
/// the API server confirmed is less than the renewal deadline old (see `crate::leader`). Cheap to
/// clone: every clone sees the same renewals.
#[derive(Clone, Debug, Default)]
pub struct MayAct(Option<Arc<Term>>);

/// When this instance last had its holding of the Lease confirmed, and for how long that lets it act.
#[derive(Debug)]
struct Term {
    renewed: Mutex<Instant>,
    renew_deadline: Duration,
}

impl MayAct {
    /// Without leader election: this instance always may act.
    pub fn always() -> MayAct {
        MayAct(None)
    }

    /// The holder of a Lease confirmed at `renewed`, which may act until `renew_deadline` after its
    /// latest confirmed renewal ([`MayAct::renewed_at`]).
    pub fn held(renewed: Instant, renew_deadline: Duration) -> MayAct {
        MayAct(Some(Arc::new(Term { renewed: Mutex::new(renewed), renew_deadline })))
    }

    /// Whether this instance may act now.
    pub fn now(&self) -> bool {
        self.0.as_ref().is_none_or(|t| t.renewed.lock().unwrap_or_else(|p| p.into_inner()).elapsed() < t.renew_deadline)
    }

    /// A renewal sent at `at` was confirmed.
    pub fn renewed_at(&self, at: Instant) {
        if let Some(t) = &self.0 {
            *t.renewed.lock().unwrap_or_else(|p| p.into_inner()) = at;
        }
    }

    /// `Err(Error::LeaseLost)` when this instance may not act now.
    ///
    /// # Errors
    /// [`Error::LeaseLost`].
    pub fn check(&self) -> Result<(), Error> {
        if self.now() { Ok(()) } else { Err(Error::LeaseLost) }
    }
}

/// Why a call to the API server failed, or was not made.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server refused the call, or did not answer in time.
    #[error("Kubernetes API: {}", kube_reason(.0))]
    Kube(#[from] kube::Error),
    /// This instance no longer holds the Lease with a margin: it must not act (see `crate::leader`).
    #[error("this operator no longer holds the Lease with a margin, so it does not act")]
    LeaseLost,
    /// The resource lacks a field the API server always sets.
    #[error("the resource has no {0}")]
    Incomplete(&'static str),
    /// A task doing the work (a Kafka call, a status write of the reset) stopped without a result (it
    /// panicked); the work is rebuilt from durable state on the retry.
    #[error("a task of the reset stopped without a result: {0}")]
    Task(#[from] tokio::task::JoinError),
}

impl Error {
    /// A stable CamelCase category (see `crate::controller::Error::category`).
    pub fn category(&self) -> &'static str {
        match self {
            Error::Kube(_) => "KubernetesApiFailed",
            Error::LeaseLost => "LeaseLost",
            Error::Incomplete(_) => "ResourceIncomplete",
            Error::Task(_) => "TaskFailed",
        }
    }
}

impl From<flow_core::render::plan::Incomplete> for Error {
    fn from(e: flow_core::render::plan::Incomplete) -> Self {
        Error::Incomplete(e.0)
    }
}

/// The API server's own words for a refused call (its status message and code), else the client's
/// error.
pub fn kube_reason(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} ({})", s.message, s.code),
        other => other.to_string(),
    }
}

/// Whether the watch behind `store` has listed its objects once (asked without waiting): until then
/// the operator reads from the API server instead.
pub fn listed<K>(store: &kube::runtime::reflector::Store<K>) -> bool
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    futures::FutureExt::now_or_never(store.wait_until_ready()).is_some_and(|r| r.is_ok())
}

/// How long an event recorded by [`Recorder::record_once`] is not asked for again.
const RECORDED_FOR: Duration = Duration::from_secs(600);

/// The one event recorder of the operator: every event about an `AnkkaFlow` is recorded through it,
/// as an `events.k8s.io/v1` Event named after what it is about (`flow_adapters::kube::record_event`),
/// and logged as `<namespace>/<name>: <reason>: <note>`. An event the API server refuses (no right to
/// create events, say) or does not answer in time is logged and skipped: it never fails the work
/// that recorded it. Cheap to clone, so that a task of its own can record.
#[derive(Clone)]
pub struct Recorder {
    client: Client,
    /// This instance's name, the events' reporting instance.
    instance: String,
    metrics: Arc<Metrics>,
    /// When each event of [`Recorder::record_once`] (by namespace and event name) was last recorded
    /// or found recorded.
    recorded: Arc<Mutex<HashMap<String, Instant>>>,
}

impl Recorder {
    /// A recorder over `client`, reporting as `instance`.
    pub fn new(client: Client, instance: &str, metrics: Arc<Metrics>) -> Recorder {
        Recorder { client, instance: instance.to_string(), metrics, recorded: Arc::default() }
    }

    /// Records `event` about `object` (an `AnkkaFlow`, or one that could not be read as one) and
    /// logs it. Returns whether the event was created now (not when one of its name existed already,
    /// or it could not be recorded).
    pub async fn record<K: Resource<DynamicType = ()>>(&self, object: &K, event: &Event) -> bool {
        let (ns, name) = (object.namespace().unwrap_or_default(), object.name_any());
        match event.type_ {
            EventType::Normal => tracing::info!("{ns}/{name}: {}: {}", event.reason, event.note),
            EventType::Warning => tracing::warn!("{ns}/{name}: {}: {}", event.reason, event.note),
        }
        match timed(k::record_event(&self.client, object, event, &self.instance)).await {
            Ok(created) => {
                if created {
                    self.metrics.event_created(&event.reason);
                }
                created
            }
            Err(e) => {
                tracing::warn!(namespace = %ns, name = %name, reason = %event.reason, error = %e, "could not record the event");
                false
            }
        }
    }

    /// Records a Warning `event` that reconciles repeat (a refusal's problems, a shared consumer
    /// group, why a request waits), and logs it the first time only: the API server keeps one of each
    /// (events are named after what they are about), and this instance does not ask again for
    /// [`RECORDED_FOR`] (events expire, so it asks again after that). A failure to record is logged
    /// with the event's text, and not retried sooner either.
    pub async fn record_once<K: Resource<DynamicType = ()>>(&self, object: &K, event: &Event) {
        let (ns, name) = (object.namespace().unwrap_or_default(), object.name_any());
        let key = format!("{ns}/{}", event.name_for(&name));
        let now = Instant::now();
        {
            let mut recorded = self.recorded.lock().unwrap_or_else(|p| p.into_inner());
            if recorded.get(&key).is_some_and(|at| now.duration_since(*at) < RECORDED_FOR) {
                return;
            }
            recorded.retain(|_, at| now.duration_since(*at) < RECORDED_FOR);
        }
        match timed(k::record_event(&self.client, object, event, &self.instance)).await {
            Ok(true) => {
                tracing::warn!("{ns}/{name}: {}: {}", event.reason, event.note);
                self.metrics.event_created(&event.reason);
            }
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(error = %e, "{ns}/{name}: {}: {} (not recorded as an event)", event.reason, event.note)
            }
        }
        self.recorded.lock().unwrap_or_else(|p| p.into_inner()).insert(key, now);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// What a test API server does with each request it reads on a connection.
    #[derive(Clone, Copy)]
    enum Answer {
        Whole,
        Nothing,
        HeadOnly,
    }

    /// An HTTP/1.1 server on loopback that answers the requests on each connection it accepts as
    /// `answers` says, in order; returns its address and a count of the connections accepted.
    async fn api_server(answers: Vec<Answer>) -> (String, Arc<AtomicUsize>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let addr = format!("http://{}", listener.local_addr().expect("an address"));
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        let answers = Arc::new(Mutex::new(answers.into_iter()));
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                let answers = answers.clone();
                tokio::spawn(async move {
                    let mut seen = Vec::new();
                    let mut buf = [0u8; 4096];
                    while let Ok(n @ 1..) = conn.read(&mut buf).await {
                        seen.extend_from_slice(&buf[..n]);
                        while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                            seen.drain(..end + 4);
                            let answer = answers.lock().unwrap_or_else(|p| p.into_inner()).next();
                            let body = r#"{"major":"1","minor":"36","gitVersion":"v1.36.3"}"#;
                            let head = format!(
                                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                                body.len()
                            );
                            match answer {
                                Some(Answer::Whole) => {
                                    let _ = conn.write_all(format!("{head}{body}").as_bytes()).await;
                                }
                                Some(Answer::HeadOnly) => {
                                    let _ = conn.write_all(head.as_bytes()).await;
                                }
                                Some(Answer::Nothing) | None => {}
                            }
                        }
                    }
                });
            }
        });
        (addr, accepted)
    }

    fn client(addr: &str, timeout: Duration) -> Client {
        calls_client(kube::Config::new(addr.parse().expect("a URL")), timeout).expect("a client")
    }

    #[tokio::test]
    async fn a_connection_idle_longer_than_the_deadline_is_used_again() {
        let (addr, accepted) = api_server(vec![Answer::Whole, Answer::Whole]).await;
        let client = client(&addr, Duration::from_millis(200));
        client.apiserver_version().await.expect("the first answer");
        tokio::time::sleep(Duration::from_millis(600)).await;
        client.apiserver_version().await.expect("the second answer");
        assert_eq!(accepted.load(Ordering::SeqCst), 1, "both calls went over one connection");
    }

    #[tokio::test]
    async fn a_call_without_an_answer_or_with_half_of_one_fails_at_its_deadline() {
        for answer in [Answer::Nothing, Answer::HeadOnly] {
            let (addr, _) = api_server(vec![answer]).await;
            let client = client(&addr, Duration::from_millis(300));
            let started = std::time::Instant::now();
            let outcome = tokio::time::timeout(Duration::from_secs(5), client.apiserver_version()).await;
            let took = started.elapsed();
            assert!(matches!(outcome, Ok(Err(_))), "the call failed by itself");
            assert!(took >= Duration::from_millis(300) && took < Duration::from_secs(2), "{took:?}");
        }
    }

    #[test]
    fn a_holder_may_act_until_the_renewal_deadline_and_every_clone_sees_a_renewal() {
        assert!(MayAct::always().now());
        let held = MayAct::held(Instant::now() - Duration::from_secs(11), Duration::from_secs(10));
        let clone = held.clone();
        assert!(!held.now() && !clone.now());
        assert!(matches!(clone.check(), Err(Error::LeaseLost)));
        held.renewed_at(Instant::now());
        assert!(held.now() && clone.now());
    }
}
