//! Integration tests of the OpenAI-compatible embeddings endpoint.

mod openai;
