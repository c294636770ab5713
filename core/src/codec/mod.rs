//! codec
