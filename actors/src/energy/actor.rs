//! The energy actor: turns every GPU power sample, RAPL reading and scope boundary into
//! an [`EnergyRecord`], applies it to the energy account, sends it to the event sink
//! (so an event file can rebuild the report), passes each gauge sample with the
//! intervals it closed and each RAPL reading's intervals on as typed events (the
//! exporters name them), and makes the report.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use chrono::{DateTime, Utc};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use uuid::Uuid;
use wattline_config::energy::{COUNTRY_VARIABLE, EnergySettings};

use super::rapl_intervals::RaplIntervals;
use super::settled::{MetricScopeNames, send_settled_scope_events};
use crate::energy::input::{EnergyInput, EnergyMessage};
use crate::energy::record::power_record;
use crate::samplers::gpu::GpuSourceStatus;
use crate::scope_boundary::ScopeBoundary;
use wattline_energy::account::EnergyAccount;
use wattline_energy::remote_estimate::with_estimate;
use wattline_gpu::PowerSample;
use wattline_model::energy::RaplZoneReading;
use wattline_model::energy::{EnergyRecord, Epoch, Nanos};
use wattline_model::energy_telemetry::{ClosedInterval, EnergyFactors, GpuTelemetry};
use wattline_model::events::{ENDED_AT_PROGRAM_EXIT, EventSink, PipelineEvent};
use wattline_model::scope_energy::SettledScope;

/// What the energy actor starts with.
pub struct EnergyArguments {
    /// Factors and interval.
    pub settings: EnergySettings,
    /// Where records and the GPU and RAPL telemetry go.
    pub sink: Arc<dyn EventSink>,
    /// The pipeline's monotonic epoch.
    pub epoch: Epoch,
}

/// The actor.
pub struct EnergyActor;

/// Its state.
pub struct EnergyState {
    account: EnergyAccount,
    sink: Arc<dyn EventSink>,
    epoch: Epoch,
    gpu_status: Option<GpuSourceStatus>,
    cpu_status: Option<Option<String>>,
    /// Intervals closed by dense readings since the last gauge sample: their energy
    /// goes out with the next one, so the metrics keep the collection cadence.
    pending: Vec<ClosedInterval>,
    /// The newest full answer whose gauges went out, per backend.
    newest_gauges: std::collections::BTreeMap<String, Option<Nanos>>,
    /// The account's cost and CO2 factors, which the telemetry carries.
    factors: Arc<EnergyFactors>,
    /// The last RAPL reading per zone, for the CPU and RAM metrics.
    rapl_intervals: RaplIntervals,
    /// The scope names the per-step metrics carry.
    metric_scope_names: MetricScopeNames,
    /// Scopes their program left open, ended at its exit, not yet settled.
    ended_at_program_exit: HashSet<Uuid>,
    /// Empty between calls: settled scopes on their way to the sink.
    settled_batch: Vec<SettledScope>,
    /// While a batch of boundaries is booked, its events (records, settled scopes),
    /// sent as one batch when it is booked: nothing per scope goes out alone.
    outbox: Option<Vec<PipelineEvent>>,
    /// When the records being made are recorded: the clock, read once for a run of
    /// boundaries booked together.
    record_clock: RecordClock,
}

/// The instant records are stamped with. Outside a batch of boundaries every record
/// reads the clock; inside one, a reading is reused for [`RecordClock::REUSES`]
/// records (a batch books a record in about a microsecond, and reading the clock and
/// making a calendar time of it for each was a seventh of that).
#[derive(Default)]
struct RecordClock {
    /// Inside a batch: the reading being reused (none yet) and how many more records
    /// may take it.
    batch: Option<(Option<DateTime<Utc>>, u32)>,
}

impl RecordClock {
    /// Records stamped with one reading inside a batch.
    const REUSES: u32 = 64;

    /// A batch starts: readings are reused until [`Self::end_batch`].
    fn start_batch(&mut self) {
        self.batch = Some((None, 0));
    }

    /// The batch is booked: every record reads the clock again.
    fn end_batch(&mut self) {
        self.batch = None;
    }

    /// The instant to stamp the next record with.
    fn now(&mut self) -> DateTime<Utc> {
        let Some((reading, uses_left)) = &mut self.batch else {
            return Utc::now();
        };
        match reading {
            Some(at) if *uses_left > 0 => {
                *uses_left -= 1;
                *at
            }
            _ => {
                let at = Utc::now();
                *reading = Some(at);
                *uses_left = Self::REUSES - 1;
                at
            }
        }
    }
}

impl EnergyState {
    /// Applies `record` and sends it to the sink, for the event file.
    fn record(&mut self, record: EnergyRecord) -> Vec<ClosedInterval> {
        let closed = self.account.apply(&record);
        let event = PipelineEvent::Energy {
            timestamp: self.record_clock.now(),
            record,
        };
        match &mut self.outbox {
            Some(outbox) => outbox.push(event),
            None => self.sink.send(event),
        }
        self.announce_settled_scopes();
        closed
    }

    /// Sends the final figures of every scope the account settled since last time, as
    /// one batch (or into the batch of boundaries being booked).
    fn announce_settled_scopes(&mut self) {
        // Through a buffer kept between calls, which trades places with the account's.
        let mut settled = std::mem::take(&mut self.settled_batch);
        self.account.drain_settled_scopes_into(&mut settled);
        if settled.is_empty() {
            self.settled_batch = settled;
            return;
        }
        let mut events = Vec::with_capacity(settled.len() + 1);
        send_settled_scope_events(
            settled.drain(..),
            &mut self.metric_scope_names,
            &mut self.ended_at_program_exit,
            |event| events.push(event),
        );
        self.settled_batch = settled;
        match &mut self.outbox {
            Some(outbox) => outbox.append(&mut events),
            None => self.sink.send_batch(events),
        }
    }

    /// Books a batch of scope boundaries from the merger, in its order, and sends the
    /// events they make as one batch. No reading is asked for: each boundary is cut
    /// from the readings either side of it (the dense power stream, the counters), and
    /// one booked after readings past it divides those intervals again.
    fn boundaries(&mut self, batch: Vec<ScopeBoundary>) {
        self.record_clock.start_batch();
        self.outbox = Some(Vec::with_capacity(batch.len()));
        for boundary in &batch {
            self.boundary(boundary);
        }
        if let Some(events) = self.outbox.take() {
            self.sink.send_batch(events);
        }
        self.record_clock.end_batch();
    }

    /// Books a scope boundary the merger sent on (the merger keeps its ATOF flags).
    fn boundary(&mut self, boundary: &ScopeBoundary) {
        match boundary {
            ScopeBoundary::Started {
                uuid,
                name,
                parent,
                process_id,
                weight,
                extras,
                at,
                wall,
            } => {
                let at = self.epoch.nanos(at.instant());
                self.record(EnergyRecord::ScopeStarted {
                    uuid: *uuid,
                    name: Arc::clone(name),
                    at,
                    wall: (*wall).into(),
                    parent: *parent,
                    process_id: *process_id,
                    weight: *weight,
                    traceparent: extras.traceparent().map(str::to_owned),
                });
            }
            ScopeBoundary::Ended {
                uuid,
                flags,
                at,
                wall,
                remote_call,
            } => {
                if flags.contains(&ENDED_AT_PROGRAM_EXIT) {
                    self.ended_at_program_exit.insert(*uuid);
                }
                let at = self.epoch.nanos(at.instant());
                // Estimated here, so the record (and a replay of it) carries the figure.
                let remote_models = &self.account.settings().config.remote_models;
                let remote_call = remote_call
                    .as_deref()
                    .map(|call| Box::new(with_estimate(call.clone(), remote_models)));
                self.record(EnergyRecord::ScopeEnded {
                    uuid: *uuid,
                    at,
                    wall: (*wall).into(),
                    remote_call,
                });
            }
            ScopeBoundary::WindowCloses { at } => {
                let at = self.epoch.nanos(at.instant());
                self.record(EnergyRecord::LateBoundariesFrom { at });
            }
        }
    }

    /// Books one producer's input: readings and boundaries become records.
    fn input(&mut self, input: EnergyInput) {
        match input {
            EnergyInput::Power { sample } => self.power(sample),
            EnergyInput::Rapl { at, zones } => self.rapl(self.epoch.nanos(at), zones),
            EnergyInput::MeasuringFrom { at, wall } => {
                let at = self.epoch.nanos(at);
                self.record(EnergyRecord::MeasuringFrom { at, wall });
            }
            EnergyInput::Boundaries(batch) => self.boundaries(batch),
            // Statuses are recorded when they change, so the file stays small.
            EnergyInput::GpuStatus { status } => {
                if self.gpu_status.as_ref() != Some(&status) {
                    self.gpu_status = Some(status.clone());
                    self.record(EnergyRecord::GpuStatus {
                        configured: status.configured,
                        unavailable: status.unavailable,
                        selection: status.selection,
                    });
                }
            }
            EnergyInput::CpuStatus { unavailable } => {
                if self.cpu_status.as_ref() != Some(&unavailable) {
                    self.cpu_status = Some(unavailable.clone());
                    self.record(EnergyRecord::CpuStatus { unavailable });
                }
            }
        }
    }

    /// RAPL counters read at `at`: the intervals they closed, for the CPU and RAM
    /// metrics, and the record.
    fn rapl(&mut self, at: Nanos, zones: Vec<RaplZoneReading>) {
        let intervals = self.rapl_intervals.advance(at, &zones);
        if !intervals.is_empty() {
            self.sink.send(PipelineEvent::RaplIntervals {
                timestamp: Utc::now(),
                intervals,
            });
        }
        self.record(EnergyRecord::Rapl { at, zones });
    }

    fn power(&mut self, power: PowerSample) {
        let record = power_record(
            &power.source,
            self.epoch,
            power.taken_at,
            power.sample.as_deref(),
            power.processes_read,
            power.power_field,
        );
        let at = record.at;
        // Older than the newest reading of its backend (a cached answer seen again, or
        // a full answer overtaken by a dense reading): nothing to integrate.
        let stale = self.account.is_stale(&record);
        let carries_shares = record
            .devices
            .iter()
            .flatten()
            .any(|device| device.shares.is_some());
        let closed = if stale && !carries_shares {
            Vec::new()
        } else {
            // A stale one still brings its process shares.
            self.record(EnergyRecord::Power(record))
        };
        if power.dense {
            merge_closed(&mut self.pending, closed);
            return;
        }
        // Gauges come from the full answers at the collection cadence: each new one
        // once, even when a dense reading overtook it for the integral.
        let newest = self.newest_gauges.entry(power.source.clone()).or_default();
        if newest.is_some_and(|newest| at <= newest) {
            return;
        }
        *newest = Some(at);
        let mut closed = closed;
        merge_closed(&mut closed, std::mem::take(&mut self.pending));
        // A sample with no device and no interval has nothing to tell.
        if let Some(sample) = power
            .sample
            .filter(|sample| !sample.devices.is_empty() || !closed.is_empty())
        {
            self.sink.send(PipelineEvent::GpuTelemetry {
                timestamp: power.observed_at,
                telemetry: Box::new(GpuTelemetry {
                    sample,
                    intervals: closed,
                    factors: Arc::clone(&self.factors),
                }),
            });
        }
    }
}

impl Actor for EnergyActor {
    type Msg = EnergyMessage;
    type State = EnergyState;
    type Arguments = EnergyArguments;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        arguments: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        for variable in &arguments.settings.ignored_variables {
            let reason = ignored_variable_reason(variable);
            tracing::info!(variable, reason, "accepted, has no effect");
        }
        let scope_names_in_metrics = arguments.settings.config.scope_names_in_metrics;
        let mut account = EnergyAccount::new(
            arguments.settings,
            arguments.epoch.nanos(Instant::now()),
            Utc::now(),
        );
        account.announce_settled_scopes();
        let factors = Arc::new(EnergyFactors::of(account.settings()));
        arguments.sink.send(PipelineEvent::Energy {
            timestamp: Utc::now(),
            record: account.started_record(),
        });
        Ok(EnergyState {
            account,
            sink: arguments.sink,
            epoch: arguments.epoch,
            gpu_status: None,
            cpu_status: None,
            pending: Vec::new(),
            newest_gauges: Default::default(),
            factors,
            rapl_intervals: RaplIntervals::default(),
            metric_scope_names: MetricScopeNames::new(scope_names_in_metrics),
            ended_at_program_exit: HashSet::new(),
            settled_batch: Vec::new(),
            outbox: None,
            record_clock: RecordClock::default(),
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            EnergyMessage::Input(input) => state.input(input),
            EnergyMessage::Report {
                at,
                wall,
                final_report,
                reply,
            } => {
                let at = state.epoch.nanos(at);
                state.record(EnergyRecord::Report { at, wall });
                let report = state.account.report(at, wall);
                if final_report {
                    state.account.settle_remaining_scopes(&report);
                    state.announce_settled_scopes();
                }
                let _ = reply.send(report);
            }
        }
        Ok(())
    }
}

/// Why a reference variable that was set has no effect here, in words.
fn ignored_variable_reason(variable: &str) -> &'static str {
    if variable == COUNTRY_VARIABLE {
        "GENAI_CO2_USE_MANUAL=true: the carbon intensity is not the country's"
    } else {
        "the grid factor is per country (GENAI_CO2_COUNTRY_ISO_CODE or carbon_region); \
         sub-national and cloud regions and the reference's tracking modes mean nothing here"
    }
}

/// Adds `more` into `into`, one entry per device: energy (both figures) and length
/// summed, a counter figure only when every part was one.
fn merge_closed(into: &mut Vec<ClosedInterval>, more: Vec<ClosedInterval>) {
    for interval in more {
        match into.iter_mut().find(|i| i.device == interval.device) {
            Some(existing) => {
                existing.kilowatt_hours += interval.kilowatt_hours;
                existing.trapezoid_kilowatt_hours = match (
                    existing.trapezoid_kilowatt_hours,
                    interval.trapezoid_kilowatt_hours,
                ) {
                    (Some(a), Some(b)) => Some(a + b),
                    (one, other) => one.or(other),
                };
                existing.seconds += interval.seconds;
                existing.counter &= interval.counter;
            }
            None => into.push(interval),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn a_batch_reuses_a_reading_for_a_bounded_run_of_records_and_no_longer() {
        let mut clock = RecordClock::default();
        // Outside a batch, each record reads the clock: time moves between them.
        let first = clock.now();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(clock.now() > first);
        clock.start_batch();
        let stamps: Vec<_> = (0..RecordClock::REUSES + 1)
            .map(|n| {
                if n == RecordClock::REUSES {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                clock.now()
            })
            .collect();
        let reused = RecordClock::REUSES as usize;
        assert!(stamps[..reused].iter().all(|at| *at == stamps[0]));
        assert!(
            stamps[reused] > stamps[0],
            "read again after {reused} records"
        );
        clock.end_batch();
        let after = clock.now();
        assert!(after >= stamps[reused]);
    }

    use super::*;
    use crate::energy::input::EnergyInbox;
    use crate::scope_boundary::Stamp;
    use uuid::Uuid;
    use wattline_energy::integrator::JOULES_PER_KILOWATT_HOUR;
    use wattline_gpu::PowerSampleSink;
    use wattline_model::events::CollectingEventSink;
    use wattline_model::report::EnergyReport;
    use wattline_model::snapshot::{GpuDeviceReading, GpuSample, GpuVendor};

    fn sample(epoch: Epoch, seconds: f64, watts: f64, dense: bool) -> PowerSample {
        let taken_at = epoch.0 + Duration::from_secs_f64(seconds);
        let mut device = GpuDeviceReading::new(GpuVendor::Nvidia, "GPU-a");
        device.device_index = Some(0);
        device.power_draw_watts = Some(watts);
        PowerSample {
            source: "nvml".into(),
            sample: Some(Arc::new(GpuSample {
                devices: vec![device],
                processes: Vec::new(),
                taken_at,
            })),
            observed_at: Utc::now(),
            taken_at,
            processes_read: false,
            dense,
            power_field: Some("nvmlDeviceGetPowerUsage"),
        }
    }

    /// The actor, its inbox, its sink and its epoch.
    async fn spawn() -> (EnergyInbox, Arc<CollectingEventSink>, Epoch) {
        let sink = Arc::new(CollectingEventSink::default());
        // An epoch a minute back, so every instant below lies after it.
        let epoch = Epoch(Instant::now() - Duration::from_secs(60));
        let (actor, _) = Actor::spawn(
            None,
            EnergyActor,
            EnergyArguments {
                settings: EnergySettings::default(),
                sink: sink.clone(),
                epoch,
            },
        )
        .await
        .unwrap();
        (EnergyInbox::new(actor), sink, epoch)
    }

    /// Every GPU telemetry event sent.
    fn gpu_telemetry(events: &[PipelineEvent]) -> Vec<&GpuTelemetry> {
        events
            .iter()
            .filter_map(|event| match event {
                PipelineEvent::GpuTelemetry { telemetry, .. } => Some(telemetry.as_ref()),
                _ => None,
            })
            .collect()
    }

    /// Every RAPL interval sent, as `(zone name, joules, seconds)`, by zone name.
    fn rapl_intervals(events: &[PipelineEvent]) -> Vec<(String, f64, f64)> {
        let mut intervals: Vec<(String, f64, f64)> = events
            .iter()
            .filter_map(|event| match event {
                PipelineEvent::RaplIntervals { intervals, .. } => Some(intervals),
                _ => None,
            })
            .flatten()
            .map(|interval| (interval.name.clone(), interval.joules, interval.seconds))
            .collect();
        intervals.sort_by(|a, b| a.0.cmp(&b.0));
        intervals
    }

    async fn report(inbox: &EnergyInbox, epoch: Epoch, seconds: f64) -> EnergyReport {
        let at = epoch.0 + Duration::from_secs_f64(seconds);
        inbox
            .report(at, Utc::now(), false)
            .await
            .expect("no report")
    }

    /// A step's start `from` and end `to` seconds in, `flags` on its end.
    fn step(
        uuid: Uuid,
        epoch: Epoch,
        (from, to): (f64, f64),
        flags: Vec<&'static str>,
    ) -> [ScopeBoundary; 2] {
        let at = |seconds: f64| epoch.0 + Duration::from_secs_f64(seconds);
        let wall = || std::time::SystemTime::now().into();
        [
            ScopeBoundary::plain_start(uuid, Stamp::for_tests(at(from)), wall()),
            ScopeBoundary::plain_end(uuid, flags, Stamp::for_tests(at(to)), wall()),
        ]
    }

    /// Sends `boundaries` as the merger does: one batch.
    fn forward(inbox: &EnergyInbox, boundaries: impl IntoIterator<Item = ScopeBoundary>) {
        inbox.send(EnergyInput::Boundaries(boundaries.into_iter().collect()));
    }

    /// The actor as the pipeline's spawn leaves it: the window open at the epoch and a
    /// 100 W reading at 0 s sent.
    async fn spawned_with_a_first_reading() -> (EnergyInbox, Arc<CollectingEventSink>, Epoch) {
        let (inbox, sink, epoch) = spawn().await;
        inbox.send(EnergyInput::MeasuringFrom {
            at: epoch.0,
            wall: Utc::now(),
        });
        PowerSampleSink::send(&inbox, sample(epoch, 0.0, 100.0, false));
        (inbox, sink, epoch)
    }

    /// Every settled scope's announcement, in order.
    fn announced(sink: &CollectingEventSink) -> Vec<SettledScope> {
        sink.events()
            .into_iter()
            .filter_map(|event| match event {
                PipelineEvent::ScopeEnergy { settled, .. } => Some(*settled),
                _ => None,
            })
            .collect()
    }

    #[tokio::test]
    async fn a_step_ended_with_the_program_exit_flag_settles_flagged_and_no_other() {
        // Two steps from 1 s to 2 s, one ended as the API ends a step its program left
        // open (the ATOF flag on its end), the other plainly; the reading at 3 s
        // settles both.
        let (inbox, sink, epoch) = spawned_with_a_first_reading().await;
        let feed: &dyn PowerSampleSink = &inbox;
        let (left_open, ended) = (Uuid::now_v7(), Uuid::now_v7());
        let steps = [
            step(left_open, epoch, (1.0, 2.0), vec![ENDED_AT_PROGRAM_EXIT]),
            step(ended, epoch, (1.0, 2.0), Vec::new()),
        ];
        forward(&inbox, steps.into_iter().flatten());
        feed.send(sample(epoch, 3.0, 100.0, false));
        let _ = report(&inbox, epoch, 3.0).await;
        let flagged: std::collections::HashMap<Uuid, bool> = sink
            .events()
            .iter()
            .filter_map(|event| match event {
                PipelineEvent::ScopeEnergy { settled, .. } => {
                    Some((settled.energy.uuid, settled.ended_at_program_exit))
                }
                _ => None,
            })
            .collect();
        let expected = std::collections::HashMap::from([(left_open, true), (ended, false)]);
        assert_eq!(flagged, expected);
    }

    #[tokio::test]
    async fn boundaries_sent_after_the_first_reading_are_booked_after_it() {
        // The pipeline's spawn: the window opens and the prepared reading is sent
        // before the merger, which sends every boundary on, exists. (A boundary booked
        // while the meter had no reading would retire with no GPU figure.)
        let (inbox, _sink, epoch) = spawned_with_a_first_reading().await;
        let feed: &dyn PowerSampleSink = &inbox;
        forward(&inbox, step(Uuid::now_v7(), epoch, (1.0, 2.0), Vec::new()));
        feed.send(sample(epoch, 3.0, 100.0, false));
        let report = report(&inbox, epoch, 3.0).await;
        // 100 W throughout: the step's second holds 100 J.
        let step = report.agent_scopes[0].gpu_energy_kwh;
        let expected = 100.0 / JOULES_PER_KILOWATT_HOUR;
        assert!(
            step.is_some_and(|kwh| (kwh - expected).abs() < 1e-15),
            "{step:?}"
        );
    }

    #[tokio::test]
    async fn a_step_whose_boundaries_come_after_later_readings_is_cut_as_if_in_time_order() {
        // Readings reach the actor straight from the samplers, boundaries through the
        // merger, later: here the readings at 1, 2 and 3 s are booked before the step
        // (0.5 s to 2.5 s) arrives. Power is linear between readings (100 W at 0 s,
        // 200 W at 1 s, 100 W at 2 s, 300 W at 3 s), so the step holds
        // 0.5 × 175 + 150 + 0.5 × 150 = 312.5 J, all of it its own, covered throughout.
        let (inbox, sink, epoch) = spawned_with_a_first_reading().await;
        let feed: &dyn PowerSampleSink = &inbox;
        for (seconds, watts) in [(1.0, 200.0), (2.0, 100.0), (3.0, 300.0)] {
            feed.send(sample(epoch, seconds, watts, true));
        }
        let uuid = Uuid::now_v7();
        forward(&inbox, step(uuid, epoch, (0.5, 2.5), Vec::new()));
        let report = report(&inbox, epoch, 3.0).await;
        let joules = |kwh: Option<f64>| kwh.map(|kwh| kwh * JOULES_PER_KILOWATT_HOUR);
        let reported = &report.agent_scopes[0];
        for figure in [reported.gpu_energy_kwh, reported.attributed_gpu_energy_kwh] {
            assert!(
                joules(figure).is_some_and(|j| (j - 312.5).abs() < 1e-9),
                "{figure:?}"
            );
        }
        // Every meter had read past its end when it came: it settled at once, with the
        // report's figures.
        let announced = announced(&sink);
        assert_eq!(announced.len(), 1);
        assert_eq!(announced[0].energy, *reported);
        assert!(
            announced[0]
                .coverage
                .is_some_and(|c| (c - 1.0).abs() < 1e-12),
            "{:?}",
            announced[0].coverage
        );
        inbox.actor().stop(None);
    }

    #[tokio::test]
    async fn dense_intervals_go_out_with_the_next_gauge_sample_and_every_record_is_kept() {
        let (inbox, sink, epoch) = spawn().await;
        // The GPU sampler's view of the inbox: a power sample sink.
        let feed: &dyn PowerSampleSink = &inbox;
        inbox.send(EnergyInput::MeasuringFrom {
            at: epoch.0,
            wall: Utc::now(),
        });
        // A full answer at 0 s (100 W), dense readings at 1 s and 2 s (200 W), a full
        // answer at 3 s (200 W): 150 + 200 + 200 = 550 J over 3 s go out with it.
        let uuid = Uuid::now_v7();
        let [start, end] = step(uuid, epoch, (1.0, 2.0), Vec::new());
        feed.send(sample(epoch, 0.0, 100.0, false));
        feed.send(sample(epoch, 1.0, 200.0, true));
        forward(&inbox, [start]);
        feed.send(sample(epoch, 2.0, 200.0, true));
        forward(&inbox, [end]);
        feed.send(sample(epoch, 3.0, 200.0, false));
        // A full answer overtaken by the dense readings: its gauges were never sent
        // (older than the newest gauges), nor its energy.
        feed.send(sample(epoch, 2.5, 300.0, false));
        let report = report(&inbox, epoch, 3.0).await;
        let kwh = |joules: f64| joules / JOULES_PER_KILOWATT_HOUR;
        assert!((report.total.gpu_energy_kwh.unwrap() - kwh(550.0)).abs() < 1e-15);
        assert!((report.agent_scopes[0].gpu_energy_kwh.unwrap() - kwh(200.0)).abs() < 1e-15);

        let events = sink.events();
        // The gauge samples sent (their devices' power) and the intervals with them:
        // the exporters' `gen_ai.gpu.power`, `wattline.energy.consumed` and
        // `wattline.energy.interval_duration`.
        let telemetry = gpu_telemetry(&events);
        let power: Vec<f64> = telemetry
            .iter()
            .flat_map(|t| t.sample.devices.iter().filter_map(|d| d.power_draw_watts))
            .collect();
        assert_eq!(power, vec![100.0, 200.0]);
        let intervals: Vec<&ClosedInterval> = telemetry.iter().flat_map(|t| &t.intervals).collect();
        let energy: Vec<f64> = intervals.iter().map(|i| i.kilowatt_hours).collect();
        assert_eq!(energy.len(), 1, "{energy:?}");
        assert!((energy[0] - kwh(550.0)).abs() < 1e-15);
        let lengths: Vec<f64> = intervals.iter().map(|i| i.seconds).collect();
        assert_eq!(lengths, vec![3.0]);
        // Every record went to the file: started, from, five readings but the stale
        // one, two scope boundaries, the report.
        let records = events
            .iter()
            .filter(|e| matches!(e, PipelineEvent::Energy { .. }))
            .count();
        assert_eq!(records, 9);
        // The step settled as soon as it ended (the 2 s reading had passed its end):
        // its final figures, and one histogram observation per figure, under its name.
        let settled: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                PipelineEvent::ScopeEnergy {
                    settled,
                    name_folded,
                } => Some((
                    settled,
                    settled.measurements(settled.metric_name(*name_folded)),
                )),
                _ => None,
            })
            .collect();
        assert_eq!(settled.len(), 1);
        let (scope, measurements) = &settled[0];
        assert_eq!(scope.energy.uuid, uuid);
        assert!((scope.energy.gpu_energy_kwh.unwrap() - kwh(200.0)).abs() < 1e-15);
        assert!((scope.energy.attributed_gpu_energy_kwh.unwrap() - kwh(200.0)).abs() < 1e-15);
        let attributed = measurements
            .iter()
            .find(|m| m.name == "wattline.scope.energy.attributed")
            .unwrap();
        assert!((attributed.value.as_f64() - 200.0).abs() < 1e-9);
        assert_eq!(
            attributed.attributes.as_ref().unwrap()["wattline.scope.name"],
            wattline_model::metric_measurements::AttributeValue::String("step".into())
        );
        inbox.actor().stop(None);
    }

    #[tokio::test]
    async fn statuses_are_recorded_when_they_change_only() {
        let (inbox, sink, epoch) = spawn().await;
        let status = |unavailable: Option<&str>| GpuSourceStatus {
            configured: "nvml".into(),
            unavailable: unavailable.map(str::to_owned),
            selection: None,
        };
        let no_rapl = || EnergyInput::CpuStatus {
            unavailable: Some("no RAPL".into()),
        };
        for input in [
            EnergyInput::GpuStatus {
                status: status(None),
            },
            EnergyInput::GpuStatus {
                status: status(None),
            },
            EnergyInput::GpuStatus {
                status: status(Some("gone")),
            },
            no_rapl(),
            no_rapl(),
        ] {
            inbox.send(input);
        }
        let _ = report(&inbox, epoch, 1.0).await;
        let events = sink.events();
        let count = |wanted: fn(&EnergyRecord) -> bool| {
            events
                .iter()
                .filter(|e| matches!(e, PipelineEvent::Energy { record, .. } if wanted(record)))
                .count()
        };
        assert_eq!(count(|r| matches!(r, EnergyRecord::GpuStatus { .. })), 2);
        assert_eq!(count(|r| matches!(r, EnergyRecord::CpuStatus { .. })), 1);
        inbox.actor().stop(None);
    }

    #[tokio::test]
    async fn rapl_readings_become_the_accounts_cpu_energy_and_an_interval_sent_on() {
        let (inbox, sink, epoch) = spawn().await;
        let zone = |microjoules: u64| RaplZoneReading {
            zone: "intel-rapl:0".into(),
            name: "package-0".into(),
            energy_microjoules: microjoules,
            max_energy_range_microjoules: Some(262_143_328_850),
        };
        inbox.send(EnergyInput::Rapl {
            at: epoch.0,
            zones: vec![zone(1_000_000)],
        });
        inbox.send(EnergyInput::Rapl {
            at: epoch.0 + Duration::from_secs(1),
            zones: vec![zone(31_000_000)],
        });
        let report = report(&inbox, epoch, 1.0).await;
        assert!(
            (report.total.cpu_energy_kwh.unwrap() - 30.0 / JOULES_PER_KILOWATT_HOUR).abs() < 1e-15
        );
        // What the exporters send as `hw.energy` under semantic-convention names.
        assert_eq!(
            rapl_intervals(&sink.events()),
            [("package-0".to_string(), 30.0, 1.0)]
        );
        inbox.actor().stop(None);
    }

    /// Writes one powercap zone under `root`, as the kernel lays it out.
    fn powercap_zone(root: &std::path::Path, directory: &str, name: &str, microjoules: u64) {
        let zone = root.join("sys/class/powercap").join(directory);
        std::fs::create_dir_all(&zone).unwrap();
        std::fs::write(zone.join("name"), format!("{name}\n")).unwrap();
        std::fs::write(zone.join("energy_uj"), format!("{microjoules}\n")).unwrap();
        std::fs::write(zone.join("max_energy_range_uj"), "262143328850\n").unwrap();
    }

    #[tokio::test]
    async fn rapl_packages_and_dram_on_powercap_become_intervals_and_their_parts_none() {
        // The exporters' `gen_ai.*` CPU and RAM points from these intervals:
        // `exporters/src/energy_names.rs`.
        let (inbox, sink, epoch) = spawn().await;
        let root = tempfile::tempdir().unwrap();
        let read = |package_0, package_1, dram, core| {
            powercap_zone(root.path(), "intel-rapl:0", "package-0", package_0);
            powercap_zone(root.path(), "intel-rapl:0:0", "core", core);
            powercap_zone(root.path(), "intel-rapl:0:2", "dram", dram);
            powercap_zone(root.path(), "intel-rapl:1", "package-1", package_1);
            let (zones, errors) = crate::platform::os::rapl::read_rapl_zones(root.path());
            assert!(errors.is_empty(), "{errors:?}");
            zones
        };
        inbox.send(EnergyInput::Rapl {
            at: epoch.0,
            zones: read(1_000_000, 2_000_000, 500_000, 100),
        });
        // Two seconds on: the packages 40 J and 20 J, DRAM 6 J; `core` is part of
        // package 0 and counts nowhere.
        inbox.send(EnergyInput::Rapl {
            at: epoch.0 + Duration::from_secs(2),
            zones: read(41_000_000, 22_000_000, 6_500_000, 50_000_000),
        });
        let _ = report(&inbox, epoch, 2.0).await;
        let intervals = rapl_intervals(&sink.events());
        let zones: Vec<&str> = intervals.iter().map(|(name, ..)| name.as_str()).collect();
        assert_eq!(zones, ["dram", "package-0", "package-1"], "{intervals:?}");
        for ((_, joules, seconds), expected) in intervals.iter().zip([6.0, 40.0, 20.0]) {
            assert!((joules - expected).abs() < 1e-9, "{intervals:?}");
            assert_eq!(*seconds, 2.0);
        }
        inbox.actor().stop(None);
    }

    #[test]
    fn an_ignored_variable_is_explained_by_what_it_is() {
        assert!(ignored_variable_reason(COUNTRY_VARIABLE).starts_with("GENAI_CO2_USE_MANUAL=true"));
        assert!(ignored_variable_reason("GENAI_CO2_CLOUD_REGION").starts_with("the grid factor"));
    }

    #[test]
    fn merging_intervals_sums_each_devices_figures_and_keeps_counter_only_if_all_were() {
        let interval =
            |device: &str, kwh: f64, trapezoid: Option<f64>, seconds, counter| ClosedInterval {
                device: device.into(),
                kilowatt_hours: kwh,
                trapezoid_kilowatt_hours: trapezoid,
                seconds,
                counter,
            };
        let mut into = vec![interval("a", 1.0, Some(2.0), 1.0, true)];
        merge_closed(
            &mut into,
            vec![
                interval("a", 3.0, Some(4.0), 2.0, false),
                interval("b", 5.0, None, 1.5, true),
                interval("b", 1.0, Some(6.0), 0.5, true),
            ],
        );
        assert_eq!(
            into,
            vec![
                interval("a", 4.0, Some(6.0), 3.0, false),
                interval("b", 6.0, Some(6.0), 2.0, true),
            ]
        );
    }
}
