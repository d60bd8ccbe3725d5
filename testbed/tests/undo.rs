//! `flow reset undo <id>` against the real test bed: it puts back the offsets a done reset's groups
//! had before it, as a request of its own; a group that consumed since is refused, naming the
//! partitions, unless `--force`.

use flow_testbed::*;

/// Runs `flow` with `args` and `--wait -o json`; returns the final status it printed and the exit
/// code.
fn waited(args: &[&str]) -> (serde_json::Value, Option<i32>) {
    let o = flow(&[args, &["--wait", "-o", "json"]].concat());
    let r = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("JSON ({e}): {}", show(&o)));
    (r, o.status.code())
}

#[test]
fn an_undo_puts_back_the_offsets_before_a_reset_and_refuses_a_group_that_consumed_since() {
    let _side_by_side = side_by_side();
    let ns = "shop-undo";
    let cart = Cart::own("undo");
    let (name, group, topic) = (cart.name.as_str(), cart.group.as_str(), cart.topic.as_str());
    // Committed 20/20/20.
    let _op = cart.scenario(ns, 0, &[]);
    let back = [(0, Some(20)), (1, Some(20)), (2, Some(20))].into();
    let start = [(0, Some(0)), (1, Some(0)), (2, Some(0))].into();

    let (reset, code) = waited(&["reset", name, "-n", ns]);
    assert_eq!(code, Some(0), "{reset}");
    let reset_id = reset["id"].as_str().expect("the id").to_string();
    assert_eq!(kafka::committed(group, topic, 3), start);

    // A bad id is refused before anything is read; an id no pipeline knows, after.
    let o = flow(&["reset", "undo", "nope", "-n", ns]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(show(&o).contains("'nope' is not a reset request id"), "{}", show(&o));
    let o = flow(&["reset", "undo", "00000000-0000-4000-8000-000000000000", "-n", ns]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));

    let (undo, code) = waited(&["reset", "undo", &reset_id, "-n", ns]);
    assert_eq!(code, Some(0), "{undo}");
    assert_ne!(undo["id"], reset_id.as_str(), "an undo is a request of its own");
    let to = format!("the offsets before reset {reset_id}");
    assert_eq!(undo["to"], to.as_str());
    let g = &undo["groups"][0];
    assert_eq!(g["outcome"], "Reset");
    assert_eq!(g["offsetsBefore"], serde_json::json!({"0": 0, "1": 0, "2": 0}));
    assert_eq!(g["offsetsAfter"], serde_json::json!({"0": 20, "1": 20, "2": 20}));
    assert_eq!(g["message"], format!("3 partition(s) of '{topic}' to {to}"));
    assert_eq!(kafka::committed(group, topic, 3), back);
    assert!(event_notes(ns, "ResetOffsets").contains(&format!("{group}: 3 partition(s) of '{topic}' to {to}")));
    // Router, started again (the stand-in plays it from its rendered Secret), goes on where it was
    // before the reset: it reads only what came after, 5 new records per partition.
    kafka::produce(topic, 3, 5);
    let read = standin::read_as_streamlet(ns, name, "router", 15);
    assert_eq!(read["records"], 15, "{read}");
    assert_eq!(read["first"], serde_json::json!({"0": 20, "1": 20, "2": 20}), "{read}");
    let back = [(0, Some(25)), (1, Some(25)), (2, Some(25))].into();
    assert_eq!(kafka::committed(group, topic, 3), back);

    // Reset again; then the group consumes a little (a commit by hand stands for it).
    let (again, _) = waited(&["reset", name, "-n", ns]);
    let again_id = again["id"].as_str().expect("the id").to_string();
    groups::commit(group, topic, &[(0, 5), (2, 7)]);
    let (refused, code) = waited(&["reset", "undo", &again_id, "-n", ns]);
    assert_eq!(code, Some(4), "the group could not be undone: {refused}");
    let why = format!(
        "its committed offsets moved since reset {again_id}: partition 0 is at 5 (expected 0), partition 2 is at 7 \
         (expected 0); nothing was committed for it (the streamlet consumed since; to put the offsets back anyway, \
         use flow reset undo --force)"
    );
    assert_eq!(refused["groups"][0]["outcome"], "Failed");
    assert_eq!(refused["groups"][0]["message"], why.as_str());
    assert!(event_notes(ns, "ResetOffsetsFailed").contains(&format!("{group}: {why}")));
    assert_eq!(kafka::committed(group, topic, 3), [(0, Some(5)), (1, Some(0)), (2, Some(7))].into());

    let (forced, code) = waited(&["reset", "undo", &again_id, "-n", ns, "--force"]);
    assert_eq!(code, Some(0), "{forced}");
    assert_eq!(kafka::committed(group, topic, 3), back);
}
