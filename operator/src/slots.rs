//! The shared reconcile slots: how many reconciles work at once (`FLOW_OPERATOR_MAX_CONCURRENT_RECONCILES`).
//!
//! A reconcile holds a slot while it reads from and writes to the Kubernetes API and decides, and
//! holds none while it waits for Kafka: describing and creating topics, a reset request's Kafka
//! calls, the catch-up's lag. Those run in their cluster's bulkhead (`crate::connections::Gate`),
//! so that one pipeline's failing or unreachable Kafka cluster never keeps another pipeline's
//! reconcile from its turn (docs/operator.md, "Bulkheads"). kube's controller starts every
//! reconcile that is due (its own limit is off; it still never runs two of one resource at once),
//! and the slots bound the work.
//!
//! A reconcile that comes back from Kafka takes the next free slot before one that has not started
//! yet ([`Slots::resume`] before [`Slots::start`]): the reconciles under way finish first, so few are
//! open at once, each holding what it read (after a restart every resource is due at once).
//!
//! Written here rather than with tokio's `Semaphore`, which serves its waiters in one queue only.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

/// The slots. Cheap to share: clones hand out the same slots.
#[derive(Clone)]
pub struct Slots {
    inner: Arc<Inner>,
}

struct Inner {
    state: Mutex<State>,
}

/// The free slots and who waits for one. A slot is free only while nobody waits.
struct State {
    free: usize,
    resuming: VecDeque<oneshot::Sender<Slot>>,
    starting: VecDeque<oneshot::Sender<Slot>>,
}

/// One slot, held until dropped.
#[must_use = "a slot is given back when dropped"]
pub struct Slot {
    /// `None` once given back (or for a slot of slots that are gone).
    inner: Option<Arc<Inner>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take() {
            give_back(inner);
        }
    }
}

/// Hands a slot of `inner` to the first waiter that still waits, those resuming first, or frees it.
fn give_back(inner: Arc<Inner>) {
    let mut state = inner.state.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        let next = match state.resuming.pop_front() {
            Some(w) => w,
            None => match state.starting.pop_front() {
                Some(w) => w,
                None => {
                    state.free += 1;
                    return;
                }
            },
        };
        match next.send(Slot { inner: Some(Arc::clone(&inner)) }) {
            Ok(()) => return,
            // That waiter is gone (its reconcile was dropped): the slot comes back unused, and
            // must not be given back through its own drop while this holds the lock.
            Err(mut unused) => {
                unused.inner = None;
            }
        }
    }
}

/// A reconcile's slot that it gives back while it waits for Kafka, and takes again after.
pub struct Held<'a> {
    slots: &'a Slots,
    slot: Option<Slot>,
}

impl Held<'_> {
    /// Gives the slot back (for a wait on Kafka).
    pub fn give_back(&mut self) {
        self.slot = None;
    }

    /// Takes a slot again, unless it holds one: as a reconcile that resumes.
    pub async fn take_back(&mut self) {
        if self.slot.is_none() {
            self.slot = Some(self.slots.resume().await);
        }
    }
}

impl Slots {
    /// `slot`, a slot of these, to give back and take again.
    pub fn held(&self, slot: Slot) -> Held<'_> {
        Held { slots: self, slot: Some(slot) }
    }

    /// `n` slots (at least 1).
    pub fn new(n: usize) -> Self {
        let state = State { free: n.max(1), resuming: VecDeque::new(), starting: VecDeque::new() };
        Slots { inner: Arc::new(Inner { state: Mutex::new(state) }) }
    }

    /// A slot for a reconcile that starts: after every reconcile that resumes.
    pub async fn start(&self) -> Slot {
        self.take(false).await
    }

    /// A slot for a reconcile under way, back from Kafka: before every reconcile that starts.
    pub async fn resume(&self) -> Slot {
        self.take(true).await
    }

    async fn take(&self, resuming: bool) -> Slot {
        let waiting = {
            let mut state = self.inner.state.lock().unwrap_or_else(|p| p.into_inner());
            if state.free > 0 {
                state.free -= 1;
                return Slot { inner: Some(Arc::clone(&self.inner)) };
            }
            let (tx, rx) = oneshot::channel();
            if resuming {
                state.resuming.push_back(tx);
            } else {
                state.starting.push_back(tx);
            }
            rx
        };
        // The sender is dropped unsent only with the slots themselves.
        waiting.await.unwrap_or(Slot { inner: None })
    }

    /// Slots free now (none while anyone waits).
    #[cfg(test)]
    fn free(&self) -> usize {
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner()).free
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Whether `f` is still waiting after the runtime ran everything else it could.
    async fn waits<F: std::future::Future>(f: &mut std::pin::Pin<&mut F>) -> bool {
        tokio::task::yield_now().await;
        futures::FutureExt::now_or_never(f.as_mut()).is_none()
    }

    #[tokio::test]
    async fn at_most_n_are_held_and_a_resuming_reconcile_goes_first() {
        let slots = Slots::new(2);
        let a = slots.start().await;
        let b = slots.start().await;
        assert_eq!(slots.free(), 0);
        let starting = slots.start();
        tokio::pin!(starting);
        assert!(waits(&mut starting).await, "a third slot was handed out");
        let resuming = slots.resume();
        tokio::pin!(resuming);
        assert!(waits(&mut resuming).await);
        // The resuming reconcile came later, and gets the first slot given back.
        drop(a);
        let r = tokio::time::timeout(Duration::from_secs(1), resuming.as_mut()).await.expect("the resuming one");
        assert!(waits(&mut starting).await, "the starting one went before");
        drop(b);
        let s = tokio::time::timeout(Duration::from_secs(1), starting.as_mut()).await.expect("then the starting one");
        drop((r, s));
        assert_eq!(slots.free(), 2, "every slot came back");
    }

    #[tokio::test]
    async fn a_waiter_that_gave_up_does_not_take_a_slot_with_it() {
        let slots = Slots::new(1);
        let held = slots.start().await;
        {
            let gone = slots.resume();
            tokio::pin!(gone);
            assert!(waits(&mut gone).await);
            // Dropped here, as a reconcile that was dropped while it waited.
        }
        let next = slots.start();
        tokio::pin!(next);
        assert!(waits(&mut next).await);
        drop(held);
        let n = tokio::time::timeout(Duration::from_secs(1), next.as_mut()).await.expect("the next waiter");
        drop(n);
        assert_eq!(slots.free(), 1);
    }
}
