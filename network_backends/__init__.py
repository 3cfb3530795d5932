"""Network backends that carry flows: `packet` (tracefabric's packet-level engine) today;
`analytical` and adapters for real ASTRA-sim/htsim binaries come with later issues."""
