//! `deploy/crd.yaml` must be exactly what the Rust types generate: regenerate it with
//! `cargo run -p flow-operator -- crd > deploy/crd.yaml` when this fails.

use flow_core::resource::AnkkaFlow;
use kube_core::CustomResourceExt;

#[test]
fn checked_in_crd_matches_the_types() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/crd.yaml");
    let text = std::fs::read_to_string(path).expect("deploy/crd.yaml is readable");
    let checked_in: serde_json::Value = serde_saphyr::from_str(&text).expect("deploy/crd.yaml is YAML");
    let generated = serde_json::to_value(AnkkaFlow::crd()).expect("the CRD serialises");
    assert!(
        checked_in == generated,
        "deploy/crd.yaml drifted from the Rust types; regenerate it with `cargo run -p flow-operator -- crd > deploy/crd.yaml`"
    );
}
