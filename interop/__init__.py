"""Interop with other simulators: export a run for a real ASTRA-sim, run one and parse what it
prints (`astra_sim`); export a traffic or a collective for htsim and parse its output (`htsim`).
They read traces, configs and workloads, so they sit above the system layer."""
