//! The names and labels of everything the operator renders, and the check that each fits
//! Kubernetes' limits.
//!
//! Per pipeline: ServiceAccount, Role and RoleBinding `flow-<pipeline>`, labelled with the pipeline.
//! Per streamlet: Secret and Deployment `flow-<pipeline>-<streamlet>`, labelled with the pipeline,
//! the streamlet and `app.kubernetes.io/name: <pipeline>-<streamlet>`.
//!
//! A pipeline id (at most 40 characters) and a streamlet name (a DNS label, at most 63) each fit on
//! their own, but together they can overflow a label value (63 characters): a 40-character pipeline
//! with a 50-character streamlet makes a 91-character `app.kubernetes.io/name`, which the API server
//! refuses. [`check`] finds every such name before anything is applied; the CLI (`flow verify`,
//! `flow generate`) and the operator run the same check, so a resource the CLI wrote never fails
//! there. The rules are Kubernetes' own (object names and label values, as its API reference gives
//! them); docs/rendering.md lists the messages.

use std::collections::BTreeMap;
use std::fmt;

use crate::names::{LABEL_MANAGED_BY, LABEL_NAME, LABEL_PIPELINE, LABEL_STREAMLET, MANAGED_BY};

/// Pod-template annotation holding the config hash.
pub const ANNOTATION_CONFIG_HASH: &str = "flow.ankka.thinkmorestupidless.com/config-hash";
/// The pod-template annotations the operator sets besides the config hash: the sidecar's metrics,
/// for scrapers that discover pods by annotation.
pub const RESERVED_ANNOTATIONS: [(&str, &str); 2] = [("prometheus.io/scrape", "true"), ("prometheus.io/port", "2050")];
/// The parameter of a built-in that names its Neo4j Secret (which its pods mount, so the name is
/// checked here too).
pub const STAGE_SECRET_PARAM: &str = "secret";

/// Longest label value.
pub const LABEL_VALUE_MAX: usize = 63;
/// Longest object name that is a DNS subdomain.
pub const DNS_SUBDOMAIN_MAX: usize = 253;

/// Name of the per-pipeline ServiceAccount, Role and RoleBinding: `flow-<pipeline>`.
pub fn pipeline_object_name(pipeline: &str) -> String {
    format!("flow-{pipeline}")
}

/// Name of a streamlet's Secret and Deployment: `flow-<pipeline>-<streamlet>`.
pub fn streamlet_object_name(pipeline: &str, streamlet: &str) -> String {
    crate::names::streamlet_object_name(pipeline, streamlet)
}

/// Value of `app.kubernetes.io/name` on a streamlet's objects and pods: `<pipeline>-<streamlet>`.
pub fn streamlet_name_label(pipeline: &str, streamlet: &str) -> String {
    format!("{pipeline}-{streamlet}")
}

/// Labels of the per-pipeline objects.
pub fn pipeline_labels(pipeline: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_MANAGED_BY.to_string(), MANAGED_BY.to_string()),
        (LABEL_PIPELINE.to_string(), pipeline.to_string()),
    ])
}

/// Labels of a streamlet's Secret, Deployment and pods.
pub fn streamlet_labels(pipeline: &str, streamlet: &str) -> BTreeMap<String, String> {
    let mut labels = pipeline_labels(pipeline);
    labels.insert(LABEL_STREAMLET.to_string(), streamlet.to_string());
    labels.insert(LABEL_NAME.to_string(), streamlet_name_label(pipeline, streamlet));
    labels
}

/// The Deployment's selector: the pipeline and streamlet labels only, so that the other labels can
/// change without a new Deployment (a selector is immutable).
pub fn selector_labels(pipeline: &str, streamlet: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_PIPELINE.to_string(), pipeline.to_string()),
        (LABEL_STREAMLET.to_string(), streamlet.to_string()),
    ])
}

/// A streamlet as the name check sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NamedStreamlet<'a> {
    /// Its name.
    pub name: &'a str,
    /// For a built-in: the Secret its `secret` parameter names, which its pods mount.
    pub stage_secret: Option<&'a str>,
}

/// What a rendered name is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NameUse {
    /// The value of a label.
    Label(&'static str),
    /// The name of the pipeline's ServiceAccount, Role and RoleBinding.
    PipelineObjects,
    /// The name of a streamlet's Secret and Deployment.
    StreamletObjects,
    /// The Secret a built-in's `secret` parameter names.
    StageSecret,
}

/// Which rule a name breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameFault {
    /// Longer than the limit.
    TooLong {
        /// Its length in characters.
        length: usize,
        /// The limit.
        max: usize,
    },
    /// Characters or shape the rule does not allow.
    Form,
}

/// A rendered name that Kubernetes would refuse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NameProblem {
    /// The streamlet whose name it is; `None` for the pipeline's own names.
    pub streamlet: Option<String>,
    /// What the name is used for.
    pub used_as: NameUse,
    /// The name as it would be rendered.
    pub value: String,
    /// What is wrong with it.
    pub fault: NameFault,
}

impl fmt::Display for NameProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let who = match &self.streamlet {
            Some(s) => format!("streamlet '{s}'"),
            None => "pipeline".to_string(),
        };
        let what = match &self.used_as {
            NameUse::Label(key) => format!("label {key}"),
            NameUse::PipelineObjects => "ServiceAccount, Role and RoleBinding name".to_string(),
            NameUse::StreamletObjects => "Secret and Deployment name".to_string(),
            NameUse::StageSecret => "'secret' parameter".to_string(),
        };
        let value = &self.value;
        match (&self.used_as, self.fault) {
            (NameUse::Label(_), NameFault::TooLong { length, max }) => write!(
                f,
                "{who}: {what} would be '{value}', {length} characters, but a label value holds at most {max}; shorten the {}",
                shorten_hint(&self.used_as)
            ),
            (NameUse::Label(_), NameFault::Form) => write!(
                f,
                "{who}: {what} would be '{value}', which is not a label value: at most 63 of [A-Za-z0-9-_.], beginning and ending with a letter or digit"
            ),
            (_, NameFault::TooLong { length, max }) => write!(
                f,
                "{who}: {what} would be '{value}', {length} characters, but a Kubernetes object name holds at most {max}; shorten the {}",
                shorten_hint(&self.used_as)
            ),
            (_, NameFault::Form) => write!(
                f,
                "{who}: {what} '{value}' is not a Kubernetes object name: at most 253 of [a-z0-9-.], beginning and ending with a letter or digit"
            ),
        }
    }
}

fn shorten_hint(used_as: &NameUse) -> &'static str {
    match used_as {
        NameUse::Label(LABEL_PIPELINE) | NameUse::PipelineObjects => "pipeline id",
        NameUse::Label(LABEL_STREAMLET) => "streamlet name",
        NameUse::StageSecret => "Secret name",
        _ => "pipeline id or the streamlet name",
    }
}

/// Whether `s` is a label value: empty, or at most 63 of `[A-Za-z0-9-_.]` beginning and ending with
/// an alphanumeric character.
pub(crate) fn label_value_fault(s: &str) -> Option<NameFault> {
    if s.len() > LABEL_VALUE_MAX {
        return Some(NameFault::TooLong { length: s.chars().count(), max: LABEL_VALUE_MAX });
    }
    let b = s.as_bytes();
    let ok = b.is_empty()
        || (b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.')));
    (!ok).then_some(NameFault::Form)
}

/// Whether `s` is a DNS subdomain (RFC 1123): at most 253 characters, dot-separated labels of
/// `[a-z0-9-]` each beginning and ending with an alphanumeric character.
pub(crate) fn subdomain_fault(s: &str) -> Option<NameFault> {
    if s.len() > DNS_SUBDOMAIN_MAX {
        return Some(NameFault::TooLong { length: s.chars().count(), max: DNS_SUBDOMAIN_MAX });
    }
    let ok = !s.is_empty()
        && s.split('.').all(|part| {
            let b = part.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        });
    (!ok).then_some(NameFault::Form)
}

/// Every name and label value rendered for `pipeline` and `streamlets` that Kubernetes would refuse:
/// the pipeline's first, then each streamlet's in the order given.
pub fn check(pipeline: &str, streamlets: &[NamedStreamlet<'_>]) -> Vec<NameProblem> {
    let mut problems = Vec::new();
    let mut push = |streamlet: Option<&str>, used_as: NameUse, value: String, fault: Option<NameFault>| {
        if let Some(fault) = fault {
            problems.push(NameProblem { streamlet: streamlet.map(str::to_string), used_as, value, fault });
        }
    };
    push(None, NameUse::Label(LABEL_PIPELINE), pipeline.to_string(), label_value_fault(pipeline));
    let objects = pipeline_object_name(pipeline);
    push(None, NameUse::PipelineObjects, objects.clone(), subdomain_fault(&objects));
    for s in streamlets {
        let name = Some(s.name);
        push(name, NameUse::Label(LABEL_STREAMLET), s.name.to_string(), label_value_fault(s.name));
        let label = streamlet_name_label(pipeline, s.name);
        push(name, NameUse::Label(LABEL_NAME), label.clone(), label_value_fault(&label));
        let objects = streamlet_object_name(pipeline, s.name);
        push(name, NameUse::StreamletObjects, objects.clone(), subdomain_fault(&objects));
        if let Some(secret) = s.stage_secret {
            push(name, NameUse::StageSecret, secret.to_string(), subdomain_fault(secret));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(name: &str) -> NamedStreamlet<'_> {
        NamedStreamlet { name, stage_secret: None }
    }

    #[test]
    fn names_and_labels() {
        assert_eq!(pipeline_object_name("cart"), "flow-cart");
        assert_eq!(streamlet_object_name("cart", "router"), "flow-cart-router");
        let labels = streamlet_labels("cart", "router");
        assert_eq!(labels.len(), 4);
        assert_eq!(labels[LABEL_NAME], "cart-router");
        assert_eq!(labels[LABEL_MANAGED_BY], "ankka-flow");
        assert_eq!(selector_labels("cart", "router").len(), 2);
    }

    #[test]
    fn a_name_label_over_63_characters_is_refused_with_its_length() {
        let pipeline = "p".repeat(40);
        let streamlet = "s".repeat(50);
        let problems = check(&pipeline, &[plain(&streamlet)]);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(
            problems[0].to_string(),
            format!(
                "streamlet '{streamlet}': label app.kubernetes.io/name would be '{pipeline}-{streamlet}', 91 characters, \
                 but a label value holds at most 63; shorten the pipeline id or the streamlet name"
            )
        );
        // exactly at the limit: 40 + 1 + 22 = 63
        assert!(check(&pipeline, &[plain(&"s".repeat(22))]).is_empty());
        assert_eq!(check(&pipeline, &[plain(&"s".repeat(23))]).len(), 1);
    }

    #[test]
    fn label_value_and_object_name_rules() {
        assert_eq!(label_value_fault(""), None);
        assert_eq!(label_value_fault("a.b_c-D9"), None);
        assert_eq!(label_value_fault("-a"), Some(NameFault::Form));
        assert_eq!(label_value_fault("a/b"), Some(NameFault::Form));
        assert_eq!(label_value_fault(&"a".repeat(64)), Some(NameFault::TooLong { length: 64, max: 63 }));
        assert_eq!(subdomain_fault("neo4j-shop"), None);
        assert_eq!(subdomain_fault("a.b-c"), None);
        for bad in ["", "A", "a..b", "a_b", "-a", "a."] {
            assert_eq!(subdomain_fault(bad), Some(NameFault::Form), "{bad}");
        }
        assert_eq!(subdomain_fault(&"a".repeat(254)), Some(NameFault::TooLong { length: 254, max: 253 }));
    }

    #[test]
    fn every_kind_of_name_has_its_message() {
        let bad_pipeline = check("Cart_EU", &[]);
        assert_eq!(
            bad_pipeline.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [
                "pipeline: ServiceAccount, Role and RoleBinding name 'flow-Cart_EU' is not a Kubernetes object name: at most 253 of [a-z0-9-.], beginning and ending with a letter or digit"
            ]
        );
        let long_pipeline = "p".repeat(64);
        assert_eq!(
            check(&long_pipeline, &[])[0].to_string(),
            format!(
                "pipeline: label flow.ankka.thinkmorestupidless.com/pipeline would be '{long_pipeline}', 64 characters, but a label value holds at most 63; shorten the pipeline id"
            )
        );
        let stage = check("checkouts", &[NamedStreamlet { name: "graph", stage_secret: Some("Neo4j_Shop") }]);
        assert_eq!(
            stage[0].to_string(),
            "streamlet 'graph': 'secret' parameter 'Neo4j_Shop' is not a Kubernetes object name: at most 253 of [a-z0-9-.], beginning and ending with a letter or digit"
        );
        let too_long = NameProblem {
            streamlet: Some("s".into()),
            used_as: NameUse::StreamletObjects,
            value: "x".repeat(254),
            fault: NameFault::TooLong { length: 254, max: 253 },
        };
        assert_eq!(
            too_long.to_string(),
            format!(
                "streamlet 's': Secret and Deployment name would be '{}', 254 characters, but a Kubernetes object name holds at most 253; shorten the pipeline id or the streamlet name",
                "x".repeat(254)
            )
        );
        let bad_streamlet = check("cart", &[plain("_x")]);
        assert_eq!(
            bad_streamlet.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [
                "streamlet '_x': label flow.ankka.thinkmorestupidless.com/streamlet would be '_x', which is not a label value: at most 63 of [A-Za-z0-9-_.], beginning and ending with a letter or digit",
                "streamlet '_x': Secret and Deployment name 'flow-cart-_x' is not a Kubernetes object name: at most 253 of [a-z0-9-.], beginning and ending with a letter or digit",
            ]
        );
    }
}
