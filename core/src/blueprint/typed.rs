//! A HOCON value read into a typed setting (the pod settings of a `--conf` file), guided by the
//! type: a scalar becomes text, a number or a boolean as the field asks (`version = 2` is the label
//! value `"2"`, `runAsUser = 1000` a number), and every key the type does not take is reported
//! with its path, never dropped: serde asks to ignore a value exactly when its key is unknown.
//!
//! Our own `serde::Deserializer` over [`Node`] rather than a detour through `serde_json::Value`,
//! which would have to guess each scalar's type before knowing the field, and would let the
//! Kubernetes types (which skip keys they do not know) lose a misspelt key without a word.

use std::fmt;

use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};

use super::tree::{Node, ScalarKind};

/// Why a value does not read as the type: where (the path's segments below the value read) and
/// what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadError {
    /// Keys and `[index]`es from the value read down to the one at fault.
    pub path: Vec<String>,
    /// Whether the key at `path` is one the type does not take.
    pub unknown: bool,
    /// What is wrong (empty for an unknown key).
    pub message: String,
}

impl ReadError {
    fn under(mut self, segment: String) -> Self {
        self.path.insert(0, segment);
        self
    }

    /// The path as written in HOCON: `a.b[0].c`.
    pub fn dotted(&self) -> String {
        let mut out = String::new();
        for s in &self.path {
            if !out.is_empty() && !s.starts_with('[') {
                out.push('.');
            }
            out.push_str(s);
        }
        out
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.dotted(), self.message)
    }
}

impl std::error::Error for ReadError {}

impl de::Error for ReadError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        ReadError { path: Vec::new(), unknown: false, message: msg.to_string() }
    }

    fn invalid_type(unexp: de::Unexpected<'_>, exp: &dyn de::Expected) -> Self {
        // In words, not in Rust's type names.
        let expected = match exp.to_string().as_str() {
            "i8" | "i16" | "i32" | "i64" | "i128" | "u8" | "u16" | "u32" | "u64" | "u128" => {
                "a whole number".to_string()
            }
            "f32" | "f64" => "a number".to_string(),
            "a sequence" => "a list".to_string(),
            e if e == "a map" || e.starts_with("struct ") => "an object".to_string(),
            e => e.to_string(),
        };
        Self::custom(format_args!("is {unexp}, but must be {expected}"))
    }

    fn missing_field(field: &'static str) -> Self {
        Self::custom(format_args!("needs '{field}'"))
    }
}

/// Reads `node` as a `T`.
///
/// # Errors
/// The first value that does not fit, with its path.
pub fn read<T: de::DeserializeOwned>(node: &Node) -> Result<T, ReadError> {
    T::deserialize(NodeDeserializer(node))
}

struct NodeDeserializer<'a>(&'a Node);

impl NodeDeserializer<'_> {
    fn text(&self) -> Option<&str> {
        match self.0 {
            Node::Scalar(s) if s.kind != ScalarKind::Null => Some(&s.text),
            _ => None,
        }
    }

    fn unexpected(&self) -> de::Unexpected<'_> {
        match self.0 {
            Node::Object(_) => de::Unexpected::Map,
            Node::Array(_) => de::Unexpected::Seq,
            Node::Scalar(s) => match s.kind {
                ScalarKind::Null => de::Unexpected::Unit,
                ScalarKind::Boolean => de::Unexpected::Other("a boolean"),
                ScalarKind::Number => de::Unexpected::Other(&s.text),
                ScalarKind::String => de::Unexpected::Str(&s.text),
            },
        }
    }

    fn integer<'de, V: Visitor<'de>>(&self, v: V, signed: bool) -> Result<V::Value, ReadError> {
        let parsed = self.text().filter(|_| self.kind() != Some(ScalarKind::Boolean));
        match parsed.map(str::trim) {
            Some(t) if signed => match t.parse::<i64>() {
                Ok(n) => v.visit_i64(n),
                Err(_) => Err(de::Error::invalid_type(self.unexpected(), &v)),
            },
            Some(t) => match t.parse::<u64>() {
                Ok(n) => v.visit_u64(n),
                Err(_) => Err(de::Error::invalid_type(self.unexpected(), &v)),
            },
            None => Err(de::Error::invalid_type(self.unexpected(), &v)),
        }
    }

    fn kind(&self) -> Option<ScalarKind> {
        match self.0 {
            Node::Scalar(s) => Some(s.kind),
            _ => None,
        }
    }
}

macro_rules! signed {
    ($($name:ident),*) => {$(
        fn $name<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ReadError> {
            self.integer(v, true)
        }
    )*};
}

macro_rules! unsigned {
    ($($name:ident),*) => {$(
        fn $name<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ReadError> {
            self.integer(v, false)
        }
    )*};
}

impl<'de> de::Deserializer<'de> for NodeDeserializer<'_> {
    type Error = ReadError;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ReadError> {
        match self.0 {
            Node::Object(o) => v.visit_map(Entries { entries: o.iter().filter(|(_, n)| !n.is_null()), value: None }),
            Node::Array(items) => v.visit_seq(Items { items: items.iter().enumerate() }),
            Node::Scalar(s) => match s.kind {
                ScalarKind::Null => v.visit_unit(),
                ScalarKind::Boolean => v.visit_bool(s.text == "true"),
                ScalarKind::Number => {
                    if let Ok(n) = s.text.parse::<i64>() {
                        v.visit_i64(n)
                    } else if let Ok(x) = s.text.parse::<f64>() {
                        v.visit_f64(x)
                    } else {
                        v.visit_string(s.text.clone())
                    }
                }
                ScalarKind::String => v.visit_string(s.text.clone()),
            },
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ReadError> {
        match self.text() {
            Some("true") => v.visit_bool(true),
            Some("false") => v.visit_bool(false),
            _ => Err(de::Error::invalid_type(self.unexpected(), &v)),
        }
    }

    signed!(deserialize_i8, deserialize_i16, deserialize_i32, deserialize_i64, deserialize_i128);
    unsigned!(deserialize_u8, deserialize_u16, deserialize_u32, deserialize_u64, deserialize_u128);

    fn deserialize_f32<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ReadError> {
        self.deserialize_f64(v)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ReadError> {
        match self.text().filter(|_| self.kind() != Some(ScalarKind::Boolean)).map(|t| t.trim().parse::<f64>()) {
            Some(Ok(x)) => v.visit_f64(x),
            _ => Err(de::Error::invalid_type(self.unexpected(), &v)),
        }
    }

    fn deserialize_char<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ReadError> {
        self.deserialize_string(v)
    }

    fn deserialize_str<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ReadError> {
        self.deserialize_string(v)
    }

    /// Any scalar reads as text: HOCON lets a number or a boolean stand where text is meant.
    fn deserialize_string<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ReadError> {
        match self.text() {
            Some(t) => v.visit_string(t.to_string()),
            None => Err(de::Error::invalid_type(self.unexpected(), &v)),
        }
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ReadError> {
        self.deserialize_string(v)
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ReadError> {
        self.deserialize_string(v)
    }

    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ReadError> {
        if self.0.is_null() { v.visit_none() } else { v.visit_some(self) }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ReadError> {
        if self.0.is_null() { v.visit_unit() } else { Err(de::Error::invalid_type(self.unexpected(), &v)) }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(self, _: &'static str, v: V) -> Result<V::Value, ReadError> {
        self.deserialize_unit(v)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _: &'static str, v: V) -> Result<V::Value, ReadError> {
        v.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ReadError> {
        match self.0 {
            Node::Array(items) => v.visit_seq(Items { items: items.iter().enumerate() }),
            _ => Err(de::Error::invalid_type(self.unexpected(), &v)),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _: usize, v: V) -> Result<V::Value, ReadError> {
        self.deserialize_seq(v)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(self, _: &'static str, _: usize, v: V) -> Result<V::Value, ReadError> {
        self.deserialize_seq(v)
    }

    fn deserialize_map<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ReadError> {
        match self.0 {
            Node::Object(o) => v.visit_map(Entries { entries: o.iter().filter(|(_, n)| !n.is_null()), value: None }),
            _ => Err(de::Error::invalid_type(self.unexpected(), &v)),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, ReadError> {
        self.deserialize_map(v)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, ReadError> {
        match self.text() {
            Some(t) => v.visit_enum(t.to_string().into_deserializer()),
            None => Err(de::Error::invalid_type(self.unexpected(), &v)),
        }
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, v: V) -> Result<V::Value, ReadError> {
        self.deserialize_string(v)
    }

    /// Asked only for the value of a key the type does not take.
    fn deserialize_ignored_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, ReadError> {
        Err(ReadError { path: Vec::new(), unknown: true, message: String::new() })
    }
}

struct Entries<'a, I: Iterator<Item = (&'a String, &'a Node)>> {
    entries: I,
    value: Option<(&'a String, &'a Node)>,
}

impl<'de, 'a, I: Iterator<Item = (&'a String, &'a Node)>> MapAccess<'de> for Entries<'a, I> {
    type Error = ReadError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, ReadError> {
        match self.entries.next() {
            None => Ok(None),
            Some((k, n)) => {
                self.value = Some((k, n));
                seed.deserialize(k.clone().into_deserializer()).map(Some)
            }
        }
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, ReadError> {
        let Some((k, n)) = self.value.take() else {
            return Err(de::Error::custom("a value without its key"));
        };
        seed.deserialize(NodeDeserializer(n)).map_err(|e| e.under(k.clone()))
    }
}

struct Items<'a, I: Iterator<Item = (usize, &'a Node)>> {
    items: I,
}

impl<'de, 'a, I: Iterator<Item = (usize, &'a Node)>> SeqAccess<'de> for Items<'a, I> {
    type Error = ReadError;

    fn next_element_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<Option<S::Value>, ReadError> {
        match self.items.next() {
            None => Ok(None),
            Some((i, n)) => seed.deserialize(NodeDeserializer(n)).map(Some).map_err(|e| e.under(format!("[{i}]"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use serde::Deserialize;

    use super::*;
    use crate::blueprint::tree;

    #[derive(Deserialize, Debug, PartialEq)]
    #[serde(rename_all = "camelCase")]
    struct Sample {
        #[serde(default)]
        labels: BTreeMap<String, String>,
        run_as_user: Option<i64>,
        #[serde(default)]
        items: Vec<Item>,
        flag: Option<bool>,
    }

    #[derive(Deserialize, Debug, PartialEq)]
    struct Item {
        name: String,
    }

    fn node(text: &str) -> Node {
        Node::Object(tree::parse(text, &HashMap::new()).expect("HOCON"))
    }

    #[test]
    fn scalars_read_as_the_field_asks() {
        let s: Sample = read(&node("labels { version = 2, tier = 1.10, on = true }\nrunAsUser = 1000\nflag = true"))
            .expect("reads");
        assert_eq!(s.labels["version"], "2");
        assert_eq!(s.labels["tier"], "1.10", "the number's text as written");
        assert_eq!(s.labels["on"], "true");
        assert_eq!(s.run_as_user, Some(1000));
        assert_eq!(s.flag, Some(true));
    }

    #[test]
    fn an_unknown_key_and_a_wrong_type_say_where() {
        let e = read::<Sample>(&node("items = [{ name = a }, { name = b, nmae = c }]")).expect_err("unknown");
        assert!(e.unknown);
        assert_eq!(e.dotted(), "items[1].nmae");
        let e = read::<Sample>(&node("runAsUser = abc")).expect_err("not a number");
        assert!(!e.unknown);
        assert_eq!(e.to_string(), "runAsUser: is string \"abc\", but must be a whole number");
        let e = read::<Sample>(&node("items = [{}]")).expect_err("missing");
        assert_eq!(e.to_string(), "items[0]: needs 'name'");
        let e = read::<Sample>(&node("flag = yes")).expect_err("not a boolean");
        assert_eq!(e.dotted(), "flag");
    }

    #[test]
    fn kubernetes_types_lose_no_misspelt_key() {
        let e = read::<k8s_openapi::api::core::v1::Toleration>(&node("key = a, operator = Exists, efect = NoSchedule"))
            .expect_err("misspelt");
        assert!(e.unknown);
        assert_eq!(e.dotted(), "efect");
        let t: k8s_openapi::api::core::v1::Toleration =
            read(&node("key = a, operator = Exists, effect = NoExecute, tolerationSeconds = 30")).expect("reads");
        assert_eq!(t.toleration_seconds, Some(30));
    }
}
