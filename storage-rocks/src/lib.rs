//! Embedded RocksDB storage backend for the apiserver framework (in progress).
