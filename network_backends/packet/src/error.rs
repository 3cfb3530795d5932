//! Every way a simulation can refuse its input or fail to finish. The engine
//! never panics on user input and never prints; callers render these messages.

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum SimError {
    /// A configuration value is out of range or inconsistent.
    #[error("invalid config field `{field}`: {message}")]
    InvalidConfig { field: String, message: String },

    /// A scheme (LB, CC, loss recovery) name that is not registered.
    #[error("unknown {family} scheme `{name}`; expected one of: {known}")]
    UnknownScheme {
        family: &'static str,
        name: String,
        known: String,
    },

    /// A scheme parameter that the scheme does not take, or with a bad value.
    #[error("{family} scheme `{scheme}`: parameter `{param}` {message}")]
    BadSchemeParam {
        family: &'static str,
        scheme: String,
        param: String,
        message: String,
    },

    /// A flow of the traffic input that cannot be simulated.
    #[error("flow {index}: field `{field}` {message}")]
    BadFlow {
        index: usize,
        field: &'static str,
        message: String,
    },

    /// The run stopped without completing every flow.
    #[error("simulation did not finish: {unfinished} of {total} flows incomplete at t={time_us:.3} us ({reason})")]
    DidNotFinish {
        unfinished: usize,
        total: usize,
        time_us: f64,
        reason: String,
    },
}

pub type SimResult<T> = Result<T, SimError>;

pub(crate) fn config_err(field: &str, message: impl Into<String>) -> SimError {
    SimError::InvalidConfig {
        field: field.to_string(),
        message: message.into(),
    }
}

impl From<tracefabric_fabric::FabricError> for SimError {
    fn from(e: tracefabric_fabric::FabricError) -> SimError {
        match e {
            tracefabric_fabric::FabricError::InvalidConfig { field, message } => {
                SimError::InvalidConfig { field, message }
            }
        }
    }
}
