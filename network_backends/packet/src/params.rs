//! Reading a scheme's parameters: typed getters with defaults, and a final check
//! that rejects every key the scheme did not read, naming it.

use crate::config::Params;
use crate::error::{SimError, SimResult};
use std::collections::BTreeSet;

pub struct ParamReader<'a> {
    family: &'static str,
    scheme: String,
    params: &'a Params,
    used: BTreeSet<String>,
}

impl<'a> ParamReader<'a> {
    pub fn new(family: &'static str, scheme: &str, params: &'a Params) -> Self {
        ParamReader {
            family,
            scheme: scheme.to_string(),
            params,
            used: BTreeSet::new(),
        }
    }

    fn bad(&self, param: &str, message: String) -> SimError {
        SimError::BadSchemeParam {
            family: self.family,
            scheme: self.scheme.clone(),
            param: param.to_string(),
            message,
        }
    }

    pub fn f64(&mut self, name: &str, default: f64) -> SimResult<f64> {
        self.used.insert(name.to_string());
        match self.params.get(name) {
            None => Ok(default),
            Some(v) => v
                .as_f64()
                .filter(|x| x.is_finite())
                .ok_or_else(|| self.bad(name, format!("must be a number, got {v}"))),
        }
    }

    /// One of `choices` (a string).
    pub fn choice(
        &mut self,
        name: &str,
        default: &'static str,
        choices: &[&'static str],
    ) -> SimResult<&'static str> {
        self.used.insert(name.to_string());
        let Some(v) = self.params.get(name) else {
            return Ok(default);
        };
        match v.as_str().and_then(|s| choices.iter().find(|c| **c == s)) {
            Some(c) => Ok(c),
            None => Err(self.bad(
                name,
                format!("must be one of {}, got {v}", choices.join(", ")),
            )),
        }
    }

    /// A boolean.
    pub fn bool(&mut self, name: &str, default: bool) -> SimResult<bool> {
        self.used.insert(name.to_string());
        match self.params.get(name) {
            None => Ok(default),
            Some(v) => v
                .as_bool()
                .ok_or_else(|| self.bad(name, format!("must be true or false, got {v}"))),
        }
    }

    /// A number within [lo, hi].
    pub fn f64_in(&mut self, name: &str, default: f64, lo: f64, hi: f64) -> SimResult<f64> {
        let v = self.f64(name, default)?;
        if v < lo || v > hi {
            return Err(self.bad(name, format!("must be in [{lo}, {hi}], got {v}")));
        }
        Ok(v)
    }

    /// A number within (lo, hi].
    pub fn f64_in_open_closed(
        &mut self,
        name: &str,
        default: f64,
        lo: f64,
        hi: f64,
    ) -> SimResult<f64> {
        let v = self.f64(name, default)?;
        if v <= lo || v > hi {
            return Err(self.bad(name, format!("must be in ({lo}, {hi}], got {v}")));
        }
        Ok(v)
    }

    /// An optional number within (lo, hi] (None: not given; the scheme derives a default).
    pub fn f64_opt(&mut self, name: &str, lo: f64, hi: f64) -> SimResult<Option<f64>> {
        if !self.params.contains_key(name) {
            self.used.insert(name.to_string());
            return Ok(None);
        }
        self.f64_in_open_closed(name, 0.0, lo, hi).map(Some)
    }

    /// Values read with these names must not decrease. Blames the one the user gave of
    /// the first pair out of order (the later one if both were given), so a lone
    /// `quantum1 = 0.5` is named, not the `quantum2` left at its default.
    pub fn ascending(&self, named: &[(&str, f64)]) -> SimResult<()> {
        self.ordered(named, false)
    }

    /// As `ascending`, but equal values are refused too.
    pub fn strictly_ascending(&self, named: &[(&str, f64)]) -> SimResult<()> {
        self.ordered(named, true)
    }

    fn ordered(&self, named: &[(&str, f64)], strict: bool) -> SimResult<()> {
        let (rel, not) = if strict { ("<", ">=") } else { ("<=", ">") };
        for pair in named.windows(2) {
            let ((lo_name, lo), (hi_name, hi)) = (pair[0], pair[1]);
            if lo > hi || (strict && lo == hi) {
                let blamed = if self.params.contains_key(hi_name) {
                    hi_name
                } else {
                    lo_name
                };
                return Err(self.bad(
                    blamed,
                    format!("must satisfy {lo_name} {rel} {hi_name}, got {lo} {not} {hi}"),
                ));
            }
        }
        Ok(())
    }

    /// An integer within [min, max].
    pub fn int_in(&mut self, name: &str, default: u64, min: u64, max: u64) -> SimResult<u64> {
        self.used.insert(name.to_string());
        let v = match self.params.get(name) {
            None => default,
            Some(v) => v.as_u64().ok_or_else(|| {
                self.bad(name, format!("must be a non-negative integer, got {v}"))
            })?,
        };
        if v < min || v > max {
            return Err(self.bad(name, format!("must be in {min}..={max}, got {v}")));
        }
        Ok(v)
    }

    /// An integer of at least `min` that fits the engine's 32-bit counters.
    pub fn u32_min(&mut self, name: &str, default: u32, min: u32) -> SimResult<u32> {
        Ok(self.int_in(name, default as u64, min as u64, u32::MAX as u64)? as u32)
    }

    /// Fails if any parameter was given that the scheme does not take.
    pub fn finish(self) -> SimResult<()> {
        for key in self.params.keys() {
            if !self.used.contains(key) {
                let known: Vec<&str> = self.used.iter().map(String::as_str).collect();
                let expected = if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                };
                return Err(self.bad(
                    key,
                    format!("is not a parameter of this scheme (it takes: {expected})"),
                ));
            }
        }
        Ok(())
    }
}
