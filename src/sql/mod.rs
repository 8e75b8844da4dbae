//! SQL text to statements.

pub mod aggregates;
pub mod analyzer;
pub mod checked;
pub mod names;
pub mod parser;
pub mod planner;
