//! Wire types of the three envelopes and the strict JSON reader they are read with.

pub mod canonical;
pub mod json;
