//! The player core: what a MoQ receiver decides, free of sockets, clocks and GStreamer.
//! Every input carries the time it happens at; nothing here reads a clock, so each
//! decision is tested in virtual time.
//!
//! - [`player`]: a broadcast's tracks from the network side's [`item`]s to stamped frames;
//! - [`select`]: which of a catalog's tracks play;
//! - [`reorder`]: the video reorder buffer and its skip-forward decisions;
//! - [`audio`]: the audio reorder window;
//! - [`playout`]: media time → running time, one timeline for a broadcast's tracks;
//! - [`delay`]: how late a track's frames come, and the playout offset they need;
//! - [`stats`]: what a track's receiver counts and measures;
//! - [`abr`]: which rendition of a video the path carries;
//! - [`renditions`]: the rendition playing, from ABR or the application's choice;
//! - [`splice`]: switching a video between renditions without a seam;
//! - [`switch`]: when to subscribe another rendition, and where to cut over to it;
//! - [`handover`]: moving a track to a new session (a relay's GOAWAY) without a gap;
//! - [`silence`]: when a relay's route has gone quiet and is worth subscribing again.

// Input from the network must never panic: no unwrap/expect outside tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod abr;
pub mod audio;
pub mod delay;
pub mod handover;
pub mod item;
pub mod player;
pub mod playout;
pub mod renditions;
pub mod reorder;
pub mod select;
pub mod silence;
pub mod splice;
pub mod stats;
pub mod switch;

pub use audio::AudioBuffer;
pub use item::{Incoming, Item};
pub use player::{Now, Output, Player, PlayerConfig, TrackId};
pub use playout::{PlayoutClock, Timeline, TrackPlayout};
pub use reorder::ReorderBuffer;
