//! `flow reset --wait` and `flow reset status <id>` against the real test bed: the request's phase and
//! each group's outcome, offsets and records to reprocess, read from the status the operator writes.

use flow_testbed::*;

#[test]
fn reset_status_reports_each_group_field_by_field() {
    let _side_by_side = side_by_side();
    let ns = "shop-status";
    let cart = Cart::own("status");
    let (name, group, topic) = (cart.name.as_str(), cart.group.as_str(), cart.topic.as_str());
    let _op = cart.scenario(ns, 0, &[]);

    let o = flow(&["reset", name, "-n", ns, "--wait"]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{out}{}", String::from_utf8_lossy(&o.stderr));
    let mut lines = out.lines();
    let id = lines
        .next()
        .and_then(|l| l.strip_prefix(&format!("reset requested for '{name}': ")))
        .expect("the request line first");
    assert_eq!(lines.next(), Some(format!("reset {id} of {ns}/{name}: Done").as_str()));
    assert!(out.contains(&format!("{group}   {topic}   3            60        Reset")), "{out}");

    // Found by id alone, in whatever namespace.
    let o = flow(&["reset", "status", id, "-o", "json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(r["id"], id);
    assert_eq!(r["namespace"], ns);
    assert_eq!(r["pipeline"], name);
    assert_eq!(r["phase"], "Done");
    assert_eq!(r["detail"], "");
    assert!(r["requestedAt"].as_str().is_some_and(|t| t.ends_with('Z')), "{r}");
    assert!(r["finishedAt"].as_str().is_some_and(|t| t >= r["requestedAt"].as_str().unwrap_or_default()), "{r}");
    let g = &r["groups"][0];
    assert_eq!(r["groups"].as_array().map(Vec::len), Some(1));
    assert_eq!(g["group"], group);
    assert_eq!(g["topic"], topic);
    assert_eq!(g["outcome"], "Reset");
    assert_eq!(g["message"], format!("3 partition(s) of '{topic}' to earliest"));
    assert_eq!(g["partitions"], 3);
    assert_eq!(g["recordsToReprocess"], 60);
    assert_eq!(g["offsetsBefore"], serde_json::json!({"0": 20, "1": 20, "2": 20}));
    assert_eq!(g["offsetsAfter"], serde_json::json!({"0": 0, "1": 0, "2": 0}));

    // YAML says the same; narrowing by namespace and pipeline finds it too.
    let o = flow(&["reset", "status", id, "-n", ns, "--pipeline", name, "-o", "yaml"]);
    assert!(o.status.success());
    let y: serde_json::Value = serde_saphyr::from_str(&String::from_utf8_lossy(&o.stdout)).expect("YAML");
    assert_eq!(y, r);

    // An unknown id is a clear error.
    let o = flow(&["reset", "status", "00000000-0000-4000-8000-000000000000", "-n", ns]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .starts_with(&format!("no reset request '00000000-0000-4000-8000-000000000000' in namespace '{ns}'")),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
