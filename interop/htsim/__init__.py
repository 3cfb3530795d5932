"""htsim interop: writing a traffic or a collective's flows as a connection matrix (with
triggers for a collective's step dependencies) beside the `htsim_uec` flags for the same fabric
(`export`), and reading htsim's per-flow output (`output`). The connection-matrix format itself
is read and written by the packet engine's traffic files (`network_backends/packet/cm.py`)."""
