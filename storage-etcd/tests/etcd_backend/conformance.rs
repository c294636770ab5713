//! The shared storage conformance suite against a real etcd: one test per case, each on its own throwaway etcd
//! (so the cases that compact cannot expire another case's revisions).

use crate::support;

apiserver::storage_conformance!(support::fresh_store);
