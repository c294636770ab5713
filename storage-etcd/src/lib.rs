//! etcd v3 storage backend for the apiserver framework (in progress).
