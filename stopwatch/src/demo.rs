//! The demo workload (placeholder while being written).
