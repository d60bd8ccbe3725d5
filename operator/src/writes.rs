//! The operator's writes to an `AnkkaFlow` it read, through one writer ([`Object`]): the status
//! (the reconcile's own write, and the reset's writes while it runs), the done annotation, and the
//! clearing of the record of the last apply. Each lands on that object only (its `metadata.uid`),
//! and only while this instance holds its Lease with a margin (the context's
//! [`crate::api::MayAct`]).
//!
//! - **The done annotation** is applied with the object's uid in the body: if the object was deleted
//!   and another created under its name, the API server refuses the write (422: the uid is
//!   immutable; 409 when no object is left), so a request finished for one object is never marked
//!   done on another.
//! - **The status** is applied with the resourceVersion this instance last read or wrote (the status
//!   subresource ignores a uid in the body): the API server refuses it (409) when anyone wrote the
//!   object since. The object is then read again: another object under the name ends the write;
//!   the same one is written again at its new version, if this instance may still act. A status write
//!   of a holder paused past its Lease thus never lands over what the new holder wrote.

use std::sync::Mutex;

use flow_adapters::kube as k;
use flow_core::resource::{AnkkaFlow, AnkkaFlowStatus};
use kube::core::Status;
use kube::{Api, ResourceExt};

use crate::api::{Error, MayAct, timed};
use crate::context::Context;

/// One `AnkkaFlow` as this instance read it, and the version it last saw of it.
pub struct Object {
    api: Api<AnkkaFlow>,
    name: String,
    uid: String,
    version: Mutex<Option<String>>,
    may_act: MayAct,
}

impl Object {
    /// The object `flow` (read from the API server or the watch cache), written with the context's
    /// client while the context's [`MayAct`] holds.
    ///
    /// # Errors
    /// [`Error::Incomplete`] when it has no namespace or uid.
    pub fn of(ctx: &Context, flow: &AnkkaFlow) -> Result<Object, Error> {
        let ns = flow.namespace().ok_or(Error::Incomplete("namespace"))?;
        let uid = flow.uid().ok_or(Error::Incomplete("uid"))?;
        Ok(Object {
            api: Api::namespaced(ctx.client.clone(), &ns),
            name: flow.name_any(),
            uid,
            version: Mutex::new(flow.resource_version()),
            may_act: ctx.may_act.clone(),
        })
    }

    /// Its `metadata.uid`.
    pub fn uid(&self) -> &str {
        &self.uid
    }

    fn version(&self) -> Option<String> {
        self.version.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn saw(&self, version: Option<String>) {
        if version.is_some() {
            *self.version.lock().unwrap_or_else(|p| p.into_inner()) = version;
        }
    }

    /// Applies `status` to this object (see the module documentation).
    ///
    /// # Errors
    /// [`Error::LeaseLost`] when this instance may not act; the API server's refusal otherwise
    /// (a 409 naming both uids when another object has the name now).
    pub async fn status(&self, status: &AnkkaFlowStatus) -> Result<(), Error> {
        let mut again = true;
        loop {
            self.may_act.check()?;
            match timed(k::write_status(&self.api, &self.name, status, self.version().as_deref())).await {
                Ok(version) => {
                    self.saw(version);
                    return Ok(());
                }
                Err(kube::Error::Api(s)) if s.code == 409 && again => {
                    again = false;
                    // Written by someone since: the same object, or another under its name?
                    match timed(self.api.get_opt(&self.name)).await? {
                        Some(now) if now.uid().as_deref() == Some(self.uid.as_str()) => {
                            self.saw(now.resource_version())
                        }
                        now => return Err(self.replaced(now.and_then(|o| o.uid()))),
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Removes the record of the last apply of the pipeline's objects from this object's status
    /// (`status.applied`, [`flow_core::render::applied`]), leaving the rest of it as it is. Unlike a
    /// status write it needs no resourceVersion: a record cleared on another object under the name
    /// costs that object one apply of its objects, nothing more.
    ///
    /// # Errors
    /// [`Error::LeaseLost`] when this instance may not act; the API server's refusal otherwise.
    pub async fn clear_applied(&self) -> Result<(), Error> {
        self.may_act.check()?;
        let version = timed(k::clear_applied(&self.api, &self.name)).await?;
        self.saw(version);
        Ok(())
    }

    /// Writes request `id` to this object's done annotation (see the module documentation).
    ///
    /// # Errors
    /// [`Error::LeaseLost`] when this instance may not act; the API server's refusal otherwise.
    pub async fn done(&self, id: &str) -> Result<(), Error> {
        self.may_act.check()?;
        let version = timed(k::write_done(&self.api, &self.name, &self.uid, id)).await?;
        self.saw(version);
        Ok(())
    }

    /// The error of a write that found another object (uid `now`), or none, under the name.
    fn replaced(&self, now: Option<String>) -> Error {
        let message = match now {
            Some(now) => format!(
                "AnkkaFlow {} was deleted and created again since it was read (uid {}, now {now}): nothing is written \
                 for the object it replaced",
                self.name, self.uid
            ),
            None => format!("AnkkaFlow {} (uid {}) was deleted since it was read", self.name, self.uid),
        };
        Error::Kube(kube::Error::Api(Box::new(Status {
            code: 409,
            reason: "Conflict".into(),
            message,
            ..Status::default()
        })))
    }
}
