"""htsim interop: its connection-matrix format (`cm`), writing a traffic or a collective's
flows as one (with triggers for a collective's step dependencies) beside the `htsim_uec`
flags for the same fabric (`export`), and reading htsim's per-flow output (`output`)."""
