//! The reset ledger as the operator uses it: a cache of reset progress that may fail or vanish
//! without ever blocking a reset.
//!
//! Every entry the ledger takes is also in the resource's status before anything depends on it
//! (docs/reset.md, "Guarantees"), so a ledger that cannot be opened, read or written only costs the
//! offsets per partition of large groups, which Kafka's commit markers stand in for. It is reported,
//! never fatal: a warning in the log, the `ankka_flow_ledger_available` gauge at 0, a count in
//! `ankka_flow_ledger_errors_total{operation}`, and the `ResetLedger` condition on the resources the
//! operator reconciles while it lasts.
//!
//! A ledger directory removed under the running operator (a volume lost, a cleanup gone wrong) is
//! noticed at the next use: sled would go on writing to files no one can open again, so the
//! database is dropped and a new one opened in a new directory of the same path.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use flow_adapters::ledger::{Ledger as Db, LedgerError, Owner};
use flow_core::reset::{LedgerEntry, ProgressWrite};

use crate::metrics::{LedgerLabels, Metrics};

/// The operator's ledger: the database when it can be used, and the last problem with it.
///
/// sled reads and writes the disk, and a write is flushed (fsync) before it counts: every call runs
/// on tokio's blocking threads, never on the runtime's own, so a slow disk delays only the work that
/// waits for it (a persist, and what depends on it), not every reconcile and probe of the process.
#[derive(Clone)]
pub struct Ledger {
    inner: Arc<Inner>,
}

struct Inner {
    dir: PathBuf,
    state: Mutex<State>,
    metrics: Arc<Metrics>,
}

#[derive(Default)]
struct State {
    db: Option<Db>,
    /// Why the ledger cannot be used, since its last failure; `None` while it works.
    problem: Option<String>,
}

/// A file sled keeps in the ledger directory for as long as the database exists.
const MARKER: &str = "conf";

/// The resource a request belongs to, owned, for a call on a blocking thread.
struct Key {
    namespace: String,
    name: String,
    uid: String,
}

impl Key {
    fn of(owner: Owner<'_>) -> Key {
        Key { namespace: owner.namespace.to_string(), name: owner.name.to_string(), uid: owner.uid.to_string() }
    }

    fn owner(&self) -> Owner<'_> {
        Owner { namespace: &self.namespace, name: &self.name, uid: &self.uid }
    }
}

impl Ledger {
    /// The ledger in `dir`; a failure to open it is reported and retried at the next use.
    pub fn open(dir: &Path, metrics: Arc<Metrics>) -> Ledger {
        let inner = Inner { dir: dir.to_path_buf(), state: Mutex::new(State::default()), metrics };
        let ledger = Ledger { inner: Arc::new(inner) };
        // Opened now in the background, so that a ledger that cannot be opened shows at once.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let inner = Arc::clone(&ledger.inner);
            runtime.spawn_blocking(move || inner.db());
        }
        ledger
    }

    /// Why the ledger cannot be used now, if it cannot. Looks at the directory first, so that a
    /// ledger removed or unopenable shows before a reset needs it.
    pub async fn problem(&self) -> Option<String> {
        self.blocking(|inner| {
            let _ = inner.db();
            inner.lock().problem.clone()
        })
        .await
        .flatten()
    }

    /// The entries of request `id` of the resource `owner` names, for whichever object (uid) they
    /// were recorded; `None` when the ledger cannot be read (the status then stands in for it).
    pub async fn progress(&self, owner: Owner<'_>, id: &str) -> Option<Vec<LedgerEntry>> {
        let (key, id) = (Key::of(owner), id.to_string());
        self.blocking(move |inner| {
            let db = inner.db()?;
            match db.progress(key.owner(), &id) {
                Ok(progress) => Some(progress),
                Err(e) => {
                    inner.failed("read", &e);
                    None
                }
            }
        })
        .await
        .flatten()
    }

    /// Writes `writes` to the progress of request `id` of `owner`, flushed to disk before it
    /// returns; whether they are durable in the ledger (the status carries them either way).
    pub async fn put(&self, owner: Owner<'_>, id: &str, writes: Vec<ProgressWrite>) -> bool {
        let (key, id) = (Key::of(owner), id.to_string());
        self.blocking(move |inner| {
            let Some(db) = inner.db() else { return false };
            match db.put(key.owner(), &id, &writes) {
                Ok(()) => {
                    inner.worked();
                    true
                }
                Err(e) => {
                    inner.failed("write", &e);
                    false
                }
            }
        })
        .await
        .unwrap_or(false)
    }

    /// Runs `call` on a blocking thread; `None` when it ended without a result (it panicked).
    async fn blocking<T: Send + 'static>(&self, call: impl FnOnce(&Inner) -> T + Send + 'static) -> Option<T> {
        let inner = Arc::clone(&self.inner);
        match tokio::task::spawn_blocking(move || call(&inner)).await {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::warn!(error = %e, "a call on the reset ledger ended without a result");
                None
            }
        }
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The database, opened (again) when it is not open or its directory was removed.
    fn db(&self) -> Option<Db> {
        let mut state = self.lock();
        if state.db.is_some() && !self.dir.join(MARKER).exists() {
            tracing::warn!(dir = %self.dir.display(), "the reset ledger's directory was removed; opening a new ledger there");
            self.metrics.ledger_errors.get_or_create(&LedgerLabels { operation: "lost".into() }).inc();
            state.db = None;
        }
        if state.db.is_none() {
            match Db::open(&self.dir) {
                Ok(db) => {
                    state.db = Some(db);
                    // A write failure stays until a write succeeds.
                    if state.problem.as_deref().is_some_and(|p| p.starts_with("cannot open")) {
                        state.problem = None;
                    }
                }
                Err(e) => {
                    drop(state);
                    self.failed("open", &e);
                    return None;
                }
            }
        }
        self.metrics.ledger_available.set(i64::from(state.problem.is_none()));
        state.db.clone()
    }

    fn failed(&self, operation: &str, e: &LedgerError) {
        let problem = match operation {
            "open" => format!("cannot open the reset ledger in {}: {e}", self.dir.display()),
            _ => format!("cannot {operation} the reset ledger in {}: {e}", self.dir.display()),
        };
        tracing::warn!(error = %e, operation, "{problem}; the status alone holds the progress of resets, which go on");
        self.metrics.ledger_errors.get_or_create(&LedgerLabels { operation: operation.into() }).inc();
        self.metrics.ledger_available.set(0);
        let mut state = self.lock();
        state.problem = Some(problem);
        if operation != "open" {
            // Opened again at the next use: a full disk or a broken file may have been fixed.
            state.db = None;
        }
    }

    fn worked(&self) {
        let mut state = self.lock();
        if state.problem.take().is_some() {
            tracing::info!(dir = %self.dir.display(), "the reset ledger works again");
        }
        self.metrics.ledger_available.set(1);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use flow_core::names::GroupId;
    use flow_core::reset::Intent;

    use super::*;

    fn write() -> Vec<ProgressWrite> {
        let intent = Intent::new(BTreeMap::from([(0, Some(5))]), BTreeMap::from([(0, 0)]), 5);
        vec![ProgressWrite::Intent(GroupId::new("cart", "router", "in"), intent)]
    }

    #[tokio::test]
    async fn a_removed_directory_is_noticed_and_a_new_ledger_opened() {
        let dir = std::env::temp_dir().join(format!("flow-ledger-removed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let metrics = Arc::new(Metrics::default());
        let l = Ledger::open(&dir, metrics.clone());
        let owner = Owner { namespace: "shop", name: "cart", uid: "5f0c1e2a-cart" };
        assert!(l.put(owner, "u1", write()).await);
        assert_eq!(l.progress(owner, "u1").await.map(|p| p.len()), Some(1));
        std::fs::remove_dir_all(&dir).expect("remove the ledger directory");
        // The progress went with the directory; the ledger works again in a new one.
        assert_eq!(l.progress(owner, "u1").await.map(|p| p.len()), Some(0));
        assert!(l.put(owner, "u1", write()).await);
        assert!(dir.join(MARKER).exists());
        assert_eq!(l.problem().await, None);
        assert!(metrics.encode().contains("ankka_flow_ledger_errors_total{operation=\"lost\"} 1"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_ledger_that_cannot_be_opened_is_a_problem_not_a_stop() {
        // A regular file where the directory should be.
        let path = std::env::temp_dir().join(format!("flow-ledger-file-{}", std::process::id()));
        std::fs::write(&path, b"not a directory").expect("a file");
        let metrics = Arc::new(Metrics::default());
        let l = Ledger::open(&path, metrics.clone());
        let owner = Owner { namespace: "shop", name: "cart", uid: "5f0c1e2a-cart" };
        assert!(!l.put(owner, "u1", write()).await);
        assert_eq!(l.progress(owner, "u1").await, None);
        let problem = l.problem().await.expect("a problem");
        assert!(problem.starts_with("cannot open the reset ledger in "), "{problem}");
        let text = metrics.encode();
        assert!(text.contains("ankka_flow_ledger_available 0"), "{text}");
        assert!(text.contains("ankka_flow_ledger_errors_total{operation=\"open\"}"), "{text}");
        let _ = std::fs::remove_file(&path);
    }
}
