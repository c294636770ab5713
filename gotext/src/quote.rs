//! `strconv.Quote`.

use unicode_properties::{GeneralCategoryGroup, UnicodeGeneralCategory};

/// Quotes `s` as Go's `strconv.Quote` does (and so `fmt`'s `%q` and `%#v` of a string): in double quotes, `"` and
/// `\` escaped, printable runes (letters, marks, numbers, punctuation, symbols and the ASCII space, as
/// `strconv.IsPrint`) kept as they are, including non-ASCII ones; `\a \b \f \n \r \t \v` by name, other control
/// bytes below U+0020 and U+007F as `\xHH`, any other non-printable rune as `\uHHHH` or `\UHHHHHHHH`.
///
/// A Rust `&str` is valid UTF-8, so Go's `\xHH` for invalid bytes cannot arise. Printability follows the Unicode
/// version of the `unicode-properties` crate, which may be newer than the Go release upstream was built with: a
/// rune assigned in between is printed here and escaped there.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if is_print(c) => out.push(c),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// Go's `strconv.IsPrint` (and `unicode.IsPrint`): the ASCII space, or a rune of the Unicode categories L (letters),
/// M (marks), N (numbers), P (punctuation) or S (symbols).
pub fn is_print(c: char) -> bool {
    if c.is_ascii() {
        return (' '..='~').contains(&c);
    }
    matches!(
        c.general_category_group(),
        GeneralCategoryGroup::Letter
            | GeneralCategoryGroup::Mark
            | GeneralCategoryGroup::Number
            | GeneralCategoryGroup::Punctuation
            | GeneralCategoryGroup::Symbol
    )
}

#[cfg(test)]
mod tests {
    use super::quote;

    /// Expected texts are what Go's `strconv.Quote` returns for the same input.
    #[test]
    fn is_print_as_go() {
        for c in ['a', ' ', '~', 'é', '世', '☺', '\u{1f600}', '\u{300}'] {
            assert!(super::is_print(c), "{c:?}");
        }
        for c in [
            '\t', '\u{7f}', '\u{a0}', '\u{ad}', '\u{2028}', '\u{feff}', '\u{e000}', '\u{378}',
        ] {
            assert!(!super::is_print(c), "{c:?}");
        }
    }

    #[test]
    fn as_strconv_quote() {
        for (input, want) in [
            ("", r#""""#),
            ("abc", r#""abc""#),
            ("a\"b\\c", r#""a\"b\\c""#),
            ("\u{7}\u{8}\u{c}\n\r\t\u{b}", r#""\a\b\f\n\r\t\v""#),
            ("\u{0}\u{1b}\u{7f}", r#""\x00\x1b\x7f""#),
            // Printable non-ASCII runes are kept (Quote, not QuoteToASCII).
            ("héllo, 世界 ☺", r#""héllo, 世界 ☺""#),
            ("\u{fffd}", "\"\u{fffd}\""),
            // Non-printable: C1 controls, format characters, spaces other than U+0020, line and paragraph separators,
            // private use, unassigned.
            ("\u{85}\u{a0}\u{ad}", r#""\u0085\u00a0\u00ad""#),
            (
                "\u{200b}\u{2028}\u{2029}\u{feff}",
                r#""\u200b\u2028\u2029\ufeff""#,
            ),
            ("\u{e000}\u{10ffff}", r#""\ue000\U0010ffff""#),
            ("\u{e0001}", r#""\U000e0001""#),
            // Outside the BMP and printable: kept.
            ("\u{1f600}", "\"\u{1f600}\""),
        ] {
            assert_eq!(quote(input), want, "{input:?}");
        }
    }
}
