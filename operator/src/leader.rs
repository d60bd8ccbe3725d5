//! Leader election over a `coordination.k8s.io/v1` Lease, and the stop signal.
//!
//! Only the Lease holder reconciles, and a deposed holder stops before a new one acts:
//! - **Renewal deadline.** The holder renews the Lease every [`Timing::retry`]. A holder that has not
//!   renewed for [`Timing::renew_deadline`] (two thirds of the Lease's duration) steps down: the
//!   process ends (the caller exits, Kubernetes restarts the container, and the fresh process waits
//!   for the Lease like any other). Every durable effect of a reset is rebuilt from the status, the
//!   ledger and Kafka's markers, so stopping mid-reconcile is safe, while reconciling on is not.
//! - **Acting only with a margin.** Commits, events, status writes and the done write happen only
//!   while the context's [`MayAct`] holds: less than the renewal deadline since the last renewal the API server
//!   confirmed, counted from before it was sent, on the monotonic clock. A process paused past it (a
//!   long GC pause, SIGSTOP) finds it false the moment it runs again, before it acts.
//! - **Every API call with a timeout**: the client of every call but the watches answers within
//!   [`API_TIMEOUT`] or fails (`crate::api::clients`), and the Lease's own calls within what is left of the
//!   renewal deadline. A status write carries the resourceVersion this instance last read or wrote,
//!   so one sent by a deposed holder after a new holder wrote is refused (`crate::writes`).
//! - **Takeover conditional on the Lease's resourceVersion.** A candidate counts a holder as gone
//!   only when the Lease it read has not changed for the Lease's duration plus a grace on its own
//!   clock (never comparing clocks across machines), and takes it over with an update that carries
//!   the resourceVersion it read: if anyone wrote the Lease meanwhile, the API server answers 409 and
//!   the candidate reads again. The grace covers a Kafka call or an API call the old holder started
//!   just before its deadline: by the time a new holder acts, it has ended. At start, a Lease too
//!   short for the longest such call is refused ([`Timing::check`]).
//!
//! A SIGTERM lets running reconciles finish and then gives the Lease back (an update that clears its
//! holder), so the next instance of a rollout takes over without waiting for it to expire.
//!
//! What this cannot stop: a request that had left the old holder's Kafka client before it paused is
//! processed by the broker when it arrives, and one queued in the client's own buffers at the instant
//! the process was paused goes out when it resumes. The first is over by the time a new holder acts
//! (the grace); the second is a window of the time between the last check and the send, a few
//! milliseconds, in which Kafka itself refuses the commit if consumers have joined the group since.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::api::{API_TIMEOUT, MayAct};
use crate::settings::{DEFAULT_INSTANCE, Settings};

/// Set once SIGTERM or SIGINT arrived; a second signal ends the process at once. `None`: a stop
/// that never comes (a context of the unit tests).
#[derive(Clone)]
pub struct Stop(Option<watch::Receiver<bool>>);

impl Stop {
    /// Starts listening for SIGTERM and SIGINT.
    ///
    /// # Errors
    /// When the signal handlers cannot be installed.
    pub fn listen() -> std::io::Result<Stop> {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        let (tx, rx) = watch::channel(false);
        tokio::spawn(async move {
            let mut seen = 0u32;
            loop {
                let name = tokio::select! {
                    _ = term.recv() => "SIGTERM",
                    _ = int.recv() => "SIGINT",
                };
                seen += 1;
                if seen == 1 {
                    tracing::info!(
                        signal = name,
                        "stopping: running reconciles finish first (a second signal stops at once)"
                    );
                    let _ = tx.send(true);
                } else {
                    tracing::warn!(signal = name, "second signal: stopping at once");
                    std::process::exit(130);
                }
            }
        });
        Ok(Stop(Some(rx)))
    }

    /// A stop asked for through the sender, for tests.
    #[cfg(test)]
    pub fn manual() -> (watch::Sender<bool>, Stop) {
        let (tx, rx) = watch::channel(false);
        (tx, Stop(Some(rx)))
    }

    /// A stop that never comes, for the contexts of unit tests.
    #[cfg(test)]
    pub fn never() -> Stop {
        Stop(None)
    }

    /// Resolves once a stop was asked for.
    pub async fn requested(self) {
        let Some(mut rx) = self.0 else { return std::future::pending().await };
        // An error means the listener is gone, which never happens while the runtime runs; treat
        // it as a stop rather than wait forever.
        let _ = rx.wait_for(|stop| *stop).await;
    }
}

/// Why leader election could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The settings make a Lease too short for the calls a holder may have under way.
    #[error("{0}")]
    Settings(String),
    /// The Lease could not be read or created.
    #[error("cannot use the Lease {namespace}/{name}: {source}")]
    Lease {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// This instance's name in the Lease.
///
/// The pod name by default, which stays the same when the container restarts, so a restarted
/// container takes its own Lease back at once. Without a pod name (`HOSTNAME` unset, outside a
/// cluster), a suffix of this process's own keeps two local operators apart.
pub fn identity(settings: &Settings) -> String {
    if let Some(id) = &settings.lease_identity {
        return id.clone();
    }
    if settings.instance != DEFAULT_INSTANCE {
        return settings.instance.clone();
    }
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    format!("{DEFAULT_INSTANCE}-{}-{nanos:08x}", std::process::id())
}

/// The periods of the election, from the Lease's duration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// How long the Lease stays valid after a renewal.
    pub duration: Duration,
    /// How long the holder may go without a confirmed renewal before it steps down; also how long
    /// after a renewal it may act. Two thirds of the duration, as Kubernetes' own controllers use.
    pub renew_deadline: Duration,
    /// How often the holder renews, and a candidate looks.
    pub retry: Duration,
    /// What a candidate waits beyond the duration before it takes over: enough for a Kafka call or
    /// an API call the old holder started just before its deadline to have ended.
    pub grace: Duration,
    /// The longest call a holder may have under way: a Kafka call (its request timeout plus the
    /// admin poll's extra second) or an API call ([`API_TIMEOUT`]).
    pub longest_call: Duration,
}

impl Timing {
    /// The periods for a Lease of `duration_seconds`, with Kafka calls of at most `kafka_call` and
    /// API calls of at most `api_call`.
    pub fn new(duration_seconds: u64, kafka_call: Duration, api_call: Duration) -> Timing {
        let duration = Duration::from_secs(duration_seconds);
        let renew_deadline = duration * 2 / 3;
        let retry = (duration / 6).max(Duration::from_millis(500));
        // The old holder stops starting calls at the renew deadline; a call it started then runs at
        // most the longest call. The candidate's count starts no earlier than the old holder's last
        // renewal, and takes over after the duration.
        let longest_call = (kafka_call + Duration::from_secs(1)).max(api_call);
        let grace = longest_call.saturating_sub(duration - renew_deadline);
        Timing { duration, renew_deadline, retry, grace, longest_call }
    }

    /// The Lease's periods for `settings`.
    pub fn of(settings: &Settings) -> Timing {
        Timing::new(
            settings.lease_duration_seconds,
            Duration::from_secs(settings.kafka_request_timeout_seconds),
            API_TIMEOUT,
        )
    }

    /// Whether the Lease suits the calls a holder may have under way: the longest may last at most
    /// twice the Lease's duration, so that a candidate takes over a holder that stopped within
    /// about three Lease terms. A longer call would leave a pipeline without an operator for that
    /// long after its holder stopped.
    ///
    /// # Errors
    /// A message naming the settings, and what to set.
    pub fn check(&self, settings: &Settings) -> Result<(), String> {
        if self.longest_call <= self.duration * 2 {
            return Ok(());
        }
        let needed = self.longest_call.as_secs().div_ceil(2);
        let call = if self.longest_call > API_TIMEOUT {
            format!(
                "FLOW_KAFKA_REQUEST_TIMEOUT_SECONDS={}: a Kafka call may run {} s",
                settings.kafka_request_timeout_seconds,
                self.longest_call.as_secs()
            )
        } else {
            format!("the API timeout: an API call may run {} s", self.longest_call.as_secs())
        };
        Err(format!(
            "FLOW_LEASE_DURATION_SECONDS={} is too short for {call}, and a stopped operator's last call must end \
             before another takes over, which would then wait {} s; set FLOW_LEASE_DURATION_SECONDS to at least \
             {needed}{}",
            settings.lease_duration_seconds,
            (self.duration + self.grace).as_secs(),
            if self.longest_call > API_TIMEOUT { ", or lower FLOW_KAFKA_REQUEST_TIMEOUT_SECONDS" } else { "" }
        ))
    }
}

/// The Lease, held by this instance.
pub struct Leadership {
    lost: watch::Receiver<Option<String>>,
    task: JoinHandle<()>,
    lease: LeaseApi,
    namespace: String,
    name: String,
    identity: String,
    may_act: MayAct,
}

/// The Lease of this election, and who this instance is in it.
#[derive(Clone)]
struct LeaseApi {
    api: Api<Lease>,
    name: String,
    identity: String,
    timing: Timing,
}

impl LeaseApi {
    /// `call` with a deadline: the renewal deadline left, at most, and never less than a second.
    async fn timed<T>(
        &self,
        left: Duration,
        call: impl std::future::Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, kube::Error> {
        match tokio::time::timeout(left.max(Duration::from_secs(1)), call).await {
            Ok(r) => r,
            Err(_) => Err(kube::Error::Service("the API server did not answer in time".into())),
        }
    }

    async fn get(&self, left: Duration) -> Result<Option<Lease>, kube::Error> {
        self.timed(left, self.api.get_opt(&self.name)).await
    }

    /// The spec of the Lease as this instance holds it, renewed now; `from` is the Lease as read,
    /// taken over when `acquired`.
    fn held(&self, from: Option<&Lease>, acquired: bool) -> LeaseSpec {
        let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
        let mut spec = from.and_then(|l| l.spec.clone()).unwrap_or_default();
        if acquired {
            spec.acquire_time = Some(now.clone());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + i32::from(from.is_some()));
        }
        spec.holder_identity = Some(self.identity.clone());
        spec.lease_duration_seconds = i32::try_from(self.timing.duration.as_secs()).ok();
        spec.renew_time = Some(now);
        spec
    }

    /// Creates the Lease with `spec`. `Ok(None)` when another instance created it first (409).
    async fn create(&self, spec: LeaseSpec, left: Duration) -> Result<Option<Lease>, kube::Error> {
        let lease =
            Lease { metadata: ObjectMeta { name: Some(self.name.clone()), ..Default::default() }, spec: Some(spec) };
        conflict_is_none(self.timed(left, self.api.create(&PostParams::default(), &lease)).await)
    }

    /// Writes `spec` over the Lease `from` as read, on condition that nobody wrote it since (a merge
    /// patch carrying the resourceVersion read). `Ok(None)` when someone did (409).
    async fn update(&self, from: &Lease, spec: &LeaseSpec, left: Duration) -> Result<Option<Lease>, kube::Error> {
        let patch = serde_json::json!({
            "metadata": { "resourceVersion": from.metadata.resource_version },
            "spec": {
                "holderIdentity": spec.holder_identity,
                "leaseDurationSeconds": spec.lease_duration_seconds,
                "acquireTime": spec.acquire_time,
                "renewTime": spec.renew_time,
                "leaseTransitions": spec.lease_transitions,
            }
        });
        conflict_is_none(
            self.timed(left, self.api.patch(&self.name, &PatchParams::default(), &Patch::Merge(&patch))).await,
        )
    }
}

/// A write's answer, with a conflict (409: someone wrote first) as `None`.
fn conflict_is_none(r: Result<Lease, kube::Error>) -> Result<Option<Lease>, kube::Error> {
    match r {
        Ok(l) => Ok(Some(l)),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(None),
        Err(e) => Err(e),
    }
}

fn holder(lease: &Lease) -> Option<&str> {
    lease.spec.as_ref().and_then(|s| s.holder_identity.as_deref()).filter(|h| !h.is_empty())
}

/// What a candidate saw of the Lease: its resourceVersion, and since when (on its own clock).
struct Observed {
    version: Option<String>,
    since: Instant,
}

impl Leadership {
    /// Waits until this instance holds the Lease. `Ok(None)` when a stop was asked for first.
    ///
    /// # Errors
    /// When the Lease cannot be read or created for good (for example no RBAC grant).
    pub async fn acquire(client: Client, settings: &Settings, stop: Stop) -> Result<Option<Leadership>, Error> {
        let namespace = settings.lease_namespace.clone();
        let name = settings.lease_name.clone();
        let identity = identity(settings);
        let timing = Timing::of(settings);
        timing.check(settings).map_err(Error::Settings)?;
        let lease = LeaseApi {
            api: Api::namespaced(client, &namespace),
            name: name.clone(),
            identity: identity.clone(),
            timing,
        };
        tracing::info!(
            lease = %format!("{namespace}/{name}"), %identity, duration_seconds = timing.duration.as_secs(),
            takeover_grace_ms = timing.grace.as_millis() as u64, "waiting to hold the lease"
        );
        let stopped = stop.requested();
        tokio::pin!(stopped);
        let mut observed: Option<Observed> = None;
        let held = loop {
            let attempt = Instant::now();
            match Self::try_acquire(&lease, &mut observed).await {
                Ok(Some(held)) => break (held, attempt),
                Ok(None) => {}
                // Forbidden or not found (no namespace): nothing will change by itself.
                Err(kube::Error::Api(s)) if matches!(s.code, 401 | 403 | 404) => {
                    return Err(Error::Lease { namespace, name, source: kube::Error::Api(s) });
                }
                Err(e) => tracing::warn!(lease = %name, error = %e, "cannot read or write the lease; trying again"),
            }
            tokio::select! {
                () = tokio::time::sleep(timing.retry) => {}
                () = &mut stopped => {
                    tracing::info!("stopped before holding the lease");
                    return Ok(None);
                }
            }
        };
        // What the reconciles are given in their context: a process holds the Lease at most once
        // (losing it ends the process).
        let may_act = MayAct::held(held.1, timing.renew_deadline);
        let (tx, lost) = watch::channel(None);
        let task = tokio::spawn(renew(lease.clone(), held.0, may_act.clone(), tx));
        tracing::info!(lease = %format!("{namespace}/{name}"), %identity, "holding the lease: this instance reconciles");
        Ok(Some(Leadership { lost, task, lease, namespace, name, identity, may_act }))
    }

    /// Whether this instance may act now, kept up to date by the renewals: what the reconciles'
    /// context carries.
    pub fn may_act(&self) -> MayAct {
        self.may_act.clone()
    }

    /// One look at the Lease: the Lease as held by this instance once it took it, `None` while
    /// another holder counts as present (or another candidate was faster).
    async fn try_acquire(lease: &LeaseApi, observed: &mut Option<Observed>) -> Result<Option<Lease>, kube::Error> {
        let t = lease.timing;
        let Some(current) = lease.get(t.retry).await? else {
            return lease.create(lease.held(None, true), t.retry).await;
        };
        let version = current.metadata.resource_version.clone();
        match holder(&current) {
            // Free (given back), or ours (this pod's container restarted): take it at once.
            None => {}
            Some(h) if h == lease.identity => {}
            Some(h) => {
                let now = Instant::now();
                let since = match observed.as_ref().filter(|o| o.version == version) {
                    Some(o) => o.since,
                    None => {
                        *observed = Some(Observed { version, since: now });
                        now
                    }
                };
                // The holder's own term, as the Lease states it, if longer than ours.
                let term = current
                    .spec
                    .as_ref()
                    .and_then(|s| s.lease_duration_seconds)
                    .and_then(|d| u64::try_from(d).ok())
                    .map_or(t.duration, |d| t.duration.max(Duration::from_secs(d)));
                if now.duration_since(since) < term + t.grace {
                    return Ok(None);
                }
                tracing::info!(lease = %lease.name, holder = %h, "the holder has not renewed the lease in time: taking it over");
            }
        }
        let acquired = holder(&current) != Some(lease.identity.as_str());
        lease.update(&current, &lease.held(Some(&current), acquired), t.retry).await
    }

    /// Resolves when this instance no longer holds the Lease: another took it, or it could not
    /// renew it before the renewal deadline.
    pub async fn lost(&mut self) {
        let why = match self.lost.wait_for(Option::is_some).await {
            Ok(why) => why.clone().unwrap_or_default(),
            Err(_) => "the task that renews it ended".to_string(),
        };
        tracing::error!(
            lease = %format!("{}/{}", self.namespace, self.name),
            identity = %self.identity,
            why,
            "lost the lease: stopping at once, so that two instances never reconcile together"
        );
    }

    /// Gives the Lease back, so another instance takes over without waiting for it to expire.
    pub async fn release(self) {
        let Leadership { task, lease, namespace, name, .. } = self;
        task.abort();
        let t = lease.timing;
        let given = async {
            let Some(current) = lease.get(t.retry).await? else { return Ok(false) };
            if holder(&current) != Some(lease.identity.as_str()) {
                return Ok(false);
            }
            let transitions = current.spec.as_ref().and_then(|s| s.lease_transitions);
            let free = LeaseSpec { lease_transitions: transitions, ..LeaseSpec::default() };
            Ok::<_, kube::Error>(lease.update(&current, &free, t.retry).await?.is_some())
        };
        match given.await {
            Ok(true) => tracing::info!(lease = %format!("{namespace}/{name}"), "released the lease"),
            Ok(false) => {
                tracing::info!(lease = %format!("{namespace}/{name}"), "the lease was no longer ours to release")
            }
            Err(e) => {
                tracing::warn!(lease = %format!("{namespace}/{name}"), error = %e, "could not release the lease; it expires by itself")
            }
        }
    }
}

/// Renews the Lease every retry period until it is lost; sends why.
async fn renew(lease: LeaseApi, mut held: Lease, term: MayAct, lost: watch::Sender<Option<String>>) {
    let t = lease.timing;
    let mut renewed = Instant::now();
    loop {
        tokio::time::sleep(t.retry).await;
        let left = t.renew_deadline.saturating_sub(renewed.elapsed());
        if left.is_zero() {
            let _ = lost.send(Some("it was not renewed within the renewal deadline".into()));
            return;
        }
        let sent = Instant::now();
        match lease.update(&held, &lease.held(Some(&held), false), left).await {
            Ok(Some(l)) => {
                held = l;
                renewed = sent;
                term.renewed_at(sent);
            }
            // Someone wrote the Lease: ours still, if our own earlier write landed unanswered.
            Ok(None) => match lease.get(left).await {
                Ok(Some(l)) if holder(&l) == Some(lease.identity.as_str()) => held = l,
                Ok(l) => {
                    let by = l.as_ref().and_then(holder).unwrap_or("no one").to_string();
                    let _ = lost.send(Some(format!("the Lease names {by} as its holder")));
                    return;
                }
                Err(e) => tracing::warn!(lease = %lease.name, error = %e, "cannot read the lease"),
            },
            Err(e) => tracing::warn!(lease = %lease.name, error = %e, "cannot renew the lease"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deposed_holder_stops_acting_before_a_new_one_may_start() {
        let t = Timing::new(15, Duration::from_secs(10), API_TIMEOUT);
        assert_eq!(t.renew_deadline, Duration::from_secs(10));
        assert_eq!(t.retry, Duration::from_millis(2500));
        // The old holder acts until 10 s after its last renewal; a call it starts then ends by 21 s.
        // A candidate takes over no earlier than 15 s + grace after that renewal.
        assert_eq!(t.grace, Duration::from_secs(6));
        assert!(t.renew_deadline + Duration::from_secs(11) <= t.duration + t.grace);
        // With short Kafka calls, an API call is the longest a holder may have under way.
        let short = Timing::new(6, Duration::from_secs(2), API_TIMEOUT);
        assert_eq!((short.renew_deadline, short.grace), (Duration::from_secs(4), Duration::from_secs(8)));
        assert!(short.renew_deadline + API_TIMEOUT <= short.duration + short.grace);
    }

    #[test]
    fn a_lease_too_short_for_the_calls_is_refused_at_start_naming_the_settings() {
        use clap::Parser;
        let settings = |args: &[&str]| crate::settings::Cli::parse_from([&["flow-operator"], args].concat()).settings;
        for ok in [
            &[][..],
            &["--lease-duration-seconds", "6"],
            &["--lease-duration-seconds", "6", "--kafka-request-timeout-seconds", "2"],
        ] {
            let s = settings(ok);
            assert_eq!(Timing::of(&s).check(&s), Ok(()), "{ok:?}");
        }
        let s = settings(&["--kafka-request-timeout-seconds", "300"]);
        let why = Timing::of(&s).check(&s).unwrap_err();
        assert!(
            why.starts_with(
                "FLOW_LEASE_DURATION_SECONDS=15 is too short for FLOW_KAFKA_REQUEST_TIMEOUT_SECONDS=300: a \
                             Kafka call may run 301 s"
            ) && why.contains(
                "set FLOW_LEASE_DURATION_SECONDS to at least 151, or lower FLOW_KAFKA_REQUEST_TIMEOUT_SECONDS"
            ),
            "{why}"
        );
        let s = settings(&["--lease-duration-seconds", "4", "--kafka-request-timeout-seconds", "1"]);
        let why = Timing::of(&s).check(&s).unwrap_err();
        assert!(why.contains("the API timeout: an API call may run 10 s") && why.contains("at least 5"), "{why}");
    }
}
