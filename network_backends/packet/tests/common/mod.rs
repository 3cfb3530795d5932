//! Checks every integration test applies to a finished run.

use tracefabric_packet::Report;

/// Bytes sent = delivered + dropped + trimmed (blackholed among the dropped), nothing left in
/// flight, every flow finished, and the CCT not below its lower bound.
pub fn conserved(r: &Report, what: &str) {
    assert_eq!(
        r.data_bytes_sent,
        r.data_bytes_delivered + r.data_bytes_dropped + r.data_bytes_trimmed,
        "{what}"
    );
    assert!(r.data_bytes_blackholed <= r.data_bytes_dropped, "{what}");
    assert_eq!(r.packets_alive_at_end, 0, "{what}");
    assert!(
        r.flows.iter().all(|f| f.finish_ps > 0),
        "{what}: a flow did not finish"
    );
    assert!(
        r.cct_ps >= r.lower_bound_ps,
        "{what}: CCT {} beat its bound {}",
        r.cct_ps,
        r.lower_bound_ps
    );
}
