//! A hostile tenant on the test bed: one module per class of attack (issue 26), each against the
//! real broker and API server, with the real `flow` and `flow-operator` binaries.
//!
//! - `acls`: Kafka enforces tenancy. A tenant who reads its streamlet Secret holds its namespace's
//!   own credential, not the operator's, and Kafka's own tool gets nothing of another namespace's
//!   group with it; the operator works with exactly the ACLs docs/secured-kafka.md lists, and a
//!   missing one fails a reset at once, with nothing committed.

mod acls;
