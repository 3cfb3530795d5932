//! What a run reports: per-flow completion, per-stage queues and utilization,
//! conservation counters and the lower bound the run is judged against.

#[derive(Clone, Debug, PartialEq)]
pub struct FlowResult {
    pub src: u32,
    pub dst: u32,
    pub bytes: u64,
    pub start_ps: u64,
    pub finish_ps: u64,
    pub packets_sent: u64,
    pub retransmissions: u64,
    pub timeouts: u64,
    /// Data frames lost into failed links (each one a retransmission the failures cost).
    pub blackholed: u64,
    pub hops: u32,
}

impl FlowResult {
    pub fn fct_ps(&self) -> u64 {
        self.finish_ps - self.start_ps
    }
}

/// One stage of the fabric (all ports from one tier to another, e.g. "E->A").
#[derive(Clone, Debug, PartialEq)]
pub struct StageStats {
    pub name: String,
    pub ports: u32,
    pub max_queue_bytes: u64,
    /// Time-averaged queue over the run, averaged over the stage's ports.
    pub mean_queue_bytes: f64,
    /// Fraction of the stage's capacity used over the run (frames + gaps excluded).
    pub utilization: f64,
    pub drops: u64,
    pub trims: u64,
    pub ecn_marks: u64,
    /// Data bytes carried by the busiest link of the stage over the stage's mean
    /// (1.0: perfectly balanced; the OFAN paper's Fig. 7 plots this minus one).
    pub max_link_load: f64,
}

/// One direction of one link: the output port of `owner` towards `peer`.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkResult {
    pub owner: u32,
    pub peer: u32,
    pub stage: String,
    /// Data frame bytes sent (headers included), ACKs excluded.
    pub data_bytes: u64,
    /// All frame bytes sent.
    pub bytes: u64,
    pub max_queue_bytes: u64,
    /// How long the link was down during the run (failures).
    pub down_ps: u64,
    /// PFC PAUSE frames that stopped this port, and how long its data priority stayed
    /// paused up to the run's completion (0 without PFC).
    pub pauses: u64,
    pub paused_ps: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    pub flows: Vec<FlowResult>,
    pub stages: Vec<StageStats>,
    pub links: Vec<LinkResult>,
    /// Collective completion time: last ACK received minus first flow start.
    pub cct_ps: u64,
    /// The lower bound on the CCT for this traffic on this fabric.
    pub lower_bound_ps: u64,
    pub events: u64,
    /// Events of the busy periods replayed instead of simulated (`crate::reuse`).
    pub events_skipped: u64,
    /// Data packets times links crossed.
    pub data_packet_hops: u64,
    pub data_bytes_sent: u64,
    pub data_bytes_delivered: u64,
    pub data_bytes_dropped: u64,
    pub data_packets_dropped: u64,
    pub acks_dropped: u64,
    /// Data packets trimmed to their header, and the payload bytes cut off (sent =
    /// delivered + dropped + trimmed).
    pub data_packets_trimmed: u64,
    /// Data packets lost on links (`link.loss_rate`), among `data_packets_dropped`.
    pub data_packets_lost_on_links: u64,
    /// Frames sent into failed links (or left without a route), among the drops, and the
    /// payload bytes of the data frames among them.
    pub frames_blackholed: u64,
    pub data_bytes_blackholed: u64,
    /// Times routes changed (local reroutes at detection, global convergences).
    pub reroutes: u64,
    /// The failure-aware rate bound (`bounds::failure`): the fraction of its line rate the
    /// busiest host can use with every flow split evenly over its valid paths (1: no failure).
    pub rho_max: f64,
    pub data_bytes_trimmed: u64,
    pub ecn_marks: u64,
    /// Packets still alive after the run drained (always 0: checked by tests).
    pub packets_alive_at_end: u64,
    /// Named counts of the load balancer's state (`queue_pairs`, `pointers`, ...).
    pub lb_counters: Vec<(String, u64)>,
    /// Named counts of the other families, as `family.name` (`cc.window_cuts`, ...).
    pub scheme_counters: Vec<(String, u64)>,
    /// Order-sensitive hash of every flow's outcome: equal digests, identical runs.
    pub digest: u64,
}

impl Report {
    pub fn cct_increase(&self) -> f64 {
        self.cct_ps as f64 / self.lower_bound_ps as f64 - 1.0
    }
}
