//! HOCON text to a plain, sorted value tree.
//!
//! # Which HOCON crate, and why
//!
//! Three crates were tried on the fixtures of `core/tests/fixtures` and on the corner cases this
//! module cares about:
//!
//! * `hocon-parser` 1.x (library name `hocon`) — **chosen**. Actively released, tested against the
//!   Lightbend specification and a shared conformance corpus, and its default build depends on
//!   `indexmap` only. It parses from a `&str`, takes the environment for `${VAR}` as an explicit map
//!   (so nothing is read from the process here), and keeps each scalar's source text and kind
//!   (`86400000` stays `86400000`, `1.50` stays `1.50`): exactly what the property flattening of
//!   needs (values that are not strings are rendered as their HOCON text). Its duration and
//!   memory-size parsers give the `DURATION` / `MEMORY_SIZE` parameter checks.
//! * `hocon-rs` 0.2 (the 0.1 line moved on) — converts straight to `serde_json` numbers, losing the
//!   source text (`1.50` becomes `1.5`), and pulls `tracing`, `bigdecimal` and `num-bigint`.
//! * `hocon` 0.9 — dormant since 2022, on `nom` 4, with `reqwest` in its default features.
//!
//! `hocon-parser` does read files for `include` directives. Core does no I/O, so an `include` is
//! refused here before the crate resolves anything: blueprints and `--conf` files are
//! self-contained, and the CLI reads every file itself.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use hocon::{HoconValue, ParseOptions, ScalarType, TokenKind};

/// A HOCON object with its keys sorted: keys are always processed in sorted order.
pub type Object = BTreeMap<String, Node>;

/// One resolved HOCON value.
#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    /// An object.
    Object(Object),
    /// An array.
    Array(Vec<Node>),
    /// A scalar, with its source text.
    Scalar(Scalar),
}

/// A scalar: its text as HOCON resolved it, and what kind of token it was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scalar {
    /// The text: a string's content, a number's digits as written, `true`/`false`, `null`.
    pub text: String,
    /// The kind.
    pub kind: ScalarKind,
}

/// Kind of a [`Scalar`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScalarKind {
    /// A quoted or unquoted string (also a concatenation such as `4 MiB`).
    String,
    /// A number.
    Number,
    /// `true` or `false`.
    Boolean,
    /// `null`.
    Null,
}

impl Node {
    /// The object, if this is one.
    pub fn as_object(&self) -> Option<&Object> {
        match self {
            Node::Object(o) => Some(o),
            _ => None,
        }
    }

    /// The scalar's text when this is a non-null scalar: HOCON lets a number or boolean stand where
    /// a string is expected (`router = 5` names descriptor `5`).
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Node::Scalar(s) if s.kind != ScalarKind::Null => Some(&s.text),
            _ => None,
        }
    }

    /// Whether this is `null`.
    pub fn is_null(&self) -> bool {
        matches!(self, Node::Scalar(Scalar { kind: ScalarKind::Null, .. }))
    }

    /// The value rendered as HOCON-like text, for messages: scalars as their text, arrays and
    /// objects in brackets and braces.
    pub fn render(&self) -> String {
        match self {
            Node::Scalar(s) => s.text.clone(),
            Node::Array(items) => format!("[{}]", items.iter().map(Node::render).collect::<Vec<_>>().join(",")),
            Node::Object(o) => {
                format!("{{{}}}", o.iter().map(|(k, v)| format!("{k}={}", v.render())).collect::<Vec<_>>().join(","))
            }
        }
    }
}

/// Why a text is not a usable HOCON document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyntaxError(pub String);

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Parses and resolves a HOCON document.
///
/// `env` is what `${VAR}` substitutions that the document does not define itself resolve against
/// (the CLI passes the process environment; tests pass what they like).
///
/// # Errors
/// The parser's or resolver's reason (with line and column), or a refusal of `include`.
pub fn parse(text: &str, env: &HashMap<String, String>) -> Result<Object, SyntaxError> {
    refuse_includes(text)?;
    let opts = ParseOptions::defaults().with_env(env.clone());
    let config = hocon::parse_string_with_options(text, opts).map_err(|e| SyntaxError(e.to_string()))?;
    let mut root = Object::new();
    for key in config.keys() {
        if let Some(v) = config.get(&quote_key(key)) {
            root.insert(key.to_string(), convert(v)?);
        }
    }
    Ok(root)
}

/// A key as a one-segment HOCON path expression, so that `config.get` does not split it at dots.
fn quote_key(key: &str) -> String {
    // A JSON string is a valid HOCON quoted string.
    serde_json::Value::String(key.to_string()).to_string()
}

fn convert(v: &HoconValue) -> Result<Node, SyntaxError> {
    Ok(match v {
        HoconValue::Object(map) => {
            let mut o = Object::new();
            for (k, v) in map {
                o.insert(k.clone(), convert(v)?);
            }
            Node::Object(o)
        }
        HoconValue::Array(items) => Node::Array(items.iter().map(convert).collect::<Result<_, _>>()?),
        HoconValue::Scalar(s) => Node::Scalar(Scalar {
            text: s.raw.clone(),
            kind: match s.value_type {
                ScalarType::Number => ScalarKind::Number,
                ScalarType::Boolean => ScalarKind::Boolean,
                ScalarType::Null => ScalarKind::Null,
                _ => ScalarKind::String,
            },
        }),
        // Only a deferred resolution leaves placeholders; the fused parse above never does.
        _ => return Err(SyntaxError("a substitution could not be resolved".to_string())),
    })
}

/// Refuses `include` directives: they would make the parser read files, and core reads none.
///
/// An `include` directive is an unquoted `include` where a key may start: at the top level or
/// directly inside an object, after a newline, an opening brace or a comma.
fn refuse_includes(text: &str) -> Result<(), SyntaxError> {
    // A text the lexer refuses gets the parser's own message from `parse`.
    let Ok(tokens) = hocon::tokenize(text) else { return Ok(()) };
    let mut open: Vec<TokenKind> = Vec::new();
    let mut key_position = true;
    for t in &tokens {
        match t.kind {
            TokenKind::LBrace | TokenKind::LBracket => {
                open.push(t.kind.clone());
                key_position = t.kind == TokenKind::LBrace;
                continue;
            }
            TokenKind::RBrace | TokenKind::RBracket => {
                open.pop();
                key_position = false;
                continue;
            }
            _ => {}
        }
        let in_object = !matches!(open.last(), Some(TokenKind::LBracket));
        if t.kind == TokenKind::Unquoted && t.value == "include" && key_position && in_object {
            return Err(SyntaxError(format!(
                "'include' at line {} is not supported: keep the whole configuration in this one file",
                t.line
            )));
        }
        key_position = in_object && matches!(t.kind, TokenKind::Newline | TokenKind::Comma);
    }
    Ok(())
}

/// Lays `over` onto `base`: objects merge key by key, anything else replaces (HOCON object
/// merging, as `--conf` files are laid over a blueprint).
pub fn merge(base: &mut Object, over: &Object) {
    for (k, v) in over {
        match (base.get_mut(k), v) {
            (Some(Node::Object(b)), Node::Object(o)) => merge(b, o),
            _ => {
                base.insert(k.clone(), v.clone());
            }
        }
    }
}

/// Why an object cannot be flattened into properties.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotProperties {
    /// The dotted key of the offending value.
    pub key: String,
}

/// Flattens a properties object into dotted keys with string values:
/// `topic { retention.ms = 86400000 }` gives `retention.ms` → `86400000`.
///
/// Strings are taken verbatim and other scalars as their HOCON text; `null` leaves the key out (so a
/// `--conf` file can remove a key the blueprint set); an array of scalars becomes its items joined
/// with `,`, which is how Kafka spells list-valued properties.
///
/// # Errors
/// An array holding an object or array.
pub fn flatten(o: &Object) -> Result<BTreeMap<String, String>, NotProperties> {
    let mut out = BTreeMap::new();
    flatten_into(o, "", &mut out)?;
    Ok(out)
}

fn flatten_into(o: &Object, prefix: &str, out: &mut BTreeMap<String, String>) -> Result<(), NotProperties> {
    for (k, v) in o {
        let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
        match v {
            Node::Object(inner) => flatten_into(inner, &key, out)?,
            Node::Scalar(s) if s.kind == ScalarKind::Null => {
                out.remove(&key);
            }
            Node::Scalar(s) => {
                out.insert(key, s.text.clone());
            }
            Node::Array(items) => {
                let mut parts = Vec::with_capacity(items.len());
                for item in items {
                    match item {
                        Node::Scalar(s) if s.kind != ScalarKind::Null => parts.push(s.text.clone()),
                        _ => return Err(NotProperties { key }),
                    }
                }
                out.insert(key, parts.join(","));
            }
        }
    }
    Ok(())
}

/// Whether `text` is a HOCON duration (`30s`, `500ms`, `10 seconds`; a bare number is milliseconds).
pub fn is_duration(text: &str) -> bool {
    single_value(text).is_some_and(|c| c.get_duration("v").is_ok())
}

/// The number of bytes of a HOCON memory size (`1 MiB`, `512k`, `1048576`).
pub fn memory_size(text: &str) -> Option<i64> {
    single_value(text).and_then(|c| c.get_bytes("v").ok())
}

fn single_value(text: &str) -> Option<hocon::Config> {
    let doc = format!("v = {}", serde_json::Value::String(text.to_string()));
    hocon::parse_string_with_options(&doc, ParseOptions::defaults().with_env(HashMap::new())).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> Result<Object, SyntaxError> {
        parse(text, &HashMap::new())
    }

    #[test]
    fn keeps_number_text_and_kinds() {
        let o = p("a { b = 1.50, c = true, d = null, e = x y, f = \"7\" }").unwrap();
        let a = o["a"].as_object().unwrap();
        assert_eq!(a["b"], Node::Scalar(Scalar { text: "1.50".into(), kind: ScalarKind::Number }));
        assert_eq!(a["c"].as_text(), Some("true"));
        assert!(a["d"].is_null());
        assert_eq!(a["e"].as_text(), Some("x y"));
        assert_eq!(a["f"], Node::Scalar(Scalar { text: "7".into(), kind: ScalarKind::String }));
    }

    #[test]
    fn quoted_keys_with_dots_stay_one_key() {
        let o = p("\"a.b\" = 1\nc.d = 2").unwrap();
        assert_eq!(o["a.b"].as_text(), Some("1"));
        assert_eq!(o["c"].as_object().unwrap()["d"].as_text(), Some("2"));
    }

    #[test]
    fn environment_comes_from_the_caller_only() {
        let env = HashMap::from([("TAG".to_string(), "1.2".to_string())]);
        let o = parse("a = ${TAG}\nb = ${?NOT_SET_ANYWHERE}", &env).unwrap();
        assert_eq!(o["a"].as_text(), Some("1.2"));
        assert!(!o.contains_key("b"));
        assert!(p("a = ${HOME}").is_err(), "the process environment is not read");
    }

    #[test]
    fn includes_are_refused_but_the_word_is_not() {
        for text in ["include \"x.conf\"", "a { include file(\"y\") }", "a = 1, include required(\"z\")"] {
            let e = p(text).unwrap_err();
            assert!(e.0.contains("'include'"), "{text}: {e}");
        }
        let o = p("a = [include, b]\nc = include\n\"include\" = 3").unwrap();
        assert_eq!(o["c"].as_text(), Some("include"));
        assert_eq!(o["include"].as_text(), Some("3"));
    }

    #[test]
    fn syntax_errors_carry_a_position() {
        let e = p("a = {").unwrap_err();
        assert!(e.0.contains("1:"), "{e}");
    }

    #[test]
    fn merging_is_deep_and_later_wins() {
        let mut base = p("a { b = 1, c { d = 2 } }, x = 1").unwrap();
        merge(&mut base, &p("a { c { e = 3 }, b = 9 }, x { y = 1 }").unwrap());
        assert_eq!(base, p("a { b = 9, c { d = 2, e = 3 } }, x { y = 1 }").unwrap());
    }

    #[test]
    fn flattening_gives_dotted_string_properties() {
        let o = p("retention.ms = 86400000\n\"quoted.key\" = true\nlist = [a, 2]\ngone = null").unwrap();
        let f = flatten(&o).unwrap();
        assert_eq!(
            f,
            BTreeMap::from([
                ("list".to_string(), "a,2".to_string()),
                ("quoted.key".to_string(), "true".to_string()),
                ("retention.ms".to_string(), "86400000".to_string()),
            ])
        );
        assert_eq!(flatten(&p("x = [{a = 1}]").unwrap()), Err(NotProperties { key: "x".into() }));
    }

    #[test]
    fn durations_and_sizes() {
        for d in ["30s", "500ms", "10 seconds", "30", "1.5s"] {
            assert!(is_duration(d), "{d}");
        }
        for d in ["lots", "", "1 MiB", "1 fortnight"] {
            assert!(!is_duration(d), "{d}");
        }
        assert_eq!(memory_size("1 MiB"), Some(1_048_576));
        assert_eq!(memory_size("4 MiB"), Some(4_194_304));
        assert_eq!(memory_size("1048576"), Some(1_048_576));
        assert_eq!(memory_size("30s"), None);
    }
}
