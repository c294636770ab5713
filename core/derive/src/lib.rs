//! Derive macros for hub and versioned API types; re-exported by `apiserver`.
