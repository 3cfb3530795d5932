//! The contract between the system layer (`collectives/`) and a network backend
//! (`network_backends/*`), in the spirit of ASTRA-sim's network API: the system layer
//! starts flows and asks for completions; the backend owns its clock and its model.
//!
//! Time is integer picoseconds everywhere. A backend must be deterministic: the same
//! sequence of calls gives the same completions, bit for bit.

/// Simulated time or a duration, in picoseconds.
pub type Ps = u64;

pub const PS_PER_NS: Ps = 1_000;

/// Times stay below 2^62 ps (53 days), so the sum of any two never wraps. A backend or
/// the system layer refuses an input that would carry its clock past this.
pub const CLOCK_LIMIT_PS: Ps = 1 << 62;

/// One message between two endpoints (NPU ranks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowRequest {
    /// Chosen by the system layer; handed back on completion.
    pub id: u64,
    pub src: u32,
    pub dst: u32,
    pub bytes: u64,
}

pub trait Network {
    /// Number of endpoints (NPUs) the network connects.
    fn endpoints(&self) -> u32;

    /// Start a flow at time `at` (never earlier than the last completion handed out).
    fn start_flow(&mut self, flow: FlowRequest, at: Ps) -> Result<(), String>;

    /// Run the network until its next flow completion, but only through events strictly
    /// before `limit`. Returns the completion (time the last byte is delivered, flow id)
    /// or `None` when nothing completes before `limit`.
    fn next_completion(&mut self, limit: Ps) -> Result<Option<(Ps, u64)>, String>;

    /// Backend-specific counters for the report (events processed, drops, ...).
    fn counters(&self) -> Vec<(String, u64)> {
        Vec::new()
    }
}
