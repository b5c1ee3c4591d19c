//! Wire types of the three envelopes and the strict JSON reader they are read with.

pub mod bridge;
pub mod canonical;
pub mod json;
pub mod request;
pub mod result;
