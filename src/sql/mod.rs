//! SQL text to statements.

pub mod parser;
