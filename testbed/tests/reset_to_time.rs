//! `flow reset --to-datetime` and `--by-duration` against the real test bed: each partition goes to
//! its first offset whose record's timestamp is at or after the instant, a partition without such a
//! record to its log end with a warning, and the events and the status say where the group went.

use std::time::Duration;

use flow_testbed::*;

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn a_reset_to_a_time_goes_to_the_first_record_at_or_after_it() {
    let _side_by_side = side_by_side();
    let ns = "shop-to-time";
    let cart = Cart::own("to-time");
    let (name, group, topic) = (cart.name.as_str(), cart.group.as_str(), cart.topic.as_str());
    // 20 records in each of 3 partitions, read: committed 20/20/20.
    let _op = cart.scenario(ns, 0, &[]);

    // A time after those records; 10 later ones in partitions 0 and 1 only, read too (30/30/20).
    std::thread::sleep(Duration::from_millis(20));
    // In milliseconds, as record timestamps and the status are.
    let now = k8s_openapi::jiff::Timestamp::now().as_millisecond();
    let mid = k8s_openapi::jiff::Timestamp::from_millisecond(now).expect("now is a valid instant");
    std::thread::sleep(Duration::from_millis(20));
    kafka::produce(topic, 2, 10);
    standin::read(group, topic, 20);
    assert_eq!(kafka::committed(group, topic, 3), [(0, Some(30)), (1, Some(30)), (2, Some(20))].into());

    // A typo is refused before anything is read or written.
    let o = flow(&["reset", name, "-n", ns, "--to-datetime", "yesterday"]);
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(show(&o).contains("--to-datetime 'yesterday' is not an RFC 3339 instant"), "{}", show(&o));
    assert!(annotation(ns, name, cart::REQUEST).is_none(), "nothing was requested");

    let at = mid.to_string();
    let o = flow(&["reset", name, "-n", ns, "--to-datetime", &at, "--wait", "-o", "json"]);
    assert!(o.status.success(), "{}", show(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(r["phase"], "Done");
    assert_eq!(r["to"], at);
    let g = &r["groups"][0];
    assert_eq!(g["outcome"], "Reset");
    assert_eq!(g["offsetsBefore"], serde_json::json!({"0": 30, "1": 30, "2": 20}));
    assert_eq!(g["offsetsAfter"], serde_json::json!({"0": 20, "1": 20, "2": 20}));
    assert_eq!(g["recordsToReprocess"], 20);
    let went = format!(
        "3 partition(s) of '{topic}' to {at}; partition(s) 2 have no record at or after {at} and went to the log end"
    );
    assert_eq!(g["message"], went);
    assert_eq!(kafka::committed(group, topic, 3), [(0, Some(20)), (1, Some(20)), (2, Some(20))].into());
    assert_eq!(event_notes(ns, "ResetOffsets"), [format!("{group}: {went}")]);
    assert_eq!(
        event_notes(ns, "ResetOffsetsWarning"),
        [format!("{group}: partition(s) 2 have no record at or after {at} and went to the log end")]
    );
    // Router, started again (the stand-in plays it from its rendered Secret), reads the records from
    // the instant on, and nothing before it.
    let read = standin::read_as_streamlet(ns, name, "router", 20);
    assert_eq!(read["records"], 20, "{read}");
    assert_eq!(read["first"], serde_json::json!({"0": 20, "1": 20}), "{read}");
    // The text of flow reset status names the time.
    let id = r["id"].as_str().expect("the id");
    let text = stdout(&flow(&["reset", "status", id, "-n", ns]));
    assert!(text.contains(&format!("\nto: {at}\n")), "{text}");

    // --by-duration: an hour ago is before every record, so every partition goes to its log start.
    let before = k8s_openapi::jiff::Timestamp::now().as_millisecond();
    let o = flow(&["reset", name, "-n", ns, "--by-duration", "PT1H", "--wait", "-o", "json"]);
    let after = k8s_openapi::jiff::Timestamp::now().as_millisecond();
    assert!(o.status.success(), "{}", show(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let to = r["to"].as_str().expect("the instant an hour ago").to_string();
    let to_ms = to.parse::<k8s_openapi::jiff::Timestamp>().expect("RFC 3339").as_millisecond();
    assert!((before - 3_600_000..=after - 3_600_000).contains(&to_ms), "{to} is an hour before the request");
    assert_eq!(r["groups"][0]["offsetsAfter"], serde_json::json!({"0": 0, "1": 0, "2": 0}));
    assert_eq!(r["groups"][0]["message"], format!("3 partition(s) of '{topic}' to {to}"));
    assert_eq!(kafka::committed(group, topic, 3), [(0, Some(0)), (1, Some(0)), (2, Some(0))].into());
    let read = standin::read_as_streamlet(ns, name, "router", 70);
    assert_eq!(read["first"], serde_json::json!({"0": 0, "1": 0, "2": 0}), "{read}");
}
