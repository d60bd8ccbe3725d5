//! The messages about descriptor files.

use super::*;

#[test]
fn descriptor_directory_messages() {
    let mut i = cart(&[]);
    i.descriptors = DescriptorSource::NotADirectory("nope".into());
    // The streamlets are not also reported: their descriptors are unknown for a reason already given.
    assert_eq!(texts(&verify(&i).unwrap_err()), ["descriptors: 'nope' is not a directory"]);
    i.descriptors = DescriptorSource::Directory { dir: "empty".into(), files: vec![] };
    assert_eq!(texts(&verify(&i).unwrap_err()), ["descriptors: 'empty' holds no *.json files"]);
}

#[test]
fn descriptor_file_problems_come_first_with_the_file_name() {
    let mut i = cart(&[]);
    let DescriptorSource::Directory { files, .. } = &mut i.descriptors else { unreachable!() };
    files.push(Source::text("a-broken.json", "{\"protocol_version\": \"2.0\", \"streamlet\": {\"name\": \"sink\"}}"));
    files.push(Source { name: "b.json".into(), text: Err(SourceError::Unreadable("permission denied".into())) });
    i.blueprint = Source::text("blueprint.conf", fixture("cart/blueprint.conf").replace("cart-router", "nope"));
    assert_eq!(
        texts(&verify(&i).unwrap_err()),
        [
            "descriptor a-broken.json: the SDK speaks protocol '2.0' and this sidecar speaks '1.0'; the major versions must match",
            "descriptor b.json: permission denied",
            "2 descriptors declare streamlet 'sink'",
            "Streamlet 'router' names descriptor 'nope', which no descriptor declares.",
        ]
    );
}

#[test]
fn builtins_need_no_descriptor_directory() {
    let bp = "blueprint.streamlets.g = builtin/neo4j-merge-sink
              blueprint.topics.d { managed = false, cluster = c, consumers = [g.in] }";
    let mut i = input("cart", bp, &["flow.streamlets.g.config.secret = s"]);
    i.descriptors = DescriptorSource::NotGiven;
    let v = verify(&i).unwrap();
    assert_eq!(v.summary(), "verified: 1 streamlets, 1 topics");
    assert_eq!(
        texts(&v.notes),
        ["note: Topic 'd' carries graph deltas and is not managed; whether it is compacted is its owner's."]
    );
    i.blueprint = Source::text("b.conf", "blueprint.streamlets.r = cart-router");
    assert_eq!(
        texts(&verify(&i).unwrap_err()),
        ["Streamlet 'r' names descriptor 'cart-router', which no descriptor declares."]
    );
}
