use super::*;

fn data(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
    kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// Two topic ids, as Kafka writes them.
fn a() -> String {
    topic_id(0x0001_0203_0405_0607, 0x0809_0a0b_0c0d_0e0f).unwrap()
}
fn b() -> String {
    topic_id(-1, 42).unwrap()
}

#[test]
fn topic_ids_are_written_as_kafka_writes_them() {
    // Kafka's Uuid.toString: the 16 bytes, big-endian halves, URL-safe base64 without padding.
    assert_eq!(a(), "AAECAwQFBgcICQoLDA0ODw");
    // URL-safe: '_' and '-', never '/' or '+'
    assert_eq!(b(), "__________8AAAAAAAAAKg");
    // the zero UUID is Kafka's "no id"
    assert_eq!(topic_id(0, 0), None);
    assert!(is_topic_id(&a()) && is_topic_id(&b()));
    for not in ["creating", "AAAAAAAAAAAAAAAAAAAAAA", "AAECAwQFBgcICQoLDA0OD", "AAECAwQFBgcICQoLDA0O+w", ""] {
        assert!(!is_topic_id(not), "{not}");
    }
}

#[test]
fn a_record_reads_back_what_it_writes_and_ignores_what_proves_nothing() {
    let mut r = Record::default();
    r.created("shop.orders", &a());
    r.created("shop.orders", &b());
    r.intend("shop.carts");
    let written = r.data();
    assert_eq!(written["shop.orders"].split(',').count(), 2);
    assert_eq!(written["shop.carts"], CREATING);
    assert_eq!(Record::from_data(&written), (r.clone(), vec![]));

    // An administrator's hand: spaces are fine; a typo is named and owns nothing; an empty value
    // names nothing.
    let (read, problems) = Record::from_data(&data(&[
        ("shop.orders", &format!(" {} ,creating ", a())),
        ("shop.typo", "AAECAwQFBgcICQoLDA0OD"),
        ("shop.empty", ""),
    ]));
    assert_eq!(problems, ["key 'shop.typo' lists 'AAECAwQFBgcICQoLDA0OD', which is neither a topic id nor 'creating'"]);
    assert!(read.entry("shop.typo").is_none() && read.entry("shop.empty").is_none());
    let orders = read.entry("shop.orders").unwrap();
    assert!(orders.creating && orders.ids.contains(&a()));
}

#[test]
fn an_intent_is_replaced_by_the_id_or_dropped() {
    let mut r = Record::default();
    r.intend("shop.orders");
    r.created("shop.orders", &a());
    assert_eq!(r.entry("shop.orders"), Some(&Entry { ids: [a()].into(), creating: false }));
    // found there already: the intent goes, and with it an entry that holds nothing else
    r.intend("shop.carts");
    r.drop_intent("shop.carts");
    assert!(r.entry("shop.carts").is_none());
    r.intend("shop.orders");
    r.drop_intent("shop.orders");
    assert_eq!(r.entry("shop.orders"), Some(&Entry { ids: [a()].into(), creating: false }));
}

#[test]
fn a_record_is_written_as_a_merge_patch_of_the_keys_that_changed() {
    let mut before = Record::default();
    before.created("shop.orders", &a());
    before.intend("shop.gone");
    assert_eq!(before.patch(&before), None);
    let mut after = before.clone();
    after.intend("shop.carts");
    after.drop_intent("shop.gone");
    assert_eq!(after.patch(&before), Some(serde_json::json!({"data": {"shop.carts": "creating", "shop.gone": null}})));
}

#[test]
fn the_record_lives_in_the_operators_namespace_named_by_the_resources_uid() {
    let owner = Owner { name: "cart".into(), namespace: "shop".into(), uid: "5f0c1e2a-cart".into() };
    let mut r = Record::default();
    r.created("cart.valid-carts", &a());
    let cm = r.config_map(&owner, "ankka-flow");
    assert_eq!(cm.metadata.name.as_deref(), Some("flow-topics-5f0c1e2a-cart"));
    assert_eq!(cm.metadata.namespace.as_deref(), Some("ankka-flow"));
    let labels = cm.metadata.labels.unwrap();
    assert_eq!(labels[LABEL_OWNER_UID], "5f0c1e2a-cart");
    assert_eq!(labels[LABEL_OWNER_NAMESPACE], "shop");
    assert_eq!(labels[LABEL_MANAGED_BY], MANAGED_BY);
    assert_eq!(cm.metadata.annotations.unwrap()[ANNOTATION_OWNER], "shop/cart");
    assert_eq!(cm.data.unwrap(), data(&[("cart.valid-carts", &a())]));
    // no owner reference: a namespaced owner must share the dependent's namespace
    assert!(cm.metadata.owner_references.is_none());
}

#[test]
fn only_a_recorded_topic_id_proves_the_operator_created_a_topic() {
    let mut r = Record::default();
    r.created("shop.orders", &a());
    assert_eq!(ownership(&r, "shop.orders", Some(&a())), Ownership::Created);
    assert_eq!(ownership(&r, "shop.orders", Some(&b())), Ownership::Adopted(Adoption::Recreated { live: b() }));
    assert_eq!(ownership(&r, "shop.orders", None), Ownership::Adopted(Adoption::NoTopicId));
    assert_eq!(ownership(&r, "shop.carts", Some(&b())), Ownership::Adopted(Adoption::ExistedBefore));
    // the id of another name proves nothing for this one
    assert_eq!(ownership(&r, "shop.carts", Some(&a())), Ownership::Adopted(Adoption::ExistedBefore));
    // an intent: the operator may have created it, or someone else meanwhile
    r.intend("shop.carts");
    assert_eq!(ownership(&r, "shop.carts", Some(&b())), Ownership::Adopted(Adoption::Unproven));
    // a recorded id still proves its own topic while another creation is under way
    r.intend("shop.orders");
    assert_eq!(ownership(&r, "shop.orders", Some(&a())), Ownership::Created);
    assert_eq!(ownership(&r, "shop.orders", Some(&b())), Ownership::Adopted(Adoption::Unproven));
}

#[test]
fn a_record_is_left_over_once_its_resource_is_gone_or_another_has_its_name() {
    assert_eq!(owner_of("shop/cart"), Some(("shop", "cart")));
    for bad in ["shop", "/cart", "shop/", ""] {
        assert_eq!(owner_of(bad), None, "{bad}");
    }
    assert!(!left_over("uid-1", Some("uid-1")));
    assert!(left_over("uid-1", None));
    assert!(left_over("uid-1", Some("uid-2")));
}
