//! The `tracefabric._core` extension: the only crate that knows about Python.
//! Engine crates stay free of PyO3; this file converts configs in and results out.

use pyo3::create_exception;

mod servers;
mod tables;

/// mimalloc for everything Rust allocates (Python's objects keep Python's allocator).
/// The engine keeps thousands of small per-port and per-flow buffers; mimalloc packs
/// same-sized ones together, which measured 7-8% fewer L1 and L2 misses and ~5% less
/// CPU time than glibc malloc on the all-to-all benchmark (c), and no worse elsewhere.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tracefabric_analytical::scale_up;
use tracefabric_packet::network_api::{DrivenPacket, EngineFactory, Windows};
use tracefabric_packet::reuse::ReuseMode;
use tracefabric_packet::{Fabric, SimConfig, SimError, Simulation};

create_exception!(
    _core,
    EngineError,
    PyException,
    "An error raised by the Rust engine: args = (variant, message, fields)."
);

fn to_py_err(e: SimError) -> PyErr {
    let message = e.to_string();
    let (variant, fields): (&str, Vec<(&str, String)>) = match &e {
        SimError::InvalidConfig { field, .. } => ("InvalidConfig", vec![("field", field.clone())]),
        SimError::UnknownScheme {
            family,
            name,
            known,
        } => (
            "UnknownScheme",
            vec![
                ("family", family.to_string()),
                ("name", name.clone()),
                ("known", known.clone()),
            ],
        ),
        SimError::BadSchemeParam {
            family,
            scheme,
            param,
            ..
        } => (
            "BadSchemeParam",
            vec![
                ("family", family.to_string()),
                ("scheme", scheme.clone()),
                ("param", param.clone()),
            ],
        ),
        SimError::BadFlow { index, field, .. } => (
            "BadFlow",
            vec![("index", index.to_string()), ("field", field.to_string())],
        ),
        SimError::DidNotFinish {
            unfinished, total, ..
        } => (
            "DidNotFinish",
            vec![
                ("unfinished", unfinished.to_string()),
                ("total", total.to_string()),
            ],
        ),
    };
    EngineError::new_err((
        variant.to_string(),
        message,
        fields
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect::<Vec<_>>(),
    ))
}

/// Build a packet-level simulation (topology, traffic, schemes, every check) without
/// running it: a comparison checks all its configs before the first run.
#[pyfunction]
fn check_packet(py: Python<'_>, config_json: &str) -> PyResult<()> {
    let cfg = SimConfig::from_json(config_json).map_err(to_py_err)?;
    py.allow_threads(|| Simulation::new(cfg).map(drop))
        .map_err(to_py_err)
}

/// Run one packet-level simulation. `config_json` follows `SimConfig`; `progress`,
/// if given, is called as progress(done_flows, total_flows) and may return a false value
/// to cancel.
#[pyfunction]
#[pyo3(signature = (config_json, progress=None))]
fn simulate_packet(
    py: Python<'_>,
    config_json: &str,
    progress: Option<PyObject>,
) -> PyResult<PyObject> {
    let cfg = SimConfig::from_json(config_json).map_err(to_py_err)?;
    let sim = Simulation::new(cfg).map_err(to_py_err)?;
    // A signal (Ctrl-C) or the callback's own exception stops the run and is raised as
    // itself, not as a cancellation.
    let mut raised: Option<PyErr> = None;
    let result = py.allow_threads(|| {
        let mut cb = |done: usize, total: usize| -> bool {
            Python::with_gil(|py| {
                let go_on = py.check_signals().and_then(|()| match &progress {
                    None => Ok(true),
                    Some(f) => f.call1(py, (done, total))?.is_truthy(py),
                });
                go_on.unwrap_or_else(|e| {
                    raised = Some(e);
                    false
                })
            })
        };
        sim.run(&mut cb)
    });
    if let Some(e) = raised {
        return Err(e);
    }
    let report = result.map_err(to_py_err)?;

    let out = PyDict::new(py);
    let flows = PyDict::new(py);
    let col = |f: &dyn Fn(&tracefabric_packet::report::FlowResult) -> u64| {
        report.flows.iter().map(f).collect::<Vec<u64>>()
    };
    flows.set_item("src", col(&|f| f.src as u64))?;
    flows.set_item("dst", col(&|f| f.dst as u64))?;
    flows.set_item("bytes", col(&|f| f.bytes))?;
    flows.set_item("start_ps", col(&|f| f.start_ps))?;
    flows.set_item("finish_ps", col(&|f| f.finish_ps))?;
    flows.set_item("fct_ps", col(&|f| f.fct_ps()))?;
    flows.set_item("packets_sent", col(&|f| f.packets_sent))?;
    flows.set_item("retransmissions", col(&|f| f.retransmissions))?;
    flows.set_item("timeouts", col(&|f| f.timeouts))?;
    flows.set_item("blackholed", col(&|f| f.blackholed))?;
    flows.set_item("hops", col(&|f| f.hops as u64))?;
    out.set_item("flows", flows)?;
    let stages: Vec<Bound<'_, PyDict>> = report
        .stages
        .iter()
        .map(|s| {
            let d = PyDict::new(py);
            d.set_item("stage", &s.name)?;
            d.set_item("ports", s.ports)?;
            d.set_item("max_queue_bytes", s.max_queue_bytes)?;
            d.set_item("mean_queue_bytes", s.mean_queue_bytes)?;
            d.set_item("utilization", s.utilization)?;
            d.set_item("drops", s.drops)?;
            d.set_item("trims", s.trims)?;
            d.set_item("ecn_marks", s.ecn_marks)?;
            d.set_item("max_link_load", s.max_link_load)?;
            Ok(d)
        })
        .collect::<PyResult<_>>()?;
    out.set_item("stages", stages)?;
    let links = PyDict::new(py);
    let lcol = |f: &dyn Fn(&tracefabric_packet::report::LinkResult) -> u64| {
        report.links.iter().map(f).collect::<Vec<u64>>()
    };
    links.set_item("owner", lcol(&|l| l.owner as u64))?;
    links.set_item("peer", lcol(&|l| l.peer as u64))?;
    links.set_item(
        "stage",
        report
            .links
            .iter()
            .map(|l| l.stage.as_str())
            .collect::<Vec<&str>>(),
    )?;
    links.set_item("data_bytes", lcol(&|l| l.data_bytes))?;
    links.set_item("bytes", lcol(&|l| l.bytes))?;
    links.set_item("max_queue_bytes", lcol(&|l| l.max_queue_bytes))?;
    links.set_item("down_ps", lcol(&|l| l.down_ps))?;
    links.set_item("pauses", lcol(&|l| l.pauses))?;
    links.set_item("paused_ps", lcol(&|l| l.paused_ps))?;
    out.set_item("links", links)?;
    out.set_item("cct_ps", report.cct_ps)?;
    out.set_item("lower_bound_ps", report.lower_bound_ps)?;
    out.set_item("events", report.events)?;
    out.set_item("data_packet_hops", report.data_packet_hops)?;
    out.set_item("data_bytes_sent", report.data_bytes_sent)?;
    out.set_item("data_bytes_delivered", report.data_bytes_delivered)?;
    out.set_item("data_bytes_dropped", report.data_bytes_dropped)?;
    out.set_item("data_packets_dropped", report.data_packets_dropped)?;
    out.set_item("acks_dropped", report.acks_dropped)?;
    out.set_item("data_packets_trimmed", report.data_packets_trimmed)?;
    out.set_item(
        "data_packets_lost_on_links",
        report.data_packets_lost_on_links,
    )?;
    out.set_item("frames_blackholed", report.frames_blackholed)?;
    out.set_item("data_bytes_blackholed", report.data_bytes_blackholed)?;
    out.set_item("reroutes", report.reroutes)?;
    out.set_item("rho_max", report.rho_max)?;
    out.set_item("data_bytes_trimmed", report.data_bytes_trimmed)?;
    out.set_item("ecn_marks", report.ecn_marks)?;
    out.set_item("packets_alive_at_end", report.packets_alive_at_end)?;
    let counters = PyDict::new(py);
    for (k, v) in &report.lb_counters {
        counters.set_item(k, v)?;
    }
    out.set_item("lb_counters", counters)?;
    let counters = PyDict::new(py);
    for (k, v) in &report.scheme_counters {
        counters.set_item(k, v)?;
    }
    out.set_item("scheme_counters", counters)?;
    out.set_item("digest", report.digest)?;
    Ok(out.into_any().unbind())
}

/// The flows a packet config's traffic starts (generated with the config's seed, checked
/// against its fabric), without running them: (src, dst, bytes, start_ps) columns.
#[pyfunction]
fn traffic_flows(py: Python<'_>, config_json: &str) -> PyResult<PyObject> {
    let cfg = SimConfig::from_json(config_json).map_err(to_py_err)?;
    cfg.validate().map_err(to_py_err)?;
    let Some(traffic) = &cfg.traffic else {
        return Err(to_py_err(SimError::InvalidConfig {
            field: "traffic".into(),
            message: "missing: the flows come from a traffic".into(),
        }));
    };
    let fabric = Fabric::build(cfg.fabric()).map_err(|e| to_py_err(e.into()))?;
    let specs = tracefabric_packet::traffic::generate(traffic, &fabric.topology, cfg.seed)
        .map_err(to_py_err)?;
    tracefabric_packet::traffic::check(&specs, fabric.hosts()).map_err(to_py_err)?;
    let out = PyDict::new(py);
    out.set_item("src", specs.iter().map(|f| f.src).collect::<Vec<_>>())?;
    out.set_item("dst", specs.iter().map(|f| f.dst).collect::<Vec<_>>())?;
    out.set_item("bytes", specs.iter().map(|f| f.bytes).collect::<Vec<_>>())?;
    out.set_item(
        "start_ps",
        specs.iter().map(|f| f.start.0).collect::<Vec<_>>(),
    )?;
    Ok(out.into_any().unbind())
}

/// Names of the registered schemes, per family.
#[pyfunction]
fn scheme_names(py: Python<'_>) -> PyResult<PyObject> {
    let d = PyDict::new(py);
    d.set_item("lb", tracefabric_packet::lb::names())?;
    d.set_item("cc", tracefabric_packet::cc::names())?;
    d.set_item("loss", tracefabric_packet::loss::names())?;
    d.set_item("receiver", tracefabric_packet::receiver::names())?;
    d.set_item("qdisc", tracefabric_packet::qdisc::names())?;
    Ok(d.into_any().unbind())
}

create_exception!(
    _core,
    SystemLayerError,
    PyException,
    "An error of the workload/system layers: args = (variant, message)."
);

/// Which network carries the flows of a system-layer run, by the names users give
/// (`BACKENDS`, the one list; Python reads it through `backend_names`).
#[derive(serde::Deserialize)]
#[serde(tag = "kind", deny_unknown_fields)]
enum BackendSpec {
    #[serde(rename = "analytical:astra-unaware")]
    AstraUnaware {
        dims: Vec<tracefabric_analytical::DimSpec>,
    },
    #[serde(rename = "analytical:astra-aware")]
    AstraAware {
        dims: Vec<tracefabric_analytical::DimSpec>,
    },
    /// Flow-level model on ASTRA-sim's dimensions (`dims`) or on a packet fabric (`config`,
    /// the packet engine's config without traffic).
    #[serde(rename = "analytical:flow")]
    Flow {
        #[serde(default)]
        dims: Option<Vec<tracefabric_analytical::DimSpec>>,
        #[serde(default)]
        config: Option<serde_json::Value>,
        #[serde(default)]
        servers: Option<servers::ServersSpec>,
        #[serde(default)]
        placement: Option<Vec<u32>>,
    },
    /// On a packet fabric, `servers` puts GPUs in servers behind their NICs and `placement`
    /// gives each rank's GPU slot (see `servers.rs`).
    #[serde(rename = "packet")]
    Packet {
        config: serde_json::Value,
        #[serde(default)]
        servers: Option<servers::ServersSpec>,
        #[serde(default)]
        placement: Option<Vec<u32>>,
        /// Reuse of busy periods: `exact` (default), `fast` or `off` (`reuse.rs` of the engine).
        #[serde(default)]
        reuse: Option<String>,
    },
}

/// Every backend's name, in the order users see them.
const BACKENDS: [&str; 4] = [
    "analytical:astra-unaware",
    "analytical:astra-aware",
    "analytical:flow",
    "packet",
];

/// The network backends of the system layer, by name.
#[pyfunction]
fn backend_names() -> Vec<&'static str> {
    BACKENDS.to_vec()
}

fn system_err(e: tracefabric_collectives::SystemError) -> PyErr {
    let variant = match &e {
        tracefabric_collectives::SystemError::Workload { .. } => "Workload",
        tracefabric_collectives::SystemError::Config { .. } => "Config",
        tracefabric_collectives::SystemError::Deadlock { .. } => "Deadlock",
        tracefabric_collectives::SystemError::Clock { .. } => "Clock",
        tracefabric_collectives::SystemError::Network(_) => "Network",
    };
    let field = match &e {
        tracefabric_collectives::SystemError::Config { field, .. } => field.clone(),
        _ => String::new(),
    };
    SystemLayerError::new_err((variant.to_string(), e.to_string(), field))
}

fn bad_input(what: &str, e: impl std::fmt::Display) -> PyErr {
    SystemLayerError::new_err(("Config".to_string(), format!("{what}: {e}")))
}

/// A bad argument of a direct call (no system file): the field is the argument's name.
fn bad_argument(what: &str, e: impl std::fmt::Display) -> PyErr {
    SystemLayerError::new_err((
        "Config".to_string(),
        format!("{what}: {e}"),
        what.to_string(),
    ))
}

/// A backend's packet-fabric config (the engine's config without traffic: the system layer
/// gives the flows) and the fabric it builds.
fn engine_config(config: &serde_json::Value) -> PyResult<(SimConfig, Fabric)> {
    let cfg = SimConfig::from_json(&config.to_string()).map_err(to_py_err)?;
    if cfg.traffic.is_some() {
        return Err(to_py_err(SimError::InvalidConfig {
            field: "traffic".into(),
            message: "a backend's network config has no traffic: the workload gives the flows"
                .into(),
        }));
    }
    let fabric = Fabric::build(cfg.fabric()).map_err(|e| to_py_err(e.into()))?;
    Ok((cfg, fabric))
}

/// The number of hosts of a packet fabric (a backend's config without traffic), checked
/// and built as the engine builds it: raises EngineError naming a bad field.
#[pyfunction]
fn fabric_hosts(config_json: &str) -> PyResult<u32> {
    let config: serde_json::Value = serde_json::from_str(config_json).map_err(|e| {
        to_py_err(SimError::InvalidConfig {
            field: "config".into(),
            message: e.to_string(),
        })
    })?;
    Ok(engine_config(&config)?.1.hosts())
}

/// Check a workload against a system config as `simulate_system` does before it runs:
/// collectives matched across groups, point-to-point pairs, and every collective planned
/// with the configured algorithms. Raises SystemLayerError; returns None.
#[pyfunction]
fn check_system(py: Python<'_>, workload_json: &str, system_json: &str) -> PyResult<()> {
    let (w, cfg) = system_inputs(workload_json, system_json)?;
    py.allow_threads(|| {
        tracefabric_collectives::executor::Prepared::new(&w, &cfg, false).map(|_| ())
    })
    .map_err(system_err)
}

fn system_inputs(
    workload_json: &str,
    system_json: &str,
) -> PyResult<(
    tracefabric_collectives::workload::WorkloadInput,
    tracefabric_collectives::system::SystemConfig,
)> {
    let w = serde_json::from_str(workload_json).map_err(|e| bad_input("workload", e))?;
    let cfg = serde_json::from_str(system_json).map_err(|e| bad_input("system config", e))?;
    Ok((w, cfg))
}

/// Run a workload (per-rank ET graphs, JSON) through the system layer on a network backend.
#[pyfunction]
fn simulate_system(
    py: Python<'_>,
    workload_json: &str,
    system_json: &str,
    backend_json: &str,
) -> PyResult<PyObject> {
    use tracefabric_analytical::{aware::Aware, flow::FlowModel, unaware::Unaware, AstraTopology};
    use tracefabric_collectives::executor;
    let (w, cfg) = system_inputs(workload_json, system_json)?;
    let backend: BackendSpec =
        serde_json::from_str(backend_json).map_err(|e| bad_input("backend", e))?;
    let topo = |dims: Vec<tracefabric_analytical::DimSpec>| {
        AstraTopology::new(dims).map_err(|e| bad_input("network", e))
    };
    let mut packet_report = None;
    let report = match backend {
        BackendSpec::AstraUnaware { dims } => {
            let mut net = Unaware::new(topo(dims)?);
            py.allow_threads(|| executor::run(&w, &cfg, &mut net))
        }
        BackendSpec::AstraAware { dims } => {
            let mut net = Aware::new(topo(dims)?);
            py.allow_threads(|| executor::run(&w, &cfg, &mut net))
        }
        BackendSpec::Flow {
            dims,
            config,
            servers: spec,
            placement,
        } => match (dims, config) {
            (Some(dims), None) if spec.is_none() && placement.is_none() => {
                let mut net = FlowModel::on_astra(topo(dims)?);
                py.allow_threads(|| executor::run(&w, &cfg, &mut net))
            }
            (None, Some(config)) => {
                let fabric = engine_config(&config)?.1;
                let ranks = w.ranks.len() as u32;
                match servers::layout(spec, placement, ranks, &fabric.topology)? {
                    None => {
                        let mut net = FlowModel::on_packet_fabric(fabric);
                        py.allow_threads(|| executor::run(&w, &cfg, &mut net))
                    }
                    Some((layout, up)) => {
                        let fabric = FlowModel::on_packet_fabric(fabric);
                        let mut net = servers::servers(layout, up, fabric)?;
                        py.allow_threads(|| executor::run(&w, &cfg, &mut net))
                    }
                }
            }
            _ => return Err(bad_input(
                "backend",
                "analytical:flow takes ASTRA-sim dimensions (dims) or a packet fabric (config, \
                     with servers and placement)",
            )),
        },
        BackendSpec::Packet {
            config,
            servers: spec,
            placement,
            reuse,
        } => {
            let mode = ReuseMode::parse(reuse.as_deref().unwrap_or("exact"))
                .map_err(|e| bad_input("backend", e))?;
            // One planning pass gives both the flow list the engine declares and the run's plan.
            // Empty transfers are not declared: the engine only carries bytes.
            let (prepared, mut flows) =
                executor::Prepared::new(&w, &cfg, true).map_err(system_err)?;
            let (sim_cfg, fabric) = engine_config(&config)?;
            let layout = servers::layout(spec, placement, w.ranks.len() as u32, &fabric.topology)?;
            if let Some((layout, _)) = &layout {
                // The fabric sees flows between NICs, and none inside a server.
                for f in flows.iter_mut() {
                    *f = scale_up::fabric_request(layout, f);
                }
            }
            // More flows than one engine holds: a sequence of engines, one per window.
            let window = sim_cfg.limits.max_flows as usize;
            let (scheme, limits, seed) =
                (sim_cfg.scheme.clone(), sim_cfg.limits.clone(), sim_cfg.seed);
            let build: EngineFactory = Box::new(move |specs| {
                Simulation::build(fabric.clone(), specs, &scheme, &limits, seed)
            });
            let mut windows = Windows::new(&flows, window, build);
            if !windows.single() {
                let f = sim_cfg.fabric().failures;
                if f.probability > 0.0 || !f.links.is_empty() || sim_cfg.scheme.qdisc == "pfc" {
                    return Err(bad_input(
                        "packet backend",
                        format!(
                            "the run declares {} flows, more than limits.max_flows = {window}: \
                             it runs on a sequence of engines, which cannot carry failures or \
                             PFC state from one to the next; raise limits.max_flows",
                            windows.len()
                        ),
                    ));
                }
            }
            let sim = match windows.engine(0) {
                Ok(sim) => sim,
                // Name the ET node behind the flow, not the engine's internal flow index.
                Err(SimError::BadFlow {
                    index,
                    field,
                    message,
                }) => {
                    let why = format!("field `{field}` {message}");
                    let declared = DrivenPacket::declared(&flows);
                    return Err(system_err(prepared.flow_error(&declared[index], &why)));
                }
                Err(e) => return Err(to_py_err(e)),
            };
            let windows = (!windows.single()).then_some(windows);
            let net = DrivenPacket::with_windows(sim, &flows, mode, windows)
                .map_err(|e| bad_input("packet backend", e))?;
            drop(flows);
            let (r, net) = match layout {
                None => {
                    let mut net = net;
                    (py.allow_threads(|| prepared.run(&mut net)), net)
                }
                Some((layout, up)) => {
                    let mut net = servers::servers(layout, up, net)?;
                    let r = py.allow_threads(|| prepared.run(&mut net));
                    (r, net.into_fabric())
                }
            };
            packet_report = Some((net.report(false), mode));
            r
        }
    }
    .map_err(system_err)?;

    let out = PyDict::new(py);
    let ranks = PyDict::new(py);
    let rcol = |f: &dyn Fn(&tracefabric_collectives::report::RankStats) -> u64| {
        report.ranks.iter().map(f).collect::<Vec<u64>>()
    };
    ranks.set_item("wall_ps", rcol(&|r| r.wall_ps))?;
    ranks.set_item("compute_ps", rcol(&|r| r.compute_ps))?;
    ranks.set_item("comm_ps", rcol(&|r| r.comm_ps))?;
    ranks.set_item("exposed_comm_ps", rcol(&|r| r.exposed_comm_ps))?;
    ranks.set_item("overlap_ps", rcol(&|r| r.overlap_ps))?;
    ranks.set_item("nodes", rcol(&|r| r.nodes))?;
    out.set_item("ranks", ranks)?;
    let colls = PyDict::new(py);
    let c = &report.collectives;
    colls.set_item("group", c.iter().map(|x| x.group).collect::<Vec<_>>())?;
    colls.set_item("seq", c.iter().map(|x| x.seq).collect::<Vec<_>>())?;
    colls.set_item("kind", c.iter().map(|x| x.kind).collect::<Vec<_>>())?;
    colls.set_item("bytes", c.iter().map(|x| x.bytes).collect::<Vec<_>>())?;
    colls.set_item(
        "algorithm",
        c.iter().map(|x| x.algorithm.as_str()).collect::<Vec<_>>(),
    )?;
    colls.set_item("chunks", c.iter().map(|x| x.chunks).collect::<Vec<_>>())?;
    colls.set_item("flows", c.iter().map(|x| x.flows).collect::<Vec<_>>())?;
    colls.set_item(
        "first_issue_ps",
        c.iter().map(|x| x.first_issue_ps).collect::<Vec<_>>(),
    )?;
    colls.set_item("start_ps", c.iter().map(|x| x.start_ps).collect::<Vec<_>>())?;
    colls.set_item("end_ps", c.iter().map(|x| x.end_ps).collect::<Vec<_>>())?;
    out.set_item("collectives", colls)?;
    out.set_item("flows", report.flows)?;
    let counters = PyDict::new(py);
    for (k, v) in &report.network_counters {
        counters.set_item(k, v)?;
    }
    if let Some((rep, mode)) = &packet_report {
        out.set_item("reuse", mode.name())?;
        counters.set_item("events_skipped", rep.events_skipped)?;
        counters.set_item("data_packet_hops", rep.data_packet_hops)?;
        counters.set_item("data_packets_dropped", rep.data_packets_dropped)?;
        counters.set_item("ecn_marks", rep.ecn_marks)?;
        counters.set_item("events", rep.events)?;
        counters.set_item("data_bytes_sent", rep.data_bytes_sent)?;
        counters.set_item("data_bytes_delivered", rep.data_bytes_delivered)?;
        out.set_item("links", tables::packet_links(py, rep)?)?;
        out.set_item("stages", tables::packet_stages(py, rep)?)?;
    }
    out.set_item("network_counters", counters)?;
    Ok(out.into_any().unbind())
}

const COLLECTIVE_FLOWS_MAX_RANKS: u32 = 4096;

/// tracefabric's name for a collective algorithm named by tracefabric or ASTRA-sim
/// (`direct8` -> `direct`), or None.
#[pyfunction]
fn algorithm_name(name: &str) -> Option<&'static str> {
    tracefabric_collectives::algorithms::canonical_name(name)
}

/// tracefabric's algorithm names and ASTRA-sim's, for error messages.
#[pyfunction]
fn algorithm_names() -> (Vec<&'static str>, Vec<&'static str>) {
    use tracefabric_collectives::algorithms::{names, ASTRA_NAMES};
    (
        names(),
        ASTRA_NAMES.iter().map(|(astra, _)| *astra).collect(),
    )
}

/// The flows one collective becomes: (src, dst, bytes) per transfer, for inspection and tests.
#[pyfunction]
#[pyo3(signature = (algorithm, kind, ranks, size, exact_blocks=true))]
fn collective_flows(
    algorithm: &str,
    kind: &str,
    ranks: i128,
    size: i128,
    exact_blocks: bool,
) -> PyResult<Vec<(u32, u32, u64, bool, Vec<u32>)>> {
    use tracefabric_collectives::algorithms::{by_name, CollectiveKind, CollectiveSpec};
    use tracefabric_collectives::dag::Blocks;
    let kind: CollectiveKind = serde_json::from_value(serde_json::Value::String(kind.to_string()))
        .map_err(|e| bad_argument("kind", e))?;
    let algo = by_name(algorithm).map_err(|e| bad_argument("algorithm", e))?;
    // Python ints are unbounded: range-check here rather than fail in PyO3's conversion.
    // The list is for inspection, so the DAG is bounded too (n^2 transfers for some algorithms).
    let ranks = u32::try_from(ranks)
        .ok()
        .filter(|n| (1..=COLLECTIVE_FLOWS_MAX_RANKS).contains(n))
        .ok_or_else(|| {
            bad_argument(
                "ranks",
                format!("expected 1..={COLLECTIVE_FLOWS_MAX_RANKS} ranks, got {ranks}"),
            )
        })?;
    let bytes = u64::try_from(size)
        .map_err(|_| bad_argument("size", format!("expected 0..=2^64-1 bytes, got {size}")))?;
    let spec = CollectiveSpec {
        kind,
        n: ranks,
        bytes,
        blocks: if exact_blocks {
            Blocks::Exact
        } else {
            Blocks::Truncate
        },
        matrix: None,
        root: 0,
        astra: false,
    };
    let dag = algo
        .build(&spec)
        .map_err(|e| bad_argument("algorithm", e))?;
    let mut preds: Vec<Vec<u32>> = vec![Vec::new(); dag.len()];
    for i in 0..dag.len() {
        dag.for_each_successor(i, &mut |j| preds[j].push(i as u32));
    }
    Ok((0..dag.len())
        .map(|i| {
            let t = dag.transfer(i);
            (
                t.src,
                t.dst,
                t.bytes,
                t.reduce,
                std::mem::take(&mut preds[i]),
            )
        })
        .collect())
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(simulate_system, m)?)?;
    m.add_function(wrap_pyfunction!(collective_flows, m)?)?;
    m.add_function(wrap_pyfunction!(algorithm_name, m)?)?;
    m.add_function(wrap_pyfunction!(algorithm_names, m)?)?;
    m.add_function(wrap_pyfunction!(check_system, m)?)?;
    m.add("SystemLayerError", m.py().get_type::<SystemLayerError>())?;
    // One clock limit for every layer, so Python refuses inputs at the same point as Rust.
    m.add("CLOCK_LIMIT_PS", tracefabric_netapi::CLOCK_LIMIT_PS)?;
    m.add_function(wrap_pyfunction!(simulate_packet, m)?)?;
    m.add_function(wrap_pyfunction!(check_packet, m)?)?;
    m.add_function(wrap_pyfunction!(scheme_names, m)?)?;
    m.add_function(wrap_pyfunction!(fabric_hosts, m)?)?;
    m.add_function(wrap_pyfunction!(traffic_flows, m)?)?;
    m.add_function(wrap_pyfunction!(backend_names, m)?)?;
    m.add("EngineError", m.py().get_type::<EngineError>())?;
    Ok(())
}
