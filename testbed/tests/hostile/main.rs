//! Hostile tenants on the real test bed: what a user who may write AnkkaFlows in one namespace tries
//! against the operator, and what stops it. One module per concern.

mod pods;
