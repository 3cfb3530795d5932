"""Network backends that carry flows: `packet` (tracefabric's packet-level engine) and the
analytical models (Rust crate in `analytical/`: ASTRA-sim's congestion-unaware and -aware
models and a max-min flow model, chosen with `backend=` in
`tracefabric.collectives.iteration.simulate`). `api/` is the Rust crate of the interface they
implement and the system layer drives; `fabric/` the topology and timing they share."""
