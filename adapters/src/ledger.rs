//! The reset ledger: per request and group, the durable progress: the intent written before a
//! commit and the outcome written once the group finished, in a sled database on the operator's volume.
//!
//! The annotations stay the source of truth for which request is done; the ledger only caches
//! progress so that a restarted operator recovers an interrupted group instead of committing it again.
//! Each write is flushed to disk before the call returns.

use std::path::Path;

use flow_core::reset::{GroupProgress, ProgressWrite};

/// Why the ledger could not be used.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// sled failed (I/O error, corruption, lock held by another process).
    #[error("reset ledger: {0}")]
    Sled(#[from] sled::Error),
    /// A stored entry does not decode (written by an incompatible version).
    #[error("reset ledger: entry '{key}' does not decode: {reason}")]
    Decode {
        /// The entry's key.
        key: String,
        /// Decoder's reason.
        reason: String,
    },
}

/// The ledger database.
#[derive(Clone)]
pub struct Ledger {
    db: sled::Db,
}

/// The resource a request belongs to.
#[derive(Clone, Copy, Debug)]
pub struct Owner<'a> {
    /// Namespace of the `AnkkaFlow`.
    pub namespace: &'a str,
    /// Name of the `AnkkaFlow`.
    pub name: &'a str,
}

fn prefix(owner: Owner<'_>, id: &str) -> String {
    format!("{}/{}/{}/", owner.namespace, owner.name, id)
}

impl Ledger {
    /// Opens (or creates) the ledger in directory `dir`.
    ///
    /// # Errors
    /// [`LedgerError::Sled`] when the directory cannot be created or is locked by another process.
    pub fn open(dir: &Path) -> Result<Self, LedgerError> {
        Ok(Ledger { db: sled::open(dir)? })
    }

    /// The progress of every group of request `id` of `owner`.
    ///
    /// # Errors
    /// [`LedgerError`] on a read failure or an undecodable entry.
    pub fn progress(&self, owner: Owner<'_>, id: &str) -> Result<Vec<GroupProgress>, LedgerError> {
        self.db
            .scan_prefix(prefix(owner, id))
            .map(|kv| {
                let (k, v) = kv?;
                serde_json::from_slice(&v).map_err(|e| LedgerError::Decode {
                    key: String::from_utf8_lossy(&k).into_owned(),
                    reason: e.to_string(),
                })
            })
            .collect()
    }

    /// Applies `writes` to the progress of request `id` of `owner`, then flushes once: a batch of
    /// groups costs one fsync, not one per group.
    ///
    /// # Errors
    /// [`LedgerError`] when an entry could not be read, decoded, written or flushed. Writes before
    /// the failing one may be kept (each is a whole entry), none is reported as durable.
    pub fn put(&self, owner: Owner<'_>, id: &str, writes: &[ProgressWrite]) -> Result<(), LedgerError> {
        for w in writes {
            let group = match w {
                ProgressWrite::Intent(g, _) | ProgressWrite::Outcome(g, _) => g,
            };
            let key = format!("{}{group}", prefix(owner, id));
            let mut entry = match self.db.get(&key)? {
                Some(v) => serde_json::from_slice(&v)
                    .map_err(|e| LedgerError::Decode { key: key.clone(), reason: e.to_string() })?,
                None => GroupProgress { group: group.clone(), intent: None, outcome: None },
            };
            match w {
                ProgressWrite::Intent(_, intent) => entry.intent = Some(intent.clone()),
                ProgressWrite::Outcome(_, outcome) => entry.outcome = Some(outcome.clone()),
            }
            // Serialising plain data cannot fail.
            let bytes = serde_json::to_vec(&entry).unwrap_or_default();
            self.db.insert(key, bytes)?;
        }
        self.db.flush()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flow_core::names::GroupId;
    use flow_core::reset::Intent;
    use std::collections::BTreeMap;

    #[test]
    fn progress_survives_reopening_and_stays_per_request() {
        let dir = std::env::temp_dir().join(format!("flow-ledger-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let owner = Owner { namespace: "shop", name: "cart" };
        let g = GroupId::new("cart", "router", "in");
        let intent = Intent::new(BTreeMap::from([(0, Some(5))]), BTreeMap::from([(0, 0)]), 5);
        {
            let l = Ledger::open(&dir).unwrap();
            l.put(owner, "u1", &[ProgressWrite::Intent(g.clone(), intent.clone())]).unwrap();
        }
        let l = Ledger::open(&dir).unwrap();
        let progress = l.progress(owner, "u1").unwrap();
        assert_eq!(progress, vec![GroupProgress { group: g.clone(), intent: Some(intent.clone()), outcome: None }]);
        assert!(l.progress(owner, "u2").unwrap().is_empty());
        let outcome = intent.clone().into_reset("t", vec![]);
        l.put(owner, "u1", &[ProgressWrite::Outcome(g.clone(), outcome.clone())]).unwrap();
        assert_eq!(l.progress(owner, "u1").unwrap()[0].outcome, Some(outcome));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
