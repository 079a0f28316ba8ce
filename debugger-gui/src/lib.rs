//! framelog's live flamegraph debugger: the model (plain Rust) and the egui app that draws it.

pub mod model;
