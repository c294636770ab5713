//! Compile-time checks of the derives: a field whose type differs from the hub's, with no override, is an error
//! that points at (and names) the field; a `status` subresource without a `status` field is an error, and so is an
//! unknown subresource name; a storage version of another hub is refused; a well-formed versioned type compiles,
//! with fallible conversions and defaults beside infallible ones.

#[test]
fn derive_ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/versioned_ok.rs");
    t.pass("tests/ui/fallible_ok.rs");
    t.compile_fail("tests/ui/conversion_mismatch.rs");
    t.compile_fail("tests/ui/status_without_field.rs");
    t.compile_fail("tests/ui/unknown_subresource.rs");
    t.compile_fail("tests/ui/storage_version_of_another_hub.rs");
}
