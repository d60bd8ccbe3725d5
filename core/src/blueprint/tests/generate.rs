//! The messages of `flow generate` alone: images and the pipeline.

use super::*;

#[test]
fn image_messages() {
    let mut g = gen_input(cart(&[]), Some("router = \"r:1\""));
    g.images = vec!["sink=s:1".into(), "router=r:2".into()];
    let r = generated(&g);
    assert_eq!(r.spec.streamlet("router").unwrap().image, "r:2", "--image wins over --images");
    g.images = vec!["sink".into(), "=x".into(), "sink=".into()];
    assert_eq!(
        gen_problems(&g),
        [
            "--image 'sink' is not name=reference",
            "--image '=x' is not name=reference",
            "--image 'sink=' is not name=reference",
            "Streamlet 'sink' has no image.",
        ]
    );
    g.images = vec!["sink=a=b".into()];
    assert_eq!(
        gen_problems(&g),
        ["Streamlet 'sink' has image 'a=b', which is not an image reference: invalid reference format."],
        "split at the first ="
    );
    g.images = vec![];
    g.images_file = Some(Source::text("images.conf", "router = {"));
    assert_eq!(gen_problems(&g), ["images: ParseError at 1:11: expected }"]);
    g.images_file = Some(Source::text("images.conf", "router = [1]\nextra = x"));
    assert_eq!(gen_problems(&g), ["images: 'router' must be an image reference, not [1]"]);
}

#[test]
fn an_image_for_a_streamlet_the_blueprint_lacks_is_refused() {
    let mut g = gen_input(cart(&[]), Some("router = \"r:1\"\nsink = \"s:1\"\nelsewhere = \"e:1\""));
    assert!(generate(&g).is_ok(), "an images file may name streamlets of other blueprints");
    g.images = vec!["routr=registry.example.com/cart-router:1.2".into(), "sink=s:2".into()];
    assert_eq!(
        gen_problems(&g),
        ["--image 'routr=registry.example.com/cart-router:1.2' names streamlet 'routr', which the blueprint \
             does not have; the streamlets that take an image are: router, sink."]
    );
}

#[test]
fn malformed_image_references_are_refused() {
    let good = [
        "r:1",
        "registry.example.com/cart-router:1.2",
        "localhost:5000/shop/router",
        "ghcr.io/acme/router@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "Registry.Example.com:443/acme/router:V1.2",
    ];
    for r in good {
        assert_eq!(images::reference_problem(r), None, "{r}");
    }
    let bad = [
        ("registry.example.com/Cart-Router:1.2", "repository name must be lowercase"),
        ("router:1.2:3", "invalid reference format"),
        ("router:", "invalid reference format"),
        ("router with space", "invalid reference format"),
        ("router@sha256:abc", "invalid reference format"),
        ("router@sha256:0123456789abcdef0123456789abcdef", "invalid checksum digest length"),
        ("-router", "invalid reference format"),
    ];
    for (r, why) in bad {
        assert_eq!(images::reference_problem(r).as_deref(), Some(why), "{r}");
    }
    let mut g = gen_input(cart(&[]), Some("router = \"Router:1\"\nsink = \"s:1\""));
    g.images = vec!["sink=sink:1:2".into()];
    assert_eq!(
        gen_problems(&g),
        [
            "Streamlet 'router' has image 'Router:1', which is not an image reference: repository name must be \
             lowercase.",
            "Streamlet 'sink' has image 'sink:1:2', which is not an image reference: invalid reference format.",
        ]
    );
}

#[test]
fn pipeline_id_defaults() {
    let mut g = gen_input(
        input("cart", &fixture("cart/blueprint.conf").replace("name = cart", ""), &[]),
        Some(&fixture("cart/images.conf")),
    );
    g.verify.blueprint.name = "some/dir/shop-eu.blueprint.conf".into();
    assert_eq!(generated(&g).spec.pipeline, "shop-eu");
    g.verify.blueprint.name = "some/dir/Shop.conf".into();
    assert_eq!(gen_problems(&g), ["pipeline id 'Shop' must be 1-40 of [a-z0-9-], not starting or ending with '-'"]);
}

#[test]
fn generate_collects_verify_and_its_own_problems() {
    let mut g = gen_input(
        input("cart", &fixture("cart/blueprint.conf").replace("name = cart", "name = Cart"), &["flow.streamlets.x {}"]),
        None,
    );
    g.namespace = Some("Shop".into());
    assert_eq!(
        gen_problems(&g),
        [
            "overrides name unknown streamlet 'x'",
            "Streamlet 'router' has no image.",
            "Streamlet 'sink' has no image.",
            "pipeline id 'Cart' must be 1-40 of [a-z0-9-], not starting or ending with '-'",
            "namespace 'Shop' is not a Kubernetes namespace name: 1-63 of [a-z0-9-], not starting or ending with '-'",
        ]
    );
}

#[test]
fn long_managed_topic_names_are_refused_at_generate() {
    let id = "t".repeat(245);
    let bp = fixture("cart/blueprint.conf").replace("review-carts", &id);
    assert!(verify(&input("cart", &bp, &[])).is_ok(), "the id alone is fine");
    let g = gen_input(input("cart", &bp, &[]), Some(&fixture("cart/images.conf")));
    assert_eq!(
        gen_problems(&g),
        [format!("'cart.{id}' is not a valid topic name, must match '[a-zA-Z0-9\\._\\-]', max 249 characters.")]
    );
}

#[test]
fn names_the_operator_could_not_render_are_refused_by_verify_and_generate() {
    let pipeline = "p".repeat(40);
    let streamlet = "s".repeat(50);
    let bp = fixture("cart/blueprint.conf")
        .replace("name = cart", &format!("name = {pipeline}"))
        .replace("router = cart-router", &format!("{streamlet} = cart-router"))
        .replace("router.", &format!("{streamlet}."));
    let want = format!(
        "streamlet '{streamlet}': label app.kubernetes.io/name would be '{pipeline}-{streamlet}', 91 characters, \
         but a label value holds at most 63; shorten the pipeline id or the streamlet name"
    );
    assert_eq!(texts(&verify(&input("cart", &bp, &[])).unwrap_err()), std::slice::from_ref(&want));
    let images = fixture("cart/images.conf").replace("router", &streamlet);
    let mut g = gen_input(input("cart", &bp, &[]), Some(&images));
    assert_eq!(gen_problems(&g), [want]);
    // generate checks the pipeline it writes: a short --pipeline fits
    g.pipeline = Some("cart".into());
    assert_eq!(generated(&g).spec.pipeline, "cart");
    // verify checks the pipeline generate would take without --pipeline; an invalid one is
    // generate's to refuse
    let invalid = bp.replace(&format!("name = {pipeline}"), "name = Not_An_Id");
    assert!(verify(&input("cart", &invalid, &[])).is_ok());
    // the built-in's Secret name is checked too
    let verify_graph =
        input("graph", &fixture("graph/blueprint.conf"), &["flow.streamlets.graph { config { secret = Neo4j_Shop } }"]);
    assert_eq!(
        texts(&verify(&verify_graph).unwrap_err()),
        [
            "streamlet 'graph': 'secret' parameter 'Neo4j_Shop' is not a Kubernetes object name: at most 253 of [a-z0-9-.], beginning and ending with a letter or digit"
        ]
    );
}

#[test]
fn delta_topic_notes() {
    let graph = |topic_settings: &str, managed: bool| {
        let bp = format!(
            "blueprint.streamlets {{ mapper = mapper, graph = builtin/neo4j-merge-sink }}
             blueprint.topics {{ in {{ managed = false, cluster = default, consumers = [mapper.in] }}
               d {{ producers = [mapper.deltas], consumers = [graph.in], managed = {managed}, cluster = c {topic_settings} }} }}"
        );
        let v = verify(&input("graph", &bp, &[&fixture("graph/overrides.conf")])).unwrap_or_else(|p| panic!("{p:?}"));
        texts(&v.notes)
    };
    assert_eq!(
        graph(", topic { cleanup.policy = compact }", true),
        ["note: Topic 'd' carries graph deltas and is compacted (cleanup.policy = compact)."]
    );
    assert_eq!(
        graph(", topic { cleanup.policy = \"compact,delete\" }", true),
        [
            "note: Topic 'd' carries graph deltas and sets cleanup.policy = compact,delete; records older than its retention are gone from a rebuild."
        ]
    );
    assert_eq!(
        graph(", topic { cleanup.policy = delete }", true),
        [
            "note: Topic 'd' carries graph deltas and sets cleanup.policy = delete; it will not hold the whole graph and cannot be relied on to rebuild it."
        ]
    );
    // An unmanaged topic with a producer is refused, so this one only has the graph's inlet.
    let bp = "blueprint.streamlets { graph = builtin/neo4j-merge-sink }
              blueprint.topics.d { managed = false, cluster = c, consumers = [graph.in] }";
    let v = verify(&input("graph", bp, &[&fixture("graph/overrides.conf")])).unwrap();
    assert_eq!(
        texts(&v.notes),
        ["note: Topic 'd' carries graph deltas and is not managed; whether it is compacted is its owner's."]
    );
}

#[test]
fn delete_policy_is_kept_when_set() {
    let bp = "blueprint.streamlets { mapper = mapper, graph = builtin/neo4j-merge-sink }
              blueprint.topics { in { managed = false, cluster = default, consumers = [mapper.in] }
                d { producers = [mapper.deltas], consumers = [graph.in], topic { cleanup.policy = delete } } }";
    let mut g = gen_input(input("graph", bp, &[&fixture("graph/overrides.conf")]), Some(&fixture("graph/images.conf")));
    g.version = "x".into();
    let r = generated(&g);
    assert_eq!(r.spec.topic("d").unwrap().topic_config, [("cleanup.policy".to_string(), "delete".to_string())].into());
}

#[test]
fn user_text_never_breaks_a_problem_over_lines() {
    let p = problems(&format!("{ROUTER_SINK}blueprint.topics {{ \"a\\nb\" {{ producers = [\"x\\ty.z\"] }} }}"), &[]);
    assert_eq!(p[0], "'x\\ty.z' does not point to a known streamlet inlet or outlet.");
    let p = problems(&format!("{ROUTER_SINK}blueprint.topics {{ \"a\\nb\" = 1 }}"), &[]);
    assert_eq!(p, ["The blueprint file has an invalid format:\n blueprint.topics.a\\nb must be an object"]);
}
