//! Every problem a descriptor file can have, with its text.

use std::fmt;

use super::*;

/// One problem of a descriptor file; displayed without the `descriptor <file>: `
/// prefix that [`super::Problem::Descriptor`] adds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DescriptorProblem {
    /// The file could not be read (reason from the reader).
    Unreadable(String),
    /// The file is not JSON.
    NotJson(String),
    /// `<what> must be an object`.
    NotAnObject(String),
    /// `'<key>' must be a string`.
    NotAString(String),
    /// `'<key>' must be an array`.
    NotAnArray(String),
    /// A field the descriptor format does not have (a typo would otherwise pass unnoticed).
    UnknownField(String),
    /// `unknown config parameter type '<t>'`.
    UnknownParamType(String),
    /// `protocol version '<v>' is not MAJOR.MINOR`.
    ProtocolVersion(String),
    /// The SDK's major protocol version differs from ours.
    ProtocolMajor(String),
    /// The SDK's protocol is later than ours.
    ProtocolLater(String),
    /// `the descriptor names no streamlet`.
    NoStreamlet,
    /// Bad `streamlet.name`.
    StreamletName(String),
    /// Bad inlet or outlet name.
    PortName(PortKind, String),
    /// A port name used `count` times across inlets and outlets.
    PortDeclared(String, usize),
    /// A port without contract.
    NoContract(PortKind, String),
    /// A contract format other than `json`.
    Format(PortKind, String, String),
    /// An empty schema name.
    NoSchemaName(PortKind, String),
    /// A fingerprint that does not match the schema name.
    Fingerprint(PortKind, String, String),
    /// Bad parameter key.
    ParamKey(String),
    /// A default that is not of the parameter's type: key, value, type.
    ParamDefault(String, String, ParamType),
    /// A parameter key declared `count` times.
    ParamDeclared(String, usize),
}

impl fmt::Display for DescriptorProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use DescriptorProblem as P;
        match self {
            P::Unreadable(reason) => write!(f, "{reason}"),
            P::NotJson(reason) => write!(f, "is not JSON: {reason}"),
            P::NotAnObject(what) => write!(f, "{what} must be an object"),
            P::NotAString(key) => write!(f, "'{key}' must be a string"),
            P::NotAnArray(key) => write!(f, "'{key}' must be an array"),
            P::UnknownField(key) => write!(f, "'{key}' is not a descriptor field"),
            P::UnknownParamType(t) => write!(f, "unknown config parameter type '{t}'"),
            P::ProtocolVersion(v) => write!(f, "protocol version '{v}' is not MAJOR.MINOR"),
            P::ProtocolMajor(v) => write!(
                f,
                "the SDK speaks protocol '{v}' and this sidecar speaks '{PROTOCOL_VERSION}'; the major versions must match"
            ),
            P::ProtocolLater(v) => write!(
                f,
                "the SDK speaks protocol '{v}', later than this sidecar's '{PROTOCOL_VERSION}'; upgrade the platform or pin the SDK"
            ),
            P::NoStreamlet => write!(f, "the descriptor names no streamlet"),
            P::StreamletName(n) => {
                write!(f, "streamlet name '{n}' must be 1-63 of [a-z0-9-], not starting or ending with '-'")
            }
            P::PortName(kind, p) => write!(f, "{kind} name '{p}' must match [a-z][a-z0-9-]{{0,62}}"),
            P::PortDeclared(p, n) => write!(f, "port '{p}' is declared {n} times"),
            P::NoContract(kind, p) => write!(f, "{kind} '{p}' has no contract"),
            P::Format(kind, p, format) => {
                write!(f, "{kind} '{p}' uses format '{format}', which this version does not support")
            }
            P::NoSchemaName(kind, p) => write!(f, "{kind} '{p}' has no schema name"),
            P::Fingerprint(kind, p, s) => write!(
                f,
                "{kind} '{p}' fingerprint does not match schema name '{s}' (was the descriptor edited by hand?)"
            ),
            P::ParamKey(k) => write!(f, "parameter key '{k}' must match [a-z][a-z0-9-]*"),
            P::ParamDefault(k, v, t) => write!(f, "parameter '{k}': '{v}' is not a {t}"),
            P::ParamDeclared(k, n) => write!(f, "parameter '{k}' is declared {n} times"),
        }
    }
}

impl DescriptorProblem {
    /// Whether the problem is one of the JSON's shape (a field of the wrong JSON type, a field the
    /// format does not have, an unknown parameter type): the descriptor does not parse, as opposed
    /// to parsing into values that break a rule.
    pub fn is_shape(&self) -> bool {
        use DescriptorProblem as P;
        matches!(
            self,
            P::Unreadable(_)
                | P::NotJson(_)
                | P::NotAnObject(_)
                | P::NotAString(_)
                | P::NotAnArray(_)
                | P::UnknownField(_)
                | P::UnknownParamType(_)
        )
    }
}
