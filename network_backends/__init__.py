"""Network backends that carry flows: `packet` (tracefabric's packet-level engine), the
analytical models (Rust crate in `analytical/`: ASTRA-sim's congestion-unaware and -aware
models and a max-min flow model, chosen with `backend=` in `tracefabric.iteration.simulate`),
and `astra_sim` (export for, run and parse a real ASTRA-sim)."""
