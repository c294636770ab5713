//! Warnings for the client: handlers, strategies and admission plugins add texts to the request's [`Warnings`];
//! the server's warning filter writes them as `Warning: 299 - "text"` headers (RFC 7234), deduplicated and capped
//! as upstream's `WithWarningRecorder` does: at most 4096 runes of text in all, and once over that, each text cut
//! to 256 runes and further texts dropped.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// Upstream's cap on the total runes of warning text in one response.
pub const TRUNCATE_AT_TOTAL_RUNES: usize = 4 * 1024;
/// Upstream's cap on one warning's runes once the total cap was exceeded.
pub const TRUNCATE_ITEM_RUNES: usize = 256;

/// Formats one `Warning` header value (apimachinery `net.NewWarningHeader`): `299 - "text"`, with `"` and `\`
/// escaped. An empty agent is `-`. Returns `None` for an agent with spaces, quotes, backslashes or control
/// characters, or a text with control characters.
pub fn warning_header(code: u16, agent: &str, text: &str) -> Option<String> {
    if code > 999 {
        return None;
    }
    let agent = if agent.is_empty() {
        "-"
    } else if agent
        .chars()
        .any(|c| c == '"' || c == '\\' || c.is_whitespace() || c.is_control())
    {
        return None;
    } else {
        agent
    };
    if text.chars().any(char::is_control) {
        return None;
    }
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        if c == '"' || c == '\\' {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted.push('"');
    Some(format!("{code:03} {agent} {quoted}"))
}

/// Collects a response's warnings: deduplicated by text, in order, truncated as upstream.
#[derive(Debug)]
pub struct WarningRecorder {
    recorded: HashSet<String>,
    ordered: Vec<(String, String)>,
    headers: Vec<String>,
    written: usize,
    truncating: bool,
    total_limit: usize,
    item_limit: usize,
}

impl Default for WarningRecorder {
    fn default() -> Self {
        Self::with_limits(TRUNCATE_AT_TOTAL_RUNES, TRUNCATE_ITEM_RUNES)
    }
}

fn truncate_runes(text: &str, limit: usize) -> (&str, usize) {
    match text.char_indices().nth(limit) {
        Some((at, _)) => (&text[..at], limit),
        None => (text, text.chars().count()),
    }
}

impl WarningRecorder {
    /// A recorder with other limits than upstream's (for tests).
    pub fn with_limits(total_limit: usize, item_limit: usize) -> Self {
        WarningRecorder {
            recorded: HashSet::new(),
            ordered: Vec::new(),
            headers: Vec::new(),
            written: 0,
            truncating: false,
            total_limit,
            item_limit,
        }
    }

    /// Adds a warning from `agent` (empty for this server).
    pub fn add(&mut self, agent: &str, text: &str) {
        if text.is_empty() || (self.truncating && self.written >= self.total_limit) {
            return;
        }
        if !self.recorded.insert(text.to_string()) {
            return;
        }
        self.ordered.push((agent.to_string(), text.to_string()));

        let (text, runes) = if self.truncating {
            truncate_runes(text, self.item_limit)
        } else {
            (text, text.chars().count())
        };
        let Some(header) = warning_header(299, agent, text) else {
            return;
        };
        if self.written + runes <= self.total_limit || self.truncating {
            self.written += runes;
            self.headers.push(header);
            return;
        }

        // Over the limit: from now on truncate, and replay what was recorded, truncated.
        tracing::warn!("exceeded max warning header size, truncating");
        self.truncating = true;
        self.written = 0;
        self.headers.clear();
        for (agent, text) in &self.ordered {
            let (text, runes) = truncate_runes(text, self.item_limit);
            if let Some(header) = warning_header(299, agent, text) {
                self.written += runes;
                self.headers.push(header);
            }
        }
    }

    /// The `Warning` header values, in order.
    pub fn headers(&self) -> &[String] {
        &self.headers
    }
}

/// The request's warning collector, in the request's extensions: handlers take it as an extractor and call
/// [`Warnings::add`]; the texts become `Warning` headers of the response they return.
#[derive(Clone, Debug, Default)]
pub struct Warnings(Arc<Mutex<WarningRecorder>>);

impl Warnings {
    /// A fresh, empty collector.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a warning from this server (agent `-`), e.g. `spec.toppings[0]: deprecated`.
    pub fn add(&self, text: impl AsRef<str>) {
        self.add_with_agent("", text);
    }

    /// Adds a warning from another agent (e.g. a webhook's name); the agent must be one token.
    pub fn add_with_agent(&self, agent: &str, text: impl AsRef<str>) {
        if let Ok(mut recorder) = self.0.lock() {
            recorder.add(agent, text.as_ref());
        }
    }

    /// The header values recorded so far.
    pub fn headers(&self) -> Vec<String> {
        self.0
            .lock()
            .map(|r| r.headers().to_vec())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(adds: &[(&str, &str)]) -> Vec<String> {
        let mut r = WarningRecorder::default();
        for (agent, text) in adds {
            r.add(agent, text);
        }
        r.headers().to_vec()
    }

    /// Upstream's `Test_recorder_AddWarning`.
    #[test]
    fn formatting_and_dedup() {
        assert!(record(&[]).is_empty());
        assert!(record(&[("", "")]).is_empty());
        assert_eq!(record(&[("", "mytext")]), [r#"299 - "mytext""#]);
        assert_eq!(
            record(&[("myagent", "mytext")]),
            [r#"299 myagent "mytext""#]
        );
        assert_eq!(
            record(&[("myagent", "mytext"), ("myagent2", "mytext")]),
            [r#"299 myagent "mytext""#]
        );
        assert_eq!(
            record(&[("", "mytext1"), ("", "mytext2"), ("", "mytext3")]),
            [
                r#"299 - "mytext1""#,
                r#"299 - "mytext2""#,
                r#"299 - "mytext3""#
            ]
        );
        assert!(record(&[("my agent", "mytext")]).is_empty());
        assert!(record(&[("myagent", "my\ntext")]).is_empty());
        assert_eq!(
            warning_header(299, "", r#"say "hi" \o/"#).unwrap(),
            r#"299 - "say \"hi\" \\o/""#
        );
    }

    /// Upstream's `TestTruncation`, with its limits of 25 and 5 runes.
    #[test]
    fn truncation() {
        let mut r = WarningRecorder::with_limits(25, 5);
        r.add("", "aaaaaaaaaa");
        r.add("-", "aaaaaaaaaa");
        r.add("", "bb");
        r.add("", "ccc");
        r.add("", "Iñtërnâtiô");
        assert_eq!(
            r.headers(),
            [
                r#"299 - "aaaaaaaaaa""#,
                r#"299 - "bb""#,
                r#"299 - "ccc""#,
                r#"299 - "Iñtërnâtiô""#
            ]
        );
        r.add("", "e");
        r.add("", "ffffffffff");
        r.add("", "ffffffffff");
        r.add("", "gggggggggg");
        r.add("", "h");
        assert_eq!(
            r.headers(),
            [
                r#"299 - "aaaaa""#,
                r#"299 - "bb""#,
                r#"299 - "ccc""#,
                r#"299 - "Iñtër""#,
                r#"299 - "e""#,
                r#"299 - "fffff""#,
                r#"299 - "ggggg""#
            ]
        );
    }
}
