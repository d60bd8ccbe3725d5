//! When the objects are left alone, and what the status records.

use super::*;

const NOW: Timestamp = Timestamp::constant(1_796_400_000, 0);
const REAPPLY_AFTER: Duration = Duration::from_secs(300);

fn deployment(generation: i64) -> ObservedDeployment {
    ObservedDeployment {
        uid: "u1".into(),
        config_hash: Some("c".into()),
        process_image: Some("i".into()),
        generation,
        observed_generation: generation,
        updated_replicas: 1,
        ready_replicas: 1,
        replica_failure: None,
    }
}

fn applied(generation: i64) -> AppliedDeployment {
    AppliedDeployment { uid: "u1".into(), generation }
}

/// A record of hash `h` applied `age` seconds before [`NOW`], router's Deployment at generation 4 and
/// sink's at 2.
fn record(h: &str, age: i64) -> AppliedObjects {
    AppliedObjects {
        hash: h.into(),
        time: api_time(Timestamp::constant(NOW.as_second() - age, 0)),
        deployments: BTreeMap::from([("router".into(), applied(4)), ("sink".into(), applied(2))]),
    }
}

fn observed(router: i64, sink: i64) -> BTreeMap<String, ObservedDeployment> {
    BTreeMap::from([("router".into(), deployment(router)), ("sink".into(), deployment(sink))])
}

fn step(
    recorded: Option<&AppliedObjects>,
    deployments: &BTreeMap<String, ObservedDeployment>,
    rolls: bool,
) -> ObjectsStep {
    objects_step("h1".into(), ["router", "sink"], recorded, deployments, rolls, NOW, REAPPLY_AFTER)
}

fn apply() -> ObjectsStep {
    ObjectsStep::Apply { hash: "h1".into() }
}

#[test]
fn objects_as_last_applied_are_left_alone_until_the_reapply_interval_ends() {
    let r = record("h1", 100);
    assert_eq!(step(Some(&r), &observed(4, 2), false), ObjectsStep::Unchanged { reapply_in: Duration::from_secs(200) });
    // Applied just now: left alone for the whole interval.
    assert_eq!(
        step(Some(&record("h1", 0)), &observed(4, 2), false),
        ObjectsStep::Unchanged { reapply_in: REAPPLY_AFTER }
    );
}

#[test]
fn anything_that_differs_from_the_record_applies_them_all() {
    let d = observed(4, 2);
    // Nothing recorded (a resource the operator never applied, or a failed apply).
    assert_eq!(step(None, &d, false), apply());
    // Something else rendered: another spec, another operator version.
    assert_eq!(step(Some(&record("h0", 10)), &d, false), apply());
    // As old as the interval, or older: the objects nobody watches are applied again.
    assert_eq!(step(Some(&record("h1", 300)), &d, false), apply());
    assert_eq!(step(Some(&record("h1", 3_000)), &d, false), apply());
    // A time ahead of this clock proves nothing, nor one that does not parse.
    assert_eq!(step(Some(&record("h1", -5)), &d, false), apply());
    let mut garbled = record("h1", 10);
    garbled.time = "yesterday".into();
    assert_eq!(step(Some(&garbled), &d, false), apply());
    // A Deployment whose spec somebody changed since (its generation rose), or that is gone.
    assert_eq!(step(Some(&record("h1", 10)), &observed(5, 2), false), apply());
    assert_eq!(step(Some(&record("h1", 10)), &BTreeMap::from([("router".into(), deployment(4))]), false), apply());
    // A Deployment deleted and created again since, at the generation recorded.
    let mut recreated = observed(4, 2);
    recreated.get_mut("router").expect("router").uid = "u2".into();
    assert_eq!(step(Some(&record("h1", 10)), &recreated, false), apply());
    // A Deployment that cannot create its pods.
    let mut failing = observed(4, 2);
    failing.get_mut("sink").expect("sink").replica_failure = Some("exceeded quota".into());
    assert_eq!(step(Some(&record("h1", 10)), &failing, false), apply());
    // A streamlet whose Deployment runs another config or image.
    assert_eq!(step(Some(&record("h1", 10)), &d, true), apply());
    // A record of other streamlets than rendered.
    let mut more = record("h1", 10);
    more.deployments.insert("old".into(), applied(1));
    assert_eq!(step(Some(&more), &d, false), apply());
}

#[test]
fn the_record_is_what_was_applied_and_nothing_after_a_failure() {
    let deployments = BTreeMap::from([("router".to_string(), applied(6))]);
    let record_now = apply().record(Some(deployments.clone()), Some(&record("h0", 10)), NOW);
    assert_eq!(record_now, Some(AppliedObjects { hash: "h1".into(), time: api_time(NOW), deployments }));
    // Left alone: the stored record stays as it is, its time included.
    let stored = record("h1", 10);
    let unchanged = ObjectsStep::Unchanged { reapply_in: Duration::from_secs(290) };
    assert_eq!(unchanged.record(Some(BTreeMap::new()), Some(&stored), NOW), Some(stored.clone()));
    // An apply that stopped part-way leaves no record, whatever was stored.
    assert_eq!(apply().record(None, Some(&stored), NOW), None);
    assert_eq!(unchanged.record(None, Some(&stored), NOW), None);
}

#[test]
fn a_record_of_other_objects_is_cleared_before_they_are_applied() {
    // Another hash: cleared first, so that an apply that stops part-way matches no record.
    assert!(apply().clears_record_first(Some(&record("h0", 10))));
    // The recorded hash applied again (interval ended, a Deployment changed): the record still holds.
    assert!(!apply().clears_record_first(Some(&record("h1", 400))));
    // Nothing recorded, or nothing applied.
    assert!(!apply().clears_record_first(None));
    let unchanged = ObjectsStep::Unchanged { reapply_in: Duration::from_secs(10) };
    assert!(!unchanged.clears_record_first(Some(&record("h0", 10))));
}

#[test]
fn a_secret_counts_through_its_config_hash_not_its_values() {
    use k8s_openapi::api::core::v1::Secret;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    let secret = |conf: &str| Secret {
        metadata: ObjectMeta { name: Some("flow-cart-router".into()), ..ObjectMeta::default() },
        string_data: Some(BTreeMap::from([("streamlet.conf".to_string(), conf.to_string())])),
        ..Secret::default()
    };
    let deployment = |hash: &str| {
        let mut d = Deployment::default();
        d.metadata.annotations = Some(BTreeMap::from([("config-hash".to_string(), hash.to_string())]));
        d
    };
    let hash = |s: &Secret, d: &Deployment| objects_hash(&"pipeline", &[(s, d)]);
    let base = hash(&secret("password = a"), &deployment("c1"));
    assert_eq!(base, hash(&secret("password = b"), &deployment("c1")), "a Secret's values are not hashed");
    assert_ne!(base, hash(&secret("password = b"), &deployment("c2")), "its config hash is");
    assert_ne!(base, objects_hash(&"another", &[(&secret("password = a"), &deployment("c1"))]));
    let mut renamed = secret("password = a");
    renamed.metadata.name = Some("flow-cart-sink".into());
    assert_ne!(base, hash(&renamed, &deployment("c1")), "everything but the values is");
}
