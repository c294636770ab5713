//! The wardle sample's tests, one test binary (each file a module): the server is linked once per change.

mod kubectl;
mod round_trip;
