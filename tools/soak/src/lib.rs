//! Resource checks of moqsink and moqsrc under misbehaving peers, and the tools for them.
//!
//! - [`peer`]: a MoQ Transport peer that writes control messages itself, so it can behave
//!   as a hostile or broken client would (never read, send garbage, flood requests).

pub mod peer;
