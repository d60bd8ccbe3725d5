//! Every refusal and note of `flow verify` and `flow generate`, with its exact text (docs/cli.md,
//! "Messages of verify and generate", lists them all).
//!
//! A [`Problem`] refuses (exit 1); a [`Note`] informs and changes nothing. Both display as the line
//! the CLI prints on stderr. Messages marked *ours* are new: the platform this project reimplements
//! let those mistakes through silently (docs/cli.md marks them too).

use std::fmt;

use super::descriptor::DescriptorProblem;
use super::params::ParamType;

/// One reason why `verify` or `generate` refuses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    // ---- descriptors ----
    /// `descriptors: '<dir>' is not a directory`.
    DescriptorsNotADirectory(String),
    /// `descriptors: '<dir>' holds no *.json files`.
    DescriptorsEmpty(String),
    /// `descriptor <file>: <problem>` (file name, not path).
    Descriptor {
        /// File name.
        file: String,
        /// The problem.
        problem: DescriptorProblem,
    },
    /// `<count> descriptors declare streamlet '<name>'`.
    DuplicateDescriptor {
        /// The `streamlet.name`.
        name: String,
        /// How many files declare it.
        count: usize,
    },

    // ---- blueprint ----
    /// `blueprint: '<path>' is not a file`.
    BlueprintNotAFile(String),
    /// *Ours*: `blueprint: '<path>' cannot be read: <reason>`.
    BlueprintUnreadable {
        /// Path as given.
        path: String,
        /// Why.
        reason: String,
    },
    /// `The blueprint file has an invalid format:` + newline + space + reason.
    InvalidFormat(String),
    /// `The blueprint.streamlets section is missing in the blueprint file.`
    StreamletsMissing,
    /// `The application blueprint is empty.`
    BlueprintEmpty,
    /// Streamlet name that is not a DNS label.
    InvalidStreamletName(String),
    /// A streamlet names a descriptor no file declares.
    UnknownDescriptor {
        /// Streamlet.
        streamlet: String,
        /// Descriptor it names.
        descriptor: String,
    },
    /// A streamlet names a built-in that does not exist.
    UnknownBuiltin {
        /// Streamlet.
        streamlet: String,
        /// The `<x>` of `builtin/<x>`.
        builtin: String,
        /// The built-ins there are.
        known: Vec<String>,
    },
    /// `'<path>' is not a valid path to an outlet or an inlet.`
    MalformedPath(String),
    /// A path to a port that does not exist; suggestions are that streamlet's ports.
    UnknownPort {
        /// Path as written.
        path: String,
        /// `<s>.<p>` of every port of the streamlet, sorted; empty when the streamlet is unknown.
        suggestions: Vec<String>,
    },
    /// A producer that is an inlet.
    NotAProducer {
        /// Path.
        path: String,
        /// Topic id.
        topic: String,
    },
    /// A consumer that is an outlet.
    NotAConsumer {
        /// Path.
        path: String,
        /// Topic id.
        topic: String,
    },
    /// Two ports on one topic with different contracts (the smaller path first).
    Incompatible {
        /// First path.
        a: String,
        /// Its contract, `<format> <schema>`.
        a_contract: String,
        /// Second path.
        b: String,
        /// Its contract.
        b_contract: String,
    },
    /// Inlets bound to no topic (sorted `<s>.<p>`).
    UnconnectedInlets(Vec<String>),
    /// A port bound to several topics (ids sorted).
    BoundTwice {
        /// Path.
        path: String,
        /// Topic ids.
        topics: Vec<String>,
    },
    /// An unmanaged topic with producers.
    UnmanagedWithProducers {
        /// Topic id.
        topic: String,
        /// Producers as written.
        producers: Vec<String>,
    },
    /// An unmanaged topic that names no brokers and no cluster.
    UnmanagedWithoutBrokers(String),
    /// A Kafka topic name that Kafka refuses.
    InvalidTopicName(String),
    /// A cluster name that is not a DNS label.
    InvalidClusterName(String),

    // ---- --conf ----
    /// `--conf <file>: <reason>`.
    ConfFile {
        /// File as given.
        file: String,
        /// Why.
        reason: String,
    },
    /// *Ours*: `overrides: '<path>' must be an object` (`flow`, `flow.topics.<id>`, …).
    OverridesNotObject(String),
    /// *Ours*: `overrides name unknown section 'flow.<key>'`.
    UnknownOverrideSection(String),
    /// `overrides name unknown topic '<id>'`.
    UnknownTopicOverride(String),
    /// `overrides name unknown streamlet '<name>'`.
    UnknownStreamletOverride(String),
    /// *Ours*: `overrides for topic '<id>': <reason>` — a topic override of the wrong type.
    TopicOverride {
        /// Topic id.
        topic: String,
        /// Why.
        reason: String,
    },
    /// *Ours*: `streamlet '<name>': <reason>` — a streamlet override of the wrong shape.
    StreamletOverride {
        /// Streamlet.
        streamlet: String,
        /// Why.
        reason: String,
    },
    /// `streamlet '<name>': parameter '<key>' is not declared`.
    ParamNotDeclared {
        /// Streamlet.
        streamlet: String,
        /// Key.
        key: String,
    },
    /// `streamlet '<name>': parameter '<key>' has no default and no value`.
    ParamMissing {
        /// Streamlet.
        streamlet: String,
        /// Key.
        key: String,
    },
    /// `streamlet '<name>': parameter '<key>' = <value> is not a <type>`.
    ParamType {
        /// Streamlet.
        streamlet: String,
        /// Key.
        key: String,
        /// The value as written.
        value: String,
        /// Its declared type.
        ty: ParamType,
    },
    /// `streamlet '<name>': replicas must be a number`.
    ReplicasNotNumber(String),
    /// *Ours*: a pod setting of `section` (`flow.pod`, `flow.streamlets.<name>.pod`) that does not
    /// read, or that Pod Security `restricted` or Kubernetes would refuse.
    PodSetting {
        /// `flow.pod` or `flow.streamlets.<name>.pod`.
        section: String,
        /// The setting's path inside it; empty for the section itself.
        path: String,
        /// What is wrong and what to write instead.
        reason: String,
    },
    /// `streamlet '<name>': replicas must not be negative`.
    ReplicasNegative(String),

    // ---- generate ----
    /// `images: <reason>`.
    ImagesFile(String),
    /// `--image '<value>' is not name=reference`.
    ImageArgument(String),
    /// `Streamlet '<name>' has no image.`
    NoImage(String),
    /// `Streamlet '<name>' is built in and takes no image.`
    BuiltinImage(String),
    /// *Ours*: `--image '<arg>' names streamlet '<name>', which the blueprint does not have; the
    /// streamlets that take an image are: <a>, <b>.`
    UnknownImageStreamlet {
        /// The argument as given.
        argument: String,
        /// The name in it.
        streamlet: String,
        /// The streamlets that take an image, joined with `, ` (`none` when there are none).
        known: String,
    },
    /// *Ours*: `Streamlet '<name>' has image '<ref>', which is not an image reference: <reason>.`
    InvalidImage {
        /// The streamlet.
        streamlet: String,
        /// The reference as given.
        reference: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `pipeline id '<id>' must be 1-40 of [a-z0-9-], not starting or ending with '-'`.
    PipelineId(String),
    /// *Ours*: a `-n` value that Kubernetes would refuse.
    Namespace(String),
    /// *Ours*: a name or label value the operator would render that Kubernetes would refuse (the
    /// operator refuses the resource with the same text).
    Name(crate::names::objects::NameProblem),
}

fn plural_ports(f: &mut fmt::Formatter<'_>, one: &str, many: &str, ports: &[String]) -> fmt::Result {
    match ports {
        [p] => write!(f, "{one} {p} is not connected."),
        _ => write!(f, "{many} ({}) are not connected.", ports.join(",")),
    }
}

/// User text (names, keys, values) can hold line breaks; a problem stays on one line of stderr, so
/// control characters are shown escaped (`\n`, `\u{1}`).
fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&c.escape_unicode().to_string()),
            c => out.push(c),
        }
    }
    out
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // The existing CLI writes this one on two lines: the header, then the reason indented.
            Problem::InvalidFormat(reason) => {
                write!(f, "The blueprint file has an invalid format:\n {}", one_line(reason))
            }
            other => f.write_str(&one_line(&other.raw())),
        }
    }
}

impl Problem {
    /// The message with user text as it is.
    fn raw(&self) -> String {
        RawProblem(self).to_string()
    }
}

struct RawProblem<'a>(&'a Problem);

impl fmt::Display for RawProblem<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use Problem as P;
        const DNS: &str = "Names must consist of lower case alphanumeric characters and may contain '-' except for at the start or end.";
        match self.0 {
            P::DescriptorsNotADirectory(d) => write!(f, "descriptors: '{d}' is not a directory"),
            P::DescriptorsEmpty(d) => write!(f, "descriptors: '{d}' holds no *.json files"),
            P::Descriptor { file, problem } => write!(f, "descriptor {file}: {problem}"),
            P::DuplicateDescriptor { name, count } => write!(f, "{count} descriptors declare streamlet '{name}'"),
            P::BlueprintNotAFile(p) => write!(f, "blueprint: '{p}' is not a file"),
            P::BlueprintUnreadable { path, reason } => write!(f, "blueprint: '{path}' cannot be read: {reason}"),
            P::InvalidFormat(reason) => write!(f, "The blueprint file has an invalid format:\n {reason}"),
            P::StreamletsMissing => write!(f, "The blueprint.streamlets section is missing in the blueprint file."),
            P::BlueprintEmpty => write!(f, "The application blueprint is empty."),
            P::InvalidStreamletName(n) => write!(f, "Invalid streamlet name '{n}'. {DNS}"),
            P::UnknownDescriptor { streamlet, descriptor } => {
                write!(f, "Streamlet '{streamlet}' names descriptor '{descriptor}', which no descriptor declares.")
            }
            P::UnknownBuiltin { streamlet, builtin, known } => write!(
                f,
                "Streamlet '{streamlet}' names built-in descriptor 'builtin/{builtin}', which this version does not have; the built-ins are: {}.",
                if known.is_empty() { "none".to_string() } else { known.join(", ") }
            ),
            P::MalformedPath(p) => write!(f, "'{p}' is not a valid path to an outlet or an inlet."),
            P::UnknownPort { path, suggestions } if suggestions.is_empty() => {
                write!(f, "'{path}' does not point to a known streamlet inlet or outlet.")
            }
            P::UnknownPort { path, suggestions } => write!(
                f,
                "'{path}' does not point to a known streamlet inlet or outlet, please try {}.",
                suggestions.join(" or ")
            ),
            P::NotAProducer { path, topic } => {
                write!(f, "'{path}' is not a valid producer for topic '{topic}', must be an outlet.")
            }
            P::NotAConsumer { path, topic } => {
                write!(f, "'{path}' is not a valid consumer for topic '{topic}', must be an inlet.")
            }
            P::Incompatible { a, a_contract, b, b_contract } => {
                write!(f, "'{a}' ({a_contract}) is not compatible with '{b}' ({b_contract}).")
            }
            P::UnconnectedInlets(ports) => plural_ports(f, "Inlet", "Inlets", ports),
            P::BoundTwice { path, topics } => {
                write!(f, "'{path}' is bound to more than one topic: {}.", topics.join(","))
            }
            P::UnmanagedWithProducers { topic, producers } => write!(
                f,
                "Topic '{topic}' is not managed but has producers {}; the platform only reads topics it does not own.",
                producers.join(", ")
            ),
            P::UnmanagedWithoutBrokers(t) => {
                write!(f, "Topic '{t}' is not managed and names no bootstrap.servers or cluster.")
            }
            P::InvalidTopicName(n) => {
                write!(f, "'{n}' is not a valid topic name, must match '[a-zA-Z0-9\\._\\-]', max 249 characters.")
            }
            P::InvalidClusterName(n) => write!(f, "Invalid Kafka cluster name '{n}'. {DNS}"),
            P::ConfFile { file, reason } => write!(f, "--conf {file}: {reason}"),
            P::OverridesNotObject(path) => write!(f, "overrides: '{path}' must be an object"),
            P::UnknownOverrideSection(k) => write!(f, "overrides name unknown section 'flow.{k}'"),
            P::UnknownTopicOverride(t) => write!(f, "overrides name unknown topic '{t}'"),
            P::UnknownStreamletOverride(s) => write!(f, "overrides name unknown streamlet '{s}'"),
            P::TopicOverride { topic, reason } => write!(f, "overrides for topic '{topic}': {reason}"),
            P::StreamletOverride { streamlet, reason } => write!(f, "streamlet '{streamlet}': {reason}"),
            P::ParamNotDeclared { streamlet, key } => {
                write!(f, "streamlet '{streamlet}': parameter '{key}' is not declared")
            }
            P::ParamMissing { streamlet, key } => {
                write!(f, "streamlet '{streamlet}': parameter '{key}' has no default and no value")
            }
            P::ParamType { streamlet, key, value, ty } => {
                // The article is always `a`, whatever the word after it, as the existing platform writes it.
                write!(f, "streamlet '{streamlet}': parameter '{key}' = {value} is not a {ty}")
            }
            P::ReplicasNotNumber(s) => write!(f, "streamlet '{s}': replicas must be a number"),
            P::ReplicasNegative(s) => write!(f, "streamlet '{s}': replicas must not be negative"),
            P::PodSetting { section, path, reason } if path.is_empty() => write!(f, "{section}: {reason}"),
            P::PodSetting { section, path, reason } => write!(f, "{section}.{path}: {reason}"),
            P::ImagesFile(reason) => write!(f, "images: {reason}"),
            P::ImageArgument(v) => write!(f, "--image '{v}' is not name=reference"),
            P::NoImage(s) => write!(f, "Streamlet '{s}' has no image."),
            P::BuiltinImage(s) => write!(f, "Streamlet '{s}' is built in and takes no image."),
            P::UnknownImageStreamlet { argument, streamlet, known } => {
                let known = if known.is_empty() { "none" } else { known };
                write!(
                    f,
                    "--image '{argument}' names streamlet '{streamlet}', which the blueprint does not have; \
                     the streamlets that take an image are: {known}."
                )
            }
            P::InvalidImage { streamlet, reference, reason } => {
                write!(f, "Streamlet '{streamlet}' has image '{reference}', which is not an image reference: {reason}.")
            }
            P::PipelineId(id) => {
                write!(f, "pipeline id '{id}' must be 1-40 of [a-z0-9-], not starting or ending with '-'")
            }
            P::Name(p) => write!(f, "{p}"),
            P::Namespace(ns) => write!(
                f,
                "namespace '{ns}' is not a Kubernetes namespace name: 1-63 of [a-z0-9-], not starting or ending with '-'"
            ),
        }
    }
}

/// Something worth knowing that does not refuse (stderr, prefixed `note: `).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Note {
    /// Outlets bound to no topic (sorted `<s>.<p>`).
    UnconnectedOutlets(Vec<String>),
    /// A managed delta topic that is compacted.
    DeltaCompacted(String),
    /// A managed delta topic whose policy has `compact` and more.
    DeltaPartlyCompacted {
        /// Topic id.
        topic: String,
        /// The policy as set.
        policy: String,
    },
    /// A managed delta topic whose policy lacks `compact`.
    DeltaNotCompacted {
        /// Topic id.
        topic: String,
        /// The policy as set.
        policy: String,
    },
    /// An unmanaged delta topic.
    DeltaUnmanaged(String),
    /// *Ours*: a `--conf` topic setting that only the blueprint decides.
    OverrideIgnored {
        /// Topic id.
        topic: String,
        /// The setting (`producers`, `consumers`, `managed`, `topic.name`).
        key: String,
    },
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "note: {}", one_line(&RawNote(self).to_string()))
    }
}

struct RawNote<'a>(&'a Note);

impl fmt::Display for RawNote<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Note::UnconnectedOutlets(ports) => plural_ports(f, "Outlet", "Outlets", ports),
            Note::DeltaCompacted(t) => {
                write!(f, "Topic '{t}' carries graph deltas and is compacted (cleanup.policy = compact).")
            }
            Note::DeltaPartlyCompacted { topic, policy } => write!(
                f,
                "Topic '{topic}' carries graph deltas and sets cleanup.policy = {policy}; records older than its retention are gone from a rebuild."
            ),
            Note::DeltaNotCompacted { topic, policy } => write!(
                f,
                "Topic '{topic}' carries graph deltas and sets cleanup.policy = {policy}; it will not hold the whole graph and cannot be relied on to rebuild it."
            ),
            Note::DeltaUnmanaged(t) => write!(
                f,
                "Topic '{t}' carries graph deltas and is not managed; whether it is compacted is its owner's."
            ),
            Note::OverrideIgnored { topic, key } => write!(
                f,
                "--conf sets flow.topics.{topic}.{key}, which only the blueprint decides; the setting has no effect."
            ),
        }
    }
}
