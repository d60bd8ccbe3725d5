//! Names, labels and annotation keys shared by the CLI and the operator.
//!
//! Every name here is part of the platform's interface (docs/migration.md, "What stays the same"):
//! changing one breaks running pipelines, so each is a constant or a small function with a test.

use std::fmt;

pub mod objects;

/// The domain prefix of every label, annotation, finalizer and API group of the platform.
pub const DOMAIN: &str = "flow.ankka.thinkmorestupidless.com";

/// Label on the resource and every rendered object: the pipeline id.
pub const LABEL_PIPELINE: &str = "flow.ankka.thinkmorestupidless.com/pipeline";
/// Label on per-streamlet objects and their pods: the streamlet name.
pub const LABEL_STREAMLET: &str = "flow.ankka.thinkmorestupidless.com/streamlet";
/// The standard `managed-by` label (Kubernetes recommended labels).
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// Value of [`LABEL_MANAGED_BY`] on everything the platform writes.
pub const MANAGED_BY: &str = "ankka-flow";
/// The standard `name` label: `<pipeline>-<streamlet>` on per-streamlet objects.
pub const LABEL_NAME: &str = "app.kubernetes.io/name";

/// Annotation written by `flow reset`: `{"id":"<uuid>","streamlets":[...]}`.
pub const ANNOTATION_RESET: &str = "flow.ankka.thinkmorestupidless.com/reset-offsets";
/// Annotation written by the operator: the id of the last request carried out.
pub const ANNOTATION_RESET_DONE: &str = "flow.ankka.thinkmorestupidless.com/reset-offsets-done";
/// Annotation stamped at admission whenever [`ANNOTATION_RESET`] is set or changed: the user who did
/// it, as the API server authenticated them (docs/governance.md). Also the annotation of every event
/// of a request that names its requester.
pub const ANNOTATION_REQUESTED_BY: &str = "flow.ankka.thinkmorestupidless.com/reset-requested-by";
/// Annotation written by `flow reset approve` and `flow reset deny`: `approved <id>` or
/// `denied <id>`.
pub const ANNOTATION_DECISION: &str = "flow.ankka.thinkmorestupidless.com/reset-decision";
/// Annotation stamped at admission whenever [`ANNOTATION_DECISION`] is set or changed: who decided.
pub const ANNOTATION_DECIDED_BY: &str = "flow.ankka.thinkmorestupidless.com/reset-decided-by";
/// Annotation of an `AnkkaFlow` whose resets need approval (`required`), whatever the operator's
/// settings say; changing it needs the `approve` permission.
pub const ANNOTATION_APPROVAL: &str = "flow.ankka.thinkmorestupidless.com/reset-approval";

/// Field manager of every server-side apply and patch the operator sends.
pub const OPERATOR_FIELD_MANAGER: &str = "ankka-flow-operator";
/// Field manager of the annotation patch the CLI sends.
pub const CLI_FIELD_MANAGER: &str = "flow-cli";
/// `reportingController` of every event the operator records.
pub const REPORTING_CONTROLLER: &str = "flow.ankka.thinkmorestupidless.com/operator";

/// The consumer group of one inlet: `<pipeline>.<streamlet>.<inlet>`.
///
/// The same string is the Kafka `client.id` of the inlet's consumer (the `client_id` label of the
/// sidecar's own Kafka metrics), and the `consumergroup` label of the operator's lag metrics.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct GroupId(String);

impl GroupId {
    /// Joins the three parts with `.`.
    pub fn new(pipeline: &str, streamlet: &str, inlet: &str) -> Self {
        GroupId(format!("{pipeline}.{streamlet}.{inlet}"))
    }

    /// A group id read back from a record (status or ledger), taken as it is.
    pub fn from_raw(s: &str) -> Self {
        GroupId(s.to_string())
    }

    /// The group id as Kafka sees it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for GroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Name of the Deployment (and Secret) of one streamlet: `flow-<pipeline>-<streamlet>`.
pub fn streamlet_object_name(pipeline: &str, streamlet: &str) -> String {
    format!("flow-{pipeline}-{streamlet}")
}

/// Whether `s` is a DNS label as Kubernetes defines it (RFC 1123): 1-63 of `[a-z0-9-]`, starting and
/// ending with an alphanumeric character.
pub fn is_dns_label(s: &str) -> bool {
    is_label_like(s, 63)
}

/// Whether `s` is a DNS subdomain (RFC 1123), as the name of most Kubernetes objects must be (an
/// `AnkkaFlow`'s among them): at most 253 characters, dot-separated labels of `[a-z0-9-]`, each
/// beginning and ending with a letter or digit.
pub fn is_dns_subdomain(s: &str) -> bool {
    objects::subdomain_fault(s).is_none()
}

/// Whether `s` is a valid pipeline id: 1-40 of `[a-z0-9-]`, not starting or ending with `-`
/// (docs/cli.md, "flow generate").
pub fn is_pipeline_id(s: &str) -> bool {
    is_label_like(s, 40)
}

fn is_label_like(s: &str, max: usize) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= max
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_id_joins_with_dots() {
        assert_eq!(GroupId::new("cart", "router", "in").as_str(), "cart.router.in");
    }

    #[test]
    fn object_name_joins_with_dashes() {
        assert_eq!(streamlet_object_name("cart", "router"), "flow-cart-router");
    }

    #[test]
    fn dns_labels() {
        for ok in ["a", "router", "a-b", "r2d2", &"a".repeat(63)] {
            assert!(is_dns_label(ok), "{ok}");
        }
        for bad in ["", "-a", "a-", "A", "a_b", "a.b", &"a".repeat(64)] {
            assert!(!is_dns_label(bad), "{bad}");
        }
        assert!(is_pipeline_id(&"a".repeat(40)));
        assert!(!is_pipeline_id(&"a".repeat(41)));
    }
}
