//! Java client settings, as cluster Secrets and resources hold them for the JVM sidecar, turned into
//! librdkafka's for the operator's own client.
//!
//! The table of every translation is in `docs/kafka-settings.md`. In short:
//!
//! - `sasl.jaas.config` with `PlainLoginModule` or `ScramLoginModule` becomes `sasl.username` and
//!   `sasl.password`; with `OAuthBearerLoginModule`, its `clientId`, `clientSecret`, `scope` and
//!   `extension_<name>` options become `sasl.oauthbearer.client.id`, `.client.secret`, `.scope` and
//!   `.extensions`, with `sasl.oauthbearer.method=oidc`;
//! - Kafka 4's own client-credential keys (`sasl.oauthbearer.client.credentials.client.id` and
//!   `.client.secret`, KIP-1139's `ClientCredentialsJwtRetriever`) become librdkafka's
//!   `sasl.oauthbearer.client.id` and `.client.secret`; a token endpoint turns OIDC on;
//! - inline PEM material as KIP-651 writes it (`ssl.truststore.type=PEM` with
//!   `ssl.truststore.certificates`; `ssl.keystore.type=PEM` with `ssl.keystore.certificate.chain` and
//!   `ssl.keystore.key`) becomes `ssl.ca.pem`, `ssl.certificate.pem` and `ssl.key.pem`;
//! - `ssl.endpoint.identification.algorithm` empty (Java's way to turn the check off) becomes `none`,
//!   `HTTPS` becomes `https`;
//! - settings that only a JVM reads (store formats, TLS provider choices, login tuning, classes the
//!   operator knows) are dropped, since librdkafka refuses to build a client with a property it does
//!   not know.
//!
//! librdkafka's own spellings pass unchanged, and win over a Java spelling of the same setting.
//! What cannot be translated is an error, phrased to follow `topic '<id>': `, that never quotes a
//! value (values hold passwords, keys and client secrets).

use std::collections::BTreeMap;

use super::and_list;

/// Login modules the platform knows: the username-and-password ones and the OAuth one. Any other
/// names a class the sidecar's JVM would load.
pub const PLAIN_LOGIN_MODULE: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";
/// See [`PLAIN_LOGIN_MODULE`].
pub const SCRAM_LOGIN_MODULE: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";
/// See [`PLAIN_LOGIN_MODULE`].
pub const OAUTHBEARER_LOGIN_MODULE: &str = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule";

/// SASL mechanisms the operator's client supports.
pub const MECHANISMS: &[&str] = &["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"];

/// Java client settings that librdkafka does not know and that the operator's client can do
/// without, dropped after translation.
pub const JAVA_ONLY_KEYS: &[&str] = &[
    // translated above, then dropped
    "sasl.jaas.config",
    "ssl.truststore.type",
    "ssl.truststore.certificates",
    "ssl.keystore.type",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "sasl.oauthbearer.client.credentials.client.id",
    "sasl.oauthbearer.client.credentials.client.secret",
    // store passwords: only meaningful with store files, which are refused
    "ssl.truststore.password",
    "ssl.keystore.password",
    // classes of Kafka's own that the rules let through (see `properties::KNOWN_CLASSES`); what they
    // select is what `sasl.oauthbearer.method=oidc` does in librdkafka
    "sasl.login.callback.handler.class",
    "sasl.oauthbearer.jwt.retriever.class",
    "sasl.oauthbearer.jwt.validator.class",
    // JVM TLS choices: librdkafka takes OpenSSL's defaults; Java cipher suite names are not OpenSSL's
    "ssl.protocol",
    "ssl.enabled.protocols",
    "ssl.cipher.suites",
    "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm",
    "ssl.secure.random.implementation",
    // the Java client's token validation, which the broker does anyway
    "sasl.oauthbearer.scope.claim.name",
    "sasl.oauthbearer.sub.claim.name",
    "sasl.oauthbearer.clock.skew.seconds",
    "sasl.oauthbearer.expected.audience",
    "sasl.oauthbearer.expected.issuer",
    "sasl.oauthbearer.header.urlencode",
    // broker-side keys sometimes copied into client settings
    "sasl.oauthbearer.jwks.endpoint.url",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
    // Kerberos tuning (Kerberos itself is not supported)
    "sasl.kerberos.ticket.renew.window.factor",
    "sasl.kerberos.ticket.renew.jitter",
    // DNS policy: librdkafka resolves every address of a name by itself
    "client.dns.lookup",
];

/// Prefixes of Java-only keys dropped like [`JAVA_ONLY_KEYS`]: the Java client's login tuning
/// (timeouts, retries and refresh of the OAuth login).
pub const JAVA_ONLY_PREFIXES: &[&str] = &["sasl.login."];

/// Turns the settings of one client, in the Java client's form, into librdkafka's (see the module
/// documentation).
///
/// # Errors
/// Every reason the settings cannot be used, each phrased to follow `topic '<id>': ` and quoting no
/// value.
pub fn for_librdkafka(mut p: BTreeMap<String, String>) -> Result<BTreeMap<String, String>, Vec<String>> {
    let mut why = Vec::new();
    if let Some(line) = p.get("sasl.jaas.config").cloned() {
        match parse_jaas(&line) {
            Err(e) => why.push(format!("sasl.jaas.config {e}")),
            Ok(jaas) => translate_jaas(&jaas, &mut p, &mut why),
        }
    }
    rename(&mut p, "sasl.oauthbearer.client.credentials.client.id", "sasl.oauthbearer.client.id");
    rename(&mut p, "sasl.oauthbearer.client.credentials.client.secret", "sasl.oauthbearer.client.secret");
    if p.contains_key("sasl.oauthbearer.token.endpoint.url") {
        p.entry("sasl.oauthbearer.method".into()).or_insert_with(|| "oidc".into());
    }
    pem(&mut p, &mut why);
    if let Some(v) = p.get_mut("ssl.endpoint.identification.algorithm") {
        match v.trim().to_ascii_lowercase().as_str() {
            "" | "none" => *v = "none".into(),
            "https" => *v = "https".into(),
            _ => why.push("ssl.endpoint.identification.algorithm is neither empty (no check) nor HTTPS".into()),
        }
    }
    check_security(&p, &mut why);
    p.retain(|k, _| !JAVA_ONLY_KEYS.contains(&k.as_str()) && !JAVA_ONLY_PREFIXES.iter().any(|x| k.starts_with(x)));
    if why.is_empty() { Ok(p) } else { Err(why) }
}

/// Moves `from`'s value to `to`, unless `to` is set already (librdkafka's own spelling wins).
fn rename(p: &mut BTreeMap<String, String>, from: &str, to: &str) {
    if let Some(v) = p.remove(from) {
        p.entry(to.into()).or_insert(v);
    }
}

/// KIP-651 inline PEM material to librdkafka's `ssl.*.pem`.
fn pem(p: &mut BTreeMap<String, String>, why: &mut Vec<String>) {
    let is_pem = |k: &str, p: &BTreeMap<String, String>| p.get(k).is_some_and(|t| t.trim().eq_ignore_ascii_case("PEM"));
    if let Some(certs) = p.get("ssl.truststore.certificates").cloned() {
        if is_pem("ssl.truststore.type", p) {
            p.entry("ssl.ca.pem".into()).or_insert_with(|| normalize_pem(&certs));
        } else {
            why.push("ssl.truststore.certificates is set without ssl.truststore.type=PEM".into());
        }
    }
    let chain = p.get("ssl.keystore.certificate.chain").cloned();
    let key = p.get("ssl.keystore.key").cloned();
    if chain.is_some() || key.is_some() {
        if !is_pem("ssl.keystore.type", p) {
            why.push(
                "ssl.keystore.certificate.chain and ssl.keystore.key are set without ssl.keystore.type=PEM".into(),
            );
        }
        match (chain, key) {
            (Some(chain), Some(key)) => {
                p.entry("ssl.certificate.pem".into()).or_insert_with(|| normalize_pem(&chain));
                p.entry("ssl.key.pem".into()).or_insert_with(|| normalize_pem(&key));
            }
            (Some(_), None) => why.push(
                "ssl.keystore.certificate.chain is set without ssl.keystore.key: a client certificate needs its private key"
                    .into(),
            ),
            (None, _) => why.push(
                "ssl.keystore.key is set without ssl.keystore.certificate.chain: a private key needs its certificate".into(),
            ),
        }
    }
}

/// PEM material as OpenSSL reads it: each `-----BEGIN <label>-----` ... `-----END <label>-----` block
/// on lines of its own, its base64 body in lines of 64 characters. A Java `.properties` value often
/// holds a whole block on one line, its line breaks lost to `\` continuations or spaces, which the
/// Java client accepts and OpenSSL does not. A block with headers (`Proc-Type: ...`) and text that
/// holds no block are left as they are.
fn normalize_pem(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(begin) = rest.find("-----BEGIN ") {
        let after_begin = &rest[begin + "-----BEGIN ".len()..];
        let Some(label_end) = after_begin.find("-----") else { break };
        let label = &after_begin[..label_end];
        let body_and_rest = &after_begin[label_end + "-----".len()..];
        let end_marker = format!("-----END {label}-----");
        let Some(end) = body_and_rest.find(&end_marker) else { break };
        let body = &body_and_rest[..end];
        if body.contains(':') {
            return text.to_string();
        }
        let b64: String = body.chars().filter(|c| !c.is_whitespace()).collect();
        out.push_str(&format!("-----BEGIN {label}-----\n"));
        for chunk in b64.as_bytes().chunks(64) {
            out.push_str(&String::from_utf8_lossy(chunk));
            out.push('\n');
        }
        out.push_str(&end_marker);
        out.push('\n');
        rest = &body_and_rest[end + end_marker.len()..];
    }
    if out.is_empty() { text.to_string() } else { out }
}

/// The security protocol and SASL mechanism are ones the operator's client supports, with what
/// each needs.
fn check_security(p: &BTreeMap<String, String>, why: &mut Vec<String>) {
    let protocol =
        p.get("security.protocol").map_or_else(|| "PLAINTEXT".to_string(), |v| v.trim().to_ascii_uppercase());
    if !["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"].contains(&protocol.as_str()) {
        why.push("security.protocol is not one of PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL".into());
        return;
    }
    if !protocol.starts_with("SASL_") {
        return;
    }
    let supported = MECHANISMS.join(", ");
    let Some(mechanism) = p.get("sasl.mechanism").or_else(|| p.get("sasl.mechanisms")) else {
        why.push(format!(
            "security.protocol is {protocol} but sasl.mechanism is not set, which a Java client reads as Kerberos \
             (GSSAPI): set sasl.mechanism to one of {supported}"
        ));
        return;
    };
    let has = |k: &str| p.get(k).is_some_and(|v| !v.is_empty());
    match mechanism.trim().to_ascii_uppercase().as_str() {
        m @ ("PLAIN" | "SCRAM-SHA-256" | "SCRAM-SHA-512") => {
            if !has("sasl.username") || !has("sasl.password") {
                why.push(format!(
                    "sasl.mechanism {m} needs a username and a password: a sasl.jaas.config line with {} or {}, \
                     or sasl.username and sasl.password",
                    short(PLAIN_LOGIN_MODULE),
                    short(SCRAM_LOGIN_MODULE)
                ));
            }
        }
        "OAUTHBEARER" => {
            let missing: Vec<&str> = [
                ("sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.token.endpoint.url"),
                ("sasl.oauthbearer.client.id", "a client id"),
                ("sasl.oauthbearer.client.secret", "a client secret"),
            ]
            .into_iter()
            .filter(|(k, _)| !has(k))
            .map(|(_, what)| what)
            .collect();
            if !missing.is_empty() {
                why.push(format!(
                    "sasl.mechanism OAUTHBEARER needs OIDC client credentials, and {} {} missing: set \
                     sasl.oauthbearer.token.endpoint.url, and clientId and clientSecret in a sasl.jaas.config line with \
                     {} (or sasl.oauthbearer.client.credentials.client.id and .client.secret)",
                    and_list(&missing),
                    if missing.len() == 1 { "is" } else { "are" },
                    short(OAUTHBEARER_LOGIN_MODULE)
                ));
            }
        }
        _ => {
            why.push(format!("sasl.mechanism names a mechanism the operator does not support: use one of {supported}"))
        }
    }
}

/// The class name of a fully qualified one.
fn short(class: &str) -> &str {
    class.rsplit('.').next().unwrap_or(class)
}

/// Adds librdkafka's settings for the login module of `jaas`.
fn translate_jaas(jaas: &Jaas, p: &mut BTreeMap<String, String>, why: &mut Vec<String>) {
    let option = |k: &str| jaas.options.get(k).filter(|v| !v.is_empty()).cloned();
    match jaas.module.as_str() {
        PLAIN_LOGIN_MODULE | SCRAM_LOGIN_MODULE => {
            let missing: Vec<&str> = ["username", "password"].into_iter().filter(|k| option(k).is_none()).collect();
            if !missing.is_empty() {
                why.push(format!(
                    "sasl.jaas.config {JAAS_FORM}: option '{}' is missing or empty",
                    missing.join("' and '")
                ));
                return;
            }
            for (from, to) in [("username", "sasl.username"), ("password", "sasl.password")] {
                if let Some(v) = option(from) {
                    p.entry(to.into()).or_insert(v);
                }
            }
        }
        OAUTHBEARER_LOGIN_MODULE => {
            if jaas.options.keys().any(|k| k.starts_with("unsecuredLogin")) {
                why.push(format!(
                    "sasl.jaas.config asks {} for unsecured tokens, which only a development broker accepts: use \
                     OIDC client credentials (sasl.oauthbearer.token.endpoint.url with clientId and clientSecret)",
                    short(OAUTHBEARER_LOGIN_MODULE)
                ));
                return;
            }
            for (from, to) in [
                ("clientId", "sasl.oauthbearer.client.id"),
                ("clientSecret", "sasl.oauthbearer.client.secret"),
                ("scope", "sasl.oauthbearer.scope"),
            ] {
                if let Some(v) = option(from) {
                    p.entry(to.into()).or_insert(v);
                }
            }
            let extensions: Vec<String> = jaas
                .options
                .iter()
                .filter_map(|(k, v)| k.strip_prefix("extension_").map(|name| format!("{name}={v}")))
                .collect();
            if !extensions.is_empty() {
                p.entry("sasl.oauthbearer.extensions".into()).or_insert(extensions.join(","));
            }
            if option("clientId").is_some() || p.contains_key("sasl.oauthbearer.token.endpoint.url") {
                p.entry("sasl.oauthbearer.method".into()).or_insert_with(|| "oidc".into());
            }
        }
        // The rules on properties refuse any other module before translation; this keeps the
        // translation total on its own.
        other => why.push(format!(
            "sasl.jaas.config uses login module '{other}', which the operator cannot use: use {}, {} or {}",
            short(PLAIN_LOGIN_MODULE),
            short(SCRAM_LOGIN_MODULE),
            short(OAUTHBEARER_LOGIN_MODULE)
        )),
    }
}

/// The shape of a JAAS line, for error messages.
const JAAS_FORM: &str = "is not of the form '<LoginModule> required <option>=\"...\" ...;'";

/// A parsed `sasl.jaas.config` line: `<LoginModule> <flag> key="value"... ;`.
#[derive(Clone, PartialEq, Eq)]
pub struct Jaas {
    /// The login module's class name.
    pub module: String,
    /// Its options (values hold secrets; never print them).
    pub options: BTreeMap<String, String>,
}

/// The login module named first in a JAAS line, if the line has a first word (for the rules on
/// properties, which look at the class without parsing the rest).
pub fn jaas_module(line: &str) -> Option<&str> {
    line.split(|c: char| c.is_whitespace() || c == ';').find(|w| !w.is_empty())
}

/// Parses one JAAS login module entry. Quoted values take `\` escapes, as Java's JAAS parser does.
///
/// # Errors
/// What is wrong, phrased to follow "sasl.jaas.config ", quoting no value.
pub fn parse_jaas(line: &str) -> Result<Jaas, String> {
    let mut rest = line.trim();
    let word = |rest: &mut &str| -> Option<String> {
        let s = rest.trim_start();
        let end = s.find(|c: char| c.is_whitespace() || c == ';').unwrap_or(s.len());
        let (w, r) = s.split_at(end);
        *rest = r;
        (!w.is_empty()).then(|| w.to_string())
    };
    let module = word(&mut rest).ok_or_else(|| "is empty".to_string())?;
    match word(&mut rest).as_deref() {
        Some("required" | "requisite" | "sufficient" | "optional") => {}
        _ => return Err(format!("{JAAS_FORM}: the login module is not followed by a control flag such as 'required'")),
    }
    let mut options: BTreeMap<String, String> = BTreeMap::new();
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix(';') {
            if !after.trim().is_empty() {
                return Err(format!("{JAAS_FORM}: there is text after the ';'"));
            }
            break;
        }
        if rest.is_empty() {
            return Err(format!("{JAAS_FORM}: it does not end with ';'"));
        }
        let eq = rest.find('=').ok_or_else(|| format!("{JAAS_FORM}: an option has no '='"))?;
        let key = rest[..eq].trim().to_string();
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err(format!("{JAAS_FORM}: an option name is missing or holds a space"));
        }
        rest = rest[eq + 1..].trim_start();
        let value = if let Some(quoted) = rest.strip_prefix('"') {
            let mut value = String::new();
            let mut chars = quoted.char_indices();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => match chars.next() {
                        Some((_, e)) => value.push(e),
                        None => break,
                    },
                    '"' => {
                        end = Some(i + 1);
                        break;
                    }
                    c => value.push(c),
                }
            }
            let end = end.ok_or_else(|| format!("{JAAS_FORM}: the value of option '{key}' has no closing quote"))?;
            rest = &quoted[end..];
            value
        } else {
            let end = rest.find(|c: char| c.is_whitespace() || c == ';').unwrap_or(rest.len());
            let (v, r) = rest.split_at(end);
            rest = r;
            v.to_string()
        };
        options.insert(key, value);
    }
    Ok(Jaas { module, options })
}

#[cfg(test)]
mod tests;
