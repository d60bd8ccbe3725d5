//! Why the operator refuses a resource. A refused resource gets one Warning event per problem, the
//! phase `Failed` with every problem in its detail, and nothing is applied: no topic, no Secret, no
//! Deployment, no finalizer. The texts are listed in docs/rendering.md.

use std::fmt;

use crate::blueprint::descriptor::{DescriptorProblem, PortKind};
use crate::connection::ConnectionError;

use crate::names::objects::NameProblem;

/// Event reason of every refusal while the operator has no sidecar image.
pub const REASON_SIDECAR_IMAGE_MISSING: &str = "SidecarImageMissing";
/// Event reason of a refusal.
pub const REASON_REFUSED: &str = "Refused";

/// One reason to refuse a resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// The operator has no sidecar image (`FLOW_SIDECAR_IMAGE`).
    NoSidecarImage,
    /// A topic that does not resolve against the cluster Secrets.
    Topic(ConnectionError),
    /// *Ours*: two topics with one id.
    TopicDeclaredTwice {
        /// Topic id.
        topic: String,
        /// How often.
        count: usize,
    },
    /// A topic's Kafka name that breaks the rule of Kafka topic names
    /// ([`crate::blueprint::names::KafkaTopicName`]), worded as `flow verify` words it.
    InvalidTopicName(String),
    /// *Ours*: two streamlets with one name.
    StreamletDeclaredTwice {
        /// Streamlet.
        streamlet: String,
        /// How often.
        count: usize,
    },
    /// The streamlet's `descriptor` is empty.
    NoDescriptor(String),
    /// The descriptor is not of the descriptor format's shape.
    DescriptorParse {
        /// Streamlet.
        streamlet: String,
        /// Why.
        problem: DescriptorProblem,
    },
    /// The descriptor breaks a rule of the descriptor format.
    Descriptor {
        /// Streamlet.
        streamlet: String,
        /// Which.
        problem: DescriptorProblem,
    },
    /// A declared inlet bound to no topic.
    InletNotBound {
        /// Streamlet.
        streamlet: String,
        /// Inlet.
        inlet: String,
    },
    /// A binding of a port the descriptor does not declare.
    UndeclaredPort {
        /// Streamlet.
        streamlet: String,
        /// Inlet or outlet, as the binding says.
        kind: PortKind,
        /// Port.
        port: String,
    },
    /// A binding to a topic id the resource does not declare.
    UndeclaredTopic {
        /// Streamlet.
        streamlet: String,
        /// Port.
        port: String,
        /// Topic id.
        topic: String,
    },
    /// *Ours*: a streamlet that is not built in and has no image.
    NoImage(String),
    /// A built-in streamlet with an image.
    BuiltinImage(String),
    /// A built-in this operator does not know.
    UnknownBuiltin {
        /// Streamlet.
        streamlet: String,
        /// The built-in's name.
        builtin: String,
    },
    /// A built-in whose `secret` parameter is missing or empty.
    NoStageSecret(String),
    /// A built-in naming a Secret that does not exist.
    StageSecretMissing {
        /// Streamlet.
        streamlet: String,
        /// Secret.
        secret: String,
        /// The pipeline's namespace.
        namespace: String,
    },
    /// A built-in's Secret without a key it needs.
    StageSecretKey {
        /// Streamlet.
        streamlet: String,
        /// Secret.
        secret: String,
        /// Key.
        key: String,
    },
    /// A built-in's Secret that could not be read.
    StageSecretUnreadable {
        /// Streamlet.
        streamlet: String,
        /// Secret.
        secret: String,
        /// Why.
        reason: String,
    },
    /// A rendered name or label value Kubernetes would refuse.
    Name(NameProblem),
    /// A pod setting that Pod Security `restricted` forbids or Kubernetes would refuse.
    Pod(crate::pod::Problem),
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use Problem as P;
        match self {
            P::NoSidecarImage => write!(f, "no sidecar image is configured: set FLOW_SIDECAR_IMAGE on the operator"),
            P::Topic(e) => e.fmt(f),
            P::TopicDeclaredTwice { topic, count } => write!(f, "topic '{topic}' is declared {count} times"),
            P::InvalidTopicName(name) => crate::blueprint::Problem::InvalidTopicName(name.clone()).fmt(f),
            P::StreamletDeclaredTwice { streamlet, count } => {
                write!(f, "streamlet '{streamlet}' is declared {count} times")
            }
            P::NoDescriptor(s) => write!(f, "streamlet '{s}' has no descriptor"),
            P::DescriptorParse { streamlet, problem } => {
                write!(f, "streamlet '{streamlet}': its descriptor does not parse: {problem}")
            }
            P::Descriptor { streamlet, problem } => write!(f, "streamlet '{streamlet}': {problem}"),
            P::InletNotBound { streamlet, inlet } => {
                write!(f, "streamlet '{streamlet}': inlet '{inlet}' is not bound to a topic")
            }
            P::UndeclaredPort { streamlet, kind, port } => {
                write!(f, "streamlet '{streamlet}': binds {kind} '{port}', which the descriptor does not declare")
            }
            P::UndeclaredTopic { streamlet, port, topic } => write!(
                f,
                "streamlet '{streamlet}': port '{port}' names topic '{topic}', which the resource does not declare"
            ),
            P::NoImage(s) => write!(f, "streamlet '{s}' has no image"),
            P::BuiltinImage(s) => write!(f, "streamlet '{s}' is built in and takes no image"),
            P::UnknownBuiltin { streamlet, builtin } => {
                write!(f, "streamlet '{streamlet}' names built-in '{builtin}', which this operator does not know")
            }
            P::NoStageSecret(s) => {
                write!(f, "streamlet '{s}' is built in and names no Secret in its 'secret' parameter")
            }
            P::StageSecretMissing { streamlet, secret, namespace } => write!(
                f,
                "streamlet '{streamlet}' names Secret '{secret}', which does not exist in namespace '{namespace}'"
            ),
            P::StageSecretKey { streamlet, secret, key } => {
                write!(f, "streamlet '{streamlet}': Secret '{secret}' has no key '{key}'")
            }
            P::StageSecretUnreadable { streamlet, secret, reason } => {
                write!(f, "streamlet '{streamlet}': Secret '{secret}': could not be read: {reason}")
            }
            P::Name(p) => p.fmt(f),
            P::Pod(p) => p.fmt(f),
        }
    }
}
