use super::*;

fn props(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
    kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

const PLAIN: &str =
    r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="shop" password="s3cr\"et";"#;

#[test]
fn plain_jaas_becomes_username_and_password() {
    let p = for_librdkafka(props(&[
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.jaas.config", PLAIN),
        ("sasl.mechanism", "PLAIN"),
    ]))
    .unwrap();
    assert_eq!(
        p,
        props(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "PLAIN"),
            ("sasl.username", "shop"),
            ("sasl.password", "s3cr\"et")
        ])
    );
}

#[test]
fn scram_jaas_unquoted_values_other_flag_and_spacing() {
    let line = "  org.apache.kafka.common.security.scram.ScramLoginModule   sufficient\n username=u1\tpassword = \"p w\" tokenauth=false ;  ";
    let p = for_librdkafka(props(&[("sasl.jaas.config", line)])).unwrap();
    assert_eq!(p, props(&[("sasl.username", "u1"), ("sasl.password", "p w")]));
}

#[test]
fn librdkafka_spellings_win_over_the_java_ones() {
    let p =
        for_librdkafka(props(&[("sasl.jaas.config", PLAIN), ("sasl.username", "x"), ("sasl.password", "y")])).unwrap();
    assert_eq!(p, props(&[("sasl.username", "x"), ("sasl.password", "y")]));
    let p = for_librdkafka(props(&[
        ("ssl.truststore.type", "PEM"),
        ("ssl.truststore.certificates", "java"),
        ("ssl.ca.pem", "librdkafka"),
    ]))
    .unwrap();
    assert_eq!(p, props(&[("ssl.ca.pem", "librdkafka")]));
}

#[test]
fn oauthbearer_jaas_options_become_oidc_client_credentials() {
    let line = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \
                clientId=\"flow\" clientSecret=\"c-secret\" scope=\"kafka\" extension_traceId=\"t1\" extension_zone=\"eu\";";
    let p = for_librdkafka(props(&[
        ("security.protocol", "SASL_SSL"),
        ("sasl.mechanism", "OAUTHBEARER"),
        ("sasl.jaas.config", line),
        ("sasl.oauthbearer.token.endpoint.url", "https://idp.example.com/token"),
        (
            "sasl.login.callback.handler.class",
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
        ),
        ("sasl.login.connect.timeout.ms", "5000"),
        ("sasl.oauthbearer.scope.claim.name", "scp"),
    ]))
    .unwrap();
    assert_eq!(
        p,
        props(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "OAUTHBEARER"),
            ("sasl.oauthbearer.method", "oidc"),
            ("sasl.oauthbearer.client.id", "flow"),
            ("sasl.oauthbearer.client.secret", "c-secret"),
            ("sasl.oauthbearer.scope", "kafka"),
            ("sasl.oauthbearer.extensions", "traceId=t1,zone=eu"),
            ("sasl.oauthbearer.token.endpoint.url", "https://idp.example.com/token"),
        ])
    );
}

#[test]
fn kafka_4_client_credential_keys_become_librdkafkas() {
    let p = for_librdkafka(props(&[
        ("security.protocol", "SASL_SSL"),
        ("sasl.mechanism", "OAUTHBEARER"),
        ("sasl.jaas.config", "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;"),
        (
            "sasl.oauthbearer.jwt.retriever.class",
            "org.apache.kafka.common.security.oauthbearer.ClientCredentialsJwtRetriever",
        ),
        ("sasl.oauthbearer.client.credentials.client.id", "flow"),
        ("sasl.oauthbearer.client.credentials.client.secret", "c-secret"),
        ("sasl.oauthbearer.scope", "kafka"),
        ("sasl.oauthbearer.token.endpoint.url", "https://idp.example.com/token"),
    ]))
    .unwrap();
    assert_eq!(
        p,
        props(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "OAUTHBEARER"),
            ("sasl.oauthbearer.method", "oidc"),
            ("sasl.oauthbearer.client.id", "flow"),
            ("sasl.oauthbearer.client.secret", "c-secret"),
            ("sasl.oauthbearer.scope", "kafka"),
            ("sasl.oauthbearer.token.endpoint.url", "https://idp.example.com/token"),
        ])
    );
}

#[test]
fn oauthbearer_without_client_credentials_or_with_unsecured_tokens_is_refused() {
    let err =
        for_librdkafka(props(&[("security.protocol", "SASL_SSL"), ("sasl.mechanism", "OAUTHBEARER")])).unwrap_err();
    assert_eq!(
        err,
        [
            "sasl.mechanism OAUTHBEARER needs OIDC client credentials, and sasl.oauthbearer.token.endpoint.url, a client \
          id and a client secret are missing: set sasl.oauthbearer.token.endpoint.url, and clientId and clientSecret in \
          a sasl.jaas.config line with OAuthBearerLoginModule (or sasl.oauthbearer.client.credentials.client.id and \
          .client.secret)"
        ]
    );
    let line = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub=\"admin\";";
    let err = for_librdkafka(props(&[("sasl.jaas.config", line)])).unwrap_err();
    assert!(err[0].contains("unsecured tokens"), "{err:?}");
    assert!(!err[0].contains("admin"), "{err:?}");
}

#[test]
fn kip_651_inline_pem_becomes_librdkafkas_pem_settings() {
    let p = for_librdkafka(props(&[
        ("security.protocol", "SSL"),
        ("ssl.truststore.type", "PEM"),
        ("ssl.truststore.certificates", "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----"),
        ("ssl.keystore.type", "pem"),
        ("ssl.keystore.certificate.chain", "-----BEGIN CERTIFICATE-----\nME\n-----END CERTIFICATE-----"),
        ("ssl.keystore.key", "-----BEGIN ENCRYPTED PRIVATE KEY-----\nK\n-----END ENCRYPTED PRIVATE KEY-----"),
        ("ssl.key.password", "key-pass"),
        ("ssl.keystore.password", "store-pass"),
        ("ssl.truststore.password", "store-pass"),
        ("ssl.endpoint.identification.algorithm", "HTTPS"),
    ]))
    .unwrap();
    assert_eq!(
        p,
        props(&[
            ("security.protocol", "SSL"),
            ("ssl.ca.pem", "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n"),
            ("ssl.certificate.pem", "-----BEGIN CERTIFICATE-----\nME\n-----END CERTIFICATE-----\n"),
            ("ssl.key.pem", "-----BEGIN ENCRYPTED PRIVATE KEY-----\nK\n-----END ENCRYPTED PRIVATE KEY-----\n"),
            ("ssl.key.password", "key-pass"),
            ("ssl.endpoint.identification.algorithm", "https"),
        ])
    );
}

#[test]
fn pem_material_on_one_line_is_rewrapped_for_openssl() {
    let body = "A".repeat(100);
    let one_line = format!(
        "-----BEGIN CERTIFICATE----- {body} -----END CERTIFICATE----- -----BEGIN CERTIFICATE-----B-----END CERTIFICATE-----"
    );
    assert_eq!(
        normalize_pem(&one_line),
        format!(
            "-----BEGIN CERTIFICATE-----\n{}\n{}\n-----END CERTIFICATE-----\n-----BEGIN CERTIFICATE-----\nB\n-----END CERTIFICATE-----\n",
            &body[..64],
            &body[64..]
        )
    );
    let with_headers = "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\nAAAA\n-----END RSA PRIVATE KEY-----";
    assert_eq!(normalize_pem(with_headers), with_headers);
    assert_eq!(normalize_pem("not pem"), "not pem");
    assert_eq!(normalize_pem("-----BEGIN X----- no end"), "-----BEGIN X----- no end");
}

#[test]
fn pem_material_without_its_type_or_its_other_half_is_refused() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (&[("ssl.truststore.certificates", "SECRET-PEM")], "without ssl.truststore.type=PEM"),
        (
            &[("ssl.truststore.type", "JKS"), ("ssl.truststore.certificates", "SECRET-PEM")],
            "without ssl.truststore.type=PEM",
        ),
        (&[("ssl.keystore.type", "PEM"), ("ssl.keystore.certificate.chain", "SECRET-PEM")], "without ssl.keystore.key"),
        (&[("ssl.keystore.type", "PEM"), ("ssl.keystore.key", "SECRET-PEM")], "without ssl.keystore.certificate.chain"),
        (
            &[("ssl.keystore.certificate.chain", "SECRET-PEM"), ("ssl.keystore.key", "SECRET-PEM")],
            "without ssl.keystore.type=PEM",
        ),
    ];
    for (kv, want) in cases {
        let err = for_librdkafka(props(kv)).unwrap_err();
        assert_eq!(err.len(), 1, "{kv:?}: {err:?}");
        assert!(err[0].contains(want), "{kv:?}: {err:?}");
        assert!(!err[0].contains("SECRET"), "{err:?}");
    }
}

#[test]
fn endpoint_identification_translated_and_java_only_keys_dropped() {
    let p = for_librdkafka(props(&[
        ("ssl.endpoint.identification.algorithm", ""),
        ("ssl.protocol", "TLSv1.3"),
        ("ssl.enabled.protocols", "TLSv1.3,TLSv1.2"),
        ("ssl.cipher.suites", "TLS_AES_128_GCM_SHA256"),
        ("ssl.truststore.type", "PEM"),
        ("client.dns.lookup", "use_all_dns_ips"),
        ("sasl.login.retry.backoff.ms", "100"),
        ("security.protocol", "SSL"),
    ]))
    .unwrap();
    assert_eq!(p, props(&[("security.protocol", "SSL"), ("ssl.endpoint.identification.algorithm", "none")]));
    let p = for_librdkafka(props(&[("ssl.endpoint.identification.algorithm", "HTTPS")])).unwrap();
    assert_eq!(p["ssl.endpoint.identification.algorithm"], "https");
    let err = for_librdkafka(props(&[("ssl.endpoint.identification.algorithm", "ldaps")])).unwrap_err();
    assert_eq!(err, ["ssl.endpoint.identification.algorithm is neither empty (no check) nor HTTPS"]);
}

#[test]
fn sasl_needs_a_supported_mechanism_and_its_credentials() {
    let err = for_librdkafka(props(&[("security.protocol", "SASL_SSL")])).unwrap_err();
    assert!(err[0].contains("sasl.mechanism is not set") && err[0].contains("GSSAPI"), "{err:?}");
    let err = for_librdkafka(props(&[("security.protocol", "SASL_SSL"), ("sasl.mechanism", "GSSAPI")])).unwrap_err();
    assert_eq!(
        err,
        ["sasl.mechanism names a mechanism the operator does not support: use one of PLAIN, SCRAM-SHA-256, \
          SCRAM-SHA-512, OAUTHBEARER"]
    );
    let err =
        for_librdkafka(props(&[("security.protocol", "sasl_ssl"), ("sasl.mechanism", "SCRAM-SHA-512")])).unwrap_err();
    assert!(err[0].starts_with("sasl.mechanism SCRAM-SHA-512 needs a username and a password"), "{err:?}");
    let err = for_librdkafka(props(&[("security.protocol", "TLS")])).unwrap_err();
    assert_eq!(err, ["security.protocol is not one of PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL"]);
    for mechanism in ["SCRAM-SHA-256", "scram-sha-512", "PLAIN"] {
        for_librdkafka(props(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", mechanism),
            ("sasl.username", "u"),
            ("sasl.password", "p"),
        ]))
        .unwrap();
    }
}

#[test]
fn malformed_jaas_is_a_clear_error_without_the_secret() {
    let m = "org.apache.kafka.common.security.plain.PlainLoginModule";
    let cases = [
        (format!(r#"{m} required username="shop" password="hunter2";"#).replace("\";", ""), "no closing quote"),
        (format!(r#"{m} required username="shop" password="hunter2""#), "does not end with ';'"),
        (format!(r#"{m} username="shop" password="hunter2";"#), "control flag"),
        (format!(r#"{m} required username="shop" hunter2;"#), "has no '='"),
        (format!(r#"{m} required username="shop" passwd="hunter2";"#), "option 'password' is missing"),
        (format!(r#"{m} required username="shop" password="hunter2"; x"#), "after the ';'"),
        (r#"com.sun.security.auth.module.Krb5LoginModule required password="hunter2";"#.into(), "Krb5LoginModule"),
        ("   ".into(), "is empty"),
    ];
    for (line, want) in cases {
        let err = for_librdkafka(props(&[("sasl.jaas.config", &line)])).unwrap_err();
        assert_eq!(err.len(), 1, "{err:?}");
        assert!(err[0].starts_with("sasl.jaas.config "), "{err:?}");
        assert!(err[0].contains(want), "{line:?}: {err:?}");
        assert!(!err[0].contains("hunter2"), "the error quotes the secret: {err:?}");
    }
}

#[test]
fn every_problem_is_reported() {
    let err = for_librdkafka(props(&[
        ("sasl.jaas.config", "x.Y required;"),
        ("ssl.truststore.certificates", "pem"),
        ("ssl.endpoint.identification.algorithm", "ldaps"),
    ]))
    .unwrap_err();
    assert_eq!(err.len(), 3, "{err:?}");
}

#[test]
fn the_first_word_of_a_jaas_line_is_its_module() {
    assert_eq!(jaas_module(PLAIN), Some(PLAIN_LOGIN_MODULE));
    assert_eq!(jaas_module("  x.Y;"), Some("x.Y"));
    assert_eq!(jaas_module(" ; "), None);
}
