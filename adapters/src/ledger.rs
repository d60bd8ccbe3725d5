//! The reset ledger: per request and group, the durable progress: the intent written before a
//! commit and the outcome written once the group finished, in a sled database on the operator's volume.
//!
//! The annotations stay the source of truth for which request is done; the ledger only caches
//! progress so that a restarted operator recovers an interrupted group instead of committing it again.
//! Each write is flushed to disk before the call returns.
//!
//! Each entry is recorded for the object (`metadata.uid`) the request ran for, in the tree
//! [`BOUND`] under `<namespace>/<name>/<request id>/<uid>/<group>`, so that an object created again
//! under the same name never takes another's progress for its own (docs/reset.md, "A request
//! belongs to its object"). Entries written before that are in the default tree under
//! `<namespace>/<name>/<request id>/<group>`, and are read with no uid.

use std::path::Path;

use flow_core::names::GroupId;
use flow_core::reset::{GroupProgress, LedgerEntry, ProgressWrite};

/// The sled tree of the entries recorded with the uid of their object.
pub const BOUND: &str = "bound";

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
    bound: sled::Tree,
}

/// The resource a request belongs to.
#[derive(Clone, Copy, Debug)]
pub struct Owner<'a> {
    /// Namespace of the `AnkkaFlow`.
    pub namespace: &'a str,
    /// Name of the `AnkkaFlow`.
    pub name: &'a str,
    /// Its `metadata.uid`.
    pub uid: &'a str,
}

fn prefix(owner: Owner<'_>, id: &str) -> String {
    format!("{}/{}/{}/", owner.namespace, owner.name, id)
}

fn decode(key: &[u8], value: &[u8]) -> Result<GroupProgress, LedgerError> {
    serde_json::from_slice(value)
        .map_err(|e| LedgerError::Decode { key: String::from_utf8_lossy(key).into_owned(), reason: e.to_string() })
}

impl Ledger {
    /// Opens (or creates) the ledger in directory `dir`.
    ///
    /// # Errors
    /// [`LedgerError::Sled`] when the directory cannot be created or is locked by another process.
    pub fn open(dir: &Path) -> Result<Self, LedgerError> {
        let db = sled::open(dir)?;
        let bound = db.open_tree(BOUND)?;
        Ok(Ledger { db, bound })
    }

    /// Every entry of request `id` of the resource `owner.namespace`/`owner.name`, whichever object
    /// (uid) it was recorded for: the reset decides what another object's entries mean.
    ///
    /// # Errors
    /// [`LedgerError`] on a read failure or an undecodable entry.
    pub fn progress(&self, owner: Owner<'_>, id: &str) -> Result<Vec<LedgerEntry>, LedgerError> {
        let prefix = prefix(owner, id);
        let mut entries = Vec::new();
        for kv in self.bound.scan_prefix(&prefix) {
            let (k, v) = kv?;
            // `<uid>/<group>` after the prefix: a uid holds no `/`.
            let uid = String::from_utf8_lossy(&k[prefix.len()..]).split('/').next().map(str::to_string);
            entries.push(LedgerEntry { uid, progress: decode(&k, &v)? });
        }
        for kv in self.db.scan_prefix(&prefix) {
            let (k, v) = kv?;
            entries.push(LedgerEntry { uid: None, progress: decode(&k, &v)? });
        }
        Ok(entries)
    }

    /// Applies `writes` to the progress of request `id` of `owner` (recorded for its uid), then
    /// flushes once: a batch of groups costs one fsync, not one per group.
    ///
    /// # Errors
    /// [`LedgerError`] when an entry could not be read, decoded, written or flushed. Writes before
    /// the failing one may be kept (each is a whole entry), none is reported as durable.
    pub fn put(&self, owner: Owner<'_>, id: &str, writes: &[ProgressWrite]) -> Result<(), LedgerError> {
        for w in writes {
            let group = match w {
                ProgressWrite::Intent(g, _) | ProgressWrite::Outcome(g, _) => g,
            };
            let key = key(owner, id, group);
            let mut entry = match self.bound.get(&key)? {
                Some(v) => decode(key.as_bytes(), &v)?,
                None => GroupProgress { group: group.clone(), intent: None, outcome: None },
            };
            match w {
                ProgressWrite::Intent(_, intent) => entry.intent = Some(intent.clone()),
                ProgressWrite::Outcome(_, outcome) => entry.outcome = Some(outcome.clone()),
            }
            // Serialising plain data cannot fail.
            let bytes = serde_json::to_vec(&entry).unwrap_or_default();
            self.bound.insert(key, bytes)?;
        }
        self.db.flush()?;
        Ok(())
    }
}

fn key(owner: Owner<'_>, id: &str, group: &GroupId) -> String {
    format!("{}{}/{group}", prefix(owner, id), owner.uid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flow_core::reset::Intent;
    use std::collections::BTreeMap;

    /// Opens the ledger at `dir` again in this process: sled's flusher thread may still hold the
    /// earlier handle's file lock for a moment after it was dropped (the operator reopens it only
    /// in a new process, after the old one exited).
    fn reopen(dir: &std::path::Path) -> Ledger {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            match Ledger::open(dir) {
                Ok(l) => return l,
                Err(e) if std::time::Instant::now() < deadline => {
                    eprintln!("reopening the ledger: {e}; trying again");
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                Err(e) => panic!("the ledger does not open again: {e}"),
            }
        }
    }

    #[test]
    fn progress_survives_reopening_and_stays_per_request_and_object() {
        let dir = std::env::temp_dir().join(format!("flow-ledger-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let owner = Owner { namespace: "shop", name: "cart", uid: "uid-1" };
        let g = GroupId::new("cart", "router", "in");
        let intent = Intent::new(BTreeMap::from([(0, Some(5))]), BTreeMap::from([(0, 0)]), 5);
        let progress = GroupProgress { group: g.clone(), intent: Some(intent.clone()), outcome: None };
        {
            let l = Ledger::open(&dir).unwrap();
            l.put(owner, "u1", &[ProgressWrite::Intent(g.clone(), intent.clone())]).unwrap();
        }
        let l = reopen(&dir);
        assert_eq!(l.progress(owner, "u1").unwrap(), vec![LedgerEntry::of("uid-1", progress.clone())]);
        assert!(l.progress(owner, "u2").unwrap().is_empty());
        let outcome = intent.clone().into_reset("t", vec![]);
        l.put(owner, "u1", &[ProgressWrite::Outcome(g.clone(), outcome.clone())]).unwrap();
        assert_eq!(l.progress(owner, "u1").unwrap()[0].progress.outcome, Some(outcome));

        // An object created again under the name sees the earlier one's entries as the earlier one's.
        let again = Owner { uid: "uid-2", ..owner };
        let entries = l.progress(again, "u1").unwrap();
        assert_eq!(entries.iter().map(|e| e.uid.as_deref()).collect::<Vec<_>>(), [Some("uid-1")]);
        assert!(!entries[0].belongs_to("uid-2"));

        // An entry written before entries were bound to the uid is read with none.
        l.db.insert("shop/cart/u3/cart.router.in", serde_json::to_vec(&progress).unwrap()).unwrap();
        assert_eq!(l.progress(again, "u3").unwrap(), vec![LedgerEntry { uid: None, progress }]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
