//! The canonical JSON writer of descriptors, byte for byte as the SDKs write it.

use serde_json::Value;

/// Writes canonical JSON: keys sorted at every level, 2-space indent, `": "`,
/// `[]` / `{}` when empty, non-ASCII literal, only `"`, `\` and control characters escaped.
pub(super) fn write_canonical(v: &Value, indent: usize, out: &mut String) {
    let pad = |n: usize, out: &mut String| out.extend(std::iter::repeat_n(' ', n));
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => write_json_string(s, out),
        Value::Array(items) if items.is_empty() => out.push_str("[]"),
        Value::Array(items) => {
            out.push_str("[\n");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(",\n");
                }
                pad(indent + 2, out);
                write_canonical(item, indent + 2, out);
            }
            out.push('\n');
            pad(indent, out);
            out.push(']');
        }
        Value::Object(o) if o.is_empty() => out.push_str("{}"),
        Value::Object(o) => {
            // Sorted explicitly: serde_json's map keeps insertion order when a crate in the build
            // turns on its `preserve_order` feature. Keys here are ASCII, where byte order and
            // the UTF-16 order the existing platform's SDKs sort by agree.
            let mut entries: Vec<(&String, &Value)> = o.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push_str("{\n");
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(",\n");
                }
                pad(indent + 2, out);
                write_json_string(k, out);
                out.push_str(": ");
                write_canonical(v, indent + 2, out);
            }
            out.push('\n');
            pad(indent, out);
            out.push('}');
        }
    }
}

/// A JSON string: `"` and `\` escaped, control characters as `\n`, `\t`… or `\u00XX`, the rest
/// (non-ASCII included) literal. The one string writer of descriptors and of `streamlet.conf`.
pub(crate) fn write_json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}
