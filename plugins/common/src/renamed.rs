//! Properties renamed to the one vocabulary (times in ms, bitrates as guint64 bit/s, names
//! that say what they bound), still accepted under their old names for one release. An old
//! name sets or reads the new property, converting the value, logs a warning at once, and
//! the element posts one warning message per old name when it next starts, so launch lines
//! and applications learn the new name.

use std::sync::Mutex;

use gst::glib;
use gst::prelude::*;

/// What the old property was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Old {
    /// A guint in seconds; the new property counts milliseconds.
    Seconds { min: u32, max: u32, default: u32 },
    /// A guint; the new property is the same quantity as a guint64.
    UInt { min: u32, max: u32, default: u32 },
    /// A read-only string under another name.
    ReadOnlyString,
}

/// A property's old name and the one that replaced it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Renamed {
    pub old: &'static str,
    pub new: &'static str,
    pub was: Old,
}

impl Renamed {
    /// The entry of `table` for the property `name`, if that is an old name.
    pub fn find(table: &'static [Renamed], name: &str) -> Option<&'static Renamed> {
        table.iter().find(|r| r.old == name)
    }

    /// The old name's ParamSpec: its old type, range and default, flagged deprecated.
    pub fn param_spec(&self) -> glib::ParamSpec {
        let blurb = match self.was {
            Old::Seconds { .. } => {
                format!("Deprecated: {} in seconds; use {} (ms)", self.new, self.new)
            }
            Old::UInt { .. } | Old::ReadOnlyString => format!("Deprecated: use {}", self.new),
        };
        match self.was {
            Old::Seconds { min, max, default } | Old::UInt { min, max, default } => {
                glib::ParamSpecUInt::builder(self.old)
                    .nick(self.old)
                    .blurb(&blurb)
                    .minimum(min)
                    .maximum(max)
                    .default_value(default)
                    .flags(glib::ParamFlags::READWRITE | glib::ParamFlags::DEPRECATED)
                    .build()
            }
            Old::ReadOnlyString => glib::ParamSpecString::builder(self.old)
                .nick(self.old)
                .blurb(&blurb)
                .flags(glib::ParamFlags::READABLE | glib::ParamFlags::DEPRECATED)
                .build(),
        }
    }

    /// What to tell the user.
    pub fn warning(&self) -> String {
        match self.was {
            Old::Seconds { .. } => format!(
                "property {} (seconds) is deprecated and will be removed: use {} (milliseconds)",
                self.old, self.new
            ),
            Old::UInt { .. } | Old::ReadOnlyString => format!(
                "property {} is deprecated and will be removed: use {}",
                self.old, self.new
            ),
        }
    }

    /// A value given to the old name, as the new property takes it. GObject has checked it
    /// against [`Renamed::param_spec`].
    pub fn to_new(&self, old: &glib::Value) -> glib::Value {
        let number = old.get::<u32>().unwrap_or_default();
        match self.was {
            Old::Seconds { .. } => number.saturating_mul(1000).to_value(),
            Old::UInt { .. } => u64::from(number).to_value(),
            Old::ReadOnlyString => old.clone(),
        }
    }

    /// The new property's value, as the old name reads it.
    pub fn to_old(&self, new: &glib::Value) -> glib::Value {
        match self.was {
            Old::Seconds { .. } => (new.get::<u32>().unwrap_or_default() / 1000).to_value(),
            Old::UInt { .. } => u32::try_from(new.get::<u64>().unwrap_or_default())
                .unwrap_or(u32::MAX)
                .to_value(),
            Old::ReadOnlyString => new.clone(),
        }
    }
}

/// The old names an element instance was given, each warned about once on the bus.
#[derive(Debug, Default)]
pub struct Deprecations {
    pending: Mutex<Vec<&'static Renamed>>,
    warned: Mutex<Vec<&'static str>>,
}

impl Deprecations {
    /// Notes that `renamed`'s old name was used; returns the warning to log now.
    pub fn used(&self, renamed: &'static Renamed) -> String {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if !pending.contains(&renamed) {
            pending.push(renamed);
        }
        renamed.warning()
    }

    /// The warnings not posted yet (an element has a bus once it is in a pipeline, not
    /// when a launch line sets its properties): one per old name per instance.
    pub fn to_post(&self) -> Vec<String> {
        let pending = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|e| e.into_inner()));
        let mut warned = self.warned.lock().unwrap_or_else(|e| e.into_inner());
        pending
            .into_iter()
            .filter(|r| {
                let new = !warned.contains(&r.old);
                warned.push(r.old);
                new
            })
            .map(Renamed::warning)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static TABLE: [Renamed; 3] = [
        Renamed {
            old: "timeout",
            new: "media-timeout",
            was: Old::Seconds {
                min: 1,
                max: 3600,
                default: 10,
            },
        },
        Renamed {
            old: "max-bitrate",
            new: "abr-max-bitrate",
            was: Old::UInt {
                min: 0,
                max: u32::MAX,
                default: 0,
            },
        },
        Renamed {
            old: "certificate-fingerprint",
            new: "tls-cert-fingerprint",
            was: Old::ReadOnlyString,
        },
    ];

    #[test]
    fn seconds_become_milliseconds_and_back() {
        let r = Renamed::find(&TABLE, "timeout").unwrap();
        assert_eq!(r.to_new(&30u32.to_value()).get::<u32>().unwrap(), 30_000);
        assert_eq!(r.to_old(&2_500u32.to_value()).get::<u32>().unwrap(), 2);
        assert!(r.warning().contains("media-timeout (milliseconds)"));
    }

    #[test]
    fn a_guint_bitrate_becomes_a_guint64_and_reads_back_saturated() {
        let r = Renamed::find(&TABLE, "max-bitrate").unwrap();
        assert_eq!(
            r.to_new(&900_000u32.to_value()).get::<u64>().unwrap(),
            900_000
        );
        assert_eq!(
            r.to_old(&u64::MAX.to_value()).get::<u32>().unwrap(),
            u32::MAX
        );
    }

    #[test]
    fn only_old_names_are_found() {
        assert!(Renamed::find(&TABLE, "media-timeout").is_none());
        assert_eq!(
            Renamed::find(&TABLE, "certificate-fingerprint")
                .unwrap()
                .new,
            "tls-cert-fingerprint"
        );
    }

    #[test]
    fn each_old_name_is_posted_once_per_instance() {
        let deprecations = Deprecations::default();
        let r = Renamed::find(&TABLE, "timeout").unwrap();
        deprecations.used(r);
        deprecations.used(r);
        assert_eq!(deprecations.to_post(), vec![r.warning()]);
        deprecations.used(r);
        assert!(deprecations.to_post().is_empty(), "already posted");
    }
}
