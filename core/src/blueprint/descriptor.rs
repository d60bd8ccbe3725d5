//! Streamlet descriptors: the canonical JSON an SDK writes at build time (docs/blueprint.md,
//! "Descriptors"), parsed and validated into a [`Descriptor`], and the built-in descriptors of the
//! sidecar.
//!
//! Validation reports every problem of a file at once, with the texts docs/cli.md lists.

use std::collections::BTreeMap;
use std::fmt;

use base64::Engine;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::names::{DescriptorName, ParamKey, PortName};
use super::params::ParamType;

mod canonical;
mod problem;

use canonical::write_canonical;
pub(crate) use canonical::write_json_string;
pub use problem::DescriptorProblem;

/// The protocol version this platform speaks, `MAJOR.MINOR`.
pub const PROTOCOL_VERSION: &str = "1.0";
const PROTOCOL_MAJOR: u32 = 1;
const PROTOCOL_MINOR: u32 = 0;

/// The only contract format.
pub const JSON_FORMAT: &str = "json";

/// Schema name of the graph-delta contract (docs/blueprint.md, "Graph deltas").
pub const GRAPH_DELTA_SCHEMA: &str = "ankka.graph-delta.v1";

/// Whether a port receives (inlet) or sends (outlet).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PortKind {
    /// Reads a topic.
    Inlet,
    /// Writes a topic.
    Outlet,
}

impl fmt::Display for PortKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PortKind::Inlet => "inlet",
            PortKind::Outlet => "outlet",
        })
    }
}

/// A valid contract: format `json`, a schema name, and the fingerprint that matches it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Contract {
    schema_name: String,
}

impl Contract {
    /// The format, always `json`.
    pub fn format(&self) -> &'static str {
        JSON_FORMAT
    }

    /// The schema name, never empty.
    pub fn schema_name(&self) -> &str {
        &self.schema_name
    }

    /// The fingerprint: standard padded Base64 of SHA-256 over the schema name's UTF-8 bytes.
    pub fn fingerprint(&self) -> String {
        fingerprint(&self.schema_name)
    }

    /// Whether the contract is the graph-delta contract.
    pub fn is_graph_delta(&self) -> bool {
        self.schema_name == GRAPH_DELTA_SCHEMA
    }
}

impl fmt::Display for Contract {
    /// `<format> <schema_name>`, as incompatibility messages render a contract.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.format(), self.schema_name)
    }
}

/// The fingerprint of a schema name.
pub fn fingerprint(schema_name: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(Sha256::digest(schema_name.as_bytes()))
}

/// A declared inlet or outlet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Port {
    /// Its name.
    pub name: PortName,
    /// Its contract.
    pub contract: Contract,
}

/// A declared configuration parameter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// Its key.
    pub key: ParamKey,
    /// Free text.
    pub description: String,
    /// Its type.
    pub ty: ParamType,
    /// Its default, already known to be of its type; `None`: a value must be given at deploy time.
    pub default: Option<String>,
}

/// A valid descriptor. Ports are sorted by name and parameters by key, as in the canonical form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Descriptor {
    protocol_version: String,
    sdk_name: String,
    sdk_version: String,
    name: DescriptorName,
    description: String,
    inlets: Vec<Port>,
    outlets: Vec<Port>,
    params: Vec<Param>,
}

/// A descriptor file that did not validate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejected {
    /// Its `streamlet.name`, when that much could be read: streamlets naming it are then not also
    /// reported as naming an unknown descriptor.
    pub name: Option<String>,
    /// Every problem found.
    pub problems: Vec<DescriptorProblem>,
}

/// Collects problems while reading JSON fields.
struct Reader {
    problems: Vec<DescriptorProblem>,
}

impl Reader {
    fn object<'a>(&mut self, v: &'a Value, what: impl Into<String>) -> Option<&'a Map<String, Value>> {
        match v {
            Value::Object(o) => Some(o),
            _ => {
                self.problems.push(DescriptorProblem::NotAnObject(what.into()));
                None
            }
        }
    }

    /// A string field; absent or `null` reads as `""` (the proto3 default).
    fn string(&mut self, o: &Map<String, Value>, key: &str, path: &str) -> String {
        match o.get(key) {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(_) => {
                self.problems.push(DescriptorProblem::NotAString(path.to_string()));
                String::new()
            }
        }
    }

    /// An array field; absent or `null` reads as empty.
    fn array<'a>(&mut self, o: &'a Map<String, Value>, key: &str, path: &str) -> &'a [Value] {
        match o.get(key) {
            Some(Value::Array(a)) => a,
            None | Some(Value::Null) => &[],
            Some(_) => {
                self.problems.push(DescriptorProblem::NotAnArray(path.to_string()));
                &[]
            }
        }
    }

    fn known_fields(&mut self, o: &Map<String, Value>, known: &[&str], prefix: &str) {
        for k in o.keys() {
            if !known.contains(&k.as_str()) {
                self.problems.push(DescriptorProblem::UnknownField(format!("{prefix}{k}")));
            }
        }
    }
}

fn parse_protocol_version(v: &str) -> Option<(u32, u32)> {
    let (major, minor) = v.split_once('.')?;
    let digits = |s: &str| (1..=9).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(major) || !digits(minor) {
        return None;
    }
    Some((major.parse().ok()?, minor.parse().ok()?))
}

impl Descriptor {
    /// Parses and validates a descriptor's JSON text.
    ///
    /// # Errors
    /// Every problem found in the text, and the `streamlet.name` if readable.
    pub fn parse(text: &str) -> Result<Descriptor, Rejected> {
        let value: Value = serde_json::from_str(text)
            .map_err(|e| Rejected { name: None, problems: vec![DescriptorProblem::NotJson(e.to_string())] })?;
        let mut r = Reader { problems: Vec::new() };
        let Some(root) = r.object(&value, "the descriptor") else {
            return Err(Rejected { name: None, problems: r.problems });
        };
        r.known_fields(root, &["protocol_version", "sdk", "streamlet"], "");

        let protocol_version = r.string(root, "protocol_version", "protocol_version");
        match parse_protocol_version(&protocol_version) {
            None => r.problems.push(DescriptorProblem::ProtocolVersion(protocol_version.clone())),
            Some((major, _)) if major != PROTOCOL_MAJOR => {
                r.problems.push(DescriptorProblem::ProtocolMajor(protocol_version.clone()))
            }
            Some((_, minor)) if minor > PROTOCOL_MINOR => {
                r.problems.push(DescriptorProblem::ProtocolLater(protocol_version.clone()))
            }
            Some(_) => {}
        }

        let (mut sdk_name, mut sdk_version) = (String::new(), String::new());
        if let Some(sdk) = root.get("sdk").filter(|v| !v.is_null())
            && let Some(sdk) = r.object(sdk, "'sdk'")
        {
            r.known_fields(sdk, &["name", "version"], "sdk.");
            sdk_name = r.string(sdk, "name", "sdk.name");
            sdk_version = r.string(sdk, "version", "sdk.version");
        }

        let streamlet = match root.get("streamlet") {
            None | Some(Value::Null) => {
                r.problems.push(DescriptorProblem::NoStreamlet);
                return Err(Rejected { name: None, problems: r.problems });
            }
            Some(s) => match r.object(s, "'streamlet'") {
                Some(s) => s,
                None => return Err(Rejected { name: None, problems: r.problems }),
            },
        };
        r.known_fields(streamlet, &["name", "description", "inlets", "outlets", "config_parameters"], "streamlet.");
        let raw_name = r.string(streamlet, "name", "streamlet.name");
        let name = DescriptorName::parse(&raw_name);
        if name.is_none() {
            r.problems.push(DescriptorProblem::StreamletName(raw_name.clone()));
        }
        let description = r.string(streamlet, "description", "streamlet.description");

        let inlets = read_ports(&mut r, streamlet, PortKind::Inlet);
        let outlets = read_ports(&mut r, streamlet, PortKind::Outlet);
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for raw in inlets.iter().chain(&outlets).map(|(raw, _)| raw.as_str()) {
            *counts.entry(raw).or_default() += 1;
        }
        for (p, n) in counts.into_iter().filter(|(_, n)| *n > 1) {
            r.problems.push(DescriptorProblem::PortDeclared(p.to_string(), n));
        }

        let params = read_params(&mut r, streamlet);

        let name = match name {
            Some(n) if r.problems.is_empty() => n,
            _ => return Err(Rejected { name: Some(raw_name), problems: r.problems }),
        };
        let mut inlets: Vec<Port> = inlets.into_iter().filter_map(|(_, p)| p).collect();
        let mut outlets: Vec<Port> = outlets.into_iter().filter_map(|(_, p)| p).collect();
        let mut params: Vec<Param> = params.into_iter().flatten().collect();
        inlets.sort_by(|a, b| a.name.cmp(&b.name));
        outlets.sort_by(|a, b| a.name.cmp(&b.name));
        params.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(Descriptor { protocol_version, sdk_name, sdk_version, name, description, inlets, outlets, params })
    }

    /// Parses and validates the `streamlet` object of a descriptor, as a resource's `descriptor`
    /// field holds it, in a descriptor of this platform's protocol version and no `sdk`: the form
    /// the operator mounts for the sidecar as `descriptor.json`.
    ///
    /// # Errors
    /// Every problem found in the object, as [`Descriptor::parse`] reports them.
    pub fn from_streamlet_object(streamlet: &Map<String, Value>) -> Result<Descriptor, Rejected> {
        let mut root = Map::new();
        root.insert("protocol_version".into(), Value::String(PROTOCOL_VERSION.into()));
        root.insert("streamlet".into(), Value::Object(streamlet.clone()));
        // A JSON value written by serde_json always reads back.
        Descriptor::parse(&Value::Object(root).to_string())
    }

    /// The `streamlet.name` blueprints refer to.
    pub fn name(&self) -> &DescriptorName {
        &self.name
    }

    /// The inlets, sorted by name.
    pub fn inlets(&self) -> &[Port] {
        &self.inlets
    }

    /// The outlets, sorted by name.
    pub fn outlets(&self) -> &[Port] {
        &self.outlets
    }

    /// The parameters, sorted by key.
    pub fn params(&self) -> &[Param] {
        &self.params
    }

    /// The port of that name, with its kind.
    pub fn port(&self, name: &str) -> Option<(PortKind, &Port)> {
        let inlet = self.inlets.iter().find(|p| p.name.as_str() == name).map(|p| (PortKind::Inlet, p));
        inlet.or_else(|| self.outlets.iter().find(|p| p.name.as_str() == name).map(|p| (PortKind::Outlet, p)))
    }

    /// The parameter of that key.
    pub fn param(&self, key: &str) -> Option<&Param> {
        self.params.iter().find(|p| p.key.as_str() == key)
    }

    /// The `streamlet` object in canonical field naming (docs/blueprint.md, "Descriptors"): snake_case
    /// keys, ports and parameters sorted, proto3 defaults (empty strings and lists, type `STRING`) left
    /// out.
    /// This is what the resource's `descriptor` field holds.
    pub fn streamlet_object(&self) -> Map<String, Value> {
        let mut s = Map::new();
        if !self.params.is_empty() {
            let params = self
                .params
                .iter()
                .map(|p| {
                    let mut o = Map::new();
                    if let Some(d) = p.default.as_ref() {
                        o.insert("default_value".into(), Value::String(d.clone()));
                    }
                    if !p.description.is_empty() {
                        o.insert("description".into(), Value::String(p.description.clone()));
                    }
                    o.insert("key".into(), Value::String(p.key.to_string()));
                    if p.ty != ParamType::String {
                        o.insert("type".into(), Value::String(p.ty.wire().into()));
                    }
                    Value::Object(o)
                })
                .collect();
            s.insert("config_parameters".into(), Value::Array(params));
        }
        if !self.description.is_empty() {
            s.insert("description".into(), Value::String(self.description.clone()));
        }
        let ports = |ports: &[Port]| {
            Value::Array(
                ports
                    .iter()
                    .map(|p| {
                        let mut c = Map::new();
                        c.insert("fingerprint".into(), Value::String(p.contract.fingerprint()));
                        c.insert("format".into(), Value::String(p.contract.format().into()));
                        c.insert("schema_name".into(), Value::String(p.contract.schema_name.clone()));
                        let mut o = Map::new();
                        o.insert("contract".into(), Value::Object(c));
                        o.insert("name".into(), Value::String(p.name.to_string()));
                        Value::Object(o)
                    })
                    .collect(),
            )
        };
        if !self.inlets.is_empty() {
            s.insert("inlets".into(), ports(&self.inlets));
        }
        s.insert("name".into(), Value::String(self.name.to_string()));
        if !self.outlets.is_empty() {
            s.insert("outlets".into(), ports(&self.outlets));
        }
        s
    }

    /// The whole descriptor in canonical JSON, byte for byte as the SDKs write it.
    pub fn canonical_json(&self) -> String {
        let mut root = Map::new();
        root.insert("protocol_version".into(), Value::String(self.protocol_version.clone()));
        let mut sdk = Map::new();
        if !self.sdk_name.is_empty() {
            sdk.insert("name".into(), Value::String(self.sdk_name.clone()));
        }
        if !self.sdk_version.is_empty() {
            sdk.insert("version".into(), Value::String(self.sdk_version.clone()));
        }
        if !sdk.is_empty() {
            root.insert("sdk".into(), Value::Object(sdk));
        }
        root.insert("streamlet".into(), Value::Object(self.streamlet_object()));
        let mut out = String::new();
        write_canonical(&Value::Object(root), 0, &mut out);
        out.push('\n');
        out
    }
}

type RawPort = (String, Option<Port>);

fn read_ports(r: &mut Reader, streamlet: &Map<String, Value>, kind: PortKind) -> Vec<RawPort> {
    let key = match kind {
        PortKind::Inlet => "inlets",
        PortKind::Outlet => "outlets",
    };
    let mut out = Vec::new();
    for (i, item) in r.array(streamlet, key, key).iter().enumerate() {
        let path = format!("{key}[{i}]");
        let Some(o) = r.object(item, format!("'{path}'")) else { continue };
        r.known_fields(o, &["name", "contract"], &format!("{path}."));
        let raw = r.string(o, "name", &format!("{path}.name"));
        let before = r.problems.len();
        let name = PortName::parse(&raw);
        if name.is_none() {
            r.problems.push(DescriptorProblem::PortName(kind, raw.clone()));
        }
        let contract = match o.get("contract") {
            None | Some(Value::Null) => {
                r.problems.push(DescriptorProblem::NoContract(kind, raw.clone()));
                None
            }
            Some(c) => r.object(c, format!("'{path}.contract'")).map(|c| {
                r.known_fields(c, &["format", "schema_name", "fingerprint"], &format!("{path}.contract."));
                let format = r.string(c, "format", &format!("{path}.contract.format"));
                let schema = r.string(c, "schema_name", &format!("{path}.contract.schema_name"));
                let given = r.string(c, "fingerprint", &format!("{path}.contract.fingerprint"));
                if format != JSON_FORMAT {
                    r.problems.push(DescriptorProblem::Format(kind, raw.clone(), format));
                }
                if schema.is_empty() {
                    r.problems.push(DescriptorProblem::NoSchemaName(kind, raw.clone()));
                } else if given != fingerprint(&schema) {
                    r.problems.push(DescriptorProblem::Fingerprint(kind, raw.clone(), schema.clone()));
                }
                Contract { schema_name: schema }
            }),
        };
        let port = match (name, contract) {
            (Some(name), Some(contract)) if r.problems.len() == before => Some(Port { name, contract }),
            _ => None,
        };
        out.push((raw, port));
    }
    out
}

fn read_params(r: &mut Reader, streamlet: &Map<String, Value>) -> Vec<Option<Param>> {
    let mut out = Vec::new();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for (i, item) in r.array(streamlet, "config_parameters", "config_parameters").iter().enumerate() {
        let path = format!("config_parameters[{i}]");
        let Some(o) = r.object(item, format!("'{path}'")) else { continue };
        r.known_fields(o, &["key", "description", "type", "default_value"], &format!("{path}."));
        let before = r.problems.len();
        let raw_key = r.string(o, "key", &format!("{path}.key"));
        *counts.entry(raw_key.clone()).or_default() += 1;
        let key = ParamKey::parse(&raw_key);
        if key.is_none() {
            r.problems.push(DescriptorProblem::ParamKey(raw_key.clone()));
        }
        let description = r.string(o, "description", &format!("{path}.description"));
        let ty = match o.get("type") {
            None | Some(Value::Null) => Some(ParamType::String),
            Some(Value::String(t)) => {
                let ty = ParamType::from_wire(t);
                if ty.is_none() {
                    r.problems.push(DescriptorProblem::UnknownParamType(t.clone()));
                }
                ty
            }
            Some(_) => {
                r.problems.push(DescriptorProblem::NotAString(format!("{path}.type")));
                None
            }
        };
        // proto3: an empty default is no default.
        let default = Some(r.string(o, "default_value", &format!("{path}.default_value"))).filter(|d| !d.is_empty());
        if let (Some(ty), Some(d)) = (ty, default.as_ref())
            && ty.typed(d).is_none()
        {
            r.problems.push(DescriptorProblem::ParamDefault(raw_key.clone(), d.clone(), ty));
        }
        out.push(match (key, ty) {
            (Some(key), Some(ty)) if r.problems.len() == before => Some(Param { key, description, ty, default }),
            _ => None,
        });
    }
    for (k, n) in counts.into_iter().filter(|(_, n)| *n > 1) {
        r.problems.push(DescriptorProblem::ParamDeclared(k, n));
    }
    out
}

/// The canonical JSON of the sidecar's built-in descriptors.
const BUILTIN_TEXTS: [&str; 1] = [include_str!("builtin/neo4j-merge-sink.json")];

/// The built-in descriptors, named `builtin/<name>` in blueprints: only
/// `neo4j-merge-sink` today.
pub fn builtins() -> Vec<Descriptor> {
    // The texts are fixed and a test parses each of them, so none is ever dropped here.
    BUILTIN_TEXTS.iter().filter_map(|t| Descriptor::parse(t).ok()).collect()
}

#[cfg(test)]
mod tests;
