//! `mswift` (OFAN paper §4 and §8.3, after MSwift, arXiv 2509.07907; CC-CATALOGUE §5):
//! Swift made to survive packet spraying. It is `swift`'s core (same target, increase,
//! decrease, pacing, parameters and defaults) with the two changes the OFAN paper names:
//!
//! 1. **Median of recent delays** instead of the latest sample ("a new mechanism based
//!    on observing recent ACKs that avoids Swift's throughput collapse"). Sprayed
//!    packets of one flow cross different paths; Swift cuts the window of the whole flow
//!    on any one slow path's sample, again every round trip, and collapses. The median
//!    of the last `median_window` ACKs' delays ignores a slow minority of paths.
//!    Default **9**: the smallest odd window that rejects 4 outliers; 9 ACKs of full
//!    packets are 0.37 µs at 800 Gbps, 6 % of the 6.25 µs round trip, so a real queue
//!    (seen on most paths) still moves the median within the same round trip, and the
//!    median lags the newest sample by at most 4 packets. (The MSwift preprint's window
//!    could not be confirmed, CC-CATALOGUE §14.)
//! 2. **Duplicate-ACK tolerance** (the LTCP-style handling of out-of-order ACKs): a loss
//!    is inferred only when the highest ACK runs more than `dup_acks` packets ahead of the
//!    lowest unacknowledged one (see `reorder`). Default **32**, the threshold the OFAN
//!    paper found best for SACK on a permutation (§8.2, and `sack`'s default), instead of
//!    TCP's 3, which sprayed packets exceed all the time.
//!
//! Loss recovery is SACK's (`loss = "sack"`, the `mswift_sack` preset); as everywhere in
//! tracefabric it is a separate family, so the CC only cuts its window on the inferred
//! losses, NACKs and timeouts.

use super::swift::{build_variant, Variant};
use super::{CcInit, CongestionControl};
use crate::config::Params;
use crate::error::SimResult;

pub fn build(init: &CcInit, params: &Params) -> SimResult<Box<dyn CongestionControl>> {
    let mswift = Variant {
        median_window: 9,
        dup_acks: 32,
    };
    build_variant("mswift", &mswift, init, params)
}
