//! How a fabric refuses its configuration: the field and what was expected.

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum FabricError {
    /// A configuration value is out of range or inconsistent.
    #[error("invalid config field `{field}`: {message}")]
    InvalidConfig { field: String, message: String },
}

pub type FabricResult<T> = Result<T, FabricError>;

pub fn config_err(field: &str, message: impl Into<String>) -> FabricError {
    FabricError::InvalidConfig {
        field: field.to_string(),
        message: message.into(),
    }
}
