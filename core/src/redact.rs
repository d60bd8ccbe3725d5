//! Keeping credentials inside their Secret: which client properties hold one, and the redaction of a
//! text (an error, a log line) given the values to hide.
//!
//! librdkafka quotes a rejected value in its configuration errors (`Invalid value "..." for
//! configuration property "..."`), and rdkafka's `ClientConfig` error repeats the value after the
//! key. Every text built from a client's configuration therefore passes through [`Secrets::redact`]
//! before it reaches an event, the status, a log line or a metric.

use std::collections::BTreeMap;

/// What a hidden value is replaced with.
pub const REDACTED: &str = "[redacted]";

/// Values shorter than this are hidden only where they stand quoted (`"..."` or `'...'`): a shorter
/// text cannot be told apart from ordinary words of a message.
const MIN_BARE_LEN: usize = 4;

/// Whether the value of client property `key` (librdkafka's or the Java client's name) is a
/// credential or key material: passwords and passphrases, client secrets, private keys, JAAS lines
/// (which carry passwords and client secrets), and the OAUTHBEARER settings that carry a token.
pub fn is_sensitive(key: &str) -> bool {
    let key = key.trim().to_ascii_lowercase();
    const EXACT: &[&str] = &[
        "sasl.jaas.config",
        "ssl.key.pem",
        "ssl_key",
        "ssl.keystore.key",
        "sasl.oauthbearer.config",
        "sasl.oauthbearer.assertion.private.key.pem",
    ];
    EXACT.contains(&key.as_str())
        || key.ends_with(".password")
        || key.ends_with(".passphrase")
        || key.ends_with(".secret")
        || key.ends_with(".jaas.config")
        || key.contains("private.key")
}

/// The values to hide from texts: every sensitive property's value, in the forms it may appear in.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secrets {
    /// Longest first, so that a value containing another is replaced whole.
    values: Vec<String>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secrets({} value(s))", self.values.len())
    }
}

impl Secrets {
    /// The secrets among client properties `props`: the value of each [`is_sensitive`] key, each
    /// option value of a JAAS line (its password or client secret), and each line of PEM key
    /// material; with their escaped forms (as `{:?}` and JSON write them).
    pub fn of<'a>(props: impl IntoIterator<Item = (&'a String, &'a String)>) -> Self {
        let mut raw: Vec<String> = Vec::new();
        for (k, v) in props {
            if !is_sensitive(k) || v.trim().is_empty() {
                continue;
            }
            raw.push(v.clone());
            raw.push(v.trim().to_string());
            if k.to_ascii_lowercase().ends_with("jaas.config") {
                raw.extend(jaas_option_values(v));
            }
            // PEM: a message may quote a single line of the key
            raw.extend(
                v.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty() && !l.starts_with("-----") && !l.contains(':'))
                    .map(str::to_string),
            );
        }
        Secrets::from_values(raw)
    }

    /// The secrets `values`, as given.
    pub fn from_values(values: impl IntoIterator<Item = String>) -> Self {
        let mut all: Vec<String> = Vec::new();
        for v in values {
            if v.is_empty() {
                continue;
            }
            let debug = v.escape_debug().to_string();
            let json = serde_json::to_string(&v).map(|q| q[1..q.len() - 1].to_string()).unwrap_or_default();
            for form in [v, debug, json] {
                if !form.is_empty() && !all.contains(&form) {
                    all.push(form);
                }
            }
        }
        all.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        Secrets { values: all }
    }

    /// These secrets and `more` (values learned later, such as an answer a client must not repeat).
    #[must_use]
    pub fn and(&self, more: impl IntoIterator<Item = String>) -> Self {
        let mut all = Secrets::from_values(more);
        for v in &self.values {
            if !all.values.contains(v) {
                all.values.push(v.clone());
            }
        }
        all.values.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        all
    }

    /// Whether there is nothing to hide.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// `text` with every secret replaced by [`REDACTED`]; a secret shorter than four characters only
    /// where it stands in quotes.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for v in &self.values {
            if v.chars().count() >= MIN_BARE_LEN {
                if out.contains(v.as_str()) {
                    out = out.replace(v.as_str(), REDACTED);
                }
            } else {
                for q in ['"', '\''] {
                    let quoted = format!("{q}{v}{q}");
                    if out.contains(&quoted) {
                        out = out.replace(&quoted, &format!("{q}{REDACTED}{q}"));
                    }
                }
            }
        }
        out
    }
}

/// `props` for showing: every sensitive value replaced by [`REDACTED`].
pub fn redact_properties(props: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    props.iter().map(|(k, v)| (k.clone(), if is_sensitive(k) { REDACTED.to_string() } else { v.clone() })).collect()
}

/// The values of `key=value` options of a JAAS line (`<LoginModule> <flag> key="value" ... ;`),
/// quoted or not. Only for hiding: a line that does not parse yields what it can.
fn jaas_option_values(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(eq) = rest.find('=') {
        let after = rest[eq + 1..].trim_start();
        let (value, tail) = if let Some(q) = after.strip_prefix('"') {
            let mut value = String::new();
            let mut chars = q.char_indices();
            let mut end = q.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, e)) = chars.next() {
                            value.push(e);
                        }
                    }
                    '"' => {
                        end = i + 1;
                        break;
                    }
                    c => value.push(c),
                }
            }
            (value, &q[end.min(q.len())..])
        } else {
            let end = after.find(|c: char| c.is_whitespace() || c == ';').unwrap_or(after.len());
            (after[..end].to_string(), &after[end..])
        };
        if !value.is_empty() {
            out.push(value);
        }
        rest = tail;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn sensitive_keys() {
        for k in [
            "sasl.password",
            "sasl.jaas.config",
            "ssl.key.password",
            "ssl.keystore.key",
            "ssl.keystore.password",
            "ssl.truststore.password",
            "ssl.key.pem",
            "sasl.oauthbearer.client.secret",
            "sasl.oauthbearer.client.credentials.client.secret",
            "sasl.oauthbearer.assertion.private.key.pem",
            "sasl.oauthbearer.assertion.private.key.passphrase",
            "sasl.oauthbearer.config",
            "listener.name.x.plain.sasl.jaas.config",
            " SASL.Password ",
        ] {
            assert!(is_sensitive(k), "{k}");
        }
        for k in [
            "sasl.username",
            "sasl.mechanism",
            "security.protocol",
            "ssl.ca.pem",
            "ssl.certificate.pem",
            "ssl.keystore.certificate.chain",
            "ssl.truststore.certificates",
            "sasl.oauthbearer.client.id",
            "sasl.oauthbearer.token.endpoint.url",
            "bootstrap.servers",
        ] {
            assert!(!is_sensitive(k), "{k}");
        }
    }

    #[test]
    fn a_librdkafka_configuration_error_loses_the_value() {
        let s = Secrets::of(&props(&[("ssl.key.password", "hunter2-secret"), ("sasl.username", "shop")]));
        let e = r#"Client config error: Invalid value "hunter2-secret" for configuration property "ssl.key.password" ssl.key.password hunter2-secret"#;
        assert_eq!(
            s.redact(e),
            r#"Client config error: Invalid value "[redacted]" for configuration property "ssl.key.password" ssl.key.password [redacted]"#
        );
        assert_eq!(s.redact("user shop"), "user shop", "usernames are not secrets");
    }

    #[test]
    fn jaas_lines_hide_their_options_and_pem_keys_their_lines() {
        let jaas =
            r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="shop" password="p\"w-1234";"#;
        let pem = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49\nAwEHBG0wawIBAQQg\n-----END PRIVATE KEY-----\n";
        let s = Secrets::of(&props(&[("sasl.jaas.config", jaas), ("ssl.key.pem", pem)]));
        let text = format!("bad: p\"w-1234; line AwEHBG0wawIBAQQg; whole {jaas}; debug {pem:?}");
        let r = s.redact(&text);
        for leak in ["p\"w-1234", "AwEHBG0wawIBAQQg", "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49", "ScramLoginModule"] {
            assert!(!r.contains(leak), "{leak} in {r}");
        }
        assert_eq!(r, "bad: [redacted]; line [redacted]; whole [redacted]; debug \"[redacted]\"");
    }

    #[test]
    fn json_and_debug_escapes_are_hidden_too() {
        let s = Secrets::from_values(["a\"b\\c-secret".to_string()]);
        assert_eq!(s.redact(r#"{"note":"a\"b\\c-secret"}"#), r#"{"note":"[redacted]"}"#);
        assert_eq!(s.redact(&format!("{:?}", "a\"b\\c-secret")), "\"[redacted]\"");
    }

    #[test]
    fn short_values_only_where_quoted_and_longest_first() {
        let s = Secrets::from_values(["abc".to_string(), "secret".to_string(), "secret-longer".to_string()]);
        assert_eq!(
            s.redact(r#"abc "abc" 'abc' secret-longer secret"#),
            r#"abc "[redacted]" '[redacted]' [redacted] [redacted]"#
        );
        assert!(Secrets::of(&props(&[("sasl.password", "  ")])).is_empty());
        assert_eq!(format!("{:?}", Secrets::from_values(["x-secret".into()])), "Secrets(1 value(s))");
    }

    #[test]
    fn properties_for_showing() {
        let p = redact_properties(&props(&[("sasl.password", "x"), ("sasl.username", "u")]));
        assert_eq!(p, props(&[("sasl.password", REDACTED), ("sasl.username", "u")]));
    }
}
