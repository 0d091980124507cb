//! Which rendition of the video plays: the ABR state machine's choice, or the one the
//! application pinned. Free of GStreamer and of the network.

use crate::abr::Abr;
use moq_media::catalog::{Catalog, Codec, MediaFormat};

/// What the application asks (the `abr`, `rendition` and `abr-max-bitrate` properties).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AbrPrefs {
    /// Let the path choose among the renditions.
    pub auto: bool,
    /// Play this rendition, whatever the path.
    pub rendition: Option<String>,
    /// Never choose a rendition above this bitrate (bit/s), but the lowest.
    pub max_bps: Option<u64>,
}

impl Default for AbrPrefs {
    fn default() -> Self {
        AbrPrefs {
            auto: true,
            rendition: None,
            max_bps: None,
        }
    }
}

/// One rendition of the video.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendition {
    pub name: String,
    pub bitrate: u64,
}

/// A switch to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    pub to: usize,
    /// Why, as `moq-rendition` says it.
    pub reason: &'static str,
}

/// Why a switch the application asked for happens.
pub const REASON_SETTINGS: &str = "settings";

/// The video's renditions and the one playing.
#[derive(Debug)]
pub struct Renditions {
    list: Vec<Rendition>,
    playing: usize,
    /// The path's choice; None while a rendition is pinned or ABR is off.
    abr: Option<Abr>,
    prefs: AbrPrefs,
}

impl Renditions {
    /// The renditions of the video track `name` in `catalog`: None unless it has
    /// alternates that moqsrc can switch between (H.264 in our format, no enhancement
    /// layer, a bitrate each).
    pub fn new(catalog: &Catalog, name: &str, prefs: &AbrPrefs, now_us: u64) -> Option<Self> {
        if catalog.format != MediaFormat::Native {
            return None;
        }
        let list: Vec<Rendition> = catalog
            .alternates(name)
            .into_iter()
            .filter(|t| t.known_codec() == Some(Codec::H264) && t.enhancement.is_none())
            .filter_map(|t| {
                Some(Rendition {
                    name: t.name.clone(),
                    bitrate: t.bitrate?,
                })
            })
            .collect();
        if list.len() < 2 {
            return None;
        }
        // ABR starts on the lowest: a viewer climbs as its path shows room.
        let lowest = (0..list.len())
            .min_by_key(|&i| list[i].bitrate)
            .unwrap_or(0);
        let playing = match prefs.auto {
            true => lowest,
            false => list.iter().position(|r| r.name == name).unwrap_or(0),
        };
        let mut renditions = Renditions {
            list,
            playing,
            abr: None,
            prefs: prefs.clone(),
        };
        renditions.follow_prefs(now_us);
        // Nothing plays yet: start where the preferences say.
        if let Some(target) = renditions.wanted() {
            renditions.playing = target.to;
        }
        Some(renditions)
    }

    pub fn playing(&self) -> &Rendition {
        &self.list[self.playing]
    }

    pub fn get(&self, index: usize) -> Option<&Rendition> {
        self.list.get(index)
    }

    /// New preferences from the application; a switch they call for comes from the next
    /// [`Renditions::poll`]. False when they are the ones in force.
    pub fn set_prefs(&mut self, prefs: &AbrPrefs, now_us: u64) -> bool {
        if *prefs == self.prefs {
            return false;
        }
        self.prefs = prefs.clone();
        self.follow_prefs(now_us);
        true
    }

    /// ABR runs when it is on and nothing is pinned, from the rendition playing.
    fn follow_prefs(&mut self, now_us: u64) {
        self.abr = (self.prefs.auto && self.pinned().is_none()).then(|| {
            let bitrates: Vec<u64> = self.list.iter().map(|r| r.bitrate).collect();
            let mut abr = Abr::new(&bitrates, self.prefs.max_bps, now_us);
            abr.set_current(self.playing);
            abr
        });
    }

    /// The pinned rendition, if the name is one of ours.
    fn pinned(&self) -> Option<usize> {
        let name = self.prefs.rendition.as_deref()?;
        self.list.iter().position(|r| r.name == name)
    }

    /// Where the preferences alone say to be, if not where we are.
    fn wanted(&self) -> Option<Target> {
        let to = match (&self.abr, self.pinned()) {
            (_, Some(pinned)) => pinned,
            (Some(abr), None) => abr.current(),
            (None, None) => return None,
        };
        (to != self.playing).then_some(Target {
            to,
            reason: REASON_SETTINGS,
        })
    }

    /// An object of a subscribed rendition arrived at `now_us`: `bytes` long, `delay_us`
    /// after it was available at the sender.
    pub fn on_object(&mut self, now_us: u64, bytes: u64, delay_us: Option<i64>) {
        if let Some(abr) = &mut self.abr {
            abr.on_object(now_us, bytes, delay_us);
        }
    }

    /// The player skipped media.
    pub fn on_skip(&mut self, now_us: u64) {
        if let Some(abr) = &mut self.abr {
            abr.on_skip(now_us);
        }
    }

    /// The switch to make now, if any.
    pub fn poll(&mut self, now_us: u64) -> Option<Target> {
        if let Some(target) = self.wanted() {
            return Some(target);
        }
        let switch = self.abr.as_mut()?.poll(now_us)?;
        (switch.to != self.playing).then_some(Target {
            to: switch.to,
            reason: switch.reason.as_str(),
        })
    }

    /// Switching to `to` goes to a higher bitrate than the rendition playing.
    pub fn goes_up(&self, to: usize) -> bool {
        self.get(to)
            .is_some_and(|r| r.bitrate > self.playing().bitrate)
    }

    /// The switch to `to` is done at `now_us`.
    pub fn switched(&mut self, to: usize, now_us: u64) {
        let up = self.goes_up(to);
        self.playing = to.min(self.list.len() - 1);
        self.stay();
        if up && let Some(abr) = &mut self.abr {
            abr.settle(now_us);
        }
    }

    /// The switch under way was given up: the rendition playing plays on.
    pub fn stay(&mut self) {
        if let Some(abr) = &mut self.abr {
            abr.set_current(self.playing);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use moq_media::catalog::{TrackEntry, TrackKind};

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
            vec![
                video("video", 1_200_000),
                video("video-1", 600_000),
                video("video-2", 250_000),
            ],
        )
    }

    fn auto() -> AbrPrefs {
        AbrPrefs::default()
    }

    #[test]
    fn abr_starts_on_the_lowest_and_a_pin_or_off_starts_where_asked() {
        let c = catalog();
        let r = Renditions::new(&c, "video", &auto(), 0).unwrap();
        assert_eq!(r.playing().name, "video-2");
        let pinned = AbrPrefs {
            rendition: Some("video-1".into()),
            ..auto()
        };
        assert_eq!(
            Renditions::new(&c, "video", &pinned, 0)
                .unwrap()
                .playing()
                .name,
            "video-1"
        );
        let off = AbrPrefs {
            auto: false,
            ..auto()
        };
        assert_eq!(
            Renditions::new(&c, "video", &off, 0)
                .unwrap()
                .playing()
                .name,
            "video"
        );
    }

    #[test]
    fn no_alternates_no_renditions() {
        let mut c = catalog();
        for t in &mut c.tracks {
            t.alt_group = None;
        }
        assert!(Renditions::new(&c, "video", &auto(), 0).is_none());
    }

    #[test]
    fn pinning_at_run_time_switches_and_unpinning_hands_back_to_abr() {
        let c = catalog();
        let mut r = Renditions::new(&c, "video", &auto(), 0).unwrap();
        assert_eq!(r.poll(0), None);
        let pin = AbrPrefs {
            rendition: Some("video".into()),
            ..auto()
        };
        r.set_prefs(&pin, 1_000);
        let target = r.poll(1_000).unwrap();
        assert_eq!((target.to, target.reason), (0, REASON_SETTINGS));
        r.switched(target.to, 2_000);
        assert_eq!(r.poll(2_000), None);
        // ABR takes over from where the pin left it, under the new cap.
        let capped = AbrPrefs {
            max_bps: Some(700_000),
            ..auto()
        };
        assert!(r.set_prefs(&capped, 3_000));
        assert!(
            !r.set_prefs(&capped, 3_000),
            "the same preferences change nothing"
        );
        let target = r.poll(3_000).unwrap();
        assert_eq!(r.get(target.to).unwrap().name, "video-1");
        r.switched(target.to, 3_000);
        assert_eq!(r.poll(4_000), None);
    }

    #[test]
    fn an_unknown_pin_leaves_abr_in_charge() {
        let c = catalog();
        let prefs = AbrPrefs {
            rendition: Some("nope".into()),
            ..auto()
        };
        let mut r = Renditions::new(&c, "video", &prefs, 0).unwrap();
        assert_eq!(r.playing().name, "video-2");
        r.on_skip(10);
        assert_eq!(r.poll(10), None, "on the lowest already");
    }
}
