//! A step's figures: named numbers the program attaches to the running step (`cuprof_step_figure`,
//! `cuprof.step(tokens=..., kv_len=...)`), bounded and checked before they reach the writer.

use std::fmt;

/// The most named figures one step keeps (`tokens` not counted).
pub const MAX_FIGURES: usize = 16;
/// The longest figure name, in bytes.
pub const MAX_NAME: usize = 64;
/// The figure that is the step's work (`args.work`, summed within a step): tokens.
pub const TOKENS: &str = "tokens";

/// Why a figure was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FigureError {
    EmptyName,
    LongName(usize),
    NotFinite(String),
    NegativeTokens,
    TooMany(String),
}

impl fmt::Display for FigureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FigureError::EmptyName => write!(f, "a step figure needs a name: pass a non-empty name"),
            FigureError::LongName(n) => write!(
                f,
                "a step figure's name is {n} bytes, over the {MAX_NAME} allowed: use a shorter name"
            ),
            FigureError::NotFinite(n) => write!(
                f,
                "step figure {n:?} is not a finite number (NaN or infinite): pass a finite value"
            ),
            FigureError::NegativeTokens => write!(
                f,
                "step figure \"tokens\" is negative: pass the step's token count (0 or more)"
            ),
            FigureError::TooMany(n) => write!(
                f,
                "step figure {n:?} is past the {MAX_FIGURES} named figures a step keeps: attach fewer"
            ),
        }
    }
}

/// The figures of the running step: `work` (tokens, summed) and named figures (the last value
/// given for a name holds), in the order first given.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepFigures {
    pub work: Option<f64>,
    pub named: Vec<(String, f64)>,
}

impl StepFigures {
    /// Adds units of work (`cuprof_step_tokens`, NVTX payloads).
    pub fn add_work(&mut self, n: f64) {
        *self.work.get_or_insert(0.0) += n;
    }

    /// Checks `name = value` and attaches it: `tokens` adds to the work, any other name sets
    /// its figure.
    pub fn set(&mut self, name: &str, value: f64) -> Result<(), FigureError> {
        check(name, value)?;
        if name == TOKENS {
            self.add_work(value);
            return Ok(());
        }
        if let Some(slot) = self.named.iter_mut().find(|(n, _)| n == name) {
            slot.1 = value;
            return Ok(());
        }
        if self.named.len() >= MAX_FIGURES {
            return Err(FigureError::TooMany(name.to_string()));
        }
        self.named.push((name.to_string(), value));
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.work.is_none() && self.named.is_empty()
    }
}

/// Whether `name = value` may be a step figure.
pub fn check(name: &str, value: f64) -> Result<(), FigureError> {
    if name.is_empty() {
        return Err(FigureError::EmptyName);
    }
    if name.len() > MAX_NAME {
        return Err(FigureError::LongName(name.len()));
    }
    if !value.is_finite() {
        return Err(FigureError::NotFinite(name.to_string()));
    }
    if name == TOKENS && value < 0.0 {
        return Err(FigureError::NegativeTokens);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_are_checked_and_bounded() {
        let mut f = StepFigures::default();
        f.set("kv_len", 512.0).unwrap();
        f.set("tokens", 3.0).unwrap();
        f.set("tokens", 4.0).unwrap();
        f.set("kv_len", 1024.0).unwrap();
        assert_eq!(f.work, Some(7.0));
        assert_eq!(f.named, vec![("kv_len".to_string(), 1024.0)]);
        assert_eq!(f.set("", 1.0), Err(FigureError::EmptyName));
        assert_eq!(f.set(&"x".repeat(65), 1.0), Err(FigureError::LongName(65)));
        assert_eq!(
            f.set("a", f64::NAN),
            Err(FigureError::NotFinite("a".into()))
        );
        assert_eq!(f.set("tokens", -1.0), Err(FigureError::NegativeTokens));
        for i in 1..MAX_FIGURES {
            f.set(&format!("f{i}"), i as f64).unwrap();
        }
        assert_eq!(f.named.len(), MAX_FIGURES);
        assert_eq!(
            f.set("one_more", 1.0),
            Err(FigureError::TooMany("one_more".into()))
        );
        f.set("f3", 30.0).unwrap();
        assert_eq!(f.named[3], ("f3".to_string(), 30.0));
    }
}
