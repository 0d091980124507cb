//! When to ask the encoder for a keyframe on behalf of a new subscriber, and when to ask
//! the other encoders of a set of renditions so that their groups start together.
//!
//! A subscriber joining mid-GoP starts sooner with a fresh keyframe than by waiting for the
//! next one, but keyframes are expensive (an I frame costs several P frames) and a peer can
//! subscribe in a loop. So requests go upstream at most once per GoP: the longest of the
//! recent keyframe intervals, which keyframes forced by earlier requests only shorten (and
//! an encoder's latency makes it impossible to tell which keyframe answered which request).
//! No clock is read: callers pass times in µs.

use std::collections::VecDeque;

/// Interval assumed until the encoder's GoP has been seen.
const DEFAULT_INTERVAL_US: u64 = 1_000_000;
/// Bounds of the interval, whatever the encoder does.
const MIN_INTERVAL_US: u64 = 250_000;
const MAX_INTERVAL_US: u64 = 10_000_000;
/// Keyframe intervals remembered.
const HISTORY: usize = 8;

#[derive(Debug, Clone, Default)]
pub struct KeyframeRequests {
    /// Recent intervals between keyframes, µs.
    intervals: VecDeque<u64>,
    last_keyframe_us: Option<u64>,
    last_request_us: Option<u64>,
}

impl KeyframeRequests {
    /// A keyframe was published at `now_us`.
    pub fn keyframe(&mut self, now_us: u64) {
        if let Some(previous) = self.last_keyframe_us
            && now_us > previous
        {
            if self.intervals.len() == HISTORY {
                self.intervals.pop_front();
            }
            self.intervals.push_back(now_us - previous);
        }
        self.last_keyframe_us = Some(now_us);
    }

    /// Whether a subscriber's keyframe request at `now_us` should go upstream.
    pub fn request(&mut self, now_us: u64) -> bool {
        let interval = self
            .intervals
            .iter()
            .max()
            .copied()
            .unwrap_or(DEFAULT_INTERVAL_US)
            .clamp(MIN_INTERVAL_US, MAX_INTERVAL_US);
        if self
            .last_request_us
            .is_some_and(|r| now_us.saturating_sub(r) < interval)
        {
            return false;
        }
        self.last_request_us = Some(now_us);
        true
    }
}

/// A keyframe on a rendition this soon after the others were asked for one answers that
/// request: it does not make the others start a group again.
const FOLLOW_WINDOW_US: u64 = 500_000;

/// Keeps the groups of renditions of one content aligned, so a receiver switching between
/// them lands on a group start: a keyframe one encoder makes on its own (its GoP, or a
/// subscriber's request) asks every other encoder of the set for one. The keyframes that
/// answer are recognised by coming within [`FOLLOW_WINDOW_US`] of the request, so they
/// start nothing themselves.
#[derive(Debug, Clone)]
pub struct AlignedKeyframes<K> {
    members: Vec<Member<K>>,
}

#[derive(Debug, Clone, Copy)]
struct Member<K> {
    id: K,
    /// When it was last asked for a keyframe to follow another.
    asked_at: Option<u64>,
    /// Whether a keyframe answered that request.
    answered: bool,
}

impl<K: Copy + Eq> Default for AlignedKeyframes<K> {
    fn default() -> Self {
        AlignedKeyframes {
            members: Vec::new(),
        }
    }
}

impl<K: Copy + Eq> AlignedKeyframes<K> {
    pub fn add(&mut self, id: K) {
        if !self.members.iter().any(|m| m.id == id) {
            self.members.push(Member {
                id,
                asked_at: None,
                answered: false,
            });
        }
    }

    pub fn remove(&mut self, id: K) {
        self.members.retain(|m| m.id != id);
    }

    /// A keyframe of `id` was published at `now_us`: the renditions to ask for one.
    pub fn keyframe(&mut self, id: K, now_us: u64) -> Vec<K> {
        let recently = |m: &Member<K>| {
            m.asked_at
                .is_some_and(|t| now_us.saturating_sub(t) < FOLLOW_WINDOW_US)
        };
        let Some(this) = self.members.iter_mut().find(|m| m.id == id) else {
            return Vec::new();
        };
        if recently(this) && !this.answered {
            this.answered = true;
            return Vec::new();
        }
        let mut ask = Vec::new();
        for m in &mut self.members {
            if m.id != id && !recently(m) {
                m.asked_at = Some(now_us);
                m.answered = false;
                ask.push(m.id);
            }
        }
        ask
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000;

    #[test]
    fn at_most_one_request_per_gop() {
        let mut k = KeyframeRequests::default();
        // The encoder's GoP is 625 ms.
        for i in 0..3 {
            k.keyframe(i * 625 * MS);
        }
        // A burst of subscriptions: one request goes up.
        let t = 1_300 * MS;
        assert!(k.request(t));
        for dt in [0, 1, 100, 600] {
            assert!(!k.request(t + dt * MS), "{dt} ms later");
        }
        assert!(k.request(t + 625 * MS));
        // A thousand subscriptions over ten seconds: at most one per GoP.
        let granted = (0..1000)
            .filter(|i| k.request(t + 700 * MS + i * 10 * MS))
            .count();
        assert!((15..=16).contains(&granted), "{granted}");
    }

    #[test]
    fn forced_keyframes_do_not_shorten_the_measured_gop() {
        let mut k = KeyframeRequests::default();
        k.keyframe(0);
        k.keyframe(2_000 * MS);
        assert!(k.request(2_100 * MS));
        // The answer comes late (encoder latency), after a natural keyframe.
        k.keyframe(2_500 * MS);
        k.keyframe(2_700 * MS);
        assert!(!k.request(3_000 * MS), "a 200 ms interval is not the GoP");
        assert!(!k.request(4_000 * MS));
        assert!(k.request(4_100 * MS));
    }

    #[test]
    fn the_interval_is_bounded_and_defaults_to_a_second() {
        let mut k = KeyframeRequests::default();
        assert!(k.request(0));
        assert!(!k.request(999 * MS));
        assert!(k.request(1_000 * MS));
        // An all-intra stream still gets at most four requests per second.
        let mut k = KeyframeRequests::default();
        for i in 0..10 {
            k.keyframe(i * 40 * MS);
        }
        assert!(k.request(400 * MS));
        assert!(!k.request(600 * MS));
        assert!(k.request(650 * MS));
    }

    #[test]
    fn a_keyframe_of_one_rendition_asks_the_others_once() {
        let mut aligned = AlignedKeyframes::default();
        for m in [1, 2, 3] {
            aligned.add(m);
        }
        aligned.add(2);
        // Rendition 2's encoder starts a GoP: 1 and 3 are asked.
        assert_eq!(aligned.keyframe(2, 1_000_000), [1, 3]);
        // Their answers start nothing, nor does a second leader within the window.
        assert!(aligned.keyframe(1, 1_040_000).is_empty());
        assert!(aligned.keyframe(2, 1_050_000).is_empty());
        assert!(aligned.keyframe(3, 1_080_000).is_empty());
        // The next GoP of any of them asks the others again.
        assert_eq!(aligned.keyframe(3, 1_625_000), [1, 2]);
        // A rendition that never answered is asked again after the window, not before.
        let mut aligned = AlignedKeyframes::default();
        aligned.add(1);
        aligned.add(2);
        assert_eq!(aligned.keyframe(1, 0), [2]);
        assert!(aligned.keyframe(1, 100_000).is_empty());
        assert_eq!(aligned.keyframe(1, 600_000), [2]);
        // A removed rendition is not asked; an unknown one asks nobody.
        aligned.remove(2);
        assert!(aligned.keyframe(1, 2_000_000).is_empty());
        assert!(aligned.keyframe(9, 2_000_000).is_empty());
    }
}
