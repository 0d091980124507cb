//! The network side of ABR: subscribes the rendition to switch to while the old one plays
//! on, holds its frames until the splice cuts, and renumbers them so the pad sees one
//! stream. Free of GStreamer.
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
use std::time::{Duration, Instant};

use h264::FrameKind;
use moq_media::FrameHeader;
use moq_media::catalog::Catalog;
use moq_player::splice::{NewFrame, OldFrame, Renumber, Splice};
use moq_session::{FilterType, Location, Session, Subscription, TrackEvent};
use tokio::task::JoinHandle;

use super::receiver::{self, BASE_PRIORITY, Event, Item, Received, ReceiverConfig};
use moq_player::renditions::{AbrPrefs, Renditions, Target};

/// After a switch failed (e.g. the relay refused the track), none for this long.
const RETRY_AFTER_US: u64 = 2_000_000;
/// Longest an old frame waits for the new rendition to catch up with it during a switch.
const OLD_WAIT: Duration = Duration::from_millis(60);
/// Longest a switch up waits for the playing rendition's next keyframe before it
/// subscribes anyway.
const GROUP_START_WAIT_US: u64 = 5_000_000;
/// How long after the playing rendition's keyframe arrived a switch up subscribes: time
/// for the other renditions' encoders to start their groups too.
const JOIN_AFTER_KEY_US: u64 = 200_000;

/// Whether a publisher sent the group under way to a subscription that asked for the next
/// group start: the largest group its SUBSCRIBE_OK named, until the first frame came.
#[derive(Debug, Default)]
struct JoinCheck(Option<u64>);

impl JoinCheck {
    /// A subscription from the next group start, after `largest`.
    fn after(largest: Option<Location>) -> JoinCheck {
        JoinCheck(largest.map(|l| l.group))
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
struct Switch {
    target: Target,
    /// Its subscription's priority.
    priority: u8,
    /// Whether it asks for the next group start (else the largest object).
    next_group: bool,
    subscribing: Option<JoinHandle<Result<Subscription, String>>>,
    subscription: Option<Subscription>,
    /// Whether its publisher sent a group not asked for, until its first frame.
    join: JoinCheck,
    splice: Splice,
    /// The new rendition's items until the cut, in its own numbering.
    held: Vec<Item>,
    /// The latest time the new rendition has reached (dts).
    reached: Option<i64>,
    /// Old items waiting for the new rendition to catch up, as the pad numbers them,
    /// with when they came.
    waiting: VecDeque<(Instant, Item)>,
}

/// A cut made: the new rendition's subscription replaces the old one's.
pub struct Cut {
    pub subscription: Subscription,
    pub event: Event,
}

/// What the forwarder does next: send `items` to the pad, then make `cut`.
#[derive(Default)]
pub struct Outgoing {
    pub items: Vec<Item>,
    pub cut: Option<Cut>,
}

pub struct Switcher {
    renditions: Renditions,
    /// The pad's track.
    track: String,
    config: ReceiverConfig,
    session: Session,
    origin: Instant,
    epoch: u64,
    /// The playing rendition's numbers as the pad sees them.
    renumber: Renumber,
    /// The last frame forwarded, as the pad numbers it.
    last: Option<FrameHeader>,
    switch: Option<Switch>,
    /// The priority the playing rendition was subscribed with.
    priority: u8,
    pending: Option<Pending>,
    quiet_until: u64,
    outgoing: Outgoing,
    /// The playing rendition's first subscription, until its first frame.
    main_join: JoinCheck,
    /// The publisher sends its group under way whatever the filter (moq-relay does).
    replays_current_group: bool,
}

impl Switcher {
    /// A switcher for the video track `track`, if the catalog lists renditions of it.
    pub fn new(
        catalog: &Catalog,
        track: &str,
        prefs: &AbrPrefs,
        config: &ReceiverConfig,
        session: &Session,
        epoch: u64,
    ) -> Option<Switcher> {
        Some(Switcher {
            renditions: Renditions::new(catalog, track, prefs, 0)?,
            track: track.to_owned(),
            config: config.clone(),
            session: session.clone(),
            origin: Instant::now(),
            epoch,
            renumber: Renumber::default(),
            last: None,
            switch: None,
            priority: BASE_PRIORITY,
            pending: None,
            quiet_until: 0,
            outgoing: Outgoing::default(),
            main_join: JoinCheck::default(),
            replays_current_group: false,
        })
    }

    /// The playing rendition was subscribed from the next group start, and the publisher
    /// had published up to `largest`.
    pub fn subscribed(&mut self, largest: Option<Location>) {
        self.main_join = JoinCheck::after(largest);
    }

    fn now_us(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// The rendition playing.
    pub fn playing(&self) -> &str {
        &self.renditions.playing().name
    }

    /// The pad's group `group` in the playing rendition's numbering.
    pub fn rendition_group(&self, group: u64) -> u64 {
        self.renumber.rendition_group(group)
    }

    /// New preferences drop a switch up that waits: the next tick decides again.
    pub fn set_prefs(&mut self, prefs: &AbrPrefs) {
        let now = self.now_us();
        if self.renditions.set_prefs(prefs, now) {
            self.pending = None;
        }
    }

    pub fn on_skip(&mut self) {
        let now = self.now_us();
        self.renditions.on_skip(now);
    }

    /// A frame of either rendition arrived: what the path carried. The delay of the
    /// rendition switched to says nothing of the path before the cut: a relay sends its
    /// current group at once, frames seconds old.
    fn observe(&mut self, frame: &Received, playing: bool) {
        let now = self.now_us();
        let delay = (playing && frame.header.availability_us > 0).then(|| {
            let elapsed = i64::try_from(frame.received.elapsed().as_micros()).unwrap_or(0);
            receiver::unix_now_us() - elapsed - frame.header.availability_us as i64
        });
        self.renditions.on_object(now, frame.au.len() as u64, delay);
    }

    /// An item of the rendition playing: renumbered for the pad, it goes out, or waits
    /// while a switch is under way.
    pub fn old(&mut self, mut item: Item) {
        let keyframe = matches!(&item, Item::Frame(f) if f.header.kind == FrameKind::Key);
        if let Item::Frame(frame) = &item
            && self.main_join.replayed(frame._object.group)
        {
            self.replays_current_group = true;
        }
        match &mut item {
            Item::Frame(frame) => {
                self.observe(frame, true);
                frame.header = self.renumber.apply(&frame.header);
            }
            Item::GroupEnd { group, .. } => *group = self.renumber.group(*group),
            _ => {}
        }
        match &mut self.switch {
            Some(switch) if switch.subscription.is_some() => {
                switch.waiting.push_back((Instant::now(), item));
                self.release(false);
            }
            _ => self.send(item),
        }
        if keyframe {
            let now = self.now_us();
            if let Some(pending) = &mut self.pending {
                pending.key_at.get_or_insert(now);
            }
        }
    }

    /// An item goes to the pad.
    fn send(&mut self, item: Item) {
        if let Item::Frame(frame) = &item
            && self
                .last
                .is_none_or(|l| frame.header.decode_index > l.decode_index)
        {
            self.last = Some(frame.header);
        }
        self.outgoing.items.push(item);
    }

    /// Lets waiting old items go once the new rendition has caught up with them, or they
    /// waited long enough (all of them with `all`), and cuts when one reaches the keyframe.
    fn release(&mut self, all: bool) {
        while let Some(switch) = &mut self.switch
            && let Some((since, item)) = switch.waiting.front()
        {
            if let Item::Frame(frame) = item {
                let header = frame.header;
                let caught_up = switch.reached.is_some_and(|d| d >= header.dts);
                if !(all || caught_up || switch.splice.has_key() || since.elapsed() >= OLD_WAIT) {
                    return;
                }
                if switch.splice.on_old(&header) == OldFrame::Cut {
                    self.cut();
                    return;
                }
            }
            if let Some((_, item)) = switch.waiting.pop_front() {
                self.send(item);
            }
        }
    }

    /// What to do next; taken.
    pub fn outgoing(&mut self) -> Outgoing {
        std::mem::take(&mut self.outgoing)
    }

    /// The next event of the rendition switched to; never while no switch is under way.
    pub async fn next(&mut self) -> Option<TrackEvent> {
        let Some(switch) = &mut self.switch else {
            return std::future::pending().await;
        };
        if let Some(task) = &mut switch.subscribing {
            let subscribed = task.await;
            switch.subscribing = None;
            match subscribed {
                Ok(Ok(subscription)) => {
                    if switch.next_group {
                        switch.join = JoinCheck::after(subscription.largest);
                    }
                    switch.subscription = Some(subscription);
                }
                _ => return None,
            }
        }
        match &mut switch.subscription {
            Some(subscription) => subscription.next().await,
            None => None,
        }
    }

    /// An item of the rendition switched to, in its own numbering: held for the cut or
    /// discarded.
    pub fn hold(&mut self, item: Item) {
        if let Item::Frame(frame) = &item {
            self.observe(frame, false);
        }
        let now = self.now_us();
        let Some(switch) = &mut self.switch else {
            return;
        };
        let hold = match &item {
            Item::Frame(frame) => switch.splice.on_new(&frame.header, now) == NewFrame::Hold,
            // A group's end matters once its frames are held.
            _ => switch.splice.has_key(),
        };
        if let Item::Frame(frame) = &item {
            switch.reached = switch.reached.max(Some(frame.header.dts));
            self.replays_current_group |= switch.join.replayed(frame._object.group);
            if !hold && let Some(subscription) = &switch.subscription {
                // The rest of a group the splice discards a frame of never plays either.
                subscription.stop_groups_before(frame._object.group.saturating_add(1));
            }
        }
        if hold {
            switch.held.push(item);
        }
        let down = !self.renditions.goes_up(switch.target.to);
        if down && switch.splice.has_key() {
            // The path cannot carry the rendition playing: waiting for it to reach the
            // keyframe only makes the picture freeze longer.
            self.cut();
            return;
        }
        self.release(false);
    }

    /// Every SWITCH_TICK: start a switch the preferences or the path call for, let old
    /// frames that waited long enough go, or cut a switch whose old rendition has had its
    /// time.
    pub fn tick(&mut self) {
        let now = self.now_us();
        match &self.switch {
            Some(switch) if switch.splice.overdue(now) => {
                self.release(true);
                self.cut();
                return;
            }
            Some(_) => return self.release(false),
            None if now < self.quiet_until => return,
            None => {}
        }
        if let Some(pending) = self.pending {
            let due = match pending.key_at {
                Some(at) => now.saturating_sub(at) >= JOIN_AFTER_KEY_US,
                None => now.saturating_sub(pending.since) >= GROUP_START_WAIT_US,
            };
            if due {
                self.pending = None;
                self.begin(pending.target);
            }
            return;
        }
        let Some(target) = self.renditions.poll(now) else {
            return;
        };
        match self.renditions.goes_up(target.to) {
            true => {
                self.pending = Some(Pending {
                    target,
                    since: now,
                    key_at: None,
                })
            }
            false => self.begin(target),
        }
    }

    /// Subscribes the rendition `target` names; the splice starts after the frame played
    /// last.
    fn begin(&mut self, target: Target) {
        let Some(name) = self.renditions.get(target.to).map(|r| r.name.clone()) else {
            return;
        };
        let (config, session) = (self.config.clone(), self.session.clone());
        let priority = match self.renditions.goes_up(target.to) {
            true => self.priority.saturating_add(1),
            false => self.priority.saturating_sub(1),
        };
        let next_group = !self.replays_current_group;
        let filter = match next_group {
            true => FilterType::NextGroupStart,
            false => FilterType::LargestObject,
        };
        let subscribing = tokio::spawn(async move {
            receiver::subscribe_from(&config, &session, &name, priority, filter).await
        });
        self.switch = Some(Switch {
            target,
            priority,
            next_group,
            subscribing: Some(subscribing),
            subscription: None,
            join: JoinCheck::default(),
            splice: Splice::new(self.last),
            held: Vec::new(),
            reached: None,
            waiting: VecDeque::new(),
        });
    }

    /// Drops the switch under way (its subscription failed or ended); the rendition
    /// playing plays on.
    pub fn give_up(&mut self) {
        if let Some(switch) = self.switch.take() {
            if let Some(task) = switch.subscribing {
                task.abort();
            }
            for (_, item) in switch.waiting {
                self.send(item);
            }
            self.renditions.stay();
            self.quiet_until = self.now_us() + RETRY_AFTER_US;
        }
    }

    /// Cuts over to the new rendition, if its keyframe is here: old items still waiting
    /// are dropped.
    fn cut(&mut self) {
        let Some(switch) = self
            .switch
            .take_if(|s| s.splice.has_key() && s.subscription.is_some())
        else {
            return;
        };
        let (Some((renumber, gap)), Some(subscription)) =
            (switch.splice.renumber(), switch.subscription)
        else {
            return;
        };
        if gap > 0
            && let Some(last) = self.last
        {
            // The old rendition's frames before the keyframe will not come.
            self.outgoing.items.push(Item::GroupEnd {
                epoch: self.epoch,
                group: last.base_group,
                complete: false,
                last: None,
            });
        }
        let from = self.renditions.playing().name.clone();
        let now = self.now_us();
        self.renditions.switched(switch.target.to, now);
        self.renumber = renumber;
        self.priority = switch.priority;
        let to = self.renditions.playing().clone();
        let mut first = true;
        for mut item in switch.held {
            match &mut item {
                Item::Frame(frame) => {
                    frame.header = renumber.apply(&frame.header);
                    if std::mem::take(&mut first) {
                        self.outgoing.items.push(Item::Rendition {
                            name: to.name.clone(),
                            from: Some(frame.header.decode_index),
                        });
                    }
                }
                Item::GroupEnd { group, .. } => *group = renumber.group(*group),
                _ => {}
            }
            self.send(item);
        }
        self.outgoing.cut = Some(Cut {
            subscription,
            event: Event::Rendition {
                track: self.track.clone(),
                from,
                to: to.name,
                bitrate: to.bitrate,
                reason: switch.target.reason,
            },
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(group: u64) -> Option<Location> {
        Some(Location { group, object: 7 })
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
}
