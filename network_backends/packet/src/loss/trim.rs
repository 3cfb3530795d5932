//! `trim`: packet trimming with SACK (NDP, UET; CC-CATALOGUE §10). A data packet that
//! meets a full queue is cut to its header and forwarded on the control priority; its
//! receiver NACKs it and the sender resends it at once. Whatever is still lost (a header
//! that found even the control queue full, a lost ACK) falls to SACK's threshold and the
//! timeout. Parameters as `sack` (`threshold`).

use super::sack::Sack;
use super::{LossInit, LossRecovery};
use crate::config::Params;
use crate::error::SimResult;

pub fn build(init: &LossInit, params: &Params) -> SimResult<Box<dyn LossRecovery>> {
    Ok(Box::new(Sack::new("trim", init, params, true)?))
}
