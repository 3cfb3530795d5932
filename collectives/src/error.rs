//! Every way the workload and system layers refuse their input or fail to finish.
//! Messages name the trace file, the node id and the field, as users need them.

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum SystemError {
    /// The workload itself is inconsistent (sizes differ across a group, a send has
    /// no receive, an unknown group, ...).
    #[error("{file}: node {node}: {message}")]
    Workload {
        file: String,
        node: u64,
        message: String,
    },

    /// The system configuration cannot run this workload (unknown algorithm, a
    /// power-of-two algorithm on 6 ranks, ...).
    #[error("system config `{field}`: {message}")]
    Config { field: String, message: String },

    /// Nodes were left waiting when nothing else could happen.
    #[error("deadlock: {message}")]
    Deadlock { message: String },

    /// Simulated time would pass the picosecond clock's range (an input out of scale).
    #[error("clock: {message}")]
    Clock { message: String },

    /// The network backend refused a flow or failed.
    #[error("network backend: {0}")]
    Network(String),
}

pub type SystemResult<T> = Result<T, SystemError>;
