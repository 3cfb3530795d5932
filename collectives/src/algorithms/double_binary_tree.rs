//! Double binary tree (the NCCL construction): two binary trees over the group, each
//! carrying half of the buffer, built so that (for even n) every position is a leaf
//! in one tree and an inner node in the other. Tree 1: position 0 is the root with one
//! child, the largest power of two below n; an inner node v with lowest set bit b has
//! children v - b/2 and v + b/2 (the latter shrunk until it exists). Tree 2 mirrors
//! tree 1 (p -> n-1-p) for even n and shifts it by one for odd n.
//! All-reduce per tree: reduce up (a node sends to its parent after all its children
//! arrived), then broadcast down (the root after its children, others after their parent).

use super::{Algorithm, CollectiveKind, CollectiveSpec};
use crate::dag::{Dag, DagBuilder};

pub struct DoubleBinaryTree;

/// Parent and children of every position of tree 1 (`None` for the root's parent).
pub fn tree_one(n: u32) -> (Vec<Option<u32>>, Vec<Vec<u32>>) {
    let mut parent = vec![None; n as usize];
    let mut children = vec![Vec::new(); n as usize];
    if n > 1 {
        let top = 1u32 << (31 - (n - 1).leading_zeros()); // largest power of two <= n-1
        parent[top as usize] = Some(0);
        children[0].push(top);
        for v in 1..n {
            let low = v & v.wrapping_neg();
            if low == 1 {
                continue;
            }
            children[v as usize].push(v - low / 2);
            let mut half = low / 2;
            while half > 0 && v + half >= n {
                half /= 2;
            }
            if half > 0 {
                children[v as usize].push(v + half);
            }
            for i in 0..children[v as usize].len() {
                let c = children[v as usize][i];
                parent[c as usize] = Some(v);
            }
        }
    }
    (parent, children)
}

/// Tree 2 as a relabelling of tree 1.
fn tree_two(n: u32) -> (Vec<Option<u32>>, Vec<Vec<u32>>) {
    let (p1, c1) = tree_one(n);
    let map = |v: u32| if n % 2 == 0 { n - 1 - v } else { (v + 1) % n };
    let mut parent = vec![None; n as usize];
    let mut children = vec![Vec::new(); n as usize];
    for v in 0..n {
        parent[map(v) as usize] = p1[v as usize].map(map);
        children[map(v) as usize] = c1[v as usize].iter().map(|&c| map(c)).collect();
    }
    (parent, children)
}

impl Algorithm for DoubleBinaryTree {
    fn name(&self) -> &'static str {
        "double_binary_tree"
    }
    fn build(&self, spec: &CollectiveSpec) -> Result<Box<dyn Dag>, String> {
        let n = spec.n;
        let mut b = DagBuilder::new("double_binary_tree");
        match spec.kind {
            CollectiveKind::AllReduce => {
                let halves = [spec.bytes - spec.bytes / 2, spec.bytes / 2];
                for (tree, &bytes) in [tree_one(n), tree_two(n)].iter().zip(&halves) {
                    if bytes > 0 {
                        tree_all_reduce(&mut b, tree, bytes);
                    }
                }
            }
            CollectiveKind::Broadcast => {
                // One tree, rooted at the broadcast root (tree 1 relabelled by a shift).
                let (parent, children) = tree_one(n);
                let at = |v: u32| (v + spec.root) % n;
                let mut down: Vec<Option<u32>> = vec![None; n as usize];
                for v in bfs_order(&parent, &children) {
                    for &c in &children[v as usize] {
                        let t = b.add(at(v), at(c), spec.bytes, false);
                        if let Some(before) = down[v as usize] {
                            b.edge(before, t);
                        }
                        down[c as usize] = Some(t);
                    }
                }
            }
            _ => {
                return Err(
                    spec.unsupported(self.name(), "trees implement all-reduce and broadcast")
                )
            }
        }
        Ok(Box::new(b.build()))
    }
}

fn bfs_order(parent: &[Option<u32>], children: &[Vec<u32>]) -> Vec<u32> {
    let mut order: Vec<u32> = (0..parent.len() as u32)
        .filter(|&v| parent[v as usize].is_none())
        .collect();
    let mut i = 0;
    while i < order.len() {
        let v = order[i];
        order.extend(children[v as usize].iter().copied());
        i += 1;
    }
    order
}

fn tree_all_reduce(
    b: &mut DagBuilder,
    (parent, children): &(Vec<Option<u32>>, Vec<Vec<u32>>),
    bytes: u64,
) {
    let n = parent.len();
    let order = bfs_order(parent, children);
    // Reduce: leaves first (reverse BFS), each node after all of its children.
    let mut up: Vec<Option<u32>> = vec![None; n];
    for &v in order.iter().rev() {
        if let Some(p) = parent[v as usize] {
            let t = b.add(v, p, bytes, true);
            for &c in &children[v as usize] {
                b.edge(
                    up[c as usize].expect("children come first in reverse BFS"),
                    t,
                );
            }
            up[v as usize] = Some(t);
        }
    }
    // Broadcast: the root once its children arrived, every other node after its parent.
    let mut down: Vec<Option<u32>> = vec![None; n];
    for &v in &order {
        for &c in &children[v as usize] {
            let t = b.add(v, c, bytes, false);
            match parent[v as usize] {
                None => {
                    for &cc in &children[v as usize] {
                        b.edge(up[cc as usize].expect("reduce built first"), t);
                    }
                }
                Some(_) => b.edge(down[v as usize].expect("parent's transfer built first"), t),
            }
            down[c as usize] = Some(t);
        }
    }
}
