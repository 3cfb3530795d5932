//! `mswift` (OFAN paper §4 and §8.3, after MSwift, arXiv 2509.07907; CC-CATALOGUE §5):
//! Swift made to survive packet spraying. It is `swift`'s core (same target, increase,
//! decrease, pacing, parameters and defaults) with the two changes the OFAN paper names:
//!
//! 1. **Median of recent delays** instead of the latest sample ("a new mechanism based
//!    on observing recent ACKs that avoids Swift's throughput collapse"). Sprayed
//!    packets of one flow cross different paths; Swift cuts the window of the whole flow
//!    on any one slow path's sample, again every round trip, and collapses. The median
//!    of the last H ACKs' delays ignores a slow minority of paths. H = max(W/2, 1) with W
//!    the window in packets (the MSwift preprint's Eq. 8, v2): about half a round trip of
//!    ACKs, so a queue on most paths moves the median within the round trip and a small
//!    window keeps reacting to its latest samples; at most 128 (`median_window` fixes H).
//! 2. **Duplicate-ACK tolerance** (the LTCP-based handling of out-of-order ACKs; Lazy
//!    TCP waits out reordering before it backs off): reordering is not taken for loss,
//!    so only NACKs and timeouts cut the window for a loss. `dup_acks` = n > 0 cuts it
//!    when the highest ACK runs more than n packets ahead of the lowest unacknowledged
//!    one (see `reorder`; Swift's is TCP's 3).
//!
//! Loss recovery is a separate family, as everywhere in tracefabric: the `mswift_sack`
//! preset resends SACK holes past UET SLEEK's reordering tolerance (1.5 windows), the
//! transport of the UET htsim in which MSwift's authors built it.

use super::swift::{build_variant, Variant};
use super::{CcInit, CongestionControl};
use crate::config::Params;
use crate::error::SimResult;

pub fn build(init: &CcInit, params: &Params) -> SimResult<Box<dyn CongestionControl>> {
    let mswift = Variant {
        median: true,
        dup_acks: 0,
    };
    build_variant("mswift", &mswift, init, params)
}
