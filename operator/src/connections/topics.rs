//! Topic administration as the reconcile sees it (describe, create, delete): over the pooled admin
//! client of each connection, or, in the mocked-API test of the reconcile, an in-memory cluster.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use flow_adapters::kafka::{KafkaClient, ResetCalls};
use flow_adapters::topics::{Created, Deleted, TopicState};
use flow_core::connection::KafkaConnection;
use flow_core::render::topics::{KafkaTopic, LiveTopic, TopicCreation};
use flow_core::reset::KafkaFailure;

use super::Pool;
#[cfg(test)]
use super::fake;

/// Where the reconcile's topic calls go: Kafka, or (in the mocked-API test of the reconcile) an
/// in-memory stand-in.
pub enum Kafka {
    /// Kafka, over the pool's admin client of each connection.
    Live(Pool),
    /// An in-memory cluster for the mocked-API test.
    #[cfg(test)]
    Fake(Arc<fake::FakeKafka>),
}

impl Kafka {
    /// Kafka itself, over `pool`.
    pub fn new(pool: Pool) -> Self {
        Kafka::Live(pool)
    }

    /// What the pool's group clients sent to the brokers so far (see [`Pool::requests_sent`]);
    /// nothing for the in-memory cluster.
    pub fn requests_sent(&self) -> flow_adapters::kafka::Requests {
        match self {
            Kafka::Live(pool) => pool.requests_sent(),
            #[cfg(test)]
            Kafka::Fake(_) => flow_adapters::kafka::Requests::new(),
        }
    }

    /// The group client of `conn` in lane `lane` (see [`super::LANES`]), for the reset driver and the
    /// lag measurement; a new one gets the group `home` gives as its home group (see [`Pool::group_client`]).
    ///
    /// # Errors
    /// librdkafka rejecting the connection's properties; the in-memory cluster has no group clients.
    pub fn group_client(
        &self,
        conn: &KafkaConnection,
        lane: usize,
        home: impl FnOnce() -> Result<flow_core::names::GroupId, KafkaFailure>,
    ) -> Result<Arc<KafkaClient>, KafkaFailure> {
        match self {
            Kafka::Live(pool) => pool.group_client(conn, lane, home),
            #[cfg(test)]
            Kafka::Fake(_) => Err(KafkaFailure::unavailable("the in-memory Kafka has no group clients")),
        }
    }

    /// The client of a reset's Kafka calls over `conn` in lane `lane`: the pool's group client (see
    /// [`Kafka::group_client`]), or in the mocked-API tests the in-memory cluster.
    ///
    /// # Errors
    /// As [`Kafka::group_client`].
    pub fn reset_client(
        &self,
        conn: &KafkaConnection,
        lane: usize,
        home: impl FnOnce() -> Result<flow_core::names::GroupId, KafkaFailure>,
    ) -> Result<Arc<dyn ResetCalls>, KafkaFailure> {
        match self {
            Kafka::Live(pool) => Ok(pool.group_client(conn, lane, home)?),
            #[cfg(test)]
            Kafka::Fake(f) => Ok(fake::FakeKafka::client(f, conn)),
        }
    }

    /// The bulkhead of `conn` (see [`super::Gate`]); the in-memory cluster has none to wait for, so
    /// its gate is always open.
    pub fn gate(&self, conn: &KafkaConnection) -> super::Gate {
        match self {
            Kafka::Live(pool) => pool.gate(conn),
            #[cfg(test)]
            Kafka::Fake(_) => super::Gate::open(conn),
        }
    }

    /// What Kafka says of each topic of `wanted` (Kafka name -> configuration keys whose live values
    /// are wanted), all over connection `conn`, in its turn of the connection's bulkhead.
    pub async fn describe(
        &self,
        conn: &KafkaConnection,
        wanted: BTreeMap<String, BTreeSet<String>>,
    ) -> BTreeMap<String, KafkaTopic> {
        match self {
            Kafka::Live(pool) => match pool.topic_admin(conn) {
                Err(f) => wanted.into_keys().map(|n| (n, KafkaTopic::Unreachable(f.reason.clone()))).collect(),
                Ok(admin) => match pool.gate(conn).enter().await {
                    Err(f) => wanted.into_keys().map(|n| (n, KafkaTopic::Unreachable(f.reason.clone()))).collect(),
                    Ok(_turn) => admin.describe(wanted).await.into_iter().map(|(n, s)| (n, from_state(s))).collect(),
                },
            },
            #[cfg(test)]
            Kafka::Fake(f) => f.describe(conn, wanted),
        }
    }

    /// Creates the topic of `c` over `conn`, in its turn of the connection's bulkhead, and gives its
    /// topic id.
    ///
    /// # Errors
    /// Kafka's refusal, the deadline, or no turn in time.
    pub async fn create(&self, conn: &KafkaConnection, c: &TopicCreation) -> Result<Created, KafkaFailure> {
        match self {
            Kafka::Live(pool) => {
                let admin = pool.topic_admin(conn)?;
                let _turn = pool.gate(conn).enter().await?;
                admin.create(&c.name, c.partitions, c.replication, &c.config).await
            }
            #[cfg(test)]
            Kafka::Fake(f) => f.create(conn, c),
        }
    }

    /// Deletes the topics `names` over `conn`, in its turn of the connection's bulkhead; a missing
    /// one is fine.
    pub async fn delete(
        &self,
        conn: &KafkaConnection,
        names: &[String],
    ) -> Vec<(String, Result<Deleted, KafkaFailure>)> {
        match self {
            Kafka::Live(pool) => match pool.topic_admin(conn) {
                Err(f) => names.iter().map(|n| (n.clone(), Err(f.clone()))).collect(),
                Ok(admin) => match pool.gate(conn).enter().await {
                    Err(f) => names.iter().map(|n| (n.clone(), Err(f.clone()))).collect(),
                    Ok(_turn) => admin.delete(names).await,
                },
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
        TopicState::Exists(d) => KafkaTopic::Exists(LiveTopic {
            partitions: d.partitions,
            replication: d.replication,
            configs: d.configs,
            topic_id: d.topic_id,
        }),
    }
}
