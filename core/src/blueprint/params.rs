//! Configuration parameter types and the typing of their values (docs/blueprint.md, "Descriptors").

use std::fmt;

use serde_json::{Number, Value};

use super::tree;

/// The type of a streamlet configuration parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParamType {
    /// Any text (the default when a descriptor names no type).
    String,
    /// A signed 64-bit integer.
    Integer,
    /// A finite double.
    Double,
    /// `true` or `false`.
    Boolean,
    /// A HOCON duration such as `30s`.
    Duration,
    /// A HOCON memory size such as `1 MiB`.
    MemorySize,
}

impl ParamType {
    /// Every type, in the order docs/blueprint.md lists them.
    pub const ALL: [ParamType; 6] = [
        ParamType::String,
        ParamType::Integer,
        ParamType::Double,
        ParamType::Boolean,
        ParamType::Duration,
        ParamType::MemorySize,
    ];

    /// The type of a descriptor's `type` field (`STRING`, `INTEGER`, …, `MEMORY_SIZE`).
    pub fn from_wire(s: &str) -> Option<ParamType> {
        ParamType::ALL.into_iter().find(|t| t.wire() == s)
    }

    /// The enum name a descriptor writes.
    pub fn wire(self) -> &'static str {
        match self {
            ParamType::String => "STRING",
            ParamType::Integer => "INTEGER",
            ParamType::Double => "DOUBLE",
            ParamType::Boolean => "BOOLEAN",
            ParamType::Duration => "DURATION",
            ParamType::MemorySize => "MEMORY_SIZE",
        }
    }

    /// The type as messages name it: the enum name lower-cased, `_` as a space (`memory size`).
    pub fn noun(self) -> &'static str {
        match self {
            ParamType::String => "string",
            ParamType::Integer => "integer",
            ParamType::Double => "double",
            ParamType::Boolean => "boolean",
            ParamType::Duration => "duration",
            ParamType::MemorySize => "memory size",
        }
    }

    /// The typed JSON value of `text`, or `None` when it is not of this type (as the existing
    /// platform's code types them): integers and doubles become numbers, booleans booleans, durations
    /// and memory sizes their trimmed text, strings themselves.
    pub fn typed(self, text: &str) -> Option<Value> {
        let t = text.trim();
        match self {
            ParamType::String => Some(Value::String(text.to_string())),
            ParamType::Integer => t.parse::<i64>().ok().map(Value::from),
            ParamType::Double => {
                // Rust also reads `inf` and `NaN`, which JSON cannot hold: those are refused.
                t.parse::<f64>().ok().and_then(Number::from_f64).map(Value::Number)
            }
            ParamType::Boolean => match t {
                "true" => Some(Value::Bool(true)),
                "false" => Some(Value::Bool(false)),
                _ => None,
            },
            ParamType::Duration => tree::is_duration(t).then(|| Value::String(t.to_string())),
            ParamType::MemorySize => tree::memory_size(t).map(|_| Value::String(t.to_string())),
        }
    }
}

impl fmt::Display for ParamType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.noun())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_typed_per_reference() {
        assert_eq!(ParamType::Integer.typed(" 250 "), Some(json!(250)));
        assert_eq!(ParamType::Integer.typed("lots"), None);
        assert_eq!(ParamType::Integer.typed("1.5"), None);
        assert_eq!(ParamType::Integer.typed("9223372036854775808"), None);
        assert_eq!(ParamType::Double.typed("2.5"), Some(json!(2.5)));
        assert_eq!(ParamType::Double.typed("NaN"), None);
        assert_eq!(ParamType::Double.typed("inf"), None);
        assert_eq!(ParamType::Boolean.typed(" true"), Some(json!(true)));
        assert_eq!(ParamType::Boolean.typed("yes"), None);
        assert_eq!(ParamType::Boolean.typed("True"), None);
        assert_eq!(ParamType::Duration.typed(" 30s "), Some(json!("30s")));
        assert_eq!(ParamType::Duration.typed("soon"), None);
        assert_eq!(ParamType::MemorySize.typed("4 MiB"), Some(json!("4 MiB")));
        assert_eq!(ParamType::MemorySize.typed("4 parsecs"), None);
        assert_eq!(ParamType::String.typed(" 100 "), Some(json!(" 100 ")));
    }

    #[test]
    fn names() {
        for t in ParamType::ALL {
            assert_eq!(ParamType::from_wire(t.wire()), Some(t));
            assert_eq!(t.noun(), t.wire().to_lowercase().replace('_', " "));
        }
        assert_eq!(ParamType::from_wire("string"), None);
    }
}
