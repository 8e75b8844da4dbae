//! SQL text to statements.

pub mod names;
pub mod parser;
pub mod planner;
