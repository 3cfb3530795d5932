//! Analytical network backends, each a `tracefabric_netapi::Network`:
//!
//! - `unaware`: ASTRA-sim 2.x's congestion-unaware model: a message takes
//!   hops x latency + bytes / bandwidth (truncated to whole ns), whatever else is in flight.
//! - `aware`: ASTRA-sim 2.x's congestion-aware model: every link is a FIFO that stores and
//!   forwards whole messages.
//! - `flow`: a physically sound flow-level model: max-min fair fluid sharing of every link
//!   (with multipath splitting on fat trees), cut-through (a flow's last byte arrives one
//!   path latency after it leaves), ACK and header overheads when the packet framing is given.
//!
//! `topology` holds ASTRA-sim's multi-dimensional analytical topologies (Ring,
//! FullyConnected, Switch per dimension). `scale_up` puts GPUs in servers in front of a
//! packet fabric's backend (flow or packet level): a flow-level scale-up domain per server.

pub mod aware;
pub mod flow;
pub mod scale_up;
mod slab;
pub mod topology;
pub mod unaware;

pub use topology::{AstraTopology, DimKind, DimSpec};

#[cfg(test)]
mod tests {
    use super::*;
    use tracefabric_netapi::{FlowRequest, Network};

    fn switch(n: u32) -> AstraTopology {
        AstraTopology::new(vec![DimSpec {
            kind: DimKind::Switch,
            npus: n,
            bandwidth_gbps: 50.0,
            latency_ns: 500.0,
        }])
        .unwrap()
    }

    /// Two 128 KiB messages from NPU 0 to NPU 1, both at t = 0.
    fn two_messages_from_0_to_1(net: &mut dyn Network) {
        for id in 0..2 {
            net.start_flow(
                FlowRequest {
                    id,
                    src: 0,
                    dst: 1,
                    bytes: 131_072,
                },
                0,
            )
            .unwrap();
        }
    }

    fn drain(net: &mut dyn Network) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        while let Some(c) = net.next_completion(u64::MAX).unwrap() {
            out.push(c);
        }
        out
    }

    #[test]
    fn unaware_ignores_contention() {
        let mut net = unaware::Unaware::new(switch(4));
        two_messages_from_0_to_1(&mut net);
        // int(2 x 500 + 131072 / 53.6870912) = 3441 ns, for both.
        assert_eq!(drain(&mut net), vec![(3_441_000, 0), (3_441_000, 1)]);
    }

    #[test]
    fn aware_stores_and_forwards_and_queues() {
        let mut net = aware::Aware::new(switch(4));
        two_messages_from_0_to_1(&mut net);
        // Serialization 2441 ns per link, +500 ns latency per hop; the second waits one serialization per link.
        assert_eq!(
            drain(&mut net),
            vec![(2 * 2_941_000, 0), (2 * 2_941_000 + 2_441_000, 1)]
        );
    }

    #[test]
    fn flow_model_shares_a_link_fairly() {
        let mut net = flow::FlowModel::on_astra(switch(4));
        let bytes = 1u64 << 24; // 312.5 us alone at 50 GB/s
        net.start_flow(
            FlowRequest {
                id: 0,
                src: 0,
                dst: 2,
                bytes,
            },
            0,
        )
        .unwrap();
        net.start_flow(
            FlowRequest {
                id: 1,
                src: 1,
                dst: 2,
                bytes,
            },
            0,
        )
        .unwrap();
        net.start_flow(
            FlowRequest {
                id: 2,
                src: 3,
                dst: 0,
                bytes,
            },
            0,
        )
        .unwrap();
        let done = drain(&mut net);
        // Flow 2 is alone; flows 0 and 1 share the link into NPU 2 at half rate each.
        assert_eq!(done[0], (312_500_000 + 1_000_000, 2));
        assert_eq!(done[1].0, 625_000_000 + 1_000_000);
        assert_eq!(done[2].0, 625_000_000 + 1_000_000);
    }

    #[test]
    fn ring_routes_the_short_way() {
        let t = AstraTopology::new(vec![DimSpec {
            kind: DimKind::Ring,
            npus: 8,
            bandwidth_gbps: 1.0,
            latency_ns: 1.0,
        }])
        .unwrap();
        assert_eq!(t.hops_in_dim(0, 0, 7), 1);
        assert_eq!(t.hops_in_dim(0, 1, 5), 4);
        let mut route = Vec::new();
        t.route(0, 6, &mut route);
        assert_eq!(
            route.iter().map(|r| (r.1 .1, r.1 .2)).collect::<Vec<_>>(),
            vec![(0, 7), (7, 6)]
        );
    }
}
