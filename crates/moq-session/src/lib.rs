//! MoQ Transport sessions over raw QUIC with quinn, on drafts 14, 16, 20 and 22.
//!
//! - [`Server`] accepts sessions and serves a [`Broadcast`]; [`connect`] opens one. The
//!   draft is negotiated by ALPN ([`Versions`]); the session speaks the message model of
//!   `moq_wire` through the draft's codec, and nothing else in it depends on the draft.
//! - A [`Session`] runs the control streams (and, from draft-17 on, a stream per request); [`Session::subscribe`] returns a
//!   [`Subscription`] yielding [`TrackEvent`]s; peers' SUBSCRIBEs are served from the
//!   session's broadcast with one QUIC stream per group, at the group's priority, by the
//!   I/O-free [`scheduler`] within the session's [`PublishLimits`].
//! - [`RelayPublisher`] announces a broadcast on a relay and keeps it announced.
//! - [`TrackProducer`] is the synchronous, never-blocking writing side for media code.
//! - [`tls`] builds identities (self-signed or PEM) and trust policies (pinned
//!   fingerprint, CA roots, insecure).

// Input from the network must never panic: no unwrap/expect outside tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod blocking;
pub mod congestion;
mod control;
mod endpoint;
mod error;
pub mod estimate;
mod feed;
mod fetch;
mod inner;
mod publish;
mod rate;
mod received;
mod relay;
mod request_ids;
pub mod scheduler;
pub mod send_queue;
mod session;
mod subscribe;
pub mod tls;
mod track;
mod url;
mod version;

pub use control::ControlReader;
pub use endpoint::{
    EVENT_QUEUE, Server, ServerEvent, ServerLimits, connect, connect_quic, connect_within,
    session_transport, transport_config,
};
pub use error::{Redirected, RequestError, SessionError};
pub use inner::{Role, Session};
pub use moq_wire::message::{FilterType, GroupOrder, Location, TrackNamespace};
pub use received::{Object, TrackEvent};
pub use relay::{MoveCause, RelayEvent, RelayPublisher, RelayTarget};
pub use scheduler::PublishLimits;
pub use session::{IMPLEMENTATION, SessionConfig};
pub use subscribe::{SubscribeOptions, Subscription};
pub use track::{
    Broadcast, GroupWriter, Handoff, HandoffHook, Payload, Priority, SubscribeHook, TrackDelivery,
    TrackProducer, TrackStats,
};
pub use url::{DEFAULT_PORT, Located, MoqUrl, QuerySettings, UrlError, parse_namespace};
pub use version::{DEFAULT_VERSIONS, Version, Versions};
