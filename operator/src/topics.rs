//! The operator's way to Kafka topic administration: one admin client per Kafka connection, kept
//! between reconciles, and the calls the reconcile makes through it (describe, create, delete).
//!
//! A connection is what `flow_core::connection::resolve` makes of a topic and the cluster Secrets,
//! the same the reset uses. A client unused for [`IDLE`] is closed, so an edited cluster Secret does
//! not leave the old connection's client open for ever.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flow_adapters::kafka::Deadlines;
use flow_adapters::topics::{Created, Deleted, TopicAdmin, TopicState};
use flow_core::connection::KafkaConnection;
use flow_core::render::topics::{KafkaTopic, LiveTopic, TopicCreation};
use flow_core::reset::KafkaFailure;

/// How long an admin client may stay unused before it is closed.
pub const IDLE: Duration = Duration::from_secs(600);

/// Where the reconcile's topic calls go: Kafka, or (in the mocked-API test of the reconcile) an
/// in-memory stand-in.
pub enum Kafka {
    /// Kafka, over one cached admin client per connection.
    Admin(AdminCache),
    /// An in-memory cluster for the mocked-API test.
    #[cfg(test)]
    Fake(Arc<fake::FakeKafka>),
}

impl Kafka {
    /// Kafka itself, whose requests have deadlines `d`.
    pub fn new(d: Deadlines) -> Self {
        Kafka::Admin(AdminCache { deadlines: d, clients: Mutex::new(Vec::new()) })
    }

    /// What Kafka says of each topic of `wanted` (Kafka name -> configuration keys whose live values
    /// are wanted), all over connection `conn`.
    pub async fn describe(
        &self,
        conn: &KafkaConnection,
        wanted: BTreeMap<String, BTreeSet<String>>,
    ) -> BTreeMap<String, KafkaTopic> {
        match self {
            Kafka::Admin(cache) => match cache.client(conn) {
                Err(f) => wanted.into_keys().map(|n| (n, KafkaTopic::Unreachable(f.reason.clone()))).collect(),
                Ok(admin) => admin.describe(wanted).await.into_iter().map(|(n, s)| (n, from_state(s))).collect(),
            },
            #[cfg(test)]
            Kafka::Fake(f) => f.describe(conn, wanted),
        }
    }

    /// Creates the topic of `c` over `conn`.
    ///
    /// # Errors
    /// Kafka's refusal, or the deadline.
    pub async fn create(&self, conn: &KafkaConnection, c: &TopicCreation) -> Result<Created, KafkaFailure> {
        match self {
            Kafka::Admin(cache) => cache.client(conn)?.create(&c.name, c.partitions, c.replication, &c.config).await,
            #[cfg(test)]
            Kafka::Fake(f) => f.create(conn, c),
        }
    }

    /// Deletes the topics `names` over `conn`; a missing one is fine.
    pub async fn delete(
        &self,
        conn: &KafkaConnection,
        names: &[String],
    ) -> Vec<(String, Result<Deleted, KafkaFailure>)> {
        match self {
            Kafka::Admin(cache) => match cache.client(conn) {
                Err(f) => names.iter().map(|n| (n.clone(), Err(f.clone()))).collect(),
                Ok(admin) => admin.delete(names).await,
            },
            #[cfg(test)]
            Kafka::Fake(f) => f.delete(conn, names),
        }
    }
}

fn from_state(s: TopicState) -> KafkaTopic {
    match s {
        TopicState::Missing => KafkaTopic::Missing,
        TopicState::Unreachable(r) => KafkaTopic::Unreachable(r),
        TopicState::Exists(d) => {
            KafkaTopic::Exists(LiveTopic { partitions: d.partitions, replication: d.replication, configs: d.configs })
        }
    }
}

/// One admin client per connection, with when it was last used.
pub struct AdminCache {
    deadlines: Deadlines,
    clients: Mutex<Vec<(KafkaConnection, Arc<TopicAdmin>, Instant)>>,
}

impl AdminCache {
    /// The client of `conn`, built on first use; clients idle for [`IDLE`] are closed.
    fn client(&self, conn: &KafkaConnection) -> Result<Arc<TopicAdmin>, KafkaFailure> {
        let now = Instant::now();
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        let (idle, kept): (Vec<_>, Vec<_>) =
            std::mem::take(&mut *clients).into_iter().partition(|(c, _, used)| c != conn && now - *used > IDLE);
        *clients = kept;
        if !idle.is_empty() {
            // Closing a librdkafka client waits for its threads: not on a runtime worker.
            tokio::task::spawn_blocking(move || drop(idle));
        }
        if let Some((_, admin, used)) = clients.iter_mut().find(|(c, _, _)| c == conn) {
            *used = now;
            return Ok(Arc::clone(admin));
        }
        let admin = Arc::new(TopicAdmin::new(conn, self.deadlines)?);
        clients.push((conn.clone(), Arc::clone(&admin), now));
        Ok(admin)
    }
}

impl Drop for AdminCache {
    fn drop(&mut self) {
        let clients = std::mem::take(&mut *self.clients.lock().unwrap_or_else(|p| p.into_inner()));
        if !clients.is_empty()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            rt.spawn_blocking(move || drop(clients));
        }
    }
}

/// An in-memory Kafka for the mocked-API test of the reconcile: topics by name, per bootstrap
/// servers, and a log of the calls made.
#[cfg(test)]
pub mod fake {
    use super::*;

    /// The stand-in cluster.
    #[derive(Default)]
    pub struct FakeKafka {
        /// Existing topics, by (bootstrap servers, name).
        pub topics: Mutex<BTreeMap<(String, String), LiveTopic>>,
        /// Every call, as `describe <servers> <names>`, `create <servers> <name>`, `delete <servers> <names>`.
        pub calls: Mutex<Vec<String>>,
    }

    impl FakeKafka {
        fn log(&self, line: String) {
            self.calls.lock().unwrap_or_else(|p| p.into_inner()).push(line);
        }

        pub(super) fn describe(
            &self,
            conn: &KafkaConnection,
            wanted: BTreeMap<String, BTreeSet<String>>,
        ) -> BTreeMap<String, KafkaTopic> {
            let names: Vec<&str> = wanted.keys().map(String::as_str).collect();
            self.log(format!("describe {} {}", conn.bootstrap_servers, names.join(",")));
            let topics = self.topics.lock().unwrap_or_else(|p| p.into_inner());
            wanted
                .into_iter()
                .map(|(name, keys)| {
                    let state = match topics.get(&(conn.bootstrap_servers.clone(), name.clone())) {
                        None => KafkaTopic::Missing,
                        Some(t) => {
                            let mut t = t.clone();
                            t.configs.retain(|k, _| keys.contains(k));
                            KafkaTopic::Exists(t)
                        }
                    };
                    (name, state)
                })
                .collect()
        }

        pub(super) fn create(&self, conn: &KafkaConnection, c: &TopicCreation) -> Result<Created, KafkaFailure> {
            self.log(format!("create {} {}", conn.bootstrap_servers, c.name));
            let mut topics = self.topics.lock().unwrap_or_else(|p| p.into_inner());
            let key = (conn.bootstrap_servers.clone(), c.name.clone());
            if topics.contains_key(&key) {
                return Ok(Created::AlreadyExisted);
            }
            topics.insert(
                key,
                LiveTopic { partitions: c.partitions, replication: c.replication, configs: c.config.clone() },
            );
            Ok(Created::Created)
        }

        pub(super) fn delete(
            &self,
            conn: &KafkaConnection,
            names: &[String],
        ) -> Vec<(String, Result<Deleted, KafkaFailure>)> {
            self.log(format!("delete {} {}", conn.bootstrap_servers, names.join(",")));
            let mut topics = self.topics.lock().unwrap_or_else(|p| p.into_inner());
            names
                .iter()
                .map(|n| {
                    let gone = topics.remove(&(conn.bootstrap_servers.clone(), n.clone())).is_some();
                    (n.clone(), Ok(if gone { Deleted::Deleted } else { Deleted::Missing }))
                })
                .collect()
        }
    }
}
