//! A collective (one chunk, one group) as a DAG of transfers between group positions.
//! A transfer may start once every transfer it depends on has arrived and been
//! processed at the sender; the executor never looks inside an algorithm.

/// One message of a collective, between positions of the group (0..n).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transfer {
    pub src: u32,
    pub dst: u32,
    pub bytes: u64,
    /// The receiver reduces the data into its buffer (reduce-scatter steps).
    pub reduce: bool,
}

pub trait Dag: Send {
    fn len(&self) -> usize;
    fn transfer(&self, i: usize) -> Transfer;
    /// Number of transfers that must arrive before transfer `i` may start.
    fn n_deps(&self, i: usize) -> u32;
    /// Calls `f` for every transfer that waits on transfer `i`.
    fn for_each_successor(&self, i: usize, f: &mut dyn FnMut(usize));
    /// Short description for reports ("ring", "double_binary_tree", ...).
    fn algorithm(&self) -> &'static str;
    /// Calls `f` for every transfer with no dependencies (those start the collective).
    fn for_each_initial(&self, f: &mut dyn FnMut(usize)) {
        for i in 0..self.len() {
            if self.n_deps(i) == 0 {
                f(i)
            }
        }
    }
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    // Per-rank progression (ASTRA-sim's model, where every member runs its own part of a
    // phase on its own clock) needs three more facts about the DAG.

    /// Transfers position `pos` receives in this DAG.
    fn receives_of(&self, pos: u32) -> u32;
    /// Calls `f` for every transfer with no dependencies that position `pos` sends.
    fn for_each_initial_from(&self, pos: u32, f: &mut dyn FnMut(usize));
    /// For algorithms whose receiver posts its receives one at a time, each with its own
    /// send of the same step (ASTRA-sim's ring): the step of transfer `i` among its
    /// receiver's receives. `None`: every receive is posted when the receiver's phase starts.
    fn recv_step(&self, _i: usize) -> Option<u32> {
        None
    }
}

/// A DAG stored explicitly (compressed successor lists): for algorithms whose
/// structure is irregular or small (direct, trees, recursive doubling).
pub struct ExplicitDag {
    name: &'static str,
    transfers: Vec<Transfer>,
    n_deps: Vec<u32>,
    succ_start: Vec<u32>,
    succ: Vec<u32>,
    /// Transfers each position receives.
    receives: Vec<u32>,
    /// Transfers without dependencies, grouped by sender: those of position p are
    /// `initial[initial_start[p]..initial_start[p + 1]]`.
    initial_start: Vec<u32>,
    initial: Vec<u32>,
}

/// Builds an [`ExplicitDag`]: add transfers, then edges `before -> after`.
pub struct DagBuilder {
    name: &'static str,
    transfers: Vec<Transfer>,
    edges: Vec<(u32, u32)>,
}

impl DagBuilder {
    pub fn new(name: &'static str) -> DagBuilder {
        DagBuilder {
            name,
            transfers: Vec::new(),
            edges: Vec::new(),
        }
    }
    pub fn add(&mut self, src: u32, dst: u32, bytes: u64, reduce: bool) -> u32 {
        self.transfers.push(Transfer {
            src,
            dst,
            bytes,
            reduce,
        });
        (self.transfers.len() - 1) as u32
    }
    /// `after` waits for `before` to arrive.
    pub fn edge(&mut self, before: u32, after: u32) {
        self.edges.push((before, after));
    }
    pub fn build(mut self) -> ExplicitDag {
        let n = self.transfers.len();
        let mut n_deps = vec![0u32; n];
        let mut counts = vec![0u32; n + 1];
        self.edges.sort_unstable();
        self.edges.dedup();
        for &(a, b) in &self.edges {
            counts[a as usize + 1] += 1;
            n_deps[b as usize] += 1;
        }
        for i in 0..n {
            counts[i + 1] += counts[i];
        }
        let succ = self.edges.iter().map(|&(_, b)| b).collect();
        let positions = (self.transfers.iter())
            .map(|t| t.src.max(t.dst) as usize + 1)
            .max()
            .unwrap_or(0);
        let mut receives = vec![0u32; positions];
        let mut initial_start = vec![0u32; positions + 1];
        for (i, t) in self.transfers.iter().enumerate() {
            receives[t.dst as usize] += 1;
            if n_deps[i] == 0 {
                initial_start[t.src as usize + 1] += 1;
            }
        }
        for p in 0..positions {
            initial_start[p + 1] += initial_start[p];
        }
        let mut fill = initial_start.clone();
        let mut initial = vec![0u32; initial_start[positions] as usize];
        for (i, t) in self.transfers.iter().enumerate() {
            if n_deps[i] == 0 {
                initial[fill[t.src as usize] as usize] = i as u32;
                fill[t.src as usize] += 1;
            }
        }
        ExplicitDag {
            name: self.name,
            transfers: self.transfers,
            n_deps,
            succ_start: counts,
            succ,
            receives,
            initial_start,
            initial,
        }
    }
}

impl Dag for ExplicitDag {
    fn len(&self) -> usize {
        self.transfers.len()
    }
    fn transfer(&self, i: usize) -> Transfer {
        self.transfers[i]
    }
    fn n_deps(&self, i: usize) -> u32 {
        self.n_deps[i]
    }
    fn for_each_successor(&self, i: usize, f: &mut dyn FnMut(usize)) {
        for &s in &self.succ[self.succ_start[i] as usize..self.succ_start[i + 1] as usize] {
            f(s as usize)
        }
    }
    fn algorithm(&self) -> &'static str {
        self.name
    }
    fn receives_of(&self, pos: u32) -> u32 {
        self.receives.get(pos as usize).copied().unwrap_or(0)
    }
    fn for_each_initial_from(&self, pos: u32, f: &mut dyn FnMut(usize)) {
        let p = pos as usize;
        if p + 1 < self.initial_start.len() {
            let (a, b) = (self.initial_start[p], self.initial_start[p + 1]);
            self.initial[a as usize..b as usize]
                .iter()
                .for_each(|&i| f(i as usize));
        }
    }
}

/// How a buffer of `total` bytes is cut into `parts` blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Blocks {
    /// Every byte is accounted for: the first `total % parts` blocks are one byte larger.
    Exact,
    /// ASTRA-sim's rule: every block is `total / parts` (integer division); the rest is dropped.
    Truncate,
}

impl Blocks {
    pub fn size(self, total: u64, parts: u64, index: u64) -> u64 {
        match self {
            Blocks::Exact => total / parts + u64::from(index < total % parts),
            Blocks::Truncate => total / parts,
        }
    }
}
