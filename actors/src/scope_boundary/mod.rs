//! A scope's start or end as the API records it: one message into the merger's
//! mailbox ([`stream`]), which writes the scope's events in
//! order with its polls and forwards it, in batches and in the same order, to the
//! energy actor that books it. Times are the clocks' raw readings: the actors make
//! calendar times of them, so the caller does not.
//!
//! A boundary the API makes now is stamped as it is sent ([`Stamp`]), so the mailbox
//! holds boundaries in the order of their instants. The only boundaries stamped in the
//! past are the window's close and the ends made there ([`BoundaryAt::WindowClose`]);
//! the close is sent first ([`ScopeBoundary::WindowCloses`]), so the energy stage
//! holds back every step it could reach.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use chrono::{DateTime, Utc};
use uuid::Uuid;
use wattline_model::remote_call::RemoteCall;

#[cfg(feature = "test-support")]
mod stall;
pub(crate) mod stream;
mod wall_clock;

/// An instant read under the scope stream's lock ([`stream::ScopeStream`], the one
/// place one is made): every boundary stamped earlier is on
/// the stream already, ahead of anything sent with or after this one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Stamp(Instant);

impl Stamp {
    /// The monotonic instant.
    pub fn instant(self) -> Instant {
        self.0
    }

    /// A stamp made up by a test (as if `at` had been read under the lock).
    #[cfg(test)]
    pub(crate) fn for_tests(at: Instant) -> Self {
        Stamp(at)
    }
}

/// A scope boundary on its way to the merger and on to the energy actor. Kept small
/// (the caller writes one per boundary, and a backlog is as many bytes as it holds):
/// what few scopes carry is behind one pointer.
#[derive(Debug)]
pub enum ScopeBoundary {
    /// An Agent scope went live: its start event goes out, later marks are copied
    /// under it, and energy is attributed to it.
    Started {
        /// Its UUID (the parent of its marks).
        uuid: Uuid,
        /// Its name.
        name: Arc<str>,
        /// The Agent scope it is nested in, if any.
        parent: Option<Uuid>,
        /// The process that opened it.
        process_id: Option<u32>,
        /// Its weight among the scopes live beside it.
        weight: Option<f64>,
        /// Its ATOF flags and the caller's `traceparent`, when it has either.
        extras: ScopeStartExtras,
        /// When it started: stamped as it was sent.
        at: Stamp,
        /// The same instant on the wall clock.
        wall: WallNanos,
    },
    /// An Agent scope ended: its end event goes out, with `flags` added.
    Ended {
        /// The scope.
        uuid: Uuid,
        /// ATOF flags added to its end event ([`ENDED_AT_PROGRAM_EXIT`] among them when
        /// its program exited with it open and wattline ended it then).
        ///
        /// [`ENDED_AT_PROGRAM_EXIT`]: wattline_model::events::ENDED_AT_PROGRAM_EXIT
        flags: Vec<&'static str>,
        /// When it ended.
        at: BoundaryAt,
        /// The same instant on the wall clock.
        wall: WallNanos,
        /// The model call to another machine it stood for, if it did: the energy
        /// stage estimates that call's energy beside the measured figures.
        remote_call: Option<Box<RemoteCall>>,
    },
    /// The measured window closes at `at` (a measured command exited, or the final
    /// report is taken): scopes still live then end there, later. The merger writes
    /// nothing for it; the energy stage settles no step that ends after it before the
    /// final report.
    WindowCloses {
        /// The window's last instant.
        at: BoundaryAt,
    },
}

#[cfg(test)]
impl ScopeBoundary {
    /// A plain scope named `step` starting at `at` (tests).
    pub(crate) fn plain_start(uuid: Uuid, at: Stamp, wall: WallNanos) -> Self {
        ScopeBoundary::Started {
            uuid,
            name: "step".into(),
            parent: None,
            process_id: None,
            weight: None,
            extras: ScopeStartExtras::default(),
            at,
            wall,
        }
    }

    /// Its end at `at`, with `flags` (tests).
    pub(crate) fn plain_end(
        uuid: Uuid,
        flags: Vec<&'static str>,
        at: Stamp,
        wall: WallNanos,
    ) -> Self {
        ScopeBoundary::Ended {
            uuid,
            flags,
            at: BoundaryAt::Stamped(at),
            wall,
            remote_call: None,
        }
    }
}

/// When a boundary happened: now, as it was sent, or at the window's close, which may
/// lie in the past.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoundaryAt {
    /// Stamped as it was sent.
    Stamped(Stamp),
    /// The window's close ([`ScopeBoundary::WindowCloses`] was sent first).
    WindowClose(Instant),
}

impl BoundaryAt {
    /// The monotonic instant.
    pub fn instant(self) -> Instant {
        match self {
            BoundaryAt::Stamped(stamp) => stamp.instant(),
            BoundaryAt::WindowClose(at) => at,
        }
    }
}

/// What a scope start carries only sometimes (remote scopes, a caller's trace): one
/// pointer, null for a plain scope, so a plain start allocates nothing for it.
#[derive(Debug, Default)]
pub struct ScopeStartExtras(Option<Box<StartExtras>>);

#[derive(Debug)]
struct StartExtras {
    attributes: Vec<&'static str>,
    traceparent: Option<String>,
}

impl ScopeStartExtras {
    /// The extras of a start with `attributes` and `traceparent`.
    pub fn new(attributes: &[&'static str], traceparent: Option<&str>) -> Self {
        let any = !attributes.is_empty() || traceparent.is_some();
        ScopeStartExtras(any.then(|| {
            Box::new(StartExtras {
                attributes: attributes.to_vec(),
                traceparent: traceparent.map(str::to_owned),
            })
        }))
    }

    /// Its ATOF flags, repeated on its end event.
    pub fn attributes(&self) -> &[&'static str] {
        self.0.as_ref().map_or(&[], |extras| &extras.attributes)
    }

    /// The caller's W3C `traceparent`, checked.
    pub fn traceparent(&self) -> Option<&str> {
        self.0
            .as_ref()
            .and_then(|extras| extras.traceparent.as_deref())
    }

    /// Whether it holds nothing (a plain scope's).
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }
}

/// A wall-clock instant as nanoseconds since the Unix epoch: half a `SystemTime`, and
/// every instant from 1677 to 2262 (one outside is clamped to that range).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WallNanos(i64);

impl WallNanos {
    /// `nanos` since 1970.
    pub(crate) fn from_nanos(nanos: i64) -> Self {
        WallNanos(nanos)
    }
}

impl From<SystemTime> for WallNanos {
    fn from(wall: SystemTime) -> Self {
        let nanos = match wall.duration_since(UNIX_EPOCH) {
            Ok(after) => i64::try_from(after.as_nanos()).unwrap_or(i64::MAX),
            Err(before) => i64::try_from(before.duration().as_nanos())
                .map(|nanos| -nanos)
                .unwrap_or(i64::MIN),
        };
        WallNanos(nanos)
    }
}

impl From<WallNanos> for SystemTime {
    fn from(wall: WallNanos) -> Self {
        let since_1970 = Duration::from_nanos(wall.0.unsigned_abs());
        if wall.0 >= 0 {
            UNIX_EPOCH + since_1970
        } else {
            UNIX_EPOCH - since_1970
        }
    }
}

impl From<WallNanos> for DateTime<Utc> {
    fn from(wall: WallNanos) -> Self {
        DateTime::from_timestamp_nanos(wall.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_boundary_is_no_more_than_112_bytes() {
        // Two per scope, written by the caller: 160 bytes each before this layout.
        assert!(
            std::mem::size_of::<ScopeBoundary>() <= 112,
            "{} bytes",
            std::mem::size_of::<ScopeBoundary>()
        );
    }

    #[test]
    fn wall_nanos_keep_the_instant_to_the_nanosecond() {
        for wall in [
            UNIX_EPOCH + Duration::new(1_764_000_000, 123_456_789),
            UNIX_EPOCH,
            UNIX_EPOCH - Duration::new(86_400, 1),
        ] {
            assert_eq!(
                DateTime::<Utc>::from(WallNanos::from(wall)),
                DateTime::<Utc>::from(wall)
            );
            assert_eq!(SystemTime::from(WallNanos::from(wall)), wall);
        }
    }

    #[test]
    fn wall_times_past_the_range_are_clamped_to_its_ends() {
        let far_future = UNIX_EPOCH + Duration::from_secs(400 * 365 * 86_400);
        let far_past = UNIX_EPOCH - Duration::from_secs(400 * 365 * 86_400);
        assert_eq!(WallNanos::from(far_future), WallNanos(i64::MAX));
        assert_eq!(WallNanos::from(far_past), WallNanos(i64::MIN));
    }

    #[test]
    fn a_plain_start_has_no_extras_and_one_with_either_keeps_both() {
        assert!(ScopeStartExtras::new(&[], None).is_empty());
        let extras = ScopeStartExtras::new(&["remote"], None);
        assert!(!extras.is_empty());
        assert_eq!(extras.attributes(), ["remote"]);
        assert_eq!(extras.traceparent(), None);
        let traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        let extras = ScopeStartExtras::new(&[], Some(traceparent));
        assert!(extras.attributes().is_empty());
        assert_eq!(extras.traceparent(), Some(traceparent));
    }
}
