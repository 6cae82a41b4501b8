//! The measurement mesh: many hosts tested pair by pair (see DESIGN.md).

pub mod hosts;
