//! A driven packet run's per-link and per-stage tables, as dicts of columns for pandas.

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Per link of a driven packet run: columns of `LinkResult`.
pub fn packet_links<'py>(
    py: Python<'py>,
    rep: &tracefabric_packet::report::Report,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let l = &rep.links;
    d.set_item("owner", l.iter().map(|x| x.owner).collect::<Vec<_>>())?;
    d.set_item("peer", l.iter().map(|x| x.peer).collect::<Vec<_>>())?;
    d.set_item(
        "stage",
        l.iter().map(|x| x.stage.as_str()).collect::<Vec<_>>(),
    )?;
    d.set_item(
        "data_bytes",
        l.iter().map(|x| x.data_bytes).collect::<Vec<_>>(),
    )?;
    d.set_item("bytes", l.iter().map(|x| x.bytes).collect::<Vec<_>>())?;
    d.set_item(
        "max_queue_bytes",
        l.iter().map(|x| x.max_queue_bytes).collect::<Vec<_>>(),
    )?;
    d.set_item("down_ps", l.iter().map(|x| x.down_ps).collect::<Vec<_>>())?;
    Ok(d)
}

/// Per stage (tier to tier) of a driven packet run: columns of `StageStats`.
pub fn packet_stages<'py>(
    py: Python<'py>,
    rep: &tracefabric_packet::report::Report,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let s = &rep.stages;
    d.set_item(
        "stage",
        s.iter().map(|x| x.name.as_str()).collect::<Vec<_>>(),
    )?;
    d.set_item("ports", s.iter().map(|x| x.ports).collect::<Vec<_>>())?;
    d.set_item(
        "max_queue_bytes",
        s.iter().map(|x| x.max_queue_bytes).collect::<Vec<_>>(),
    )?;
    d.set_item(
        "mean_queue_bytes",
        s.iter().map(|x| x.mean_queue_bytes).collect::<Vec<_>>(),
    )?;
    d.set_item(
        "utilization",
        s.iter().map(|x| x.utilization).collect::<Vec<_>>(),
    )?;
    d.set_item(
        "max_link_load",
        s.iter().map(|x| x.max_link_load).collect::<Vec<_>>(),
    )?;
    d.set_item("drops", s.iter().map(|x| x.drops).collect::<Vec<_>>())?;
    d.set_item("trims", s.iter().map(|x| x.trims).collect::<Vec<_>>())?;
    d.set_item(
        "ecn_marks",
        s.iter().map(|x| x.ecn_marks).collect::<Vec<_>>(),
    )?;
    Ok(d)
}
