//! Compile-time checks of the derives: a field whose type differs from the hub's, with no override, is an error
//! that points at (and names) the field; a `status` subresource without a `status` field is an error; a well-formed
//! versioned type compiles.

#[test]
fn derive_ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/versioned_ok.rs");
    t.compile_fail("tests/ui/conversion_mismatch.rs");
    t.compile_fail("tests/ui/status_without_field.rs");
}
