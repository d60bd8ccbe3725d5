//! Which namespaces the operator watches (`FLOW_WATCH_NAMESPACE`): every namespace, or the
//! namespaces listed, where its rights may be bound alone (a RoleBinding to its ClusterRole in each,
//! as the chart's `watchNamespaces` grants; see docs/install.md). Every list and watch of
//! AnkkaFlows and of their Deployments is made through here, so that the operator never asks for
//! objects outside the namespaces it watches, which RBAC would refuse it (403).

use std::sync::Arc;

use k8s_openapi::NamespaceResourceScope;
use kube::api::ListParams;
use kube::{Api, Client, Resource};

use crate::context::Guarded;
use crate::settings::Settings;

/// The namespaces the operator reconciles.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Every namespace (`FLOW_WATCH_NAMESPACE` unset or exactly empty).
    All,
    /// These namespaces only: sorted, each once, never empty.
    Namespaces(Vec<String>),
}

impl Scope {
    /// The scope `settings` ask for. A value of `--watch-namespace` that names no namespace other
    /// than the empty one was refused at start (`crate::settings`), so only an unset or exactly
    /// empty one means every namespace.
    pub fn of(settings: &Settings) -> Scope {
        match settings.watch_namespaces.as_ref().map(|w| w.names()) {
            Some(names) if !names.is_empty() => Scope::Namespaces(names.to_vec()),
            _ => Scope::All,
        }
    }

    /// One API handle per watched namespace, or one of every namespace.
    pub fn apis<K>(&self, client: &Client) -> Vec<Api<K>>
    where
        K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>,
    {
        match self {
            Scope::All => vec![Api::all(client.clone())],
            Scope::Namespaces(names) => names.iter().map(|ns| Api::namespaced(client.clone(), ns)).collect(),
        }
    }

    /// Every AnkkaFlow the operator watches, read from the API server: one list per watched
    /// namespace, or one of every namespace. One that cannot be read as an `AnkkaFlow` is in the list
    /// as such, as in the controllers' caches: it never fails the list of the others.
    ///
    /// # Errors
    /// The first list that fails.
    pub async fn list_flows(&self, client: &Client) -> Result<Vec<Arc<Guarded>>, kube::Error> {
        let mut all = Vec::new();
        for api in self.apis::<Guarded>(client) {
            all.extend(api.list(&ListParams::default()).await?.items.into_iter().map(Arc::new));
        }
        Ok(all)
    }

    /// For the log: `(all)`, or the namespaces joined with `,`.
    pub fn shown(&self) -> String {
        match self {
            Scope::All => "(all)".to_string(),
            Scope::Namespaces(names) => names.join(","),
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::Scope;
    use crate::settings::Cli;

    fn scope(args: &[&str]) -> Scope {
        Scope::of(&Cli::parse_from(std::iter::once("flow-operator").chain(args.iter().copied())).settings)
    }

    #[test]
    fn one_or_several_namespaces_or_all() {
        assert_eq!(scope(&[]), Scope::All);
        assert_eq!(scope(&["--watch-namespace", ""]), Scope::All);
        assert_eq!(scope(&["--watch-namespace", "shop"]), Scope::Namespaces(vec!["shop".into()]));
        assert_eq!(scope(&["--watch-namespace", "a, b"]), Scope::Namespaces(vec!["a".into(), "b".into()]));
        assert_eq!(
            scope(&["--watch-namespace", " tenant, shop ,tenant"]),
            Scope::Namespaces(vec!["shop".into(), "tenant".into()])
        );
        assert_eq!(scope(&["--watch-namespace", "shop,tenant"]).shown(), "shop,tenant");
        assert_eq!(scope(&[]).shown(), "(all)");
    }
}
