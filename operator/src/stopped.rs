//! When this operator saw each streamlet stopped: the moment its last pod went away (deleted, or
//! `Succeeded`/`Failed`, the same pods [`flow_adapters::kube::running_pods`] counts), learned from
//! the operator's own watch of the pods that carry a pipeline label. The reset's settle counts from
//! it (`flow_core::reset::ResetMachine::with_stopped`, docs/reset.md "The settle").
//!
//! Only what this process saw counts, never a status or an annotation a tenant can write. A streamlet
//! whose pods it never saw (it stopped before the operator started, or before this instance held the
//! Lease) is not known stopped, and its groups wait the full settle. When the watch has to list
//! again (its `resourceVersion` expired, or it failed, so changes in between may be lost), every
//! streamlet found stopped counts as stopped at the end of that list: a later moment than the true
//! one, never an earlier one; until that list ends, no streamlet is known stopped.
//!
//! The same watch answers which of a pipeline's pods can still run ([`running`]), once it has listed
//! them and while it runs without failure: a reset then need not list them again from the API
//! server (a consistent list waits for the server's cache to catch up with etcd, about 80 ms right
//! after the request's own write). What it may not have seen yet is a pod created in the last
//! moments, whose consumer cannot have joined the group yet; Kafka's view of the group stays
//! decisive (a commit is refused while the group has members, docs/reset.md). Before the first list
//! ends, or after a failure, the reset lists from the API server (case F2).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{LazyLock, Mutex};

use flow_core::names::{LABEL_PIPELINE, LABEL_STREAMLET};
use flow_core::reset::Timestamp;
use flow_core::targets::pod_counts;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher;
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
    /// Whether the watch has listed the pods and runs without failure since.
    current: bool,
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
            watcher::Event::Apply(pod) => match can_run(&pod) {
                Some((uid, key)) => self.add(uid, key),
                None => self.remove(&pod.uid().unwrap_or_default(), now),
            },
            watcher::Event::Delete(pod) => self.remove(&pod.uid().unwrap_or_default(), now),
            watcher::Event::Init => {
                self.listing = Some(HashMap::new());
                self.current = false;
            }
            watcher::Event::InitApply(pod) => {
                if let (Some((uid, key)), Some(listing)) = (can_run(&pod), self.listing.as_mut()) {
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
                self.current = true;
            }
        }
    }

    /// The watch failed: what it shows may miss changes until it has listed again, so it answers
    /// no pod counts and knows no streamlet stopped until then.
    pub fn lost(&mut self) {
        self.current = false;
        self.listing = None;
        for s in self.streamlets.values_mut() {
            s.stopped_at = None;
        }
    }

    /// Per value of the streamlet label, the pods of `pipeline` in `namespace` that can still run, as
    /// [`flow_adapters::kube::running_pods`] counts them; `None` unless the watch is current.
    pub fn running(&self, namespace: &str, pipeline: &str) -> Option<BTreeMap<String, u32>> {
        if !self.current {
            return None;
        }
        let mut counts = BTreeMap::new();
        for (ns, p, streamlet) in self.pods.values() {
            if ns == namespace && p == pipeline {
                *counts.entry(streamlet.clone()).or_insert(0) += 1;
            }
        }
        Some(counts)
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
    for seen in SEEN.lock().unwrap_or_else(|p| p.into_inner()).iter_mut() {
        if let Some(s) = seen.streamlets.get_mut(&key) {
            s.stopped_at = None;
        }
    }
}

/// A pod that can still run: its uid and streamlet.
fn can_run(pod: &Pod) -> Option<(String, Key)> {
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

/// What each watch of this process has seen: one per watched namespace, or one of every namespace
/// (each lists, and fails, on its own). Empty until [`spawn`] runs, so every streamlet then waits
/// the full settle.
static SEEN: LazyLock<Mutex<Vec<Seen>>> = LazyLock::new(|| Mutex::new(Vec::new()));

/// When this process saw each streamlet of `pipeline` in `namespace` stop, of those it saw running.
pub fn stopped(namespace: &str, pipeline: &str) -> BTreeMap<String, Timestamp> {
    let seen = SEEN.lock().unwrap_or_else(|p| p.into_inner());
    seen.iter().flat_map(|s| s.stopped(namespace, pipeline)).collect()
}

/// The pods of `pipeline` in `namespace` that can still run, per streamlet, from the watch (see the
/// module documentation); `None` while any watch has not listed, or failed since.
pub fn running(namespace: &str, pipeline: &str) -> Option<BTreeMap<String, u32>> {
    let seen = SEEN.lock().unwrap_or_else(|p| p.into_inner());
    if seen.is_empty() {
        return None;
    }
    let each: Vec<BTreeMap<String, u32>> =
        seen.iter().map(|s| s.running(namespace, pipeline)).collect::<Option<_>>()?;
    let mut counts = BTreeMap::new();
    for (streamlet, n) in each.into_iter().flatten() {
        *counts.entry(streamlet).or_insert(0) += n;
    }
    Some(counts)
}

/// Watches the pods with a pipeline label through each of `apis`. A watch that fails lists again,
/// a second later, from the start.
pub fn spawn(apis: Vec<Api<Pod>>) {
    for api in apis {
        let i = {
            let mut seen = SEEN.lock().unwrap_or_else(|p| p.into_inner());
            seen.push(Seen::default());
            seen.len() - 1
        };
        tokio::spawn(async move {
            loop {
                let config = watcher::Config::default().labels(LABEL_PIPELINE);
                let mut events = watcher(api.clone(), config).boxed();
                while let Some(event) = events.next().await {
                    let mut seen = SEEN.lock().unwrap_or_else(|p| p.into_inner());
                    let Some(seen) = seen.get_mut(i) else { return };
                    match event {
                        Ok(event) => seen.take(event, crate::context::now()),
                        Err(e) => {
                            tracing::debug!(error = %e, "the watch of pods failed: it lists again");
                            seen.lost();
                            break;
                        }
                    }
                }
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
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

    #[test]
    fn pods_are_counted_only_from_a_watch_that_listed_and_has_not_failed_since() {
        let mut seen = Seen::default();
        assert_eq!(seen.running("shop", "cart"), None, "not listed yet (case F2)");
        seen.take(watcher::Event::Init, Timestamp(1));
        seen.take(watcher::Event::InitApply(pod("a", "router", "Running")), Timestamp(1));
        assert_eq!(seen.running("shop", "cart"), None, "still listing");
        seen.take(watcher::Event::InitApply(pod("b", "router", "Pending")), Timestamp(1));
        seen.take(watcher::Event::InitApply(pod("c", "sink", "Failed")), Timestamp(1));
        seen.take(watcher::Event::InitDone, Timestamp(2));
        assert_eq!(seen.running("shop", "cart"), Some(BTreeMap::from([("router".to_string(), 2)])));
        assert_eq!(seen.running("shop", "other"), Some(BTreeMap::new()));
        seen.take(watcher::Event::Delete(pod("a", "router", "Running")), Timestamp(3));
        seen.take(watcher::Event::Delete(pod("b", "router", "Running")), Timestamp(4));
        assert_eq!(seen.running("shop", "cart"), Some(BTreeMap::new()));
        assert_eq!(seen.stopped("shop", "cart"), BTreeMap::from([("router".to_string(), Timestamp(4))]));
        // A failed watch may have missed a start and a stop: nothing counted, nothing known stopped,
        // until it has listed again; then stopped as of the end of that list.
        seen.lost();
        assert_eq!(seen.running("shop", "cart"), None);
        assert!(seen.stopped("shop", "cart").is_empty());
        listed(&mut seen, vec![], Timestamp(20));
        assert_eq!(seen.running("shop", "cart"), Some(BTreeMap::new()));
        assert_eq!(seen.stopped("shop", "cart"), BTreeMap::from([("router".to_string(), Timestamp(20))]));
    }
}
