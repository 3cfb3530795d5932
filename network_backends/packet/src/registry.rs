//! A scheme family's registry: names and the factories that build them, looked up by name.

use crate::error::{SimError, SimResult};

/// Names in registration order.
pub(crate) fn names<F>(registry: &[(&'static str, F)]) -> Vec<&'static str> {
    registry.iter().map(|(n, _)| *n).collect()
}

/// The factory registered as `name`; an unknown name is refused with the known ones.
pub(crate) fn find<F: Copy>(
    family: &'static str,
    registry: &[(&'static str, F)],
    name: &str,
) -> SimResult<F> {
    match registry.iter().find(|(n, _)| *n == name) {
        Some((_, make)) => Ok(*make),
        None => Err(SimError::UnknownScheme {
            family,
            name: name.to_string(),
            known: names(registry).join(", "),
        }),
    }
}
