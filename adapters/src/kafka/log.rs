//! What librdkafka reports to the operator's clients (log lines, error events): logged with the
//! credentials taken out, and sorted into the final failures (TLS, authentication) that no retry of
//! a call can cure, since the calls themselves only time out.
//!
//! An OAuth token endpoint's answer never goes further: librdkafka quotes the body of an HTTP error
//! in its log line and in the token failure it reports later, and a body is whatever the endpoint
//! chose to send (an HTML page, a stack trace, an echo of the request). Only its HTTP status code and
//! a fixed reason reach a log, an event or the status; the body is learned and redacted from every
//! later text of the client.
//!
//! A failing connection makes librdkafka repeat itself (every reconnect, every broker thread, every
//! client of the connection): each distinct line of one connection reaches the log at most once per
//! [`REPEAT_INTERVAL`], and the next one that does says how many were held back ([`Repeats`]).

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use flow_core::redact::Secrets;
use flow_core::reset::{FailureKind, KafkaFailure};
use rdkafka::client::ClientContext;
use rdkafka::consumer::ConsumerContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::statistics::Statistics;

/// How often one line of librdkafka's, for one connection, reaches the log at most.
const REPEAT_INTERVAL: Duration = Duration::from_secs(60);

/// Distinct lines followed at most: past that, lines not followed already are logged as they come
/// (a bound on the memory a flood of distinct lines can take).
const FOLLOWED: usize = 4096;

/// The lines of librdkafka's that were logged lately, by connection and text, for the whole process:
/// a connection's clients (its lanes, its topic admin client) share them.
///
/// Written here: `tracing` has no rate limit of its own, and the layers that add one count per call
/// site, not per connection and text.
#[derive(Default)]
struct Repeats {
    seen: Mutex<HashMap<String, Seen>>,
}

/// One line: when it was last logged, and how often it came since without being logged.
struct Seen {
    logged: Instant,
    held: u64,
}

impl Repeats {
    /// Whether the line `key` is logged at `now`: `Some(n)` with the `n` times it came since it was
    /// last logged (0 the first time), `None` while it was logged less than [`REPEAT_INTERVAL`] ago
    /// (it is counted).
    fn note(&self, key: &str, now: Instant) -> Option<u64> {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = seen.get_mut(key) {
            if now.duration_since(s.logged) < REPEAT_INTERVAL {
                s.held += 1;
                return None;
            }
            let held = std::mem::take(&mut s.held);
            s.logged = now;
            return Some(held);
        }
        if seen.len() >= FOLLOWED {
            // Lines not logged for an interval are let go, with what they held back (it would have
            // been told with their next line only).
            seen.retain(|_, s| now.duration_since(s.logged) < REPEAT_INTERVAL);
        }
        if seen.len() < FOLLOWED {
            seen.insert(key.to_string(), Seen { logged: now, held: 0 });
        }
        Some(0)
    }
}

/// The process's record of repeated lines.
static REPEATS: LazyLock<Repeats> = LazyLock::new(Repeats::default);

/// The key of a librdkafka line of a connection to `brokers`: the line without what changes from
/// one repeat to the next (librdkafka ends a broker's line with `(after <n>ms in state <state>, <n>
/// identical error(s) suppressed)`).
fn repeat_key(brokers: &str, fac: &str, line: &str) -> String {
    let line = line.split(" (after ").next().unwrap_or(line);
    format!("{brokers}\u{0}{fac}\u{0}{line}")
}

/// Logs a librdkafka line (already without credentials) of a connection to `brokers` at `level`, at
/// most once per [`REPEAT_INTERVAL`] (see [`Repeats`]). Every client context of a connection (its
/// group clients and its topic admin client) logs through it.
fn log_line(brokers: &str, level: Level, fac: &str, line: &str) {
    let Some(held) = REPEATS.note(&repeat_key(brokers, fac, line), Instant::now()) else { return };
    let more = match held {
        0 => String::new(),
        n => format!(" ({n} more like it since it was last logged)"),
    };
    match level {
        Level::Debug => tracing::debug!(target: "librdkafka", repeated = held, "{fac} {line}{more}"),
        Level::Info => tracing::info!(target: "librdkafka", repeated = held, "{fac} {line}{more}"),
        Level::Warn => tracing::warn!(target: "librdkafka", repeated = held, "{fac} {line}{more}"),
        Level::Error => tracing::error!(target: "librdkafka", repeated = held, "{fac} {line}{more}"),
    }
}

/// The level a librdkafka line is logged at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Level {
    Debug,
    Info,
    Warn,
    Error,
}

/// A failure that no retry of the same call can cure, as librdkafka reported it to the client's
/// context: the calls themselves only time out.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Cause {
    /// The TLS handshake failed: the broker's certificate was not trusted (wrong CA, wrong name), or
    /// the broker refused the client's certificate (unknown CA, expired).
    Tls(String),
    /// SASL authentication failed: wrong username or password, a rejected token, or no token at all
    /// (the OAuth token endpoint refused the client or could not be reached).
    Authentication(String),
}

/// The librdkafka client context of a [`super::KafkaClient`]: it takes librdkafka's log lines and
/// error events, hands them to `tracing` with every credential of the client's configuration taken
/// out, and keeps the first final [`Cause`] they report.
pub struct ClientLog {
    bootstrap_servers: String,
    secrets: Secrets,
    /// Bodies of token endpoint answers seen so far: redacted like the credentials.
    learned: std::sync::Mutex<Secrets>,
    cause: std::sync::Mutex<Option<Cause>>,
    /// Requests sent to the brokers so far, by request type (`Metadata`, `ListOffsets`,
    /// `OffsetFetch`, ...), as librdkafka's last statistics counted them.
    requests: std::sync::Mutex<Requests>,
}

/// Requests sent, by request type.
pub type Requests = std::collections::BTreeMap<String, u64>;

impl ClientLog {
    pub(crate) fn new(bootstrap_servers: &str, secrets: Secrets) -> Self {
        ClientLog {
            bootstrap_servers: bootstrap_servers.to_string(),
            secrets,
            learned: std::sync::Mutex::new(Secrets::default()),
            cause: std::sync::Mutex::new(None),
            requests: std::sync::Mutex::new(Requests::new()),
        }
    }

    fn remember(&self, cause: Cause) {
        let mut known = self.cause.lock().unwrap_or_else(|p| p.into_inner());
        if known.is_none() {
            *known = Some(cause);
        }
    }

    /// `failure`, replaced by the final failure librdkafka reported meanwhile, if any (a call whose
    /// connection failed authentication only times out); either way without a credential or an
    /// answer of a token endpoint.
    pub(crate) fn explain(&self, failure: KafkaFailure) -> KafkaFailure {
        match self.cause() {
            Some(cause) => cause,
            None => KafkaFailure { reason: self.redact(&failure.reason), ..failure },
        }
    }

    /// The final failure librdkafka reported so far, if any, worded for the user.
    pub(crate) fn cause(&self) -> Option<KafkaFailure> {
        let cause = self.cause.lock().unwrap_or_else(|p| p.into_inner()).clone()?;
        let at = &self.bootstrap_servers;
        let (kind, reason) = match cause {
            Cause::Tls(r) => (FailureKind::Configuration, format!("TLS with the Kafka cluster at {at} failed: {r}")),
            Cause::Authentication(r) => {
                (FailureKind::Authentication, format!("authentication with the Kafka cluster at {at} failed: {r}"))
            }
        };
        Some(KafkaFailure::new(kind, self.redact(&reason)))
    }

    /// The requests sent to the brokers so far, by request type, as of librdkafka's last statistics
    /// (see [`super::STATISTICS_INTERVAL`]).
    pub(super) fn requests(&self) -> Requests {
        self.requests.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// `text` with every credential of the client's configuration, and every token endpoint answer
    /// seen, taken out.
    pub(crate) fn redact(&self, text: &str) -> String {
        let learned = self.learned.lock().unwrap_or_else(|p| p.into_inner()).redact(text);
        self.secrets.redact(&learned)
    }

    /// Sorts one librdkafka report (a log line or an error event's text) into a [`Cause`], if it is
    /// one, and learns a token endpoint's answer it quotes; returns the text as it may be shown.
    fn sort(&self, text: &str) -> String {
        if let Some(oidc) = oidc_failure(text) {
            if !oidc.body.trim().is_empty() {
                let mut learned = self.learned.lock().unwrap_or_else(|p| p.into_inner());
                let body = oidc.body.trim();
                let mut values: Vec<String> = vec![oidc.body.to_string(), body.to_string()];
                values.extend(body.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_string));
                *learned = learned.and(values);
            }
            self.remember(Cause::Authentication(format!("no OAUTHBEARER token: {}", oidc.reason)));
            return format!("OAuth token request failed: {}", oidc.reason);
        }
        if let Some(cause) = cause_of(text) {
            self.remember(cause);
        }
        self.redact(text)
    }
}

/// A token endpoint's failed answer, as librdkafka logs it: `Failed to retrieve OIDC token from
/// "<url>": <the answer's body, or curl's error> (<HTTP status code, or -1>)`
/// (`rdkafka_sasl_oauthbearer_oidc.c`).
struct OidcFailure<'a> {
    /// What may be shown: the status code, and a fixed reason.
    reason: String,
    /// What must not be: the body.
    body: &'a str,
}

/// The token endpoint failure `text` reports, if any.
fn oidc_failure(text: &str) -> Option<OidcFailure<'_>> {
    let at = text.find("Failed to retrieve OIDC token from ")?;
    let rest = &text[at..];
    // the URL is quoted; the body follows `": ` and the code ends the line in parentheses
    let body_start = rest.find("\": ").map_or(rest.len(), |i| i + 3);
    let (body, code) = match rest.rfind(" (") {
        Some(open) if open >= body_start && rest.ends_with(')') => {
            (&rest[body_start..open], rest[open + 2..rest.len() - 1].trim().parse::<i32>().ok())
        }
        _ => (&rest[body_start.min(rest.len())..], None),
    };
    let reason = match code {
        Some(c) if (100..600).contains(&c) => {
            format!("the OAuth token endpoint answered HTTP {c} ({}); its answer is not shown", http_meaning(c))
        }
        _ => "the OAuth token endpoint could not be reached or gave no usable answer".to_string(),
    };
    Some(OidcFailure { reason, body })
}

/// What an HTTP status code of a token endpoint means to a user (RFC 6749, section 5.2, for the
/// client errors of a token request).
fn http_meaning(code: i32) -> &'static str {
    match code {
        400 => "the request was refused: a wrong grant, scope or client",
        401 => "the client id or secret was not accepted",
        403 => "the client may not get a token",
        404 => "there is no token endpoint at that URL",
        429 => "too many requests",
        500..=599 => "the token endpoint failed",
        300..=399 => "a redirect, which the client does not follow",
        _ => "an unexpected answer",
    }
}

/// The [`Cause`] a librdkafka log line or error text reports, if any. librdkafka words them as
/// `<broker>: SSL handshake failed: <OpenSSL's reason> (after <n>ms in state <state>)`, `<broker>:
/// SASL authentication error: <broker's reason> (after ...)` and `Failed to acquire SASL OAUTHBEARER
/// token: <reason>`; the broker name and the timing are left out.
fn cause_of(text: &str) -> Option<Cause> {
    let after = |marker: &str| {
        text.find(marker).map(|at| {
            let rest = &text[at + marker.len()..];
            rest.split(" (after ").next().unwrap_or(rest).trim().to_string()
        })
    };
    if let Some(r) = after("SSL handshake failed: ") {
        return Some(Cause::Tls(tls_reason(&r)));
    }
    // TLS 1.3: the broker checks the client's certificate after the client thinks the handshake
    // done, and answers with an alert on the first read ("Receive failed: ...:ssl/tls alert bad
    // certificate: SSL alert number 42").
    if text.contains("alert") && (text.contains("SSL routines") || text.contains("SSL alert number")) {
        let r =
            after("Receive failed: ").or_else(|| after("SSL transport error: ")).unwrap_or_else(|| text.to_string());
        return Some(Cause::Tls(tls_reason(&r)));
    }
    if let Some(r) = after("SASL authentication error: ") {
        return Some(Cause::Authentication(r));
    }
    // What follows is the token endpoint's answer when the token request failed (already known then,
    // from the line above: the first cause is kept), so it is never quoted.
    if text.contains("Failed to acquire SASL OAUTHBEARER token") {
        return Some(Cause::Authentication(
            "no OAUTHBEARER token: the OAuth token endpoint did not give one".to_string(),
        ));
    }
    None
}

/// OpenSSL's reason with the meaning a user needs put first.
fn tls_reason(openssl: &str) -> String {
    let l = openssl.to_ascii_lowercase();
    let meaning = if l.contains("certificate verify failed") || l.contains("could not be verified") {
        "the broker's certificate is not signed by a CA the client trusts (ssl.ca.pem / ssl.ca.location) or does not name the broker"
    } else if l.contains("certificate expired") {
        "the broker refused the client's certificate: it has expired"
    } else if l.contains("unknown ca") || l.contains("bad certificate") {
        "the broker refused the client's certificate: it is not signed by a CA the broker trusts, or none was sent"
    } else if l.contains("certificate unknown") {
        // what a Java broker answers for a certificate its CA signed that fails validation
        "the broker refused the client's certificate: it has expired, is not valid yet, or is not for client authentication"
    } else if l.contains("certificate required") {
        "the broker requires a client certificate (ssl.certificate.pem and ssl.key.pem)"
    } else if l.contains("bad decrypt") || l.contains("ssl.key") {
        "the client's private key cannot be read (a wrong ssl.key.password?)"
    } else {
        return openssl.to_string();
    };
    format!("{meaning} ({openssl})")
}

impl ClientContext for ClientLog {
    /// librdkafka's log lines: delivered whenever the client's queue is served (the client's pump
    /// thread does it), scrubbed of credentials, then logged. A failed TLS handshake (facility `FAIL`)
    /// and a failed SASL authentication reach the context only here, or as an error event.
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, log_message: &str) {
        use rdkafka::config::RDKafkaLogLevel as L;
        let line = self.sort(log_message);
        let level = match level {
            // librdkafka's debug lines (only with its `debug` setting, which no tenant can give the
            // operator's clients) are each different: not followed.
            L::Debug | L::Info => {
                tracing::debug!(target: "librdkafka", "{fac} {line}");
                return;
            }
            L::Notice => Level::Info,
            L::Warning => Level::Warn,
            _ => Level::Error,
        };
        log_line(&self.bootstrap_servers, level, fac, &line);
    }

    /// librdkafka's statistics: the requests sent, summed over the brokers (and the bootstrap
    /// connections), kept for [`ClientLog::requests`].
    fn stats(&self, statistics: Statistics) {
        let mut sent = Requests::new();
        for broker in statistics.brokers.values() {
            for (request, n) in &broker.req {
                *sent.entry(request.clone()).or_default() += u64::try_from(*n).unwrap_or(0);
            }
        }
        sent.retain(|_, n| *n > 0);
        *self.requests.lock().unwrap_or_else(|p| p.into_inner()) = sent;
    }

    fn error(&self, error: KafkaError, reason: &str) {
        let shown = self.sort(reason);
        if self.cause.lock().unwrap_or_else(|p| p.into_inner()).is_none()
            && matches!(
                error.rdkafka_error_code(),
                Some(RDKafkaErrorCode::Authentication | RDKafkaErrorCode::SaslAuthenticationFailed)
            )
        {
            self.remember(Cause::Authentication(shown.clone()));
        }
        let error = self.redact(&error.to_string());
        log_line(&self.bootstrap_servers, Level::Debug, "ERROR", &format!("{error}: {shown}"));
    }
}

impl ConsumerContext for ClientLog {}

#[cfg(test)]
mod tests {
    use super::*;

    /// librdkafka's own wording, as logged on the test bed's listeners.
    #[test]
    fn final_causes_from_librdkafka_reports() {
        let tls = |t: &str| match cause_of(t) {
            Some(Cause::Tls(r)) => r,
            other => panic!("{t}: {other:?}"),
        };
        let auth = |t: &str| match cause_of(t) {
            Some(Cause::Authentication(r)) => r,
            other => panic!("{t}: {other:?}"),
        };
        let r = tls(
            "ssl://127.0.0.1:19100/bootstrap: SSL handshake failed: error:0A000086:SSL routines::certificate verify failed: broker certificate could not be verified, verify that ssl.ca.location is correctly configured or root CA certificates are installed (install ca-certificates package) (after 4ms in state SSL_HANDSHAKE)",
        );
        assert!(r.starts_with("the broker's certificate is not signed by a CA the client trusts"), "{r}");
        assert!(!r.contains("after 4ms"), "{r}");
        let r = tls(
            "ssl://127.0.0.1:19101/bootstrap: Receive failed: error:0A000416:SSL routines::ssl/tls alert certificate unknown: SSL alert number 46 (after 130ms in state APIVERSION_QUERY)",
        );
        assert!(r.contains("expired") && r.ends_with("SSL alert number 46)"), "{r}");
        let r = tls(
            "ssl://127.0.0.1:19101/bootstrap: Receive failed: error:0A000412:SSL routines::ssl/tls alert bad certificate: SSL alert number 42 (after 1ms in state APIVERSION_QUERY)",
        );
        assert!(r.contains("not signed by a CA the broker trusts"), "{r}");
        let r = auth(
            "sasl_ssl://127.0.0.1:19102/bootstrap: SASL authentication error: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512 (after 312ms in state AUTH_REQ)",
        );
        assert_eq!(
            r,
            "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"
        );
        let r = auth("Failed to acquire SASL OAUTHBEARER token: <html>the endpoint's page</html>");
        assert_eq!(r, "no OAUTHBEARER token: the OAuth token endpoint did not give one");
        assert_eq!(
            cause_of("ssl://127.0.0.1:19100/bootstrap: Connect to ipv4#127.0.0.1:19100 failed: Connection refused"),
            None
        );
        assert_eq!(cause_of("Disconnected (after 2ms in state UP)"), None);
    }

    #[test]
    fn a_repeated_line_is_logged_once_per_interval_with_a_count() {
        let r = Repeats::default();
        let t0 = Instant::now();
        let key = |broker: &str, after: &str| {
            repeat_key(
                "127.0.0.1:19999",
                "FAIL",
                &format!("{broker}: Connect to ipv4#127.0.0.1:19999 failed: Connection refused (after {after})"),
            )
        };
        let line = key("127.0.0.1:19999/bootstrap", "0ms in state CONNECT");
        assert_eq!(r.note(&line, t0), Some(0), "the first one is logged");
        // Its repeats within the interval, however librdkafka times them, are counted, not logged.
        for i in 1..=29u64 {
            let again =
                key("127.0.0.1:19999/bootstrap", &format!("{i}ms in state CONNECT, {i} identical error(s) suppressed"));
            assert_eq!(r.note(&again, t0 + Duration::from_secs(i)), None);
        }
        // Another line of the same connection, and the same line of another connection, are their own.
        assert_eq!(r.note(&key("127.0.0.1:19999/1", "0ms in state CONNECT"), t0), Some(0));
        let other = repeat_key(
            "127.0.0.1:19998",
            "FAIL",
            "127.0.0.1:19999/bootstrap: Connect to ipv4#127.0.0.1:19999 failed: Connection refused",
        );
        assert_eq!(r.note(&other, t0), Some(0));
        // After the interval: logged again, with the count of those held back.
        assert_eq!(r.note(&line, t0 + REPEAT_INTERVAL), Some(29));
        assert_eq!(r.note(&line, t0 + REPEAT_INTERVAL + Duration::from_secs(1)), None);
        assert_eq!(r.note(&line, t0 + REPEAT_INTERVAL * 3), Some(1));
    }

    #[test]
    fn the_lines_followed_are_bounded() {
        let r = Repeats::default();
        let t0 = Instant::now();
        for i in 0..FOLLOWED {
            assert_eq!(r.note(&format!("line {i}"), t0), Some(0));
        }
        // Full: a new line is logged, not followed; old lines are let go once quiet for an interval.
        assert_eq!(r.note("one more", t0), Some(0));
        assert_eq!(r.note("one more", t0), Some(0), "not followed while full");
        assert_eq!(r.note("line 0", t0), None, "still followed");
        let later = t0 + REPEAT_INTERVAL;
        assert_eq!(r.note("another", later), Some(0));
        assert_eq!(r.note("another", later), None, "followed once the quiet ones went");
        assert!(r.seen.lock().unwrap_or_else(|p| p.into_inner()).len() < FOLLOWED);
    }

    /// librdkafka's log line of a token request the endpoint refused quotes the answer's body; only
    /// the status code goes on, and the body is redacted from every later text of the client.
    #[test]
    fn a_token_endpoints_answer_never_goes_further_than_its_status_code() {
        let w = ClientLog::new("kafka:9093", Secrets::default());
        let shown = w.sort(
            "Failed to retrieve OIDC token from \"http://evil.example/token\": {\"error\":\"leaked internal page\nsecond line\"} (400)",
        );
        assert_eq!(
            shown,
            "OAuth token request failed: the OAuth token endpoint answered HTTP 400 (the request was refused: a wrong \
             grant, scope or client); its answer is not shown"
        );
        // the failure reported later quotes the body again: it is redacted, and the cause is the first one
        let later =
            w.sort("Failed to acquire SASL OAUTHBEARER token: {\"error\":\"leaked internal page\nsecond line\"}");
        assert!(!later.contains("leaked"), "{later}");
        assert!(!w.redact("a timeout after: second line\"}").contains("second line"));
        let f = w.cause().expect("a cause");
        assert_eq!(f.kind, FailureKind::Authentication);
        assert!(f.reason.ends_with("the OAuth token endpoint answered HTTP 400 (the request was refused: a wrong grant, scope or client); its answer is not shown"), "{}", f.reason);
        // curl's failure to connect: no code
        let w = ClientLog::new("kafka:9093", Secrets::default());
        let shown =
            w.sort("Failed to retrieve OIDC token from \"http://10.0.0.1/token\": Couldn't connect to server (-1)");
        assert!(shown.ends_with("could not be reached or gave no usable answer"), "{shown}");
    }

    #[test]
    fn a_cause_is_worded_for_the_user_and_holds_no_secret() {
        let w = ClientLog::new("kafka:9093", Secrets::from_values(["hunter2-secret".to_string()]));
        assert_eq!(w.cause(), None);
        w.sort("x: SASL authentication error: bad password hunter2-secret (after 1ms in state AUTH_REQ)");
        w.sort("x: SSL handshake failed: later (after 1ms in state SSL_HANDSHAKE)");
        let f = w.cause().expect("a cause");
        assert!(!f.transient());
        assert_eq!(f.reason, "authentication with the Kafka cluster at kafka:9093 failed: bad password [redacted]");
    }
}
