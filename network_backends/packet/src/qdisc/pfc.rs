//! `pfc`: lossless switches (IEEE 802.1Qbb priority flow control; CC-CATALOGUE §11).
//! Marks ECN at dequeue exactly as `red` does, and adds per-ingress accounting that the
//! engine runs (`sim::pfc`): every data frame a switch holds is charged to the ingress it
//! came in on (the upstream port that sent it). When an ingress holds more than `xoff_bytes`
//! its switch sends a PAUSE upstream; when it drains to `xon_bytes` or below, a RESUME.
//! Between the two the upstream port sends no data frames (the control priority, ACKs,
//! NACKs, pulls and trimmed headers, is never paused). `headroom_bytes` past XOFF absorb
//! what is already on its way while the PAUSE travels; a frame that would exceed XOFF +
//! headroom is dropped (or trimmed, with `trim`) and counted. Data frames are not held to
//! the output port's `switch.buffer_bytes`: the buffer is shared, bounded per ingress.
//!
//! Parameters (bytes of whole frames on the wire):
//! - `xoff_bytes` (default 15 data frames) and `xon_bytes` (default 12): csg-htsim's
//!   input-queue thresholds (`-pfc_thresholds 15 12`); `xon_bytes < xoff_bytes`.
//! - `headroom_bytes` (default 2·C·d + 2 frames, d = link latency + switch latency: the
//!   PAUSE waits behind at most a frame, crosses the link, the upstream finishes its frame,
//!   and a link's worth is on the wire: §11 acceptance 1).
//! - `deadlock_us` (default 500): a port paused this long in a cycle of paused ports, each
//!   holding frames of the ingress before it, ends the run with an error naming the ports.
//! - `trim` as in `red`.

use super::{red, Lossless, Overflow, QdiscInit, QueueDiscipline};
use crate::config::Params;
use crate::error::{SimError, SimResult};
use crate::params::ParamReader;
use crate::topology::PortId;
use crate::units::{Dur, Rate};

pub struct Pfc {
    red: Box<dyn QueueDiscipline>,
    lossless: Lossless,
}

/// The default headroom: 2·C·d + 2 frames (frames with their inter-frame gap).
pub fn default_headroom(init: &QdiscInit) -> u64 {
    let rate = Rate::from_gbps(init.link.rate_gbps);
    let d_ps =
        Dur::from_ns_f64(init.link.latency_ns).0 + Dur::from_ns_f64(init.switch.latency_ns).0;
    let on_wire = (rate.bps() as u128 * d_ps as u128).div_ceil(8_000_000_000_000) as u64;
    2 * on_wire + 2 * frame(init)
}

fn frame(init: &QdiscInit) -> u64 {
    (init.packet.payload_bytes + init.packet.header_bytes + init.packet.gap_bytes) as u64
}

pub fn build(init: &QdiscInit, params: &Params) -> SimResult<Box<dyn QueueDiscipline>> {
    let mut p = ParamReader::new("qdisc", "pfc", params);
    let trim = p.bool("trim", init.trim)?;
    let data = (init.packet.payload_bytes + init.packet.header_bytes) as u64;
    let max = crate::config::MAX_BUFFER_BYTES;
    let xoff = p.int_in("xoff_bytes", 15 * data, data, max)?;
    let xon = p.int_in("xon_bytes", 12 * data, 0, max)?;
    if xon >= xoff {
        return Err(SimError::BadSchemeParam {
            family: "qdisc",
            scheme: "pfc".into(),
            param: if params.contains_key("xon_bytes") {
                "xon_bytes"
            } else {
                "xoff_bytes"
            }
            .into(),
            message: format!("must satisfy xon_bytes < xoff_bytes, got {xon} >= {xoff}"),
        });
    }
    let headroom = p.int_in("headroom_bytes", default_headroom(init), 0, max)?;
    let deadlock_us = p.f64_in_open_closed("deadlock_us", 500.0, 0.0, 1e6)?;
    p.finish()?;
    let mut red_params = Params::new();
    red_params.insert("trim".into(), trim.into());
    Ok(Box::new(Pfc {
        red: red::build(init, &red_params)?,
        lossless: Lossless {
            xoff,
            xon,
            headroom,
            deadlock_after: Dur((deadlock_us * 1e6).round() as u64),
        },
    }))
}

impl QueueDiscipline for Pfc {
    fn dequeue_floor(&self) -> u64 {
        self.red.dequeue_floor()
    }

    fn on_dequeue(&mut self, port: PortId, backlog: u64, port_tx_bytes: u64) -> bool {
        self.red.on_dequeue(port, backlog, port_tx_bytes)
    }

    fn on_overflow(&mut self, port: PortId) -> Overflow {
        self.red.on_overflow(port)
    }

    fn lossless(&self) -> Option<Lossless> {
        Some(self.lossless)
    }
}
