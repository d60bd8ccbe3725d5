//! `flow reset --dry-run` and `flow reset --plan` against the real test bed: the plan per partition
//! with its warnings, nothing changed by it; the plan carried out exactly; and a group whose offsets
//! moved since the plan refused, naming the partitions.

use flow_testbed::*;

#[test]
fn a_dry_run_plans_and_a_plan_is_carried_out_only_while_the_offsets_are_as_planned() {
    let _side_by_side = side_by_side();
    let ns = "shop-plan";
    let cart = Cart::own("plan");
    let (name, group, topic) = (cart.name.as_str(), cart.group.as_str(), cart.topic.as_str());
    // 20 records per partition, committed 20/20/20; then 10 more in partitions 0 and 1, and
    // partition 0's first 25 deleted: its log start passed the committed offset.
    let _op = cart.scenario(ns, 0, &[]);
    kafka::produce(topic, 2, 10);
    kafka::delete_records(topic, 0, 25);
    let before = [(0, Some(20)), (1, Some(20)), (2, Some(20))].into();
    let dir = fresh_dir("plan");
    let file = dir.join("plan.json");
    let file_arg = file.to_str().expect("UTF-8 path");

    let o = flow(&["reset", name, "-n", ns, "--dry-run", "--plan-out", file_arg]);
    assert!(o.status.success(), "{}", show(&o));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let first = text.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("plan ") && first.ends_with(&format!(" of {ns}/{name}: to earliest (nothing was changed)"))
    );
    for row in [
        format!("{group}   {topic}   0           20          25    5"),
        format!("{group}   {topic}   1           20          0     30"),
        format!("{group}   {topic}   2           20          0     20"),
    ] {
        assert!(text.contains(&row), "{row}\n{text}");
    }
    assert!(
        text.contains(&format!(
            "{group}: would move 3 partition(s) of '{topic}' to earliest, 55 record(s) to reprocess"
        )),
        "{text}"
    );
    assert!(
        text.contains("the log start passed its committed offset in partition(s) 0 (5 record(s))"),
        "trimmed history: {text}"
    );
    assert!(text.contains(&format!("warning: {group}: the log start is moving: retention (retention.ms=")), "{text}");
    assert_eq!(kafka::committed(group, topic, 3), before, "a dry run changes nothing");
    let plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("the plan file")).expect("the plan file is JSON");
    assert_eq!(plan["pipeline"], name);
    assert_eq!(
        plan["groups"][0]["partitions"][0],
        serde_json::json!({"partition": 0, "committed": 20, "newOffset": 25, "recordsToReprocess": 5})
    );
    let plan_id = plan["id"].as_str().expect("the plan's id").to_string();

    // The same as JSON.
    let o = flow(&["reset", name, "-n", ns, "--dry-run", "-o", "json"]);
    assert!(o.status.success(), "{}", show(&o));
    let again: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(again["groups"], plan["groups"]);
    // And as YAML.
    let o = flow(&["reset", name, "-n", ns, "--dry-run", "-o", "yaml"]);
    assert!(o.status.success(), "{}", show(&o));
    let yaml: serde_json::Value =
        serde_saphyr::from_slice(&o.stdout).unwrap_or_else(|e| panic!("YAML ({e}): {}", show(&o)));
    assert_eq!(yaml["groups"], plan["groups"]);

    // Carried out exactly.
    let o = flow(&["reset", name, "-n", ns, "--plan", file_arg, "--wait", "-o", "json"]);
    assert!(o.status.success(), "{}", show(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(r["to"], format!("the offsets of plan {plan_id}"));
    assert_eq!(r["groups"][0]["message"], format!("3 partition(s) of '{topic}' to the offsets of plan {plan_id}"));
    assert_eq!(kafka::committed(group, topic, 3), [(0, Some(25)), (1, Some(0)), (2, Some(0))].into());
    // Router, started again (the stand-in plays it from its rendered Secret), reprocesses exactly what
    // the plan said: 55 records, from the planned offsets.
    let read = standin::read_as_streamlet(ns, name, "router", 55);
    assert_eq!(read["records"], 55, "{read}");
    assert_eq!(read["first"], serde_json::json!({"0": 25, "1": 0, "2": 0}), "{read}");
    assert_eq!(kafka::committed(group, topic, 3), [(0, Some(30)), (1, Some(30)), (2, Some(20))].into());

    // A new plan; the group's offsets move before it is carried out: refused, naming the partition.
    let o = flow(&["reset", name, "-n", ns, "--dry-run", "--plan-out", file_arg]);
    assert!(o.status.success(), "{}", show(&o));
    groups::commit(group, topic, &[(1, 3)]);
    let o = flow(&["reset", name, "-n", ns, "--plan", file_arg, "--wait", "-o", "json"]);
    assert_eq!(o.status.code(), Some(4), "{}", show(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let message = r["groups"][0]["message"].as_str().unwrap_or_default();
    assert!(message.contains(": partition 1 is at 3 (expected 30); nothing was committed for it (make a new plan with flow reset --dry-run)"), "{message}");
    assert_eq!(kafka::committed(group, topic, 3), [(0, Some(30)), (1, Some(3)), (2, Some(20))].into());

    // Another pipeline's plan is refused before anything is written.
    let o = flow(&["reset", name, "-n", "shop-elsewhere", "--plan", file_arg]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(
        show(&o).contains(&format!(
            "is a plan of pipeline '{name}' in namespace 'shop-plan', not of '{name}' in 'shop-elsewhere'"
        )),
        "{}",
        show(&o)
    );
}
