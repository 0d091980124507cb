//! The network side of ABR: subscribes the rendition to switch to while the old one plays
//! on, holds its frames until the splice cuts, and renumbers them so the pad sees one
//! stream. Free of GStreamer.

use std::time::Instant;

use moq_media::FrameHeader;
use moq_media::catalog::Catalog;
use moq_media::splice::{NewFrame, OldFrame, Renumber, Splice};
use moq_session::{Session, Subscription, TrackEvent};
use tokio::task::JoinHandle;

use super::receiver::{self, BASE_PRIORITY, Event, Item, Received, ReceiverConfig};
use super::renditions::{AbrPrefs, Renditions, Target};

/// After a switch failed (e.g. the relay refused the track), none for this long.
const RETRY_AFTER_US: u64 = 2_000_000;

/// A switch under way.
struct Switch {
    target: Target,
    subscribing: Option<JoinHandle<Result<Subscription, String>>>,
    subscription: Option<Subscription>,
    splice: Splice,
    /// The new rendition's items until the cut, in its own numbering.
    held: Vec<Item>,
}

/// A cut made: the new rendition's subscription and the items the pad gets first.
pub struct Cut {
    pub subscription: Subscription,
    pub items: Vec<Item>,
    pub event: Event,
}

/// What became of a frame of the rendition playing.
pub enum Old {
    Play,
    Cut(Cut),
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
    quiet_until: u64,
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
            quiet_until: 0,
        })
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

    pub fn set_prefs(&mut self, prefs: &AbrPrefs) {
        let now = self.now_us();
        self.renditions.set_prefs(prefs, now);
    }

    pub fn on_skip(&mut self) {
        let now = self.now_us();
        self.renditions.on_skip(now);
    }

    /// A frame of either rendition arrived: what the path carried.
    fn observe(&mut self, frame: &Received) {
        let now = self.now_us();
        let delay = (frame.header.availability_us > 0).then(|| {
            let elapsed = i64::try_from(frame.received.elapsed().as_micros()).unwrap_or(0);
            receiver::unix_now_us() - elapsed - frame.header.availability_us as i64
        });
        self.renditions.on_object(now, frame.au.len() as u64, delay);
    }

    /// An item of the rendition playing, renumbered for the pad; whether it plays or
    /// the switch cuts here.
    pub fn old(&mut self, item: &mut Item) -> Old {
        match item {
            Item::Frame(frame) => {
                self.observe(frame);
                frame.header = self.renumber.apply(&frame.header);
                if let Some(switch) = &mut self.switch
                    && switch.splice.on_old(&frame.header) == OldFrame::Cut
                    && let Some(cut) = self.cut()
                {
                    return Old::Cut(cut);
                }
                if self
                    .last
                    .is_none_or(|l| frame.header.decode_index > l.decode_index)
                {
                    self.last = Some(frame.header);
                }
            }
            Item::GroupEnd { group, .. } => *group = self.renumber.group(*group),
            _ => {}
        }
        Old::Play
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
                Ok(Ok(subscription)) => switch.subscription = Some(subscription),
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
            self.observe(frame);
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
        if hold {
            switch.held.push(item);
        }
    }

    /// Every few hundred ms: start a switch the preferences or the path call for, or cut
    /// one whose old rendition has had its time.
    pub fn tick(&mut self) -> Option<Cut> {
        let now = self.now_us();
        match &self.switch {
            Some(switch) if switch.splice.overdue(now) => return self.cut(),
            Some(_) => return None,
            None if now < self.quiet_until => return None,
            None => {}
        }
        let target = self.renditions.poll(now)?;
        let name = self.renditions.get(target.to)?.name.clone();
        let (config, session) = (self.config.clone(), self.session.clone());
        let subscribing = tokio::spawn(async move {
            receiver::subscribe(&config, &session, &name, BASE_PRIORITY).await
        });
        self.switch = Some(Switch {
            target,
            subscribing: Some(subscribing),
            subscription: None,
            splice: Splice::new(self.last),
            held: Vec::new(),
        });
        None
    }

    /// Drops the switch under way (its subscription failed or ended); the rendition
    /// playing plays on.
    pub fn give_up(&mut self) {
        if let Some(switch) = self.switch.take() {
            if let Some(task) = switch.subscribing {
                task.abort();
            }
            self.renditions.stay();
            self.quiet_until = self.now_us() + RETRY_AFTER_US;
        }
    }

    /// Cuts over to the new rendition, if its keyframe is here.
    fn cut(&mut self) -> Option<Cut> {
        let (renumber, gap) = self.switch.as_ref()?.splice.renumber()?;
        let switch = self.switch.take()?;
        let subscription = switch.subscription?;
        let mut items = Vec::with_capacity(switch.held.len() + 2);
        if gap > 0
            && let Some(last) = self.last
        {
            // The old rendition's frames before the keyframe will not come.
            items.push(Item::GroupEnd {
                epoch: self.epoch,
                group: last.base_group,
                complete: false,
                last: None,
            });
        }
        let from = self.renditions.playing().name.clone();
        self.renditions.switched(switch.target.to);
        self.renumber = renumber;
        let to = self.renditions.playing().clone();
        let mut first = true;
        for mut item in switch.held {
            if let Item::Frame(frame) = &mut item {
                frame.header = renumber.apply(&frame.header);
                if std::mem::take(&mut first) {
                    items.push(Item::Rendition {
                        name: to.name.clone(),
                        from: Some(frame.header.decode_index),
                    });
                }
                if self
                    .last
                    .is_none_or(|l| frame.header.decode_index > l.decode_index)
                {
                    self.last = Some(frame.header);
                }
            } else if let Item::GroupEnd { group, .. } = &mut item {
                *group = renumber.group(*group);
            }
            items.push(item);
        }
        Some(Cut {
            subscription,
            items,
            event: Event::Rendition {
                track: self.track.clone(),
                from,
                to: to.name,
                bitrate: to.bitrate,
                reason: switch.target.reason,
            },
        })
    }
}
