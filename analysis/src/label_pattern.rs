//! [`LabelPattern`]: the one rule for matching frame labels, shared by `framelog dump --label`
//! and the debugger's search.
//!
//! Patterns are case-insensitive:
//! - `"text"` in double quotes matches the whole label exactly;
//! - a pattern with `*`, `?` or `[` is a glob over the whole label (`*` also crosses `/`);
//! - anything else matches labels that contain it.

/// A parsed label pattern. Two patterns are equal when their texts are.
#[derive(Debug, Clone)]
pub struct LabelPattern {
    text: String,
    kind: Kind,
}

impl PartialEq for LabelPattern {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for LabelPattern {}

#[derive(Debug, Clone)]
enum Kind {
    Exact(String),
    Glob(globset::GlobMatcher),
    Contains(String),
}

impl LabelPattern {
    /// Parses `text` (surrounding spaces ignored); `Ok(None)` for an empty pattern.
    pub fn parse(text: &str) -> Result<Option<Self>, String> {
        let t = text.trim();
        if t.is_empty() {
            return Ok(None);
        }
        let kind = if t.len() >= 2 && t.starts_with('"') && t.ends_with('"') {
            Kind::Exact(t[1..t.len() - 1].to_lowercase())
        } else if t.contains(['*', '?', '[']) {
            let glob = globset::GlobBuilder::new(t)
                .case_insensitive(true)
                .literal_separator(false)
                .build()
                .map_err(|e| format!("bad label pattern {t:?}: {}", e.kind()))?;
            Kind::Glob(glob.compile_matcher())
        } else {
            Kind::Contains(t.to_lowercase())
        };
        Ok(Some(Self {
            text: t.to_owned(),
            kind,
        }))
    }

    /// The pattern as typed (trimmed).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The pattern that matches exactly `label` (quoted).
    pub fn exact_text(label: &str) -> String {
        format!("\"{label}\"")
    }

    /// Whether `label` matches.
    pub fn matches(&self, label: &str) -> bool {
        match &self.kind {
            Kind::Exact(p) => label.to_lowercase() == *p,
            Kind::Contains(p) => label.to_lowercase().contains(p.as_str()),
            Kind::Glob(g) => g.is_match(label),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, label: &str) -> bool {
        LabelPattern::parse(p).unwrap().unwrap().matches(label)
    }

    #[test]
    fn one_rule_for_every_kind_of_pattern() {
        assert!(m("db", "DB/query") && !m("db", "http"));
        assert!(m("\"User: Select\"", "user: select") && !m("\"User\"", "User: Select"));
        assert!(m("http/*", "HTTP/get/users") && m("User: *", "User: Select"));
        assert!(m("a?c", "abc") && !m("a?c", "abbc") && m("[ab]x", "bx"));
        assert!(LabelPattern::parse("  ").unwrap().is_none());
        assert!(
            LabelPattern::parse("[")
                .unwrap_err()
                .contains("bad label pattern")
        );
        assert_eq!(LabelPattern::exact_text("x"), "\"x\"");
    }
}
