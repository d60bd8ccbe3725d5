//! Kubernetes events as the platform records them: reasons, notes and names.
//!
//! Events are `events.k8s.io/v1`. The API refuses a `note` over 1 KiB, so notes are cut to fit without
//! splitting a UTF-8 character. The name of an event is derived from what it is about (a request, a
//! group, an outcome), so that two groups are never merged into one event and a retry that records the
//! same fact again is refused by the API server as already existing (docs/reset.md, "Guarantees").

use sha2::{Digest, Sha256};

/// The API server's limit on `note`, in bytes.
pub const NOTE_LIMIT: usize = 1024;

/// `Normal` or `Warning`, as Kubernetes defines event types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum EventType {
    /// Something happened as expected.
    Normal,
    /// Something needs a user's attention.
    Warning,
}

impl EventType {
    /// The API's string.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// One event to record about an `AnkkaFlow`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Event {
    /// `Normal` or `Warning`.
    pub type_: EventType,
    /// CamelCase reason, stable: used in field selectors and metric labels.
    pub reason: String,
    /// Human text, at most [`NOTE_LIMIT`] bytes.
    pub note: String,
    /// What the event is about; equal keys name the same event. For a group outcome it is
    /// `<request id>/<group>`, so one request records one event per group however often it is retried.
    pub key: String,
    /// For an event of a reset request: who requested it, as the API server authenticated them. The
    /// event carries it as its annotation [`ANNOTATION_REQUESTED_BY`](crate::names::ANNOTATION_REQUESTED_BY),
    /// so that the note stays as it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_by: Option<String>,
}

impl Event {
    /// Builds an event, cutting the note to fit [`NOTE_LIMIT`].
    pub fn new(type_: EventType, reason: &str, note: impl Into<String>, key: impl Into<String>) -> Self {
        Event { type_, reason: reason.into(), note: fit_note(&note.into()), key: key.into(), requested_by: None }
    }

    /// The event, marked as one of a request that `user` requested.
    #[must_use]
    pub fn requested_by(mut self, user: Option<&str>) -> Self {
        self.requested_by = user.map(str::to_string);
        self
    }

    /// The event's object name for the resource named `resource`:
    /// `<resource>.<reason lower-cased>.<first 8 bytes of SHA-256(reason, key) in hex>`.
    ///
    /// Names stay within the 253 characters of a DNS subdomain for any resource name Kubernetes accepts.
    pub fn name_for(&self, resource: &str) -> String {
        let mut h = Sha256::new();
        h.update(self.reason.as_bytes());
        h.update(b"\n");
        h.update(self.key.as_bytes());
        let digest = h.finalize();
        let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        let reason = self.reason.to_ascii_lowercase();
        let keep = 253usize.saturating_sub(reason.len() + hex.len() + 2);
        let resource = &resource[..resource.len().min(keep)];
        format!("{resource}.{reason}.{hex}")
    }
}

/// Cuts `note` to at most [`NOTE_LIMIT`] bytes on a character boundary, ending with `…` when cut.
pub fn fit_note(note: &str) -> String {
    if note.len() <= NOTE_LIMIT {
        return note.to_string();
    }
    let ellipsis = '…';
    let mut end = NOTE_LIMIT - ellipsis.len_utf8();
    while !note.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{ellipsis}", &note[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_fit_without_splitting_characters() {
        let long = "ä".repeat(700); // 1400 bytes
        let cut = fit_note(&long);
        assert!(cut.len() <= NOTE_LIMIT);
        assert!(cut.ends_with('…'));
        assert_eq!(fit_note("short"), "short");
    }

    #[test]
    fn names_differ_per_key_and_repeat_per_key() {
        let a = Event::new(EventType::Normal, "ResetOffsets", "x", "u1/cart.router.in");
        let b = Event::new(EventType::Normal, "ResetOffsets", "y", "u1/cart.sink.in");
        let a2 = Event::new(EventType::Normal, "ResetOffsets", "other note", "u1/cart.router.in");
        assert_ne!(a.name_for("cart"), b.name_for("cart"));
        assert_eq!(a.name_for("cart"), a2.name_for("cart"));
        assert!(a.name_for("cart").starts_with("cart.resetoffsets."));
        assert!(a.name_for(&"x".repeat(253)).len() <= 253);
    }
}
