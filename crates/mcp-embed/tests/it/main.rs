//! Integration tests of the embedding back ends.

mod openai;
