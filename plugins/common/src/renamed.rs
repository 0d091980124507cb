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
    /// An old guint in seconds (1 to 3600), now a property in ms whose default is
    /// `default_ms`.
    pub const fn seconds(old: &'static str, new: &'static str, default_ms: u32) -> Renamed {
        let default = default_ms / 1000;
        Renamed::with(
            old,
            new,
            Old::Seconds {
                min: 1,
                max: 3600,
                default,
            },
        )
    }

    /// An old guint (up to its type's maximum), now a guint64 of the same quantity.
    pub const fn uint(old: &'static str, new: &'static str, min: u32, default: u32) -> Renamed {
        Renamed::with(
            old,
            new,
            Old::UInt {
                min,
                max: u32::MAX,
                default,
            },
        )
    }

    /// An old read-only string.
    pub const fn read_only(old: &'static str, new: &'static str) -> Renamed {
        Renamed::with(old, new, Old::ReadOnlyString)
    }

    const fn with(old: &'static str, new: &'static str, was: Old) -> Renamed {
        Renamed { old, new, was }
    }

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
        let mut pending = crate::lock(&self.pending);
        if !pending.contains(&renamed) {
            pending.push(renamed);
        }
        renamed.warning()
    }

    /// What an element's `set_property` does before setting one of its own properties: an
    /// old name in `table` sets its new property instead, and a property that may change
    /// only in NULL or READY is left alone while the element runs. `Some(warning)` when
    /// that handled the call (logged in `cat`): the element returns. An old name is noted
    /// whatever the log level, since the bus warning comes from it.
    pub fn before_set(
        &self,
        table: &'static [Renamed],
        element: &gst::Element,
        pspec: &glib::ParamSpec,
        value: &glib::Value,
        cat: gst::DebugCategory,
    ) -> bool {
        if let Some(renamed) = Renamed::find(table, pspec.name()) {
            let warning = self.used(renamed);
            gst::warning!(cat, obj = element, "{warning}");
            element.set_property_from_value(renamed.new, &renamed.to_new(value));
            return true;
        }
        let running = element.current_state() > gst::State::Ready;
        if running && pspec.flags().contains(gst::PARAM_FLAG_MUTABLE_READY) {
            gst::warning!(
                cat,
                obj = element,
                "{} can only be set in the NULL or READY state: ignored",
                pspec.name()
            );
            return true;
        }
        false
    }

    /// When `name` is an old name in `table`: the new property's value on `object` as the
    /// old name reads it, and the warning to log.
    pub fn get(
        &self,
        table: &'static [Renamed],
        object: &glib::Object,
        name: &str,
    ) -> Option<(glib::Value, String)> {
        let renamed = Renamed::find(table, name)?;
        let warning = self.used(renamed);
        Some((renamed.to_old(&object.property_value(renamed.new)), warning))
    }

    /// The warnings not posted yet (an element has a bus once it is in a pipeline, not
    /// when a launch line sets its properties): one per old name per instance.
    pub fn to_post(&self) -> Vec<String> {
        let pending = std::mem::take(&mut *crate::lock(&self.pending));
        let mut warned = crate::lock(&self.warned);
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
        Renamed::seconds("timeout", "media-timeout", 10_000),
        Renamed::uint("max-bitrate", "abr-max-bitrate", 0, 0),
        Renamed::read_only("certificate-fingerprint", "tls-cert-fingerprint"),
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
