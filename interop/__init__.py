"""Interop with other simulators: export a run for a real ASTRA-sim, run one and parse what it
prints (`astra_sim`). It reads traces, configs and workloads, so it sits above the system layer."""
