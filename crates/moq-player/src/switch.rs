//! Switching the video between renditions: when to subscribe the rendition to switch
//! to while the old one plays on, holding its frames until the splice cuts, and
//! renumbering them so the track sees one stream. Free of the network and of clocks: the
//! element's network side makes the subscriptions this asks for ([`Action`]) and tells
//! it what comes of them; every input carries the time (µs on a monotonic clock).
//!
//! The renditions' encoders take different times per frame, so the new rendition's
//! keyframe often arrives a few ms after the old rendition's frame of the same instant.
//! Were that frame forwarded at once, the keyframe would come too late to cut to, and the
//! switch would wait a whole group for the next one. So while a switch is under way, an
//! old frame waits until the new rendition has caught up with it, for at most
//! [`OLD_WAIT`].
//!
//! Nothing of the new rendition's group under way can be used: its keyframe is older than
//! what has played. A publisher that honours the "next group start" filter sends none of
//! it. moq-relay ignores that filter and sends the group it holds from its keyframe, all
//! at once: through a narrow link, seconds of useless frames that fill the queue and
//! starve the rendition playing. It honours "largest object", starting after its newest
//! object at the encoder's pace. So a switch asks with the filter the publisher honours,
//! learned from the first frame of any subscription that asked for the next group start
//! (one of a group SUBSCRIBE_OK already named says the filter is ignored), and stops a
//! group (STOP_SENDING) as soon as the splice discards a frame of it: the rest would only
//! delay what plays. A relay that no longer held the rendition subscribes to the
//! publisher again, and passes on what it gets: moqsink, asked for a keyframe by that
//! subscription, serves it from the group the keyframe starts.
//!
//! Until the filter is learned, a switch up hedges: it subscribes [`JOIN_AFTER_KEY_US`]
//! after the playing rendition's next keyframe arrived. The other renditions' groups
//! start a frame or more after it (moqsink asks their encoders for a keyframe when it
//! sees the first), so a relay's group of the new rendition has only just begun then, a
//! small burst at most; the splice cuts at the next group, which flows at its encoder's
//! pace. Going down is urgent and subscribes at once.
//!
//! Going up, the rendition switched to is subscribed one priority step below the one
//! playing (a higher number): a sender whose congestion window cannot carry both at once,
//! as after losses, sends what plays first, and the new rendition waits instead of the
//! picture. Going down, one step above: the path cannot carry the rendition playing, and
//! were it sent first, the way out would starve behind it. The rendition playing starves
//! instead, so going down cuts as soon as the keyframe is here rather than waiting for
//! the old rendition to reach it.

use std::collections::VecDeque;

use h264::FrameKind;
use moq_media::FrameHeader;
use moq_media::catalog::Catalog;
use moq_media::metrics::transit_us;

use crate::item::{Incoming, Item};
use crate::renditions::{AbrPrefs, Renditions, Target};
use crate::splice::{NewFrame, OldFrame, Renumber, Splice};

/// After a switch failed (e.g. the relay refused the track), none for this long.
const RETRY_AFTER_US: u64 = 2_000_000;
/// Longest an old frame waits for the new rendition to catch up with it during a switch.
const OLD_WAIT_US: u64 = 60_000;
/// Longest a switch up waits for the playing rendition's next keyframe before it
/// subscribes anyway.
const GROUP_START_WAIT_US: u64 = 5_000_000;
/// How long after the playing rendition's keyframe arrived a switch up subscribes: time
/// for the other renditions' encoders to start their groups too.
const JOIN_AFTER_KEY_US: u64 = 200_000;
/// Frame times without a frame of the playing rendition after which a switch down stops
/// waiting for it to reach the new keyframe: its path cannot carry it. One that still
/// comes is waited for (its encoder may run a frame or two behind the new one's).
const STARVED_FRAMES: u64 = 3;

/// Whether a publisher sent the group under way to a subscription that asked for the next
/// group start: the largest group its SUBSCRIBE_OK named, until the first frame came.
#[derive(Debug, Default)]
struct JoinCheck(Option<u64>);

impl JoinCheck {
    /// A subscription from the next group start, after group `largest`.
    fn after(largest: Option<u64>) -> JoinCheck {
        JoinCheck(largest)
    }

    /// A frame of group `group` came: true if it is the first and of a group not asked for.
    fn replayed(&mut self, group: u64) -> bool {
        self.0.take().is_some_and(|largest| group <= largest)
    }
}

/// A switch up waiting to subscribe.
#[derive(Debug, Clone, Copy)]
struct Pending {
    target: Target,
    /// When the switch was decided.
    since: u64,
    /// When the playing rendition's next keyframe arrived.
    key_at: Option<u64>,
}

/// A switch under way.
struct Switch<T> {
    target: Target,
    /// Its subscription's priority.
    priority: u8,
    /// Whether it asks for the next group start (else the largest object).
    next_group: bool,
    /// Its subscription is up.
    subscribed: bool,
    /// Whether its publisher sent a group not asked for, until its first frame.
    join: JoinCheck,
    splice: Splice,
    /// The new rendition's items until the cut, in its own numbering.
    held: Vec<Item<T>>,
    /// The latest time the new rendition has reached (dts).
    reached: Option<i64>,
    /// Old items waiting for the new rendition to catch up, as the track numbers them,
    /// with when they came.
    waiting: VecDeque<(u64, Item<T>)>,
    /// When the playing rendition's latest frame came (or the switch began), and its
    /// duration.
    old_seen: (u64, u64),
}

impl<T> Switch<T> {
    /// The playing rendition has not sent a frame for [`STARVED_FRAMES`] frame times.
    fn old_starved(&self, now_us: u64) -> bool {
        let (at, duration) = self.old_seen;
        now_us.saturating_sub(at) > STARVED_FRAMES * duration
    }
}

/// A change of the rendition playing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub from: String,
    pub to: String,
    /// `to`'s bitrate, bit/s.
    pub bitrate: u64,
    pub reason: &'static str,
}

/// What the network side does for the switcher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Subscribe the rendition to switch to, with this priority, from the next group
    /// start (else from the largest object); report with [`Switcher::switch_subscribed`]
    /// or [`Switcher::give_up`], then hand its events to [`Switcher::hold`].
    Subscribe {
        rendition: String,
        priority: u8,
        next_group: bool,
    },
    /// Stop the groups of the switch's subscription before this one: they never play.
    StopGroupsBefore(u64),
    /// The switch's subscription replaces the one playing, whose events go to
    /// [`Switcher::old`] from now on.
    Cut(Change),
}

pub struct Switcher<T> {
    renditions: Renditions,
    epoch: u64,
    /// The playing rendition's numbers as the track sees them.
    renumber: Renumber,
    /// The last frame forwarded, as the track numbers it.
    last: Option<FrameHeader>,
    switch: Option<Switch<T>>,
    /// The priority the playing rendition was subscribed with.
    priority: u8,
    pending: Option<Pending>,
    quiet_until: u64,
    /// Items for the track, in order.
    items: VecDeque<Item<T>>,
    actions: VecDeque<Action>,
    /// The playing rendition's first subscription, until its first frame.
    main_join: JoinCheck,
    /// The publisher sends its group under way whatever the filter (moq-relay does).
    replays_current_group: bool,
}

impl<T> Switcher<T> {
    /// A switcher for the video track `track`, if the catalog lists renditions of it;
    /// the rendition playing is subscribed with `priority`.
    pub fn new(
        catalog: &Catalog,
        track: &str,
        prefs: &AbrPrefs,
        priority: u8,
        epoch: u64,
        now_us: u64,
    ) -> Option<Switcher<T>> {
        Some(Switcher {
            renditions: Renditions::new(catalog, track, prefs, now_us)?,
            epoch,
            renumber: Renumber::default(),
            last: None,
            switch: None,
            priority,
            pending: None,
            quiet_until: 0,
            items: VecDeque::new(),
            actions: VecDeque::new(),
            main_join: JoinCheck::default(),
            replays_current_group: false,
        })
    }

    /// The playing rendition was subscribed from the next group start, and the publisher
    /// had published up to group `largest`.
    pub fn subscribed(&mut self, largest: Option<u64>) {
        self.main_join = JoinCheck::after(largest);
    }

    /// A switch is under way: its rendition's first keyframe may keep the track waiting.
    pub fn switching(&self) -> bool {
        self.switch.is_some()
    }

    /// The rendition playing.
    pub fn playing(&self) -> &str {
        &self.renditions.playing().name
    }

    /// The track's group `group` in the playing rendition's numbering.
    pub fn rendition_group(&self, group: u64) -> u64 {
        self.renumber.rendition_group(group)
    }

    /// New preferences drop a switch up that waits: the next tick decides again.
    pub fn set_prefs(&mut self, prefs: &AbrPrefs, now_us: u64) {
        if self.renditions.set_prefs(prefs, now_us) {
            self.pending = None;
        }
    }

    pub fn on_skip(&mut self, now_us: u64) {
        self.renditions.on_skip(now_us);
    }

    /// The next item for the track.
    pub fn poll_item(&mut self) -> Option<Item<T>> {
        self.items.pop_front()
    }

    /// The next thing for the network side to do.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// A frame of either rendition arrived: what the path carried. The delay of the
    /// rendition switched to says nothing of the path before the cut: a relay sends its
    /// current group at once, frames seconds old.
    fn observe(&mut self, frame: &Incoming<T>, playing: bool, now_us: u64) {
        let delay = (playing && frame.header.availability_us > 0)
            .then(|| transit_us(frame.header.availability_us, frame.received_us));
        self.renditions.on_object(now_us, frame.size as u64, delay);
    }

    /// An item of the rendition playing: renumbered for the track, it goes out, or waits
    /// while a switch is under way.
    pub fn old(&mut self, mut item: Item<T>, now_us: u64) {
        let keyframe = matches!(&item, Item::Frame(f) if f.header.kind == FrameKind::Key);
        if let Item::Frame(frame) = &item
            && self.main_join.replayed(frame.group)
        {
            self.replays_current_group = true;
        }
        self.renumber.item(&mut item);
        if let Item::Frame(frame) = &item {
            self.observe(frame, true, now_us);
            if let Some(switch) = &mut self.switch {
                switch.old_seen = (now_us, frame.header.duration.max(1));
            }
        }
        match &mut self.switch {
            Some(switch) if switch.subscribed => {
                switch.waiting.push_back((now_us, item));
                self.release(false, now_us);
            }
            _ => self.send(item),
        }
        if keyframe && let Some(pending) = &mut self.pending {
            pending.key_at.get_or_insert(now_us);
        }
    }

    /// An item goes to the track.
    fn send(&mut self, item: Item<T>) {
        if let Item::Frame(frame) = &item
            && self
                .last
                .is_none_or(|l| frame.header.decode_index > l.decode_index)
        {
            self.last = Some(frame.header);
        }
        self.items.push_back(item);
    }

    /// Lets waiting old items go once the new rendition has caught up with them, or they
    /// waited long enough (all of them with `all`), and cuts when one reaches the keyframe.
    fn release(&mut self, all: bool, now_us: u64) {
        while let Some(switch) = &mut self.switch
            && let Some((since, item)) = switch.waiting.front()
        {
            if let Item::Frame(frame) = item {
                let header = frame.header;
                let caught_up = switch.reached.is_some_and(|d| d >= header.dts);
                let waited = now_us.saturating_sub(*since) >= OLD_WAIT_US;
                if !(all || caught_up || switch.splice.has_key() || waited) {
                    return;
                }
                if switch.splice.on_old(&header) == OldFrame::Cut {
                    self.cut(now_us);
                    return;
                }
            }
            if let Some((_, item)) = switch.waiting.pop_front() {
                self.send(item);
            }
        }
    }

    /// The switch's subscription is up; the publisher had published up to group
    /// `largest`.
    pub fn switch_subscribed(&mut self, largest: Option<u64>) {
        if let Some(switch) = &mut self.switch {
            switch.subscribed = true;
            if switch.next_group {
                switch.join = JoinCheck::after(largest);
            }
        }
    }

    /// An item of the rendition switched to, in its own numbering: held for the cut or
    /// discarded.
    pub fn hold(&mut self, item: Item<T>, now_us: u64) {
        if let Item::Frame(frame) = &item {
            self.observe(frame, false, now_us);
        }
        let Some(switch) = &mut self.switch else {
            return;
        };
        let hold = match &item {
            Item::Frame(frame) => switch.splice.on_new(&frame.header, now_us) == NewFrame::Hold,
            // A group's end matters once its frames are held.
            _ => switch.splice.has_key(),
        };
        if let Item::Frame(frame) = &item {
            switch.reached = switch.reached.max(Some(frame.header.dts));
            self.replays_current_group |= switch.join.replayed(frame.group);
            if !hold {
                // The rest of a group the splice discards a frame of never plays either.
                self.actions
                    .push_back(Action::StopGroupsBefore(frame.group.saturating_add(1)));
            }
        }
        if hold {
            switch.held.push(item);
        }
        if self.starved_down(now_us) {
            // The path cannot carry the rendition playing: waiting for it to reach the
            // keyframe only makes the picture freeze longer.
            self.cut(now_us);
            return;
        }
        self.release(false, now_us);
    }

    /// A switch down has the keyframe to cut to, and the rendition playing stopped coming.
    fn starved_down(&self, now_us: u64) -> bool {
        self.switch.as_ref().is_some_and(|switch| {
            !self.renditions.goes_up(switch.target.to)
                && switch.splice.has_key()
                && switch.old_starved(now_us)
        })
    }

    /// Every few tens of ms: start a switch the preferences or the path call for, let old
    /// frames that waited long enough go, or cut a switch whose old rendition has had its
    /// time.
    pub fn tick(&mut self, now_us: u64) {
        match &self.switch {
            Some(switch) if switch.splice.overdue(now_us) => {
                self.release(true, now_us);
                self.cut(now_us);
                return;
            }
            Some(_) if self.starved_down(now_us) => return self.cut(now_us),
            Some(_) => return self.release(false, now_us),
            None if now_us < self.quiet_until => return,
            None => {}
        }
        if let Some(pending) = self.pending {
            let due = match pending.key_at {
                Some(at) => now_us.saturating_sub(at) >= JOIN_AFTER_KEY_US,
                None => now_us.saturating_sub(pending.since) >= GROUP_START_WAIT_US,
            };
            if due {
                self.pending = None;
                self.begin(pending.target, now_us);
            }
            return;
        }
        let Some(target) = self.renditions.poll(now_us) else {
            return;
        };
        match self.renditions.goes_up(target.to) {
            true => {
                self.pending = Some(Pending {
                    target,
                    since: now_us,
                    key_at: None,
                })
            }
            false => self.begin(target, now_us),
        }
    }

    /// Subscribes the rendition `target` names; the splice starts after the frame played
    /// last.
    fn begin(&mut self, target: Target, now_us: u64) {
        let Some(name) = self.renditions.get(target.to).map(|r| r.name.clone()) else {
            return;
        };
        let priority = match self.renditions.goes_up(target.to) {
            true => self.priority.saturating_add(1),
            false => self.priority.saturating_sub(1),
        };
        let next_group = !self.replays_current_group;
        self.actions.push_back(Action::Subscribe {
            rendition: name,
            priority,
            next_group,
        });
        self.switch = Some(Switch {
            target,
            priority,
            next_group,
            subscribed: false,
            join: JoinCheck::default(),
            splice: Splice::new(self.last),
            held: Vec::new(),
            reached: None,
            waiting: VecDeque::new(),
            old_seen: (now_us, self.last.map_or(1, |l| l.duration.max(1))),
        });
    }

    /// Drops the switch under way (its subscription failed or ended); the rendition
    /// playing plays on.
    pub fn give_up(&mut self, now_us: u64) {
        if let Some(switch) = self.switch.take() {
            for (_, item) in switch.waiting {
                self.send(item);
            }
            self.renditions.stay();
            self.quiet_until = now_us + RETRY_AFTER_US;
        }
    }

    /// Cuts over to the new rendition, if its keyframe is here: old items still waiting
    /// are dropped.
    fn cut(&mut self, now_us: u64) {
        let Some(switch) = self.switch.take_if(|s| s.splice.has_key() && s.subscribed) else {
            return;
        };
        let Some((renumber, gap)) = switch.splice.renumber() else {
            return;
        };
        if gap > 0
            && let Some(last) = self.last
        {
            // The old rendition's frames before the keyframe will not come.
            self.items.push_back(Item::GroupEnd {
                epoch: self.epoch,
                group: last.base_group,
                complete: false,
                last: None,
            });
        }
        let from = self.renditions.playing().name.clone();
        self.renditions.switched(switch.target.to, now_us);
        self.renumber = renumber;
        self.priority = switch.priority;
        let to = self.renditions.playing().clone();
        let mut first = true;
        for mut item in switch.held {
            renumber.item(&mut item);
            if let Item::Frame(frame) = &item
                && std::mem::take(&mut first)
            {
                self.items.push_back(Item::Rendition {
                    name: to.name.clone(),
                    from: Some(frame.header.decode_index),
                });
            }
            self.send(item);
        }
        self.actions.push_back(Action::Cut(Change {
            from,
            to: to.name,
            bitrate: to.bitrate,
            reason: switch.target.reason,
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use h264::SliceType;
    use moq_media::catalog::{TrackEntry, TrackKind, TrackRole};

    fn at(group: u64) -> Option<u64> {
        Some(group)
    }

    #[test]
    fn a_first_group_already_named_by_subscribe_ok_was_not_asked_for() {
        let mut check = JoinCheck::after(at(10));
        assert!(check.replayed(10), "the group under way came");
        assert!(!check.replayed(10), "only the first frame tells");
        assert!(
            !JoinCheck::after(at(10)).replayed(11),
            "the next group, as asked"
        );
        assert!(JoinCheck::after(at(10)).replayed(3), "an older group came");
    }

    #[test]
    fn nothing_to_tell_without_a_largest_group_or_a_subscription() {
        assert!(!JoinCheck::after(None).replayed(0));
        assert!(!JoinCheck::default().replayed(0));
    }

    const FRAME_US: u64 = 41_667;
    const GOP: u64 = 12;

    fn catalog() -> Catalog {
        let video = |name: &str, bitrate: u64| TrackEntry {
            codec: Some("avc1.64001e".into()),
            avcc: Some("01".into()),
            bitrate: Some(bitrate),
            alt_group: Some(1),
            ..TrackEntry::new(name, TrackKind::Video)
        };
        Catalog::native(
            "skip-gops",
            1,
            vec![video("low", 300_000), video("high", 900_000)],
        )
    }

    fn pin(name: &str) -> AbrPrefs {
        AbrPrefs {
            auto: false,
            rendition: Some(name.into()),
            max_bps: None,
        }
    }

    /// Frame `n` of the stream (time `n` frames), as a rendition whose numbering starts
    /// `offset` frames (and groups) off numbers it.
    fn frame(n: u64, offset: u64) -> Item<()> {
        let key = n.is_multiple_of(GOP);
        let header = FrameHeader {
            kind: if key {
                FrameKind::Key
            } else {
                FrameKind::Reference
            },
            slice_type: if key { SliceType::I } else { SliceType::P },
            decode_index: n + offset,
            dts: (n * FRAME_US) as i64,
            pts: (n * FRAME_US) as i64,
            duration: FRAME_US,
            availability_us: 0,
            base_group: n / GOP + offset,
            base_index: n + offset,
        };
        Item::Frame(Incoming {
            epoch: 0,
            group: header.base_group,
            header,
            layer: TrackRole::Base,
            size: 1_000,
            received_us: 0,
            data: (),
        })
    }

    /// The frames the track got, as (decode index, time in frames).
    fn forwarded(sw: &mut Switcher<()>) -> Vec<(u64, u64)> {
        std::iter::from_fn(|| sw.poll_item())
            .filter_map(|item| match item {
                Item::Frame(f) => Some((f.header.decode_index, f.header.dts as u64 / FRAME_US)),
                _ => None,
            })
            .collect()
    }

    fn actions(sw: &mut Switcher<()>) -> Vec<Action> {
        std::iter::from_fn(|| sw.poll_action()).collect()
    }

    #[test]
    fn a_switch_up_subscribes_after_the_next_keyframe_and_cuts_without_a_seam() {
        let mut sw = Switcher::new(&catalog(), "low", &pin("low"), 100, 0, 0).unwrap();
        sw.subscribed(None);
        assert_eq!(sw.playing(), "low");
        for n in 1..5 {
            sw.old(frame(n, 0), n * FRAME_US);
        }
        sw.set_prefs(&pin("high"), 5 * FRAME_US);
        sw.tick(5 * FRAME_US);
        assert!(
            actions(&mut sw).is_empty(),
            "up waits for the next group start"
        );
        // The playing rendition's keyframe comes; 200 ms later the switch subscribes.
        let mut t = 5 * FRAME_US;
        for n in 5..=GOP {
            t = n * FRAME_US;
            sw.old(frame(n, 0), t);
            sw.tick(t);
        }
        t += 250_000;
        sw.tick(t);
        assert_eq!(
            actions(&mut sw),
            [Action::Subscribe {
                rendition: "high".into(),
                priority: 101,
                next_group: true
            }]
        );
        sw.switch_subscribed(Some(0));
        // Both renditions flow; the new one (numbered 1000 on) reaches its keyframe of
        // frame 2 GOP; the old one plays until it gets there, then the new subscription
        // is the one playing.
        let mut cut = Vec::new();
        for n in GOP + 1..3 * GOP {
            let t = t + (n - GOP) * FRAME_US;
            if cut.iter().any(|a| matches!(a, Action::Cut(_))) {
                sw.old(frame(n, 1000), t);
                continue;
            }
            sw.old(frame(n, 0), t);
            if n >= 2 * GOP - 2 {
                sw.hold(frame(n, 1000), t);
            }
            cut.extend(actions(&mut sw));
        }
        let out = forwarded(&mut sw);
        assert!(
            matches!(&cut[..], [Action::StopGroupsBefore(_), .., Action::Cut(c)]
                if c.from == "low" && c.to == "high" && c.bitrate == 900_000),
            "{cut:?}"
        );
        assert_eq!(sw.playing(), "high");
        // One stream: every frame once, in order, numbered on from the old rendition.
        let times: Vec<u64> = out.iter().map(|(_, t)| *t).collect();
        assert_eq!(times, (1..3 * GOP).collect::<Vec<_>>());
        assert!(out.windows(2).all(|w| w[1].0 == w[0].0 + 1), "{out:?}");
    }

    #[test]
    fn a_switch_down_subscribes_at_once_and_cuts_when_the_keyframe_is_here() {
        let mut sw = Switcher::new(&catalog(), "low", &pin("high"), 100, 0, 0).unwrap();
        sw.subscribed(None);
        assert_eq!(sw.playing(), "high");
        sw.old(frame(0, 0), 0);
        sw.set_prefs(&pin("low"), FRAME_US);
        sw.tick(FRAME_US);
        assert_eq!(
            actions(&mut sw),
            [Action::Subscribe {
                rendition: "low".into(),
                priority: 99,
                next_group: true
            }]
        );
        sw.switch_subscribed(Some(0));
        assert!(sw.switching(), "under way until the cut");
        // The old rendition starves: only frame 1 of it comes, and nothing for four frame
        // times after it; the new one's next group starts at GOP.
        sw.old(frame(1, 0), 2 * FRAME_US);
        for n in GOP - 1..=GOP {
            sw.hold(frame(n, 500), (3 + STARVED_FRAMES) * FRAME_US);
        }
        assert!(matches!(actions(&mut sw).last(), Some(Action::Cut(c)) if c.to == "low"));
        assert!(!sw.switching());
        // The new rendition's subscription plays now.
        for n in GOP + 1..GOP + 3 {
            sw.old(frame(n, 500), 4 * FRAME_US);
        }
        let out = forwarded(&mut sw);
        let times: Vec<u64> = out.iter().map(|(_, t)| *t).collect();
        assert_eq!(times, [0, 1, GOP, GOP + 1, GOP + 2]);
        // The frames between are numbered as missing, so the player skips them.
        assert_eq!(out[2].0, GOP);
    }

    /// Under load the higher rendition's encoder runs a frame or two behind the lower
    /// one's: its frames still come, so the cut waits for them instead of skipping them.
    #[test]
    fn a_switch_down_waits_for_a_rendition_playing_that_runs_a_frame_behind() {
        let mut sw = Switcher::new(&catalog(), "low", &pin("high"), 100, 0, 0).unwrap();
        sw.subscribed(None);
        sw.old(frame(0, 0), 0);
        sw.set_prefs(&pin("low"), FRAME_US);
        sw.tick(FRAME_US);
        assert_eq!(actions(&mut sw).len(), 1, "subscribes");
        sw.switch_subscribed(Some(0));
        // Each frame of the new rendition comes a frame time before the old one's.
        let mut cut = false;
        for n in 1..GOP + 3 {
            let t = (n + 1) * FRAME_US;
            if cut {
                sw.old(frame(n + 1, 500), t);
                continue;
            }
            if n + 1 >= GOP {
                sw.hold(frame(n + 1, 500), t);
            }
            sw.old(frame(n, 0), t + FRAME_US / 2);
            sw.tick(t + FRAME_US / 2);
            cut = actions(&mut sw)
                .iter()
                .any(|a| matches!(a, Action::Cut(c) if c.to == "low"));
        }
        assert!(cut, "switched");
        let out = forwarded(&mut sw);
        let times: Vec<u64> = out.iter().map(|(_, t)| *t).collect();
        assert_eq!(times, (0..GOP + 4).collect::<Vec<_>>(), "no frame skipped");
        assert!(out.windows(2).all(|w| w[1].0 == w[0].0 + 1), "{out:?}");
    }

    #[test]
    fn a_publisher_that_sends_the_group_under_way_is_asked_for_the_largest_object() {
        let mut sw = Switcher::new(&catalog(), "low", &pin("high"), 100, 0, 0).unwrap();
        // Subscribed from the next group start after group 0, the first frame is of 0.
        sw.subscribed(at(0));
        sw.old(frame(1, 0), 0);
        sw.set_prefs(&pin("low"), 1_000);
        sw.tick(1_000);
        assert!(matches!(
            actions(&mut sw)[..],
            [Action::Subscribe {
                next_group: false,
                ..
            }]
        ));
    }

    #[test]
    fn a_failed_switch_lets_the_old_frames_go_and_waits_before_trying_again() {
        let mut sw = Switcher::new(&catalog(), "low", &pin("high"), 100, 0, 0).unwrap();
        sw.old(frame(0, 0), 0);
        sw.set_prefs(&pin("low"), 1_000);
        sw.tick(1_000);
        assert_eq!(actions(&mut sw).len(), 1);
        sw.switch_subscribed(None);
        sw.old(frame(1, 0), 2_000);
        assert_eq!(
            forwarded(&mut sw),
            [(0, 0)],
            "frame 1 waits for the new rendition"
        );
        sw.give_up(3_000);
        assert_eq!(forwarded(&mut sw), [(1, 1)]);
        assert_eq!(sw.playing(), "high");
        sw.tick(4_000);
        assert!(actions(&mut sw).is_empty(), "no retry at once");
        sw.tick(3_000 + RETRY_AFTER_US);
        assert_eq!(actions(&mut sw).len(), 1, "then again");
    }
}
