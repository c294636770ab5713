//! The benchmark harness's tests, one test binary (each file a module): the server is linked once per change
//! instead of once per file.

mod delegated;
mod quick;
mod scale;
