//! The Kafka cluster Secrets (`kafka-cluster-<name>` in the clusters namespace), read through a
//! cache, so that a reconcile, a reset and a lag sample cost no API call for them while they are
//! unchanged.
//!
//! One watch of the namespace's Secrets, metadata only, says which Secrets exist and at which
//! `resourceVersion`; they are listed again only when one of them is at a version this instance
//! has not read (or is new, or gone). Every change the watch sees also wakes a reconcile of every
//! pipeline (see `crate::controller`). Until the watch has listed the namespace once, and whenever
//! it is not running, every read lists the Secrets from the API server, as before the cache.

use std::collections::BTreeMap;
use std::sync::Mutex;

use flow_adapters::kube as k;
use flow_core::connection::{CLUSTER_SECRET_PREFIX, Cluster, Clusters};
use futures::FutureExt;
use k8s_openapi::api::core::v1::Secret;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::Store;
use kube::{Client, ResourceExt};

/// The cluster Secrets of one namespace, cached (see the module documentation).
pub struct ClusterSecrets {
    client: Client,
    namespace: String,
    /// The watch's view of the namespace's Secrets (metadata only); none without a watch.
    seen: Option<Store<PartialObjectMeta<Secret>>>,
    /// What each cluster Secret held, by Secret name: its `resourceVersion` and its cluster.
    read: Mutex<BTreeMap<String, Read>>,
}

/// A cluster Secret as it was read.
#[derive(Clone)]
struct Read {
    version: String,
    cluster: String,
    content: Cluster,
}

impl ClusterSecrets {
    /// The cluster Secrets of `namespace`, with the store of a metadata watch of its Secrets, or
    /// none (every read then lists them).
    pub fn new(client: Client, namespace: &str, seen: Option<Store<PartialObjectMeta<Secret>>>) -> Self {
        ClusterSecrets { client, namespace: namespace.to_string(), seen, read: Mutex::new(BTreeMap::new()) }
    }

    /// The namespace of the cluster Secrets.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The clusters, by cluster name: from the cache while the watch shows every cluster Secret at
    /// the version read last, else listed again (the operator may list and watch the Secrets of the
    /// clusters namespace, and reads none of them by name there).
    ///
    /// # Errors
    /// The Secrets cannot be listed.
    pub async fn get(&self) -> Result<Clusters, kube::Error> {
        let Some(seen) = self.seen.as_ref().filter(|s| s.wait_until_ready().now_or_never().is_some_and(|r| r.is_ok()))
        else {
            return k::clusters(&self.client, &self.namespace).await;
        };
        // The cluster Secrets the watch sees now, with their versions.
        let now: BTreeMap<String, String> = seen
            .state()
            .iter()
            .filter(|m| m.name_any().starts_with(CLUSTER_SECRET_PREFIX))
            .map(|m| (m.name_any(), m.resource_version().unwrap_or_default()))
            .collect();
        {
            let read = self.read.lock().unwrap_or_else(|p| p.into_inner());
            let current =
                read.len() == now.len() && now.iter().all(|(n, v)| read.get(n).is_some_and(|r| &r.version == v));
            if current {
                return Ok(read.values().map(|r| (r.cluster.clone(), r.content.clone())).collect());
            }
        }
        let listed = k::cluster_secrets(&self.client, &self.namespace).await?;
        let clusters = listed.iter().map(|s| (s.cluster.clone(), s.content.clone())).collect();
        *self.read.lock().unwrap_or_else(|p| p.into_inner()) = listed
            .into_iter()
            .map(|s| (s.name, Read { version: s.resource_version, cluster: s.cluster, content: s.content }))
            .collect();
        Ok(clusters)
    }
}
