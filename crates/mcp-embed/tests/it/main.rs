//! Integration tests of the embedding back ends.

#[cfg(feature = "local")]
mod local;
mod openai;
