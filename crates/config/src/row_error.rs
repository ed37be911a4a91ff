//! What is wrong with one row of a config table.

/// A row's problem: the column at fault and what is wrong with its value. Shown as
/// `column: problem`; the table and row are named by whoever reads the row.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{column}: {problem}")]
pub struct RowError {
    /// The column (or columns, comma-separated) at fault.
    pub column: &'static str,
    /// What is wrong with it.
    pub problem: String,
}

impl RowError {
    /// `column`'s value is wrong because of `problem`.
    pub fn new(column: &'static str, problem: impl Into<String>) -> Self {
        RowError {
            column,
            problem: problem.into(),
        }
    }
}
