//! Control messages of the model, and their draft-14 wire form.
//!
//! Draft-14 frames every message as a varint type, a 16-bit payload length and the payload;
//! see [`ControlMessage::encode`] and [`ControlMessage::decode`]. The messages later drafts
//! added ([`SubscribeUpdateOk`], SUBSCRIBE_TRACKS, [`Redirect`]) and the fill of a
//! [`Subscribe`] have no draft-14 form: encoding them fails.

use crate::cursor::{read_u8, read_u16, take};
use crate::{DecodeError, EncodeError};

use super::common::{
    FilterType, GOAWAY_URI, GroupOrder, Location, NamespacePrefix, REASON_PHRASE, TrackNamespace,
    Wire, get, put, read_flag, read_full_name, write_flag, write_full_name,
};
use super::params::{Parameters, Scope};

/// A `String` field of a control message is a Reason Phrase (GOAWAY, whose URI has a limit of
/// its own, is written out by hand).
impl Wire for String {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        REASON_PHRASE.write(self, out)
    }

    fn read(buf: &mut &[u8]) -> Result<Self, DecodeError> {
        REASON_PHRASE.read(buf)
    }
}

/// Parameters of a control message other than the setup messages.
impl Wire for Parameters {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        self.write_scoped(Scope::Message, out)
    }

    fn read(buf: &mut &[u8]) -> Result<Self, DecodeError> {
        Parameters::read_scoped(buf, Scope::Message)
    }
}

/// Defines structs whose fields are encoded one after another, in declaration order.
macro_rules! wire_structs {
    ($(
        $(#[$meta:meta])*
        $name:ident { $( $(#[$fmeta:meta])* $field:ident: $ty:ty ),* $(,)? }
    )*) => {$(
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl Wire for $name {
            fn write(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
                $( Wire::write(&self.$field, out)?; )*
                Ok(())
            }

            fn read(buf: &mut &[u8]) -> Result<Self, DecodeError> {
                Ok(Self { $( $field: Wire::read(buf)?, )* })
            }
        }
    )*};
}

wire_structs! {
    /// MAX_REQUEST_ID: raises the limit on the peer's Request IDs.
    MaxRequestId {
        /// One more than the largest Request ID the peer may use.
        request_id: u64,
    }

    /// REQUESTS_BLOCKED: the sender wants to make a request but has run out of Request IDs.
    RequestsBlocked {
        /// The Maximum Request ID (as last granted by the peer) that blocks the sender.
        max_request_id: u64,
    }

    /// UNSUBSCRIBE: the subscriber no longer wants the track.
    Unsubscribe { request_id: u64 }

    /// FETCH_CANCEL: the subscriber no longer wants the fetched objects.
    FetchCancel { request_id: u64 }

    /// PUBLISH_NAMESPACE_OK: accepts a PUBLISH_NAMESPACE.
    PublishNamespaceOk { request_id: u64 }

    /// SUBSCRIBE_NAMESPACE_OK: accepts a SUBSCRIBE_NAMESPACE.
    SubscribeNamespaceOk { request_id: u64 }

    /// SUBSCRIBE_ERROR: rejects a SUBSCRIBE (codes in [`super::subscribe_error`]).
    SubscribeError { request_id: u64, code: u64, reason: String }

    /// PUBLISH_ERROR: rejects a PUBLISH (codes in [`super::publish_error`]).
    PublishError { request_id: u64, code: u64, reason: String }

    /// FETCH_ERROR: rejects a FETCH (codes in [`super::fetch_error`]).
    FetchError { request_id: u64, code: u64, reason: String }

    /// PUBLISH_NAMESPACE_ERROR: rejects a PUBLISH_NAMESPACE (codes in
    /// [`super::publish_namespace_error`]).
    PublishNamespaceError { request_id: u64, code: u64, reason: String }

    /// SUBSCRIBE_NAMESPACE_ERROR: rejects a SUBSCRIBE_NAMESPACE (codes in
    /// [`super::subscribe_namespace_error`]).
    SubscribeNamespaceError { request_id: u64, code: u64, reason: String }

    /// PUBLISH_DONE: the publisher has finished a subscription and will open no more streams
    /// for it.
    PublishDone {
        request_id: u64,
        /// Why it ended, from [`super::publish_done_code`].
        status: u64,
        /// Data streams opened for the subscription, so the subscriber knows when it has seen
        /// them all; 2^62 - 1 when unknown, 0 for datagram tracks.
        stream_count: u64,
        reason: String,
    }

    /// PUBLISH_NAMESPACE: the sender has tracks under this namespace.
    PublishNamespace { request_id: u64, namespace: TrackNamespace, params: Parameters }

    /// PUBLISH_NAMESPACE_DONE: the publisher withdraws a namespace.
    PublishNamespaceDone { namespace: TrackNamespace }

    /// PUBLISH_NAMESPACE_CANCEL: the receiver of a PUBLISH_NAMESPACE stops routing requests
    /// for it (codes in [`super::publish_namespace_error`]).
    PublishNamespaceCancel { namespace: TrackNamespace, code: u64, reason: String }

    /// SUBSCRIBE_NAMESPACE: asks for PUBLISH_NAMESPACE / PUBLISH messages under a prefix.
    SubscribeNamespace { request_id: u64, namespace_prefix: NamespacePrefix, params: Parameters }

    /// UNSUBSCRIBE_NAMESPACE: ends a SUBSCRIBE_NAMESPACE.
    UnsubscribeNamespace { namespace_prefix: NamespacePrefix }

    /// The part of a joining FETCH that ties it to a subscription.
    JoiningFetch {
        /// The SUBSCRIBE (with a Largest Object filter) whose live edge the fetch ends at.
        joining_request_id: u64,
        /// Groups back from the live edge (relative) or the first group (absolute).
        joining_start: u64,
    }
}

/// The answer to a SUBSCRIBE_UPDATE: the update was applied. Draft-14 has none (nothing is
/// sent); later drafts send REQUEST_OK.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SubscribeUpdateOk {
    /// The SUBSCRIBE_UPDATE answered.
    pub request_id: u64,
    /// The subscription it updated.
    pub subscription_request_id: u64,
}

/// SUBSCRIBE_TRACKS (draft-20): asks for a PUBLISH of every track under a prefix, now and
/// later; same fields as SUBSCRIBE_NAMESPACE.
pub type SubscribeTracks = SubscribeNamespace;

/// A request refused with REDIRECT (draft-20): it could succeed elsewhere, or for another
/// track.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Redirect {
    /// The request refused.
    pub request_id: u64,
    pub reason: String,
    /// Where to send it again; empty for the current session's URI. Only a server may send
    /// a non-empty one.
    pub connect_uri: String,
    /// The namespace and track name to ask for instead; `None` for the same ones. Requests
    /// about a namespace leave the track name empty.
    pub target: Option<(TrackNamespace, Vec<u8>)>,
}

/// TRACK_STATUS asks for what a SUBSCRIBE would report, without subscribing; same format.
pub type TrackStatus = Subscribe;
/// TRACK_STATUS_OK answers TRACK_STATUS like SUBSCRIBE_OK would, with track alias 0.
pub type TrackStatusOk = SubscribeOk;
/// TRACK_STATUS_ERROR rejects TRACK_STATUS like SUBSCRIBE_ERROR would.
pub type TrackStatusError = SubscribeError;

/// Writes the Content Exists flag and, when set, the Largest Location.
fn write_largest(largest: &Option<Location>, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    write_flag(largest.is_some(), out);
    largest.as_ref().map_or(Ok(()), |l| l.write(out))
}

/// Reads the Content Exists flag and the Largest Location it announces.
fn read_largest(buf: &mut &[u8]) -> Result<Option<Location>, DecodeError> {
    if read_flag(buf, "content exists must be 0 or 1")? {
        Ok(Some(Location::read(buf)?))
    } else {
        Ok(None)
    }
}

const FORWARD: &str = "forward must be 0 or 1";

/// CLIENT_SETUP: the first message from the client, offering versions.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClientSetup {
    pub versions: Vec<u64>,
    /// Setup parameters ([`super::setup_param`]).
    pub params: Parameters,
}

impl Wire for ClientSetup {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        put(self.versions.len() as u64, out)?;
        self.versions.iter().try_for_each(|&v| put(v, out))?;
        self.params.write_scoped(Scope::Setup, out)
    }

    fn read(buf: &mut &[u8]) -> Result<Self, DecodeError> {
        let count = get(buf)?;
        let mut versions = Vec::new();
        for _ in 0..count {
            versions.push(get(buf)?);
        }
        let params = Parameters::read_scoped(buf, Scope::Setup)?;
        Ok(Self { versions, params })
    }
}

/// SERVER_SETUP: the server's answer, choosing one of the offered versions.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ServerSetup {
    pub version: u64,
    /// Setup parameters ([`super::setup_param`]).
    pub params: Parameters,
}

impl Wire for ServerSetup {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        put(self.version, out)?;
        self.params.write_scoped(Scope::Setup, out)
    }

    fn read(buf: &mut &[u8]) -> Result<Self, DecodeError> {
        Ok(Self {
            version: get(buf)?,
            params: Parameters::read_scoped(buf, Scope::Setup)?,
        })
    }
}

/// GOAWAY: the sender will close the session soon.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Goaway {
    /// Where a client should reconnect; empty to reuse the current URI. Only a server may
    /// send a non-empty one.
    pub new_session_uri: String,
}

impl Wire for Goaway {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        GOAWAY_URI.write(&self.new_session_uri, out)
    }

    fn read(buf: &mut &[u8]) -> Result<Self, DecodeError> {
        Ok(Self {
            new_session_uri: GOAWAY_URI.read(buf)?,
        })
    }
}

/// SUBSCRIBE: asks for the objects of a track as they are published.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Subscribe {
    pub request_id: u64,
    pub namespace: TrackNamespace,
    pub track_name: Vec<u8>,
    /// Lower is more important, relative to the subscriber's other subscriptions.
    pub subscriber_priority: u8,
    pub group_order: GroupOrder,
    /// False to set the subscription up without objects flowing yet.
    pub forward: bool,
    pub filter: FilterType,
    pub params: Parameters,
    /// Part of the track's past to deliver as well, on a fetch stream of the subscription
    /// (draft-20's FILL_PARAMETERS; earlier drafts send a joining FETCH instead).
    pub fill: Option<Fill>,
}

/// What a subscription's fill delivers: the objects a FETCH with this filter would, on a
/// fetch stream whose header names the SUBSCRIBE. Every field left out takes the
/// subscription's value.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Fill {
    /// The range, evaluated as a fetch's (never beyond the largest object). `None`: the
    /// subscription's own filter.
    pub filter: Option<FilterType>,
    pub subscriber_priority: Option<u8>,
    pub group_order: Option<GroupOrder>,
    /// How long, in milliseconds, a relay may wait for objects it has to fetch upstream.
    pub timeout_ms: Option<u64>,
}

impl Wire for Subscribe {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        if self.fill.is_some() {
            return Err(EncodeError::Invalid(
                "draft-14 has no fill: send a joining FETCH",
            ));
        }
        put(self.request_id, out)?;
        write_full_name(&self.namespace, &self.track_name, out)?;
        out.push(self.subscriber_priority);
        self.group_order.write_requested(out);
        write_flag(self.forward, out);
        self.filter.write(out)?;
        self.params.write(out)
    }

    fn read(buf: &mut &[u8]) -> Result<Self, DecodeError> {
        let request_id = get(buf)?;
        let (namespace, track_name) = read_full_name(buf)?;
        Ok(Self {
            request_id,
            namespace,
            track_name,
            subscriber_priority: read_u8(buf)?,
            group_order: GroupOrder::read_requested(buf)?,
            forward: read_flag(buf, FORWARD)?,
            filter: FilterType::read(buf)?,
            params: Parameters::read(buf)?,
            fill: None,
        })
    }
}

/// SUBSCRIBE_OK: accepts a SUBSCRIBE and names the track alias its data will carry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SubscribeOk {
    pub request_id: u64,
    pub track_alias: u64,
    /// Milliseconds until the subscription lapses; 0 for never or unknown.
    pub expires_ms: u64,
    /// The order actually used: never [`GroupOrder::Publisher`].
    pub group_order: GroupOrder,
    /// Largest object published so far, `None` if the track has no content yet.
    pub largest: Option<Location>,
    pub params: Parameters,
}

impl Wire for SubscribeOk {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        put(self.request_id, out)?;
        put(self.track_alias, out)?;
        put(self.expires_ms, out)?;
        self.group_order.write_decided(out)?;
        write_largest(&self.largest, out)?;
        self.params.write(out)
    }

    fn read(buf: &mut &[u8]) -> Result<Self, DecodeError> {
        Ok(Self {
            request_id: get(buf)?,
            track_alias: get(buf)?,
            expires_ms: get(buf)?,
            group_order: GroupOrder::read_decided(buf)?,
            largest: read_largest(buf)?,
            params: Parameters::read(buf)?,
        })
    }
}

/// SUBSCRIBE_UPDATE: narrows an existing subscription or changes its priority / forwarding.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SubscribeUpdate {
    /// This request's own ID.
    pub request_id: u64,
    /// The SUBSCRIBE being updated.
    pub subscription_request_id: u64,
    pub start: Location,
    /// Last group wanted, `None` for open ended. (Sent as group + 1, with 0 for open ended.)
    pub end_group: Option<u64>,
    pub subscriber_priority: u8,
    pub forward: bool,
    pub params: Parameters,
}

impl Wire for SubscribeUpdate {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        put(self.request_id, out)?;
        put(self.subscription_request_id, out)?;
        self.start.write(out)?;
        let end = match self.end_group {
            None => 0,
            Some(group) => group
                .checked_add(1)
                .ok_or(EncodeError::VarintOutOfRange(group))?,
        };
        put(end, out)?;
        out.push(self.subscriber_priority);
        write_flag(self.forward, out);
        self.params.write(out)
    }

    fn read(buf: &mut &[u8]) -> Result<Self, DecodeError> {
        Ok(Self {
            request_id: get(buf)?,
            subscription_request_id: get(buf)?,
            start: Location::read(buf)?,
            end_group: get(buf)?.checked_sub(1),
            subscriber_priority: read_u8(buf)?,
            forward: read_flag(buf, FORWARD)?,
            params: Parameters::read(buf)?,
        })
    }
}

/// PUBLISH: the publisher starts a subscription on its own initiative.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Publish {
    pub request_id: u64,
    pub namespace: TrackNamespace,
    pub track_name: Vec<u8>,
    pub track_alias: u64,
    /// The order the publisher will use: never [`GroupOrder::Publisher`].
    pub group_order: GroupOrder,
    /// Largest object published so far, `None` if the track has no content yet.
    pub largest: Option<Location>,
    /// True if objects flow at once, before PUBLISH_OK.
    pub forward: bool,
    pub params: Parameters,
}

impl Wire for Publish {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        put(self.request_id, out)?;
        write_full_name(&self.namespace, &self.track_name, out)?;
        put(self.track_alias, out)?;
        self.group_order.write_decided(out)?;
        write_largest(&self.largest, out)?;
        write_flag(self.forward, out);
        self.params.write(out)
    }

    fn read(buf: &mut &[u8]) -> Result<Self, DecodeError> {
        let request_id = get(buf)?;
        let (namespace, track_name) = read_full_name(buf)?;
        Ok(Self {
            request_id,
            namespace,
            track_name,
            track_alias: get(buf)?,
            group_order: GroupOrder::read_decided(buf)?,
            largest: read_largest(buf)?,
            forward: read_flag(buf, FORWARD)?,
            params: Parameters::read(buf)?,
        })
    }
}

/// PUBLISH_OK: accepts a PUBLISH and sets the subscription's terms.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PublishOk {
    pub request_id: u64,
    pub forward: bool,
    pub subscriber_priority: u8,
    /// Overrides the order from PUBLISH: never [`GroupOrder::Publisher`].
    pub group_order: GroupOrder,
    pub filter: FilterType,
    pub params: Parameters,
}

impl Wire for PublishOk {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        put(self.request_id, out)?;
        write_flag(self.forward, out);
        out.push(self.subscriber_priority);
        self.group_order.write_decided(out)?;
        self.filter.write(out)?;
        self.params.write(out)
    }

    fn read(buf: &mut &[u8]) -> Result<Self, DecodeError> {
        Ok(Self {
            request_id: get(buf)?,
            forward: read_flag(buf, FORWARD)?,
            subscriber_priority: read_u8(buf)?,
            group_order: GroupOrder::read_decided(buf)?,
            filter: FilterType::read(buf)?,
            params: Parameters::read(buf)?,
        })
    }
}

/// What a FETCH asks for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FetchType {
    /// A range of a named track.
    Standalone {
        namespace: TrackNamespace,
        track_name: Vec<u8>,
        start: Location,
        /// One past the last object wanted; an `object` of 0 asks for all of `end.group`.
        end: Location,
    },
    /// Starts `joining_start` groups before the live edge of an existing subscription.
    RelativeJoining(JoiningFetch),
    /// Starts at group `joining_start`, up to the live edge of an existing subscription.
    AbsoluteJoining(JoiningFetch),
    /// A named track from where `filter` starts, relative to its largest object, up to that
    /// object (draft-20 on; absolute ranges are [`FetchType::Standalone`]).
    Filtered {
        namespace: TrackNamespace,
        track_name: Vec<u8>,
        filter: FilterType,
    },
}

impl Wire for FetchType {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        match self {
            Self::Standalone {
                namespace,
                track_name,
                start,
                end,
            } => {
                put(0x1, out)?;
                write_full_name(namespace, track_name, out)?;
                start.write(out)?;
                end.write(out)
            }
            Self::RelativeJoining(joining) => {
                put(0x2, out)?;
                joining.write(out)
            }
            Self::AbsoluteJoining(joining) => {
                put(0x3, out)?;
                joining.write(out)
            }
            Self::Filtered { .. } => Err(EncodeError::Invalid(
                "a fetch relative to the largest object has no draft-14 form",
            )),
        }
    }

    fn read(buf: &mut &[u8]) -> Result<Self, DecodeError> {
        match get(buf)? {
            0x1 => {
                let (namespace, track_name) = read_full_name(buf)?;
                Ok(Self::Standalone {
                    namespace,
                    track_name,
                    start: Location::read(buf)?,
                    end: Location::read(buf)?,
                })
            }
            0x2 => Ok(Self::RelativeJoining(JoiningFetch::read(buf)?)),
            0x3 => Ok(Self::AbsoluteJoining(JoiningFetch::read(buf)?)),
            _ => Err(DecodeError::ProtocolViolation("unknown fetch type")),
        }
    }
}

/// FETCH: asks for objects already published.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Fetch {
    pub request_id: u64,
    pub subscriber_priority: u8,
    pub group_order: GroupOrder,
    pub fetch_type: FetchType,
    pub params: Parameters,
}

impl Wire for Fetch {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        put(self.request_id, out)?;
        out.push(self.subscriber_priority);
        self.group_order.write_requested(out);
        self.fetch_type.write(out)?;
        self.params.write(out)
    }

    fn read(buf: &mut &[u8]) -> Result<Self, DecodeError> {
        Ok(Self {
            request_id: get(buf)?,
            subscriber_priority: read_u8(buf)?,
            group_order: GroupOrder::read_requested(buf)?,
            fetch_type: FetchType::read(buf)?,
            params: Parameters::read(buf)?,
        })
    }
}

/// FETCH_OK: accepts a FETCH and says where its objects end.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FetchOk {
    pub request_id: u64,
    /// The order actually used: never [`GroupOrder::Publisher`].
    pub group_order: GroupOrder,
    /// True if the track is finished and `end_location` is its last object.
    pub end_of_track: bool,
    /// The end of what the fetch covers (same "one past" convention as the request).
    pub end_location: Location,
    pub params: Parameters,
}

impl Wire for FetchOk {
    fn write(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        put(self.request_id, out)?;
        self.group_order.write_decided(out)?;
        write_flag(self.end_of_track, out);
        self.end_location.write(out)?;
        self.params.write(out)
    }

    fn read(buf: &mut &[u8]) -> Result<Self, DecodeError> {
        Ok(Self {
            request_id: get(buf)?,
            group_order: GroupOrder::read_decided(buf)?,
            end_of_track: read_flag(buf, "end of track must be 0 or 1")?,
            end_location: Location::read(buf)?,
            params: Parameters::read(buf)?,
        })
    }
}

/// Defines [`ControlMessage`] from one table of (variant, payload type, draft-14 type code,
/// name), and the messages later drafts added (variant, payload type, name).
macro_rules! control_messages {
    (
        draft14 {
            $( $variant:ident($ty:ty) = $code:literal, $name:literal; )*
        }
        later {
            $( $later:ident($later_ty:ty), $later_name:literal; )*
        }
    ) => {
        /// Any control message of the model.
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum ControlMessage {
            $( $variant($ty), )*
            $( $later($later_ty), )*
        }

        impl ControlMessage {
            /// The draft-14 message type code; `None` for messages draft-14 does not have.
            pub fn message_type(&self) -> Option<u64> {
                match self {
                    $( Self::$variant(_) => Some($code), )*
                    $( Self::$later(_) => None, )*
                }
            }

            /// The message's name, for logs: draft-14's, or that of the draft that added it.
            pub fn name(&self) -> &'static str {
                match self {
                    $( Self::$variant(_) => $name, )*
                    $( Self::$later(_) => $later_name, )*
                }
            }

            fn is_known(message_type: u64) -> bool {
                matches!(message_type, $( $code )|*)
            }

            fn write_payload(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
                match self {
                    $( Self::$variant(m) => m.write(out), )*
                    $( Self::$later(_) => Err(EncodeError::Invalid(
                        concat!($later_name, " has no draft-14 form"),
                    )), )*
                }
            }

            fn read_payload(message_type: u64, buf: &mut &[u8]) -> Result<Self, DecodeError> {
                match message_type {
                    $( $code => Ok(Self::$variant(<$ty>::read(buf)?)), )*
                    _ => Err(DecodeError::UnknownMessageType(message_type)),
                }
            }
        }
    };
}

control_messages! {
    draft14 {
    ClientSetup(ClientSetup) = 0x20, "CLIENT_SETUP";
    ServerSetup(ServerSetup) = 0x21, "SERVER_SETUP";
    Goaway(Goaway) = 0x10, "GOAWAY";
    MaxRequestId(MaxRequestId) = 0x15, "MAX_REQUEST_ID";
    RequestsBlocked(RequestsBlocked) = 0x1A, "REQUESTS_BLOCKED";
    Subscribe(Subscribe) = 0x03, "SUBSCRIBE";
    SubscribeOk(SubscribeOk) = 0x04, "SUBSCRIBE_OK";
    SubscribeError(SubscribeError) = 0x05, "SUBSCRIBE_ERROR";
    SubscribeUpdate(SubscribeUpdate) = 0x02, "SUBSCRIBE_UPDATE";
    Unsubscribe(Unsubscribe) = 0x0A, "UNSUBSCRIBE";
    PublishDone(PublishDone) = 0x0B, "PUBLISH_DONE";
    Publish(Publish) = 0x1D, "PUBLISH";
    PublishOk(PublishOk) = 0x1E, "PUBLISH_OK";
    PublishError(PublishError) = 0x1F, "PUBLISH_ERROR";
    Fetch(Fetch) = 0x16, "FETCH";
    FetchOk(FetchOk) = 0x18, "FETCH_OK";
    FetchError(FetchError) = 0x19, "FETCH_ERROR";
    FetchCancel(FetchCancel) = 0x17, "FETCH_CANCEL";
    TrackStatus(TrackStatus) = 0x0D, "TRACK_STATUS";
    TrackStatusOk(TrackStatusOk) = 0x0E, "TRACK_STATUS_OK";
    TrackStatusError(TrackStatusError) = 0x0F, "TRACK_STATUS_ERROR";
    PublishNamespace(PublishNamespace) = 0x06, "PUBLISH_NAMESPACE";
    PublishNamespaceOk(PublishNamespaceOk) = 0x07, "PUBLISH_NAMESPACE_OK";
    PublishNamespaceError(PublishNamespaceError) = 0x08, "PUBLISH_NAMESPACE_ERROR";
    PublishNamespaceDone(PublishNamespaceDone) = 0x09, "PUBLISH_NAMESPACE_DONE";
    PublishNamespaceCancel(PublishNamespaceCancel) = 0x0C, "PUBLISH_NAMESPACE_CANCEL";
    SubscribeNamespace(SubscribeNamespace) = 0x11, "SUBSCRIBE_NAMESPACE";
    SubscribeNamespaceOk(SubscribeNamespaceOk) = 0x12, "SUBSCRIBE_NAMESPACE_OK";
    SubscribeNamespaceError(SubscribeNamespaceError) = 0x13, "SUBSCRIBE_NAMESPACE_ERROR";
    UnsubscribeNamespace(UnsubscribeNamespace) = 0x14, "UNSUBSCRIBE_NAMESPACE";
    }
    later {
        SubscribeUpdateOk(SubscribeUpdateOk), "REQUEST_OK (update)";
        SubscribeTracks(SubscribeTracks), "SUBSCRIBE_TRACKS";
        Redirect(Redirect), "REQUEST_ERROR (REDIRECT)";
    }
}

impl ControlMessage {
    /// Appends the framed message: type, 16-bit payload length, payload.
    ///
    /// Fails without writing anything if a field breaks a draft limit or the payload exceeds
    /// 65535 bytes.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let start = out.len();
        let result = self.encode_framed(out);
        if result.is_err() {
            out.truncate(start);
        }
        result
    }

    fn encode_framed(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let message_type = self
            .message_type()
            .ok_or(EncodeError::Invalid("the message has no draft-14 form"))?;
        put(message_type, out)?;
        let length_at = out.len();
        out.extend_from_slice(&[0, 0]);
        self.write_payload(out)?;
        let len = out.len() - length_at - 2;
        let len16 = u16::try_from(len).map_err(|_| EncodeError::MessageTooLong(len))?;
        out[length_at..length_at + 2].copy_from_slice(&len16.to_be_bytes());
        Ok(())
    }

    /// Decodes one framed message from the front of `buf`, returning it and the bytes used.
    ///
    /// [`DecodeError::Incomplete`] until the whole message (as its length field says) is in
    /// `buf`. An unknown type is reported as soon as the type is read. Once the message is
    /// complete, fields that run past its length or leave bytes over are a protocol violation.
    pub fn decode(buf: &[u8]) -> Result<(Self, usize), DecodeError> {
        let mut rest = buf;
        let message_type = get(&mut rest)?;
        if !Self::is_known(message_type) {
            return Err(DecodeError::UnknownMessageType(message_type));
        }
        let len = read_u16(&mut rest)?;
        let mut payload = take(&mut rest, len.into())?;
        let message = Self::read_payload(message_type, &mut payload).map_err(|err| match err {
            DecodeError::Incomplete => {
                DecodeError::ProtocolViolation("control message shorter than its fields")
            }
            other => other,
        })?;
        if !payload.is_empty() {
            return Err(DecodeError::ProtocolViolation(
                "control message longer than its fields",
            ));
        }
        Ok((message, buf.len() - rest.len()))
    }
}
