//! The field cases of docs/field-cases.md, one end-to-end test each, on the real
//! test bed (Kafka 4.1 broker, Kubernetes control plane with kwok) with the real `flow` and
//! `flow-operator` binaries.
//!
//! Every test has its own namespace (`case-…`), its own pipeline name and so its own consumer groups
//! (`case-<x>.<streamlet>.<inlet>`), and its own topics (`case.<x>-…`). The pipelines come from the
//! real `flow generate`, run on a blueprint built from the cart example's descriptor (see
//! `flow_testbed::pipeline_yaml`). They deliberately do not share `shop.cart-events.v1` or `cart.router.in` with the
//! other test binaries, nor anything with each other: they are isolated, and run side by side with
//! each other and with the other isolated tests (`flow_testbed::side_by_side`, docs/testbed.md), where
//! a stray member or a topic recreated under a running test would break it.
//!
//! Covered here: A1, A2, A3, A4 (a member present at the operator's inspection), A5, B1 (with B2's
//! read-back), B3, B4, C1 (on the main broker, which does not auto-create topics), C2, C3, E1, F1
//! (first half), F3.
//!
//! A3 found that the classic DescribeGroups answers `Dead` with 0 members for a consumer-protocol
//! (KIP-848) group with a live member; the operator now describes groups with DescribeConsumerGroups,
//! and [`a3_a_consumer_protocol_member_is_seen_as_a_member_before_any_commit`] checks it.
//!
//! Covered in other test files:
//! - A4 on the commit path (a consumer joins the group between the operator's inspection and its
//!   commit, so Kafka answers UNKNOWN_MEMBER_ID / REBALANCE_IN_PROGRESS, which must read as consumers
//!   still active, with Kafka's reason): `commit_failures.rs`
//!   (`a4_a_member_that_joins_before_the_commit_is_refused_by_kafka_and_the_reset_waits_for_it`), placed
//!   with the operator's pause fault point (`FLOW_FAULT_PAUSE_AT=after-intent`).
//! - B5 (a partition added between reading metadata and committing) and F1's second half (a consumer
//!   committing right after the reset's read-back, caught by the settle and a second read-back):
//!   `settle.rs`.
//! - C1 as reported, on the test bed's second broker, which has `auto.create.topics.enable=true`:
//!   `autocreate.rs`. `kafka_faults::c1_a_missing_topic_is_a_failure_naming_it_and_creates_nothing` here covers
//!   the rest of it on the main broker.
//! - C4 (a topic deleted, or recreated with fewer partitions, between the fence and the commit; offsets
//!   that read back otherwise than committed): `commit_failures.rs`, with the same pause fault point.
//!   A commit refused for lack of rights on one topic needs an authorizer, which the test bed's broker
//!   does not run (a test-bed change), and is not covered.
//! - F2 (a request pending when the operator starts, before its caches sync), and F1 with a
//!   Terminating pod whose container commits on close: `running.rs`.
//! - C5 (SASL/PLAIN): `security/`, on the test bed broker's SASL listener.
//! - D1 and D5: `exactly_once.rs`.
//!
//! Not covered, and why:
//! - C3's "batched lookups" is not observable from outside on one local broker; only the duration is
//!   measured.
//! - D2–D4 and E2 are not covered here.
//!
//! The tests are grouped by the kinds of docs/field-cases.md; `world` holds the fixture builder
//! ([`world::Case`]) and what the tests read back.

mod activity;
mod earliest;
mod event_objects;
mod kafka_faults;
mod running;
mod world;
