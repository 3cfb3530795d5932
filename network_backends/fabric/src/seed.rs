//! Seeded hashing: one master seed; every component derives its own stream from (seed,
//! family, id), so adding a component never perturbs another's draws.

/// SplitMix64 finalizer: a cheap, well-mixed 64-bit hash step.
#[inline]
pub fn mix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Stable id of a component family, so derived seeds do not depend on declaration order.
pub fn family(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

pub fn derive_seed(seed: u64, family_name: &str, id: u64) -> u64 {
    mix64(mix64(seed ^ family(family_name)).wrapping_add(id))
}

/// A uniform draw in [0, 1) for `index` under `seed` (the top 53 bits of a hash).
pub fn uniform(seed: u64, index: u64) -> f64 {
    (mix64(seed ^ mix64(index)) >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}
