//! `-o`: the output format, on every command that prints a result. Each command renders its result
//! from one serde model, so `-o json` and `-o yaml` always hold the same fields.

use serde::Serialize;

use crate::exit::Failure;

/// `-o text|json|yaml`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// Lines for people (tables for `flow reset status`).
    #[default]
    #[value(alias = "table")]
    Text,
    /// JSON.
    Json,
    /// YAML.
    Yaml,
}

/// `value` as pretty JSON or YAML, ending with a line break. `Text` is the caller's to render.
///
/// # Errors
/// The value cannot be serialised (not expected for our own types).
pub fn render<T: Serialize>(value: &T, format: Format) -> Result<String, Failure> {
    match format {
        Format::Json => serde_json::to_string_pretty(value)
            .map(|s| s + "\n")
            .map_err(|e| Failure::refused(format!("cannot render JSON: {e}"))),
        Format::Yaml | Format::Text => {
            serde_saphyr::to_string(value).map_err(|e| Failure::refused(format!("cannot render YAML: {e}")))
        }
    }
}

/// One document of a stream (`--watch`): YAML documents each start with `---`, so that the output
/// as a whole is one valid YAML stream; JSON documents follow one another (a stream `jq` reads).
///
/// # Errors
/// As [`render`].
pub fn render_in_stream<T: Serialize>(value: &T, format: Format) -> Result<String, Failure> {
    let text = render(value, format)?;
    Ok(if format == Format::Yaml { format!("---\n{text}") } else { text })
}

/// `header` and `rows` as left-aligned columns three spaces apart, one line each (trailing spaces
/// trimmed), each column as wide as its widest cell.
pub fn columns<const N: usize>(header: [&str; N], rows: &[[String; N]]) -> String {
    let header = header.map(String::from);
    let widths: Vec<usize> =
        (0..N).map(|i| rows.iter().chain([&header]).map(|r| r[i].chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for row in std::iter::once(&header).chain(rows) {
        let cells: Vec<String> = row.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        out.push_str(cells.join("   ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_yaml_stream_holds_every_document() {
        #[derive(Serialize, serde::Deserialize, Debug, PartialEq)]
        struct D {
            phase: String,
            n: u32,
        }
        let docs = [D { phase: "Resetting".into(), n: 1 }, D { phase: "Done".into(), n: 2 }];
        let stream: String = docs.iter().map(|d| render_in_stream(d, Format::Yaml).unwrap()).collect();
        let back: Vec<D> = serde_saphyr::from_multiple(&stream).unwrap();
        assert_eq!(back, docs, "{stream}");
    }
}
