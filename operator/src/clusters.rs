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
use flow_core::connection::{CLUSTER_SECRET_PREFIX, Clusters};
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
    /// Each cluster Secret as it was last listed, by Secret name.
    read: Mutex<BTreeMap<String, k::ClusterSecret>>,
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
        let Some(seen) = self.seen.as_ref().filter(|s| crate::api::listed(s)) else {
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
            let current = read.len() == now.len()
                && now.iter().all(|(n, v)| read.get(n).is_some_and(|r| &r.resource_version == v));
            if current {
                return Ok(read.values().map(|r| (r.cluster.clone(), r.content.clone())).collect());
            }
        }
        let listed = k::cluster_secrets(&self.client, &self.namespace).await?;
        let clusters = listed.iter().map(|s| (s.cluster.clone(), s.content.clone())).collect();
        *self.read.lock().unwrap_or_else(|p| p.into_inner()) =
            listed.into_iter().map(|s| (s.name.clone(), s)).collect();
        Ok(clusters)
    }
}

#[cfg(test)]
mod tests {
    use http::{Method, StatusCode};
    use kube::core::{ObjectMeta, PartialObjectMetaExt};
    use kube::runtime::reflector::{self, store::Writer};
    use kube::runtime::watcher::Event;

    use super::*;
    use crate::fixtures::{ApiServer, secret, secret_list};

    const LIST: &str = "/api/v1/namespaces/ankka-flow/secrets";

    fn seen(name: &str, version: &str) -> PartialObjectMeta<Secret> {
        ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ankka-flow".into()),
            resource_version: Some(version.into()),
            ..ObjectMeta::default()
        }
        .into_response_partial()
    }

    fn listed(version: &str) -> serde_json::Value {
        let mut s = secret("ankka-flow", "kafka-cluster-main", "*", &[("bootstrap.servers", "kafka:9092")]);
        s["metadata"]["resourceVersion"] = version.into();
        secret_list(vec![s])
    }

    fn client() -> (Client, ApiServer) {
        let (service, handle) = tower_test::mock::pair();
        (Client::new(service, "default"), ApiServer(handle))
    }

    /// A writer whose watch has listed `kafka-cluster-main` at `version` and an unrelated Secret.
    fn synced(version: &str) -> (Store<PartialObjectMeta<Secret>>, Writer<PartialObjectMeta<Secret>>) {
        let (store, mut writer) = reflector::store();
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitApply(seen("kafka-cluster-main", version)));
        writer.apply_watcher_event(&Event::InitApply(seen("something-else", "3")));
        writer.apply_watcher_event(&Event::InitDone);
        (store, writer)
    }

    async fn cached(secrets: &ClusterSecrets) -> Clusters {
        tokio::time::timeout(std::time::Duration::from_secs(1), secrets.get())
            .await
            .expect("answered from the cache, with no call to the API server")
            .expect("no error")
    }

    #[tokio::test]
    async fn an_unchanged_secret_is_not_listed_again_and_a_changed_one_is() {
        let (client, mut api) = client();
        let (store, mut writer) = synced("7");
        let secrets = ClusterSecrets::new(client, "ankka-flow", Some(store));
        let (first, _) = tokio::join!(secrets.get(), api.expect(Method::GET, LIST, StatusCode::OK, listed("7")));
        assert!(first.expect("listed").contains_key("main"));
        // Unchanged in the watch: from the cache, no call (a call would never be answered).
        assert!(cached(&secrets).await.contains_key("main"));
        // Changed: listed again.
        writer.apply_watcher_event(&Event::Apply(seen("kafka-cluster-main", "8")));
        let (again, _) = tokio::join!(secrets.get(), api.expect(Method::GET, LIST, StatusCode::OK, listed("8")));
        assert!(again.expect("listed").contains_key("main"));
        assert!(cached(&secrets).await.contains_key("main"));
        // Deleted: listed again, and gone.
        writer.apply_watcher_event(&Event::Delete(seen("kafka-cluster-main", "9")));
        let (gone, _) = tokio::join!(secrets.get(), api.expect(Method::GET, LIST, StatusCode::OK, secret_list(vec![])));
        assert!(gone.expect("listed").is_empty());
        api.done().await;
    }

    #[tokio::test]
    async fn before_the_watch_has_listed_every_read_lists() {
        let (client, mut api) = client();
        let (store, _writer) = reflector::store::<PartialObjectMeta<Secret>>();
        let secrets = ClusterSecrets::new(client, "ankka-flow", Some(store));
        for _ in 0..2 {
            let (got, _) = tokio::join!(secrets.get(), api.expect(Method::GET, LIST, StatusCode::OK, listed("7")));
            assert!(got.expect("listed").contains_key("main"));
        }
        api.done().await;
    }
}
