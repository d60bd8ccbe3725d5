//! Finding a reset request by its id: the API calls that read AnkkaFlows, and a [`Poller`] that
//! bounds each call and, for a command that waits, tries a transient failure again.
//!
//! Every API call is bounded (by [`CALL_TIMEOUT`], and by what is left of `--timeout`), so that a
//! hung API server cannot hold a command past its timeout; a transient failure (no answer, 429,
//! 5xx) is said on stderr and tried again a second later, so that one lost answer does not end a
//! long wait.

use std::time::{Duration, Instant};

use flow_core::resource::AnkkaFlow;
use kube::Api;
use kube::api::ListParams;

use super::report::{Report, report_from};
use crate::cluster::{CALL_TIMEOUT, Cluster, transient};
use crate::exit::Failure;
use crate::reporter::Reporter;

/// Where to look for a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Scope {
    /// One namespace.
    Namespace(String),
    /// Every namespace.
    All,
}

/// The AnkkaFlows in `scope` (only `pipeline`, when given): one GET of the pipeline in a namespace,
/// else one LIST.
pub(super) async fn flows(
    cluster: &Cluster,
    scope: &Scope,
    pipeline: Option<&str>,
) -> Result<Vec<AnkkaFlow>, kube::Error> {
    let api: Api<AnkkaFlow> = match scope {
        Scope::Namespace(ns) => Api::namespaced(cluster.client.clone(), ns),
        Scope::All => Api::all(cluster.client.clone()),
    };
    match (scope, pipeline) {
        (Scope::Namespace(_), Some(p)) => Ok(api.get_opt(p).await?.into_iter().collect()),
        // Across namespaces a name is no key: select by it.
        (Scope::All, Some(p)) => {
            Ok(api.list(&ListParams::default().fields(&format!("metadata.name={p}"))).await?.items)
        }
        (_, None) => Ok(api.list(&ListParams::default()).await?.items),
    }
}

/// Request `id` among `flows`, read from `scope` (only `pipeline`, when given).
///
/// # Errors
/// None of them knows the id.
pub(super) fn search(flows: &[AnkkaFlow], scope: &Scope, pipeline: Option<&str>, id: &str) -> Result<Report, Failure> {
    flows.iter().find_map(|f| report_from(f, id)).ok_or_else(|| {
        let scope = match (pipeline, scope) {
            (Some(p), Scope::Namespace(ns)) => format!("pipeline '{p}' in namespace '{ns}'"),
            (Some(p), Scope::All) => format!("pipeline '{p}'"),
            (None, Scope::Namespace(ns)) => format!("namespace '{ns}'"),
            (None, Scope::All) => "any namespace".to_string(),
        };
        Failure::refused(format!(
            "no reset request '{id}' in {scope}: the id is the one `flow reset` printed; the last 10 requests of each pipeline are kept"
        ))
    })
}

/// Finds request `id` among the AnkkaFlows of namespace `ns` (only `pipeline`, when given).
///
/// # Errors
/// No AnkkaFlow there knows the id, or the API failed.
pub async fn locate(cluster: &Cluster, ns: &str, pipeline: Option<&str>, id: &str) -> Result<Report, Failure> {
    let scope = Scope::Namespace(ns.to_string());
    let found = flows(cluster, &scope, pipeline).await.map_err(|e| cluster.failure(e))?;
    search(&found, &scope, pipeline, id)
}

/// Why [`Poller::call`] gave up.
#[derive(Debug)]
pub(super) enum Stop {
    /// A failure that does not pass by itself (or any failure, for [`Poller::once`]).
    Final(kube::Error),
    /// The deadline came first.
    Deadline,
}

impl Stop {
    /// As a failure of `cluster`'s command.
    pub(super) fn failure(self, cluster: &Cluster) -> Failure {
        match self {
            Stop::Final(e) => cluster.failure(e),
            Stop::Deadline => {
                Failure::refused(format!("cannot reach Kubernetes: {}: no answer in time", cluster.server))
            }
        }
    }
}

/// Makes the API calls of a command that reads a request, bounded and, when waiting, tried again.
pub(super) struct Poller<'a> {
    cluster: &'a Cluster,
    deadline: Option<Instant>,
    /// For a command that waits: where a transient failure is said before it is tried again.
    retry: Option<&'a Reporter>,
    /// The transient failure last said on stderr, so that it is said once while it lasts.
    said: Option<String>,
}

impl<'a> Poller<'a> {
    /// One look: each call bounded by [`CALL_TIMEOUT`], any failure final.
    pub(super) fn once(cluster: &'a Cluster) -> Self {
        Poller { cluster, deadline: None, retry: None, said: None }
    }

    /// For a command that waits until `deadline` (without one: as long as it takes): transient
    /// failures are said on `out` and tried again every second.
    pub(super) fn retrying(cluster: &'a Cluster, deadline: Option<Instant>, out: &'a Reporter) -> Self {
        Poller { cluster, deadline, retry: Some(out), said: None }
    }

    /// `call`, bounded by [`CALL_TIMEOUT`] and the deadline, and tried again after a transient
    /// failure, which is said on stderr (`<problem>; trying again`) once while it lasts.
    pub(super) async fn call<T, F, Fut>(&mut self, mut call: F) -> Result<T, Stop>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, kube::Error>>,
    {
        loop {
            let left = self.deadline.map(|d| d.saturating_duration_since(Instant::now()));
            let limit = left.map_or(CALL_TIMEOUT, |l| l.min(CALL_TIMEOUT));
            if limit.is_zero() {
                return Err(Stop::Deadline);
            }
            let (out, problem) = match (tokio::time::timeout(limit, call()).await, self.retry) {
                (Ok(Ok(v)), _) => {
                    self.said = None;
                    return Ok(v);
                }
                (Ok(Err(e)), Some(out)) if transient(&e) => (out, self.cluster.problem(&e)),
                (Ok(Err(e)), _) => return Err(Stop::Final(e)),
                (Err(_), _) if left.is_some_and(|l| l <= CALL_TIMEOUT) => return Err(Stop::Deadline),
                (Err(_), Some(out)) => (
                    out,
                    format!(
                        "cannot reach Kubernetes: {}: no answer within {} s",
                        self.cluster.server,
                        CALL_TIMEOUT.as_secs()
                    ),
                ),
                (Err(_), None) => return Err(Stop::Deadline),
            };
            if self.said.as_deref() != Some(problem.as_str()) {
                out.say(&format!("{problem}; trying again"));
                self.said = Some(problem);
            }
            let pause = self.deadline.map_or(Duration::from_secs(1), |d| {
                d.saturating_duration_since(Instant::now()).min(Duration::from_secs(1))
            });
            tokio::time::sleep(pause).await;
        }
    }
}
