//! Blueprints: verify a pipeline's HOCON blueprint against its streamlet descriptors and its
//! deploy-time configuration, and generate the `AnkkaFlow` resource from them (docs/blueprint.md).
//!
//! Pure: the CLI reads every file and hands over its text (or why it could not be read) in a
//! [`Source`]; time, version and environment come in as values. [`verify`] and [`generate`] report
//! every problem they find in one pass, in this order: descriptor problems, then
//! blueprint problems, then `--conf` problems, then (for `generate`) image and naming problems.
//!
//! ```text
//! descriptors ─┐
//! blueprint ───┼─ verify ──> VerifiedBlueprint ─┐
//! --conf ... ──┘                                 ├─ generate ──> AnkkaFlow ──> YAML
//! images, pipeline, version, namespace ─────────┘
//! ```

pub mod conf;
pub mod descriptor;
pub mod generate;
pub mod images;
pub mod names;
pub mod params;
pub mod problems;
pub mod raw;
pub mod tree;
pub mod typed;
pub mod verify;

use std::collections::{BTreeSet, HashMap};

pub use generate::{GenerateInput, Generated, generate, to_yaml};
pub use problems::{Note, Problem};

use conf::{Deployment, Overrides};
use raw::RawBlueprint;
use tree::Object;
use verify::{Catalog, VerifiedBlueprint};

/// Why a file's text is missing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceError {
    /// Nothing is at the path.
    Missing,
    /// The path is not a regular file (a directory, say).
    NotAFile,
    /// Reading failed; the reader's reason.
    Unreadable(String),
}

/// One input file: the name messages use for it, and its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    /// For a blueprint, `--conf` or `--images` file: the path as given. For a descriptor: the file
    /// name only.
    pub name: String,
    /// The text, or why there is none.
    pub text: Result<String, SourceError>,
}

impl Source {
    /// A source with text.
    pub fn text(name: impl Into<String>, text: impl Into<String>) -> Source {
        Source { name: name.into(), text: Ok(text.into()) }
    }
}

/// Where descriptors come from (`--descriptors <dir>`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DescriptorSource {
    /// No `--descriptors`: only built-in streamlets can be verified.
    NotGiven,
    /// The path given is not a directory.
    NotADirectory(String),
    /// Every `*.json` directly in the directory.
    Directory {
        /// The directory as given.
        dir: String,
        /// Its `*.json` files, named by file name.
        files: Vec<Source>,
    },
}

/// The inputs of `flow verify`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyInput {
    /// `--descriptors`.
    pub descriptors: DescriptorSource,
    /// The blueprint file.
    pub blueprint: Source,
    /// `--conf` files in command-line order (a later one wins).
    pub confs: Vec<Source>,
    /// What `${VAR}` in HOCON files resolves against when the file does not define it.
    pub env: HashMap<String, String>,
}

/// A blueprint that verified, with its `--conf` files applied.
#[derive(Clone, Debug, PartialEq)]
pub struct Verified {
    /// The blueprint.
    pub blueprint: VerifiedBlueprint,
    /// Replicas, parameter values and topic settings after `--conf`.
    pub deployment: Deployment,
    /// Notes for stderr.
    pub notes: Vec<Note>,
}

impl Verified {
    /// The success line of `flow verify`: `verified: <n> streamlets, <m> topics`, where `m` counts
    /// the topics with at least one port.
    pub fn summary(&self) -> String {
        format!("verified: {} streamlets, {} topics", self.blueprint.streamlets.len(), self.blueprint.topics.len())
    }
}

/// Everything a verification found, also when it failed: `generate` adds its own problems to it.
pub(crate) struct Checked {
    pub raw: Option<RawBlueprint>,
    pub verified: Option<Verified>,
    pub problems: Vec<Problem>,
}

/// Verifies a blueprint against its descriptors and `--conf` files (docs/cli.md, "flow verify").
///
/// # Errors
/// Every problem found, descriptors first, then the blueprint, then the `--conf` files.
pub fn verify(input: &VerifyInput) -> Result<Verified, Vec<Problem>> {
    let mut c = check(input);
    // The pipeline id `flow generate` takes without `--pipeline`; one that is not a valid id is
    // generate's to refuse, and then there are no names to check.
    if let Some(v) = &c.verified {
        let pipeline = default_pipeline(&input.blueprint.name, v.blueprint.name.as_deref());
        if names::PipelineId::parse(&pipeline).is_some() {
            c.problems.extend(name_problems(&pipeline, v));
        }
    }
    match c.verified {
        Some(v) if c.problems.is_empty() => Ok(v),
        _ => Err(c.problems),
    }
}

/// The pipeline id when `--pipeline` is not given: `blueprint.name`, else the blueprint's file name
/// up to its first `.` (`blueprint.conf` -> `blueprint`).
pub(crate) fn default_pipeline(blueprint_path: &str, blueprint_name: Option<&str>) -> String {
    if let Some(name) = blueprint_name {
        return name.to_string();
    }
    let file = blueprint_path.rsplit(['/', '\\']).next().unwrap_or(blueprint_path);
    file.split('.').next().unwrap_or(file).to_string()
}

/// The names the operator would render for `pipeline` that Kubernetes would refuse (the operator
/// runs the same check, see [`crate::names::objects`]).
pub(crate) fn name_problems(pipeline: &str, v: &Verified) -> Vec<Problem> {
    let streamlets: Vec<crate::names::objects::NamedStreamlet<'_>> = v
        .blueprint
        .streamlets
        .iter()
        .map(|(name, s)| crate::names::objects::NamedStreamlet {
            name: name.as_str(),
            stage_secret: if s.builtin {
                v.deployment
                    .streamlets
                    .get(name)
                    .and_then(|d| d.config.get(crate::names::objects::STAGE_SECRET_PARAM))
                    .and_then(|s| s.as_str())
            } else {
                None
            },
        })
        .collect();
    crate::names::objects::check(pipeline, &streamlets).into_iter().map(Problem::Name).collect()
}

pub(crate) fn check(input: &VerifyInput) -> Checked {
    let (catalog, mut problems) = Catalog::load(&input.descriptors);
    let mut notes = Vec::new();

    let raw = match &input.blueprint.text {
        Err(SourceError::NotAFile | SourceError::Missing) => {
            problems.push(Problem::BlueprintNotAFile(input.blueprint.name.clone()));
            None
        }
        Err(SourceError::Unreadable(reason)) => {
            problems.push(Problem::BlueprintUnreadable { path: input.blueprint.name.clone(), reason: reason.clone() });
            None
        }
        Ok(text) => match tree::parse(text, &input.env) {
            Err(e) => {
                problems.push(Problem::InvalidFormat(e.to_string()));
                None
            }
            Ok(root) => match raw::read_blueprint(&root) {
                Ok(raw) => Some(raw),
                Err(p) => {
                    problems.extend(p);
                    None
                }
            },
        },
    };

    let mut conf_problems = Vec::new();
    let mut merged = Object::new();
    for c in &input.confs {
        let parsed = match &c.text {
            Err(SourceError::Missing) => Err("no such file".to_string()),
            Err(SourceError::NotAFile) => Err("not a file".to_string()),
            Err(SourceError::Unreadable(r)) => Err(r.clone()),
            Ok(text) => tree::parse(text, &input.env).map_err(|e| e.to_string()),
        };
        match parsed {
            Ok(root) => tree::merge(&mut merged, &root),
            Err(reason) => conf_problems.push(Problem::ConfFile { file: c.name.clone(), reason }),
        }
    }
    let confs_ok = conf_problems.is_empty();
    let overrides = if confs_ok { conf::read_overrides(&merged) } else { Overrides::default() };

    let mut verified = None;
    if let Some(raw) = &raw {
        let merged_of = |id: &str, settings: &Object| conf::merged_fields(settings, overrides.topics.get(id)).0;
        let (bp, p, n) = verify::verify(raw, &catalog, &merged_of);
        problems.extend(p);
        notes.extend(n);
        if let Some(bp) = bp
            && confs_ok
        {
            let declared: BTreeSet<String> = raw.topics.keys().cloned().collect();
            let (deployment, p, n) = conf::apply(&bp, &declared, &overrides);
            conf_problems.extend(p);
            notes.extend(n);
            if let Some(deployment) = deployment {
                notes.extend(delta_notes(&bp, &deployment));
                verified = Some(Verified { blueprint: bp, deployment, notes: Vec::new() });
            }
        }
    }
    problems.extend(conf_problems);
    if let Some(v) = verified.as_mut() {
        v.notes = notes;
    }
    Checked { raw, verified, problems }
}

/// The notes for topics that carry graph deltas (docs/blueprint.md, "Graph deltas"), by topic id.
fn delta_notes(bp: &VerifiedBlueprint, d: &Deployment) -> Vec<Note> {
    let mut notes = Vec::new();
    for (id, t) in bp.topics.iter().filter(|(_, t)| t.delta) {
        let topic = id.to_string();
        if !t.managed {
            notes.push(Note::DeltaUnmanaged(topic));
            continue;
        }
        let policy = d.topics.get(id).and_then(|f| f.topic.get(CLEANUP_POLICY));
        notes.push(match policy {
            None => Note::DeltaCompacted(topic),
            Some(p) => {
                let parts: BTreeSet<&str> = p.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
                if parts.len() == 1 && parts.contains("compact") {
                    Note::DeltaCompacted(topic)
                } else if parts.contains("compact") {
                    Note::DeltaPartlyCompacted { topic, policy: p.clone() }
                } else {
                    Note::DeltaNotCompacted { topic, policy: p.clone() }
                }
            }
        });
    }
    notes
}

/// The Kafka topic config key of the cleanup policy.
pub const CLEANUP_POLICY: &str = "cleanup.policy";

#[cfg(test)]
mod tests;
