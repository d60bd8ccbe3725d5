//! The reset request annotation, `flow.ankka.thinkmorestupidless.com/reset-offsets`.
//!
//! Shape (reference.md §5.3, §6.3): `{"id":"<uuid>","streamlets":["router"]}`. An empty `streamlets`
//! list means "every streamlet with an inlet". We are stricter than the reference platform, which ignored
//! a request it could not parse: here every malformed annotation is reported with the reason
//! (product.md §4).

use serde::{Deserialize, Serialize};

use crate::names::is_dns_label;

/// The most streamlet names one request may list. A pipeline has far fewer; the bound keeps refusal
/// messages and status small when an annotation is written by mistake or by a script gone wrong.
pub const MAX_NAMED_STREAMLETS: usize = 256;

/// A well-formed reset request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResetRequest {
    /// The request id: a UUID in its hyphenated lower-case form.
    pub id: String,
    /// The streamlets to reset; empty means every streamlet with an inlet.
    #[serde(default)]
    pub streamlets: Vec<String>,
}

/// Why a request annotation was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MalformedRequest {
    /// Not JSON, or not the request's shape (unknown field, wrong type, missing `id`).
    #[error("it is not a reset request: {0}")]
    Shape(String),
    /// The id is not a UUID.
    #[error("its id '{0}' is not a UUID")]
    IdNotUuid(String),
    /// More names than [`MAX_NAMED_STREAMLETS`].
    #[error("it names {0} streamlets, more than the {max} a request may name", max = MAX_NAMED_STREAMLETS)]
    TooManyNames(usize),
    /// Names that cannot be streamlet names at all.
    #[error("{} not a streamlet name: {}", if .0.len() == 1 { "this is" } else { "these are" }, .0.join(", "))]
    BadNames(Vec<String>),
}

impl ResetRequest {
    /// Parses the annotation value.
    ///
    /// # Errors
    /// [`MalformedRequest`] when the text is not JSON of the request's shape (unknown fields are
    /// refused), the id is not a UUID, more than [`MAX_NAMED_STREAMLETS`] names are listed, or a name
    /// is not a DNS label. Long inputs are quoted only in part.
    pub fn parse(text: &str) -> Result<Self, MalformedRequest> {
        let request: ResetRequest = serde_json::from_str(text).map_err(|e| MalformedRequest::Shape(e.to_string()))?;
        match uuid::Uuid::try_parse(&request.id) {
            Ok(u) if u.hyphenated().to_string() == request.id => {}
            _ => return Err(MalformedRequest::IdNotUuid(clip(&request.id, 64))),
        }
        if request.streamlets.len() > MAX_NAMED_STREAMLETS {
            return Err(MalformedRequest::TooManyNames(request.streamlets.len()));
        }
        let bad: Vec<String> =
            request.streamlets.iter().filter(|n| !is_dns_label(n)).map(|n| format!("'{}'", clip(n, 64))).collect();
        if !bad.is_empty() {
            return Err(MalformedRequest::BadNames(bad));
        }
        Ok(request)
    }

    /// The annotation value: compact JSON, as the CLI writes it.
    pub fn to_annotation(&self) -> String {
        // Serialising a struct of strings cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// At most `max` characters of `s`, with `…` when cut; never splits a UTF-8 character.
pub fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_string(),
        Some((i, _)) => format!("{}…", &s[..i]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "1b7c2f0e-9a4d-4d3e-8f55-2f1c0b6e9a71";

    #[test]
    fn parses_the_cli_form() {
        let r = ResetRequest::parse(&format!(r#"{{"id":"{ID}","streamlets":["router"]}}"#)).unwrap();
        assert_eq!(r.id, ID);
        assert_eq!(r.streamlets, vec!["router"]);
        assert_eq!(ResetRequest::parse(&r.to_annotation()).unwrap(), r);
    }

    #[test]
    fn missing_list_means_all() {
        let r = ResetRequest::parse(&format!(r#"{{"id":"{ID}"}}"#)).unwrap();
        assert!(r.streamlets.is_empty());
    }

    #[test]
    fn refuses_each_malformed_kind() {
        assert!(matches!(ResetRequest::parse("not json"), Err(MalformedRequest::Shape(_))));
        assert!(matches!(ResetRequest::parse(r#"{"streamlets":[]}"#), Err(MalformedRequest::Shape(_))));
        assert!(matches!(
            ResetRequest::parse(&format!(r#"{{"id":"{ID}","extra":1}}"#)),
            Err(MalformedRequest::Shape(_))
        ));
        assert!(matches!(ResetRequest::parse(r#"{"id":"u1"}"#), Err(MalformedRequest::IdNotUuid(_))));
        assert!(matches!(
            ResetRequest::parse(&format!(r#"{{"id":"{}"}}"#, ID.to_uppercase())),
            Err(MalformedRequest::IdNotUuid(_))
        ));
        let many: Vec<String> = (0..1000).map(|i| format!("\"s{i}\"")).collect();
        assert_eq!(
            ResetRequest::parse(&format!(r#"{{"id":"{ID}","streamlets":[{}]}}"#, many.join(","))),
            Err(MalformedRequest::TooManyNames(1000))
        );
        assert_eq!(
            ResetRequest::parse(&format!(r#"{{"id":"{ID}","streamlets":["Router","ok"]}}"#)),
            Err(MalformedRequest::BadNames(vec!["'Router'".into()]))
        );
    }

    #[test]
    fn clip_keeps_characters_whole() {
        assert_eq!(clip("äöü", 2), "äö…");
        assert_eq!(clip("ab", 5), "ab");
    }
}
