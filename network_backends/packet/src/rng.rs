//! Seeded randomness. One master seed; every component derives its own stream
//! from (seed, family, id), so adding a component never perturbs another's draws.

use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;

pub type Rng = Pcg64Mcg;

pub use tracefabric_fabric::seed::{derive_seed, family, mix64};

pub fn derive_rng(seed: u64, family_name: &str, id: u64) -> Rng {
    Rng::seed_from_u64(derive_seed(seed, family_name, id))
}
