//! The Kafka cluster ids the operator learned, per connection: what `flow_core::tenancy` takes as
//! an input to tell clusters apart. `crate::tenancy` asks Kafka for them.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use flow_core::connection::KafkaConnection;
use flow_core::tenancy::ClusterId;

/// How long a cluster id learned over a connection is kept: ids do not change, but the brokers an
/// address names may (a DNS name moved), so it is asked again after a while, as long as a pooled
/// client is kept.
const KEEP_KNOWN: Duration = Duration::from_secs(600);

/// How long "no id" is kept: a request waiting for it looks again at each recheck
/// ([`flow_core::reset::WAIT_RECHECK`]), and the warnings of the same reconcile do not ask twice.
const KEEP_UNKNOWN: Duration = flow_core::reset::WAIT_RECHECK;

/// The Kafka cluster ids learned so far, per connection: what `flow_core::tenancy` takes as an
/// input to tell clusters apart.
#[derive(Default)]
pub struct ClusterIds {
    learned: Mutex<Vec<(KafkaConnection, ClusterId, Instant)>>,
}

impl ClusterIds {
    /// The ids still fresh, to look connections up in.
    pub fn known(&self) -> Vec<(KafkaConnection, ClusterId)> {
        let now = Instant::now();
        let mut learned = self.learned.lock().unwrap_or_else(|p| p.into_inner());
        learned.retain(|(_, id, at)| now.duration_since(*at) < keep(id));
        learned.iter().map(|(c, id, _)| (c.clone(), id.clone())).collect()
    }

    pub fn remember(&self, conn: KafkaConnection, id: ClusterId) {
        let mut learned = self.learned.lock().unwrap_or_else(|p| p.into_inner());
        learned.retain(|(c, _, _)| *c != conn);
        learned.push((conn, id, Instant::now()));
    }
}

fn keep(id: &ClusterId) -> Duration {
    match id {
        ClusterId::Known(_) => KEEP_KNOWN,
        ClusterId::Unknown(_) => KEEP_UNKNOWN,
    }
}
