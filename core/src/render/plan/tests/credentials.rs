//! A namespace's own streamlet credentials reach its streamlets' `streamlet.conf`, and nothing else
//! changes: the operator's client keeps the cluster's credential, and a streamlet of another
//! cluster is rendered byte for byte as before.

use super::*;

#[test]
fn the_namespaces_own_credentials_replace_the_clusters_in_streamlet_conf_alone() {
    let operator = r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="operator" password="operator-pw-9";"#;
    let shop = r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="shop-streamlets" password="shop-pw";"#;
    let mut with_credentials = clusters();
    with_credentials.extend([cluster(
        "shop",
        &[
            ("bootstrap.servers", "kafka.kafka.svc:9092"),
            (
                "connection-config",
                &format!("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config={operator}\n"),
            ),
            (
                "streamlet-credentials.shop",
                &format!("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config={shop}\n"),
            ),
        ],
    )]);
    let flow = generated("cart");
    let v = match decide(&Inputs {
        flow: &flow,
        sidecar_image: Some(SIDECAR),
        clusters: &with_credentials,
        token_endpoints: &Default::default(),
        stage_secrets: &nothing(),
    })
    .unwrap()
    {
        Decision::Apply(v) => *v,
        other => panic!("{other:?}"),
    };
    // router reads cart-events (cluster shop): the fixture, but with the namespace's credential.
    let want = fixture("cart/rendered/router.streamlet.conf").replace(
        r#"connection-config { "security.protocol" = "PLAINTEXT" }"#,
        &format!(
            r#"connection-config {{ "sasl.jaas.config" = {}, "sasl.mechanism" = "PLAIN", "security.protocol" = "SASL_PLAINTEXT" }}"#,
            serde_json::to_string(shop).unwrap()
        ),
    );
    let router = rendered(&v, "router");
    assert_eq!(router.streamlet_conf, want);
    assert!(!router.streamlet_conf.contains("operator-pw-9"));
    // sink reads valid-carts (cluster default): as before, to the byte.
    assert_eq!(rendered(&v, "sink").streamlet_conf, fixture("cart/rendered/sink.streamlet.conf"));
    // The operator's own client of cart-events keeps the cluster's credential.
    let events = v.topics().iter().find(|t| t.id == "cart-events").unwrap();
    assert_eq!(events.kafka_connection().properties["sasl.username"], "operator");
}
