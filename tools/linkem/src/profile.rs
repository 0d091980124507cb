//! Link profiles: the JSON format shared by the CLI, the tests and the benchmarks, and the trace
//! arithmetic on it (which step is in force at a time, when a packet finishes serialising).

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// Why a profile could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{}: {source}", path.display())]
    InFile {
        path: PathBuf,
        #[source]
        source: Box<Error>,
    },
    #[error("not valid profile JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("invalid profile: {0}")]
    Invalid(String),
}

/// Upper bounds that keep arithmetic finite and catch unit mistakes (ms written as s, …).
const MAX_STEP_S: f64 = 1e7;
const MIN_STEP_S: f64 = 0.001;
/// Longest delay or jitter; also bounds [`Profile::with_delay`].
const MAX_DELAY: Duration = Duration::from_secs(60);
const MAX_RATE_KBIT: u64 = 100_000_000;
const MAX_QUEUE_BYTES: u64 = 1 << 30;
/// Length of the single step of [`Profile::constant`]; it is held after its end anyway.
const CONSTANT_STEP: Duration = Duration::from_secs(60);

/// Gilbert–Elliott loss: a two-state Markov chain stepped once per packet, with a loss
/// probability per state. Defaults (`loss_good` 0, `loss_bad` 1) give the plain Gilbert model.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gilbert {
    pub p_good_to_bad: f64,
    pub p_bad_to_good: f64,
    #[serde(default)]
    pub loss_good: f64,
    #[serde(default = "one")]
    pub loss_bad: f64,
}

fn one() -> f64 {
    1.0
}

impl Gilbert {
    /// Probability of being in the bad state in the long run.
    pub fn stationary_bad(&self) -> f64 {
        let sum = self.p_good_to_bad + self.p_bad_to_good;
        if sum == 0.0 {
            0.0
        } else {
            self.p_good_to_bad / sum
        }
    }

    /// Long-run fraction of packets this model loses.
    pub fn stationary_loss(&self) -> f64 {
        let bad = self.stationary_bad();
        (1.0 - bad) * self.loss_good + bad * self.loss_bad
    }
}

/// One piece of the piecewise-constant trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub duration: Duration,
    /// Link rate in kbit/s (1000 bit/s) of UDP payload; 0 means unlimited.
    pub rate_kbit: u64,
    /// One-way delay added after serialisation.
    pub delay: Duration,
    /// Half-width of the uniform jitter added to `delay` (never reorders packets).
    pub jitter: Duration,
    /// Bernoulli loss probability per packet.
    pub loss: f64,
}

/// A validated link profile for one direction, optionally carrying one for the other.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    name: String,
    description: Option<String>,
    looped: bool,
    queue_bytes: usize,
    steps: Vec<Step>,
    /// Cumulative end of each step in ns from the start of a pass.
    ends_ns: Vec<u64>,
    gilbert: Option<Gilbert>,
    reverse: Option<Box<Profile>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProfile {
    name: Option<String>,
    description: Option<String>,
    #[serde(rename = "loop", default)]
    looped: bool,
    queue_bytes: u64,
    steps: Vec<RawStep>,
    gilbert: Option<Gilbert>,
    reverse: Option<Box<RawProfile>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    duration_s: f64,
    rate_kbit: u64,
    #[serde(default)]
    delay_ms: f64,
    #[serde(default)]
    jitter_ms: f64,
    #[serde(default)]
    loss: f64,
}

fn check(ok: bool, what: impl FnOnce() -> String) -> Result<(), Error> {
    if ok {
        Ok(())
    } else {
        Err(Error::Invalid(what()))
    }
}

fn check_range(field: &str, value: f64, lo: f64, hi: f64) -> Result<(), Error> {
    check(value.is_finite() && (lo..=hi).contains(&value), || {
        format!("{field} must be between {lo} and {hi} (got {value})")
    })
}

fn ms(value: f64) -> Duration {
    Duration::from_secs_f64(value / 1000.0)
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl RawStep {
    fn validate(self, at: &str) -> Result<Step, Error> {
        check_range(
            &format!("{at}.duration_s"),
            self.duration_s,
            MIN_STEP_S,
            MAX_STEP_S,
        )?;
        check(self.rate_kbit <= MAX_RATE_KBIT, || {
            format!(
                "{at}.rate_kbit must be at most {MAX_RATE_KBIT} (got {})",
                self.rate_kbit
            )
        })?;
        let max_ms = MAX_DELAY.as_millis() as f64;
        check_range(&format!("{at}.delay_ms"), self.delay_ms, 0.0, max_ms)?;
        check_range(&format!("{at}.jitter_ms"), self.jitter_ms, 0.0, max_ms)?;
        check_range(&format!("{at}.loss"), self.loss, 0.0, 1.0)?;
        Ok(Step {
            duration: Duration::from_secs_f64(self.duration_s),
            rate_kbit: self.rate_kbit,
            delay: ms(self.delay_ms),
            jitter: ms(self.jitter_ms),
            loss: self.loss,
        })
    }
}

impl RawProfile {
    /// `at` is the path of this object in the file ("" at the top, "reverse." inside).
    fn validate(self, at: &str, default_name: Option<&str>) -> Result<Profile, Error> {
        let name = match (self.name, default_name) {
            (Some(n), _) if !n.trim().is_empty() => n,
            (None, Some(d)) => format!("{d} (reverse)"),
            _ => {
                return Err(Error::Invalid(format!(
                    "{at}name must be a non-empty string"
                )));
            }
        };
        check(self.queue_bytes <= MAX_QUEUE_BYTES, || {
            format!("{at}queue_bytes must be at most {MAX_QUEUE_BYTES}")
        })?;
        check(!self.steps.is_empty(), || {
            format!("{at}steps must not be empty")
        })?;
        if let Some(g) = &self.gilbert {
            for (field, v) in [
                ("p_good_to_bad", g.p_good_to_bad),
                ("p_bad_to_good", g.p_bad_to_good),
                ("loss_good", g.loss_good),
                ("loss_bad", g.loss_bad),
            ] {
                check_range(&format!("{at}gilbert.{field}"), v, 0.0, 1.0)?;
            }
        }
        let steps = self
            .steps
            .into_iter()
            .enumerate()
            .map(|(i, s)| s.validate(&format!("{at}steps[{i}]")))
            .collect::<Result<Vec<_>, _>>()?;
        let reverse = match self.reverse {
            None => None,
            Some(_) if default_name.is_some() => {
                return Err(Error::Invalid(format!(
                    "{at}reverse cannot contain another reverse"
                )));
            }
            Some(r) => Some(Box::new(r.validate("reverse.", Some(&name))?)),
        };
        let mut profile = Profile {
            name,
            description: self.description,
            looped: self.looped,
            queue_bytes: self.queue_bytes as usize,
            steps,
            ends_ns: Vec::new(),
            gilbert: self.gilbert,
            reverse,
        };
        profile.index_steps();
        Ok(profile)
    }
}

impl Profile {
    /// Parses and validates a profile; errors name the offending field.
    pub fn from_json_str(json: &str) -> Result<Profile, Error> {
        let raw: RawProfile = serde_json::from_str(json)?;
        raw.validate("", None)
    }

    /// Reads a profile file; errors name the file.
    pub fn from_file(path: &Path) -> Result<Profile, Error> {
        let json = std::fs::read_to_string(path).map_err(|source| Error::Read {
            path: path.to_owned(),
            source,
        })?;
        Profile::from_json_str(&json).map_err(|e| Error::InFile {
            path: path.to_owned(),
            source: Box::new(e),
        })
    }

    /// A constant-rate link with no delay or loss (`rate_kbit` 0 = unlimited). It has one step
    /// of 60 s, held for as long as the link runs.
    pub fn constant(rate_kbit: u64, queue_bytes: usize) -> Profile {
        let mut profile = Profile {
            name: format!("constant {rate_kbit} kbit/s"),
            description: None,
            looped: false,
            queue_bytes,
            steps: vec![Step {
                duration: CONSTANT_STEP,
                rate_kbit,
                delay: Duration::ZERO,
                jitter: Duration::ZERO,
                loss: 0.0,
            }],
            ends_ns: Vec::new(),
            gilbert: None,
            reverse: None,
        };
        profile.index_steps();
        profile
    }

    /// The same profile with `delay` (at most 60 s) on every step.
    pub fn with_delay(mut self, delay: Duration) -> Profile {
        for s in &mut self.steps {
            s.delay = delay.min(MAX_DELAY);
        }
        self
    }

    /// The same profile with Bernoulli loss `loss` (clamped to [0, 1]) on every step.
    pub fn with_loss(mut self, loss: f64) -> Profile {
        let loss = if loss.is_nan() {
            0.0
        } else {
            loss.clamp(0.0, 1.0)
        };
        for s in &mut self.steps {
            s.loss = loss;
        }
        self
    }

    fn index_steps(&mut self) {
        let mut end = 0u64;
        self.ends_ns = self
            .steps
            .iter()
            .map(|s| {
                end = end.saturating_add(nanos(s.duration).max(1));
                end
            })
            .collect();
    }

    /// Length of one pass over the steps (a run's nominal length). After it the trace starts
    /// again if it loops, otherwise the last step stays in force.
    pub fn duration(&self) -> Duration {
        Duration::from_nanos(self.period_ns())
    }

    fn period_ns(&self) -> u64 {
        self.ends_ns.last().copied().unwrap_or(1)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }

    pub fn is_looped(&self) -> bool {
        self.looped
    }

    /// Drop-tail limit: bytes waiting or being serialised.
    pub fn queue_bytes(&self) -> usize {
        self.queue_bytes
    }

    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    pub fn gilbert(&self) -> Option<&Gilbert> {
        self.gilbert.as_ref()
    }

    /// The profile for the other direction carried in the same file, if any (the `"reverse"`
    /// object). The CLI uses it unless `--reverse` is given; in-process users pass it as
    /// [`crate::LinkConfig::upstream`] themselves.
    pub fn reverse(&self) -> Option<&Profile> {
        self.reverse.as_deref()
    }

    /// The step in force at trace time `t`, and when it ends (None: held for ever).
    fn step_at(&self, t_ns: u64) -> (usize, Option<u64>) {
        let period = self.period_ns();
        if t_ns >= period && !self.looped {
            return (self.steps.len() - 1, None);
        }
        let base = t_ns - t_ns % period;
        let i = self.ends_ns.partition_point(|&e| e <= t_ns - base);
        (i, Some(base.saturating_add(self.ends_ns[i])))
    }

    pub(crate) fn step(&self, t: Duration) -> &Step {
        &self.steps[self.step_at(nanos(t)).0]
    }

    /// Link rate at trace time `t` in kbit/s (0 = unlimited).
    pub fn rate_kbit_at(&self, t: Duration) -> u64 {
        self.step(t).rate_kbit
    }

    /// When a packet of `bytes` that starts serialising at `start` has fully left, following
    /// rate changes that happen mid-packet (the rest of its bits go at the new rate).
    pub(crate) fn serialised_at(&self, start: Duration, bytes: usize) -> Duration {
        let mut t = nanos(start);
        let mut bits = bytes as f64 * 8.0;
        loop {
            let (i, end) = self.step_at(t);
            let rate = self.steps[i].rate_kbit as f64;
            if rate == 0.0 || bits <= 0.0 {
                return Duration::from_nanos(t);
            }
            // kbit/s is bits per ms, so one bit takes 1e6 / rate ns.
            let need_ns = bits * 1e6 / rate;
            match end {
                Some(end) if t as f64 + need_ns > end as f64 => {
                    bits -= (end - t) as f64 * rate / 1e6;
                    t = end;
                }
                _ => return Duration::from_nanos(t.saturating_add(need_ns.round() as u64)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STEPPED: &str = r#"{"name": "t", "queue_bytes": 1000, "steps": [
        {"duration_s": 1, "rate_kbit": 1000},
        {"duration_s": 2, "rate_kbit": 2000, "delay_ms": 5, "loss": 0.5}]}"#;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn parses_and_finds_steps() {
        let p = Profile::from_json_str(STEPPED).unwrap();
        assert_eq!(p.name(), "t");
        assert_eq!(p.duration(), secs(3.0));
        assert_eq!(p.rate_kbit_at(secs(0.5)), 1000);
        assert_eq!(p.rate_kbit_at(secs(1.0)), 2000);
        // Not looped: the last step is held.
        assert_eq!(p.rate_kbit_at(secs(100.0)), 2000);
        assert_eq!(p.step(secs(2.0)).delay, Duration::from_millis(5));
    }

    #[test]
    fn looped_trace_repeats() {
        let p =
            Profile::from_json_str(&STEPPED.replace("\"queue", "\"loop\": true, \"queue")).unwrap();
        assert!(p.is_looped());
        assert_eq!(p.rate_kbit_at(secs(3.5)), 1000);
        assert_eq!(p.rate_kbit_at(secs(7.0)), 2000);
    }

    #[test]
    fn serialisation_follows_rate_changes_mid_packet() {
        let p = Profile::from_json_str(STEPPED).unwrap();
        // 1000 bytes at 1000 kbit/s = 8 ms.
        assert_eq!(p.serialised_at(secs(0.1), 1000), secs(0.108));
        // Starts 4 ms before the step: 500 bytes at 1000 kbit/s, 500 at 2000 → 4 + 2 ms.
        assert_eq!(p.serialised_at(secs(0.996), 1000), secs(1.002));
        let unlimited = Profile::constant(0, 10);
        assert_eq!(unlimited.serialised_at(secs(1.0), 65535), secs(1.0));
    }

    #[test]
    fn errors_name_the_field() {
        let bad = STEPPED.replace("\"loss\": 0.5", "\"loss\": 1.5");
        let e = Profile::from_json_str(&bad).unwrap_err().to_string();
        assert!(e.contains("steps[1].loss"), "{e}");
        let e = Profile::from_json_str(&STEPPED.replace("rate_kbit\": 1000", "rate_kbps\": 1"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("rate_kbps"), "{e}");
        let e = Profile::from_json_str("{").unwrap_err().to_string();
        assert!(e.contains("JSON"), "{e}");
        let e = Profile::from_json_str(r#"{"name": "x", "queue_bytes": 1, "steps": []}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("steps must not be empty"), "{e}");
    }

    #[test]
    fn reverse_gets_a_name_and_cannot_nest() {
        let with_rev = r#"{"name": "g", "queue_bytes": 1, "steps": [{"duration_s": 1,
            "rate_kbit": 0}], "reverse": {"queue_bytes": 1, "steps": [{"duration_s": 1,
            "rate_kbit": 0, "delay_ms": 25}]}}"#;
        let p = Profile::from_json_str(with_rev).unwrap();
        let r = p.reverse().unwrap();
        assert_eq!(r.name(), "g (reverse)");
        assert_eq!(r.steps()[0].delay, Duration::from_millis(25));
        let nested = with_rev.replace(
            "\"reverse\": {",
            "\"reverse\": {\"reverse\": {\"queue_bytes\": 1, \"steps\": []},",
        );
        let e = Profile::from_json_str(&nested).unwrap_err().to_string();
        assert!(e.contains("cannot contain another reverse"), "{e}");
    }

    #[test]
    fn gilbert_stationary_loss() {
        let g = Gilbert {
            p_good_to_bad: 0.01,
            p_bad_to_good: 0.19,
            loss_good: 0.0,
            loss_bad: 1.0,
        };
        assert!((g.stationary_loss() - 0.05).abs() < 1e-12);
    }
}
