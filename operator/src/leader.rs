//! Leader election over a `coordination.k8s.io/v1` Lease, and the stop signal.
//!
//! Only the Lease holder reconciles. An instance that is not the holder waits; the holder renews the
//! Lease in the background while it works. Losing the Lease ends the process at once (the caller
//! returns an error, Kubernetes restarts the container, and the fresh process waits for the Lease
//! like any other): every durable effect of a reset is idempotent and rebuilt from the status and
//! the ledger, so stopping mid-reconcile is safe, while reconciling on without the Lease is not. A
//! SIGTERM lets running reconciles finish and then gives the Lease back, so the next instance of a
//! rollout takes over without waiting for it to expire.
//!
//! The lease crate renews the Lease and notices that another instance took it, but only when it
//! renews. A holder that cannot renew (the API server unreachable, the process paused) would go on
//! believing it holds the Lease after it expired. So the holder also reads the Lease itself every
//! few seconds and stops once it can no longer show that it holds a Lease that is still valid: the
//! holder is someone else, or the last renewal it saw is about to run out.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder, LeaseManagerError};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::settings::{DEFAULT_INSTANCE, Settings};

/// How long a stopping holder waits for its Lease to be given back.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);

/// Set once SIGTERM or SIGINT arrived; a second signal ends the process at once.
#[derive(Clone)]
pub struct Stop(watch::Receiver<bool>);

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
        Ok(Stop(rx))
    }

    /// Resolves once a stop was asked for.
    pub async fn requested(mut self) {
        // An error means the listener is gone, which never happens while the runtime runs; treat
        // it as a stop rather than wait forever.
        let _ = self.0.wait_for(|stop| *stop).await;
    }
}

/// Why leader election could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Lease could not be read or created.
    #[error("cannot use the Lease {namespace}/{name}: {source}")]
    Lease {
        namespace: String,
        name: String,
        #[source]
        source: LeaseManagerError,
    },
    /// The background task that renews the Lease ended.
    #[error("the task that holds the Lease {namespace}/{name} ended")]
    TaskEnded { namespace: String, name: String },
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

/// The Lease, held by this instance.
pub struct Leadership {
    held: watch::Receiver<bool>,
    api: Api<Lease>,
    duration: u64,
    grace: u64,
    task: JoinHandle<Result<LeaseManager, LeaseManagerError>>,
    namespace: String,
    name: String,
    identity: String,
}

impl Leadership {
    /// Waits until this instance holds the Lease. `Ok(None)` when a stop was asked for first.
    ///
    /// # Errors
    /// When the Lease cannot be read or created (for example no RBAC grant), or its task ends.
    pub async fn acquire(client: Client, settings: &Settings, stop: Stop) -> Result<Option<Leadership>, Error> {
        let namespace = settings.lease_namespace.clone();
        let name = settings.lease_name.clone();
        let identity = identity(settings);
        let duration = settings.lease_duration_seconds;
        // Renew when a third of the term is left: at 15 s, every 10 s, as Kubernetes' own
        // controllers do.
        let grace = (duration / 3).max(1);
        let api = Api::namespaced(client.clone(), &namespace);
        let manager = LeaseManagerBuilder::new(client, &name)
            .with_namespace(&namespace)
            .with_identity(&identity)
            .with_duration(duration)
            .with_grace(grace)
            .build()
            .await
            .map_err(|source| Error::Lease { namespace: namespace.clone(), name: name.clone(), source })?;
        let (mut held, task) = manager.watch().await;
        tracing::info!(lease = %format!("{namespace}/{name}"), %identity, duration_seconds = duration, "waiting to hold the lease");
        let stopped = stop.requested();
        tokio::pin!(stopped);
        loop {
            if *held.borrow_and_update() {
                break;
            }
            tokio::select! {
                changed = held.changed() => {
                    if changed.is_err() {
                        return Err(Error::TaskEnded { namespace, name });
                    }
                }
                () = &mut stopped => {
                    drop(held);
                    let _ = tokio::time::timeout(RELEASE_TIMEOUT, task).await;
                    tracing::info!("stopped before holding the lease");
                    return Ok(None);
                }
            }
        }
        tracing::info!(lease = %format!("{namespace}/{name}"), %identity, "holding the lease: this instance reconciles");
        Ok(Some(Leadership { held, api, duration, grace, task, namespace, name, identity }))
    }

    /// Resolves when this instance no longer holds the Lease (another took it, or it could not be
    /// renewed in time and the renewing task noticed).
    pub async fn lost(&mut self) {
        let why = tokio::select! {
            // An error means the renewing task ended: the Lease is no longer renewed either way.
            _ = self.held.wait_for(|held| !*held) => "another instance holds it".to_string(),
            why = fence(&self.api, &self.name, &self.identity, self.duration, self.grace) => why,
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
        let Leadership { held, task, namespace, name, .. } = self;
        // Closing the channel makes the renewing task release the Lease and end.
        drop(held);
        match tokio::time::timeout(RELEASE_TIMEOUT, task).await {
            Ok(Ok(Ok(_))) => tracing::info!(lease = %format!("{namespace}/{name}"), "released the lease"),
            Ok(Ok(Err(e))) => {
                tracing::warn!(lease = %format!("{namespace}/{name}"), error = %e, "could not release the lease; it expires by itself")
            }
            Ok(Err(e)) => {
                tracing::warn!(lease = %format!("{namespace}/{name}"), error = %e, "the lease task failed; the lease expires by itself")
            }
            Err(_) => tracing::warn!(
                lease = %format!("{namespace}/{name}"),
                "releasing the lease took too long; it expires by itself"
            ),
        }
    }
}

/// Reads the Lease every `grace / 2` seconds (at least 1) and returns why this instance can no longer
/// count on holding it: the Lease names another holder, or the last renewal seen runs out within
/// half a reading period (whether because renewals fail or because the Lease cannot be read).
async fn fence(api: &Api<Lease>, name: &str, identity: &str, duration: u64, grace: u64) -> String {
    let period = Duration::from_secs((grace / 2).max(1));
    let margin = period / 2;
    // Just acquired: valid for a whole term from now at most.
    let mut valid_until = Instant::now() + Duration::from_secs(duration);
    loop {
        match api.get(name).await {
            Ok(lease) => {
                let spec = lease.spec.unwrap_or_default();
                if spec.holder_identity.as_deref() != Some(identity) {
                    return format!(
                        "the Lease names {} as its holder",
                        spec.holder_identity.as_deref().unwrap_or("no one")
                    );
                }
                if let Some(renewed) = spec.renew_time {
                    let now = k8s_openapi::jiff::Timestamp::now();
                    let age_ms = u64::try_from(now.as_millisecond() - renewed.0.as_millisecond()).unwrap_or(0);
                    let term = Duration::from_secs(
                        spec.lease_duration_seconds.map_or(duration, |d| u64::try_from(d).unwrap_or(duration)),
                    );
                    valid_until = Instant::now() + term.saturating_sub(Duration::from_millis(age_ms));
                }
            }
            Err(e) => tracing::warn!(lease = name, error = %e, "cannot read the lease"),
        }
        if Instant::now() + margin >= valid_until {
            return "it was not seen renewed before running out".to_string();
        }
        // Read again after a period, or just before the deadline if that comes first.
        tokio::time::sleep(period.min(valid_until.saturating_duration_since(Instant::now() + margin))).await;
    }
}
