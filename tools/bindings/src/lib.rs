//! The `tracefabric._core` extension: the only crate that knows about Python.
//! Engine crates stay free of PyO3; this file converts configs in and results out.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tracefabric_packet::{SimError, Simulation, SimConfig};

create_exception!(_core, EngineError, PyException, "An error raised by the Rust engine: args = (variant, message, fields).");

fn to_py_err(e: SimError) -> PyErr {
    let message = e.to_string();
    let (variant, fields): (&str, Vec<(&str, String)>) = match &e {
        SimError::InvalidConfig { field, .. } => ("InvalidConfig", vec![("field", field.clone())]),
        SimError::UnknownScheme { family, name, known } => {
            ("UnknownScheme", vec![("family", family.to_string()), ("name", name.clone()), ("known", known.clone())])
        }
        SimError::BadSchemeParam { family, scheme, param, .. } => {
            ("BadSchemeParam", vec![("family", family.to_string()), ("scheme", scheme.clone()), ("param", param.clone())])
        }
        SimError::BadFlow { index, field, .. } => ("BadFlow", vec![("index", index.to_string()), ("field", field.to_string())]),
        SimError::DidNotFinish { unfinished, total, .. } => {
            ("DidNotFinish", vec![("unfinished", unfinished.to_string()), ("total", total.to_string())])
        }
    };
    EngineError::new_err((variant.to_string(), message, fields.into_iter().map(|(k, v)| (k.to_string(), v)).collect::<Vec<_>>()))
}

/// Run one packet-level simulation. `config_json` follows `SimConfig`; `progress`,
/// if given, is called as progress(done_flows, total_flows) and may return False to cancel.
#[pyfunction]
#[pyo3(signature = (config_json, progress=None))]
fn simulate_packet(py: Python<'_>, config_json: &str, progress: Option<PyObject>) -> PyResult<PyObject> {
    let cfg = SimConfig::from_json(config_json).map_err(to_py_err)?;
    let sim = Simulation::new(cfg).map_err(to_py_err)?;
    let report = py
        .allow_threads(|| {
            let mut cb = |done: usize, total: usize| -> bool {
                match &progress {
                    None => true,
                    Some(f) => Python::with_gil(|py| {
                        if py.check_signals().is_err() {
                            return false;
                        }
                        f.call1(py, (done, total)).and_then(|r| r.is_truthy(py)).unwrap_or(false)
                    }),
                }
            };
            sim.run(&mut cb)
        })
        .map_err(to_py_err)?;

    let out = PyDict::new(py);
    let flows = PyDict::new(py);
    let col = |f: &dyn Fn(&tracefabric_packet::report::FlowResult) -> u64| report.flows.iter().map(f).collect::<Vec<u64>>();
    flows.set_item("src", col(&|f| f.src as u64))?;
    flows.set_item("dst", col(&|f| f.dst as u64))?;
    flows.set_item("bytes", col(&|f| f.bytes))?;
    flows.set_item("start_ps", col(&|f| f.start_ps))?;
    flows.set_item("finish_ps", col(&|f| f.finish_ps))?;
    flows.set_item("fct_ps", col(&|f| f.fct_ps()))?;
    flows.set_item("packets_sent", col(&|f| f.packets_sent))?;
    flows.set_item("retransmissions", col(&|f| f.retransmissions))?;
    flows.set_item("timeouts", col(&|f| f.timeouts))?;
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
            d.set_item("ecn_marks", s.ecn_marks)?;
            d.set_item("max_link_load", s.max_link_load)?;
            Ok(d)
        })
        .collect::<PyResult<_>>()?;
    out.set_item("stages", stages)?;
    let links = PyDict::new(py);
    let lcol = |f: &dyn Fn(&tracefabric_packet::report::LinkResult) -> u64| report.links.iter().map(f).collect::<Vec<u64>>();
    links.set_item("owner", lcol(&|l| l.owner as u64))?;
    links.set_item("peer", lcol(&|l| l.peer as u64))?;
    links.set_item("stage", report.links.iter().map(|l| l.stage.as_str()).collect::<Vec<&str>>())?;
    links.set_item("data_bytes", lcol(&|l| l.data_bytes))?;
    links.set_item("bytes", lcol(&|l| l.bytes))?;
    links.set_item("max_queue_bytes", lcol(&|l| l.max_queue_bytes))?;
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
    out.set_item("ecn_marks", report.ecn_marks)?;
    out.set_item("packets_alive_at_end", report.packets_alive_at_end)?;
    let counters = PyDict::new(py);
    for (k, v) in &report.lb_counters {
        counters.set_item(k, v)?;
    }
    out.set_item("lb_counters", counters)?;
    out.set_item("digest", report.digest)?;
    Ok(out.into_any().unbind())
}

/// Names of the registered schemes, per family.
#[pyfunction]
fn scheme_names(py: Python<'_>) -> PyResult<PyObject> {
    let d = PyDict::new(py);
    d.set_item("lb", tracefabric_packet::lb::names())?;
    d.set_item("cc", tracefabric_packet::cc::names())?;
    d.set_item("loss", tracefabric_packet::loss::names())?;
    Ok(d.into_any().unbind())
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(simulate_packet, m)?)?;
    m.add_function(wrap_pyfunction!(scheme_names, m)?)?;
    m.add("EngineError", m.py().get_type::<EngineError>())?;
    Ok(())
}
