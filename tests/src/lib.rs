//! Helpers shared by the integration tests and their child-process binaries.
