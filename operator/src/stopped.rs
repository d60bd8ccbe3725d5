//! When this operator saw each streamlet stopped: the moment its last pod went away (deleted, or
//! `Succeeded`/`Failed`, the same pods [`flow_adapters::kube::running_pods`] counts), learned from
//! the operator's own watch of the pods that carry a pipeline label. The reset's settle counts from
//! it (`flow_core::reset::ResetMachine::with_stopped`, docs/reset.md "The settle").
//!
//! Only what this process saw counts, never a status or an annotation a tenant can write. A streamlet
//! whose pods it never saw (it stopped before the operator started, or before this instance held the
//! Lease) is not known stopped, and its groups wait the full settle. When the watch has to list
//! again (its `resourceVersion` expired, so changes in between may be lost), every streamlet found
//! stopped counts as stopped at the end of that list: a later moment than the true one, never an
//! earlier one.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{LazyLock, Mutex};

use flow_core::names::{LABEL_PIPELINE, LABEL_STREAMLET};
use flow_core::reset::Timestamp;
use flow_core::targets::pod_counts;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};

/// A streamlet: namespace, pipeline, streamlet (the pod's labels).
type Key = (String, String, String);

/// What the watch has seen of the pods, per streamlet.
#[derive(Debug, Default)]
pub struct Seen {
    /// Pods that can still run, by uid: their streamlet.
    pods: HashMap<String, Key>,
    /// Per streamlet seen running: its pods' uids, and since when it has none.
    streamlets: HashMap<Key, Streamlet>,
    /// While the watch lists again: the pods of the list so far.
    listing: Option<HashMap<String, Key>>,
}

#[derive(Debug, Default)]
struct Streamlet {
    pods: HashSet<String>,
    stopped_at: Option<Timestamp>,
}

impl Seen {
    /// Takes one event of the watch, at `now`.
    pub fn take(&mut self, event: watcher::Event<Pod>, now: Timestamp) {
        match event {
            watcher::Event::Apply(pod) => match running(&pod) {
                Some((uid, key)) => self.add(uid, key),
                None => self.remove(&pod.uid().unwrap_or_default(), now),
            },
            watcher::Event::Delete(pod) => self.remove(&pod.uid().unwrap_or_default(), now),
            watcher::Event::Init => self.listing = Some(HashMap::new()),
            watcher::Event::InitApply(pod) => {
                if let (Some((uid, key)), Some(listing)) = (running(&pod), self.listing.as_mut()) {
                    listing.insert(uid, key);
                }
            }
            watcher::Event::InitDone => {
                let listed = self.listing.take().unwrap_or_default();
                self.pods.clear();
                for s in self.streamlets.values_mut() {
                    s.pods.clear();
                }
                for (uid, key) in listed {
                    self.add(uid, key);
                }
                // Changes between the last event and the list are unknown: a streamlet without pods
                // counts as stopped from now on.
                for s in self.streamlets.values_mut().filter(|s| s.pods.is_empty()) {
                    s.stopped_at = Some(now);
                }
            }
        }
    }

    fn add(&mut self, uid: String, key: Key) {
        if let Some(old) = self.pods.get(&uid).filter(|old| **old != key).cloned() {
            // Its labels changed, and its process runs on: the old streamlet is not known stopped
            // (its groups wait the full settle) until one of its own pods goes.
            if let Some(s) = self.streamlets.get_mut(&old) {
                s.pods.remove(&uid);
                if s.pods.is_empty() {
                    s.stopped_at = None;
                }
            }
        }
        let s = self.streamlets.entry(key.clone()).or_default();
        s.pods.insert(uid.clone());
        s.stopped_at = None;
        self.pods.insert(uid, key);
    }

    fn remove(&mut self, uid: &str, now: Timestamp) {
        let Some(key) = self.pods.remove(uid) else { return };
        if let Some(s) = self.streamlets.get_mut(&key) {
            s.pods.remove(uid);
            if s.pods.is_empty() {
                s.stopped_at = Some(now);
            }
        }
    }

    /// The streamlets of `pipeline` in `namespace` that were seen running and have no pod now, with
    /// when their last pod went.
    pub fn stopped(&self, namespace: &str, pipeline: &str) -> BTreeMap<String, Timestamp> {
        self.streamlets
            .iter()
            .filter(|((ns, p, _), _)| ns == namespace && p == pipeline)
            .filter_map(|((_, _, streamlet), s)| s.stopped_at.map(|at| (streamlet.clone(), at)))
            .collect()
    }
}

/// A consumer of `streamlet` of `pipeline` (namespace, pipeline) was found in its group while no pod
/// of it runs (a pod force-deleted before its process ended, a consumer outside Kubernetes): when it
/// stopped is not known, so the streamlet is no longer known stopped, until one of its pods runs and
/// goes again.
pub fn members_seen(pipeline: &(String, String), streamlet: &str) {
    let key = (pipeline.0.clone(), pipeline.1.clone(), streamlet.to_string());
    if let Some(s) = SEEN.lock().unwrap_or_else(|p| p.into_inner()).streamlets.get_mut(&key) {
        s.stopped_at = None;
    }
}

/// A pod that can still run: its uid and streamlet.
fn running(pod: &Pod) -> Option<(String, Key)> {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if !pod_counts(phase) {
        return None;
    }
    let labels = pod.labels();
    let key = (
        pod.namespace()?,
        labels.get(LABEL_PIPELINE)?.clone(),
        labels.get(LABEL_STREAMLET).cloned().unwrap_or_default(),
    );
    Some((pod.uid()?, key))
}

/// What this process's watch has seen (empty until [`spawn`] runs, so every streamlet then waits
/// the full settle).
static SEEN: LazyLock<Mutex<Seen>> = LazyLock::new(|| Mutex::new(Seen::default()));

/// See [`Seen::stopped`].
pub fn stopped(namespace: &str, pipeline: &str) -> BTreeMap<String, Timestamp> {
    SEEN.lock().unwrap_or_else(|p| p.into_inner()).stopped(namespace, pipeline)
}

/// Watches the pods that carry a pipeline label through `apis` (one per watched namespace, or one of
/// every namespace), for as long as the process runs.
pub fn spawn(apis: Vec<Api<Pod>>) {
    for api in apis {
        let config = watcher::Config::default().labels(LABEL_PIPELINE);
        let mut events = watcher(api, config).default_backoff().boxed();
        tokio::spawn(async move {
            while let Some(event) = events.next().await {
                match event {
                    Ok(event) => SEEN.lock().unwrap_or_else(|p| p.into_inner()).take(event, crate::context::now()),
                    Err(e) => tracing::debug!(error = %e, "the watch of pods restarts"),
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(uid: &str, streamlet: &str, phase: &str) -> Pod {
        serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": uid, "namespace": "shop", "uid": uid,
                         "labels": {LABEL_PIPELINE: "cart", LABEL_STREAMLET: streamlet}},
            "status": {"phase": phase}
        }))
        .expect("a pod")
    }

    fn listed(seen: &mut Seen, pods: Vec<Pod>, now: Timestamp) {
        seen.take(watcher::Event::Init, now);
        for p in pods {
            seen.take(watcher::Event::InitApply(p), now);
        }
        seen.take(watcher::Event::InitDone, now);
    }

    #[test]
    fn a_streamlet_is_stopped_when_its_last_pod_went() {
        let mut seen = Seen::default();
        listed(&mut seen, vec![pod("a", "router", "Running"), pod("b", "router", "Running")], Timestamp(1));
        assert!(seen.stopped("shop", "cart").is_empty(), "running");
        seen.take(watcher::Event::Delete(pod("a", "router", "Running")), Timestamp(5));
        assert!(seen.stopped("shop", "cart").is_empty(), "one pod left");
        seen.take(watcher::Event::Delete(pod("b", "router", "Running")), Timestamp(9));
        assert_eq!(seen.stopped("shop", "cart"), BTreeMap::from([("router".to_string(), Timestamp(9))]));
        assert!(seen.stopped("shop", "other").is_empty() && seen.stopped("elsewhere", "cart").is_empty());
        // A pod that runs again: no longer stopped.
        seen.take(watcher::Event::Apply(pod("c", "router", "Pending")), Timestamp(12));
        assert!(seen.stopped("shop", "cart").is_empty());
        // A pod that ended (Failed) counts as gone, as for the reset's own pod list.
        seen.take(watcher::Event::Apply(pod("c", "router", "Failed")), Timestamp(15));
        assert_eq!(seen.stopped("shop", "cart"), BTreeMap::from([("router".to_string(), Timestamp(15))]));
    }

    #[test]
    fn a_streamlet_never_seen_running_is_not_known_stopped() {
        let mut seen = Seen::default();
        listed(&mut seen, vec![], Timestamp(1));
        seen.take(watcher::Event::Delete(pod("x", "router", "Running")), Timestamp(5));
        assert!(seen.stopped("shop", "cart").is_empty());
    }

    #[test]
    fn a_new_list_stops_no_streamlet_earlier_than_the_list() {
        // Stopped at 9; while the watch was away, it may have run and stopped again: after the list,
        // it counts as stopped from the list's end.
        let mut seen = Seen::default();
        listed(&mut seen, vec![pod("a", "router", "Running"), pod("s", "sink", "Running")], Timestamp(1));
        seen.take(watcher::Event::Delete(pod("a", "router", "Running")), Timestamp(9));
        listed(&mut seen, vec![pod("s", "sink", "Running")], Timestamp(50));
        assert_eq!(seen.stopped("shop", "cart"), BTreeMap::from([("router".to_string(), Timestamp(50))]));
        // A streamlet whose pods went while the watch was away is stopped from the list's end too.
        listed(&mut seen, vec![], Timestamp(80));
        assert_eq!(
            seen.stopped("shop", "cart"),
            BTreeMap::from([("router".to_string(), Timestamp(80)), ("sink".to_string(), Timestamp(80))])
        );
    }
}
