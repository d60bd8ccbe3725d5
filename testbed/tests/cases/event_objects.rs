//! Events: case E1 of docs/field-cases.md.

use std::time::Duration;

use flow_testbed::*;

use crate::world::*;

/// E1: one request resets three groups with the same outcome: three Event objects on the API
/// server, with three names, each with its own group's note; no more after a while.
#[test]
fn e1_three_groups_give_three_events_each_with_its_own_note() {
    let case = Case::new("case-e1");
    let (ns, p) = (case.ns, case.ns);
    let names = ["alpha", "beta", "gamma"];
    let topics = ["case.e1-alpha", "case.e1-beta", "case.e1-gamma"];
    for (n, t) in names.iter().zip(topics) {
        case.topic(t, 3, 10).group_at(n, t, 3, 10);
    }
    let streamlets: Vec<Streamlet> = names.iter().zip(topics).map(|(n, t)| s(n, t, 0)).collect();
    case.apply(&streamlets);

    let id = flow_reset(ns, p, &[]);
    wait_done(ns, p, &id, Duration::from_secs(60));
    std::thread::sleep(Duration::from_secs(3));
    let got = events(ns, p, "ResetOffsets");
    let want: Vec<String> = names
        .iter()
        .zip(topics)
        .map(|(n, t)| format!("{}: 3 partition(s) of '{t}' to earliest", group(p, n)))
        .collect();
    assert_eq!(got.iter().map(|e| e.2.clone()).collect::<Vec<_>>(), want);
    let mut object_names: Vec<&String> = got.iter().map(|e| &e.0).collect();
    object_names.sort();
    object_names.dedup();
    assert_eq!(object_names.len(), 3, "three distinct Event objects: {got:?}");
    assert!(got.iter().all(|e| e.1 == "Normal"), "{got:?}");
    for (n, t) in names.iter().zip(topics) {
        assert_eq!(kafka::committed(&group(p, n), t, 3), all(3, 0));
    }
}
