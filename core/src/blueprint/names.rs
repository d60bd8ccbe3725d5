//! Validated names of the blueprint world: each type can only hold a value that passed its rule,
//! so code that has one never checks it again.
//!
//! Rules: streamlet, descriptor and cluster names are DNS labels (RFC 1123, as Kubernetes' API
//! conventions name objects); port names `[a-z][a-z0-9-]{0,62}` and parameter keys `[a-z][a-z0-9-]*`;
//! Kafka topic names `[a-zA-Z0-9._-]`, at most 249 characters; pipeline ids 1-40 of `[a-z0-9-]`;
//! port paths `<streamlet>.<port>` (docs/blueprint.md).

use std::fmt;

use crate::names::{is_dns_label, is_pipeline_id};

macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident, $check:expr) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(String);

        impl $name {
            /// The name, when `s` follows the rule; `None` otherwise.
            pub fn parse(s: &str) -> Option<Self> {
                let check: fn(&str) -> bool = $check;
                check(s).then(|| $name(s.to_string()))
            }

            /// The name as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    };
}

name_type!(
    /// A streamlet's name inside a pipeline: a DNS label (1-63 of `[a-z0-9-]`, alphanumeric at both ends).
    StreamletName,
    is_dns_label
);
name_type!(
    /// A descriptor's `streamlet.name`: 1-63 of `[a-z0-9-]`, not starting or ending with `-`.
    DescriptorName,
    is_dns_label
);
name_type!(
    /// A Kafka cluster name (Secret `kafka-cluster-<name>`): a DNS label.
    ClusterName,
    is_dns_label
);
name_type!(
    /// A pipeline id: 1-40 of `[a-z0-9-]`, not starting or ending with `-`.
    PipelineId,
    is_pipeline_id
);
name_type!(
    /// An inlet's or outlet's name: `[a-z][a-z0-9-]{0,62}`.
    PortName,
    is_port_name
);
name_type!(
    /// A configuration parameter's key: `[a-z][a-z0-9-]*`.
    ParamKey,
    is_param_key
);
name_type!(
    /// A Kafka topic name: 1-249 of `[a-zA-Z0-9._-]`, and neither `.` nor `..` (Kafka refuses those).
    KafkaTopicName,
    is_kafka_topic_name
);
name_type!(
    /// A topic's id inside a blueprint (a key of `blueprint.topics`): any non-empty text.
    TopicId,
    |s: &str| !s.is_empty()
);

fn is_port_name(s: &str) -> bool {
    let b = s.as_bytes();
    (1..=63).contains(&b.len())
        && b[0].is_ascii_lowercase()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

fn is_param_key(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_lowercase()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

fn is_kafka_topic_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 249
        && s != "."
        && s != ".."
        && s.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
}

/// A port path as a blueprint writes it in `producers` and `consumers`: `<streamlet>.<port>`.
///
/// Parsing follows the existing platform's: trim; a leading `.` is invalid; split on `.` and drop
/// empty segments; at least two segments; the last is the port, the others joined with `.` the
/// streamlet. The parts are not checked against the name rules here: a path naming a streamlet or
/// port that does not exist is a different problem, found by looking it up.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PortPath {
    streamlet: String,
    port: String,
}

impl PortPath {
    /// The path, or `None` when `text` is not of the form `<streamlet>.<port>`.
    pub fn parse(text: &str) -> Option<PortPath> {
        let t = text.trim();
        if t.starts_with('.') {
            return None;
        }
        let segments: Vec<&str> = t.split('.').filter(|s| !s.is_empty()).collect();
        let (port, streamlet) = segments.split_last()?;
        if streamlet.is_empty() {
            return None;
        }
        Some(PortPath { streamlet: streamlet.join("."), port: (*port).to_string() })
    }

    /// A path from its two parts.
    pub fn new(streamlet: &str, port: &str) -> PortPath {
        PortPath { streamlet: streamlet.to_string(), port: port.to_string() }
    }

    /// The streamlet part.
    pub fn streamlet(&self) -> &str {
        &self.streamlet
    }

    /// The port part.
    pub fn port(&self) -> &str {
        &self.port
    }
}

impl fmt::Display for PortPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.streamlet, self.port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_paths_parse_as_the_reference_does() {
        assert_eq!(PortPath::parse(" router.in "), Some(PortPath::new("router", "in")));
        assert_eq!(PortPath::parse("a.b.c"), Some(PortPath::new("a.b", "c")));
        assert_eq!(PortPath::parse("router..in"), Some(PortPath::new("router", "in")));
        assert_eq!(PortPath::parse("router.in."), Some(PortPath::new("router", "in")));
        for bad in ["", "router", ".router.in", "router.", "..", " .a.b"] {
            assert_eq!(PortPath::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn name_rules() {
        assert!(PortName::parse("in").is_some());
        assert!(PortName::parse(&format!("a{}", "b".repeat(62))).is_some());
        for bad in ["", "In", "1in", "-in", "in_x", &format!("a{}", "b".repeat(63))] {
            assert!(PortName::parse(bad).is_none(), "{bad}");
        }
        assert!(ParamKey::parse("review-threshold").is_some());
        assert!(ParamKey::parse(&"a".repeat(300)).is_some());
        for bad in ["", "Review", "1a", "-a", "a.b"] {
            assert!(ParamKey::parse(bad).is_none(), "{bad}");
        }
        assert!(KafkaTopicName::parse("shop.cart-events.v1").is_some());
        assert!(KafkaTopicName::parse("A_b-9").is_some());
        assert!(KafkaTopicName::parse(&"a".repeat(249)).is_some());
        for bad in ["", ".", "..", "a b", "a/b", &"a".repeat(250)] {
            assert!(KafkaTopicName::parse(bad).is_none(), "{bad}");
        }
        assert!(PipelineId::parse("cart-eu").is_some());
        assert!(PipelineId::parse("Cart_EU").is_none());
        assert!(StreamletName::parse("router").is_some());
        assert!(ClusterName::parse("Shop").is_none());
        assert!(TopicId::parse("").is_none());
    }
}
