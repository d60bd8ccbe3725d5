//! The per-streamlet Secret `flow-<pipeline>-<streamlet>` and the config hash.
//!
//! The Secret holds the two files the sidecar reads from `/etc/flow/config`: `descriptor.json` (the
//! descriptor the streamlet was verified against, which the sidecar compares with what the running
//! process declares) and `streamlet.conf` (see [`super::conf`]). It carries the Kafka connection
//! settings, credentials included, which is why they travel in a Secret and never in the resource or
//! the process container.
//!
//! The config hash goes into the pod template: when either file changes, or the Neo4j Secret of a
//! built-in is edited, the hash changes and the Deployment rolls its pods, so they read the new files.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sha2::{Digest, Sha256};

use super::Owner;
use crate::names::objects::{streamlet_labels, streamlet_object_name};

/// Key of the descriptor in the Secret, and its file name in the sidecar's config directory.
pub const DESCRIPTOR_KEY: &str = "descriptor.json";
/// Key of the sidecar configuration in the Secret, and its file name.
pub const CONF_KEY: &str = "streamlet.conf";

/// The config hash: lowercase hex SHA-256 of `descriptor.json`, `"\n---\n"` and `streamlet.conf`,
/// followed by `"\n---\nsecret:"` and the `resourceVersion` of the built-in's Neo4j Secret when there
/// is one (its content is not read: a new version of it rolls the streamlet).
pub fn config_hash(descriptor_json: &str, streamlet_conf: &str, stage_secret_version: Option<&str>) -> String {
    let mut h = Sha256::new();
    h.update(descriptor_json.as_bytes());
    h.update(b"\n---\n");
    h.update(streamlet_conf.as_bytes());
    if let Some(version) = stage_secret_version {
        h.update(b"\n---\nsecret:");
        h.update(version.as_bytes());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The Secret of one streamlet: type `Opaque`, the streamlet's labels, both files in `stringData`.
pub fn streamlet_secret(
    pipeline: &str,
    streamlet: &str,
    descriptor_json: &str,
    streamlet_conf: &str,
    owner: &Owner,
) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(streamlet_object_name(pipeline, streamlet)),
            namespace: Some(owner.namespace.clone()),
            labels: Some(streamlet_labels(pipeline, streamlet)),
            owner_references: Some(vec![owner.reference()]),
            ..ObjectMeta::default()
        },
        type_: Some("Opaque".into()),
        string_data: Some(BTreeMap::from([
            (DESCRIPTOR_KEY.to_string(), descriptor_json.to_string()),
            (CONF_KEY.to_string(), streamlet_conf.to_string()),
        ])),
        ..Secret::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_covers_both_files_and_the_stage_secret_version() {
        let plain = config_hash("d", "c", None);
        assert_eq!(plain.len(), 64);
        assert!(plain.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
        // SHA-256 of "d\n---\nc", computed independently with sha256sum
        assert_eq!(plain, "3002a688c4c4b68dc255e4fdb0c0a895b74533b964aaffe48aee9cbc0d5b7967");
        assert_eq!(
            config_hash("d", "c", Some("1")),
            "5e1446b2f9773f5c38c58b91dc993c50520395729619bef203d56caa9313f0eb"
        );
        assert_ne!(config_hash("d", "c", Some("1")), config_hash("d", "c", Some("2")));
        assert_ne!(config_hash("d2", "c", None), plain);
    }
}
