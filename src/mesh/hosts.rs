//! Hosts lists (placeholder until written).
