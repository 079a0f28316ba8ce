//! Frame categories (`u8`), in the seed's order.

/// A frame's category. The eleven known values have names; any other value is kept as is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Category(pub u8);

const NAMES: [&str; 11] = [
    "http", "rpc", "cli", "job", "function", "lock", "workflow", "event", "database", "email",
    "template",
];

impl Category {
    /// An HTTP request.
    pub const HTTP: Self = Self(0);
    /// A remote procedure call.
    pub const RPC: Self = Self(1);
    /// A command-line invocation.
    pub const CLI: Self = Self(2);
    /// A background job.
    pub const JOB: Self = Self(3);
    /// A function call (the default).
    pub const FUNCTION: Self = Self(4);
    /// Waiting for or holding a lock.
    pub const LOCK: Self = Self(5);
    /// A workflow step.
    pub const WORKFLOW: Self = Self(6);
    /// An event being emitted or handled.
    pub const EVENT: Self = Self(7);
    /// A database query.
    pub const DATABASE: Self = Self(8);
    /// Sending an email.
    pub const EMAIL: Self = Self(9);
    /// Rendering a template.
    pub const TEMPLATE: Self = Self(10);

    /// All named categories, in value order.
    pub const ALL: [Self; 11] = [
        Self::HTTP,
        Self::RPC,
        Self::CLI,
        Self::JOB,
        Self::FUNCTION,
        Self::LOCK,
        Self::WORKFLOW,
        Self::EVENT,
        Self::DATABASE,
        Self::EMAIL,
        Self::TEMPLATE,
    ];

    /// The category's name, or `None` for a value this version does not know.
    pub fn name(self) -> Option<&'static str> {
        NAMES.get(self.0 as usize).copied()
    }

    /// Looks a category up by name (case-insensitive), or parses a plain number.
    pub fn parse(s: &str) -> Option<Self> {
        let lower = s.to_ascii_lowercase();
        NAMES
            .iter()
            .position(|n| *n == lower)
            .map(|i| Self(i as u8))
            .or_else(|| s.parse::<u8>().ok().map(Self))
    }
}

impl std::fmt::Display for Category {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "category-{}", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_seed_order() {
        assert_eq!(Category::HTTP.name(), Some("http"));
        assert_eq!(Category::DATABASE.name(), Some("database"));
        assert_eq!(Category::TEMPLATE.name(), Some("template"));
        for (i, c) in Category::ALL.iter().enumerate() {
            assert_eq!(c.0 as usize, i);
            assert_eq!(Category::parse(c.name().unwrap()), Some(*c));
        }
    }

    #[test]
    fn unknown_values_are_shown_not_rejected() {
        let c = Category(200);
        assert_eq!(c.name(), None);
        assert_eq!(c.to_string(), "category-200");
        assert_eq!(Category::parse("200"), Some(c));
        assert_eq!(Category::parse("nonsense"), None);
    }
}
