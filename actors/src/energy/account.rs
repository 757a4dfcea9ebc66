//! The energy account: every GPU power sample and RAPL reading in time order becomes
//! per-device, per-zone, per-Agent-scope and per-process energy, cost and CO2, plus
//! the `gen_ai.*` metric values for the exporters.

use std::collections::BTreeMap;
use std::time::Instant;

use chrono::{DateTime, Utc};
use uuid::Uuid;
use wattline_config::energy::EnergySettings;

use super::genai;
use super::integrator::{
    DeviceIntegrator, Interval, JOULES_PER_KILOWATT_HOUR, PowerPoint, counter_delta_joules,
};
use super::report::{
    DeviceEnergy, EnergyReport, EnergyTotals, Factor, ProcessEnergy, ScopeEnergy, ZoneEnergy,
};
use crate::events::MetricMeasurement;
use crate::gpu::GpuSample;
use crate::platform::linux::rapl::RaplZoneReading;

#[derive(Debug, Default)]
struct DeviceAccount {
    name: Option<String>,
    integrator: DeviceIntegrator,
}

#[derive(Debug)]
struct ZoneAccount {
    name: String,
    last: (Instant, u64),
    first_at: Instant,
    max_range: Option<u64>,
    joules: f64,
}

#[derive(Debug)]
struct ScopeWindow {
    uuid: Uuid,
    name: String,
    started: Instant,
    started_wall: DateTime<Utc>,
    ended: Option<(Instant, DateTime<Utc>)>,
    joules: f64,
}

/// Energy accounting for one pipeline.
#[derive(Debug)]
pub struct EnergyAccount {
    settings: EnergySettings,
    started_wall: DateTime<Utc>,
    devices: BTreeMap<String, DeviceAccount>,
    zones: BTreeMap<String, ZoneAccount>,
    /// Agent scopes that can still receive energy (live, or ended after the latest
    /// sample), in start order.
    scopes: Vec<ScopeWindow>,
    /// Agent scopes whose window no later interval can reach: kept for the report
    /// only, out of the per-interval loop.
    finished_scopes: Vec<ScopeWindow>,
    process_joules: BTreeMap<u32, f64>,
    gpu_source: Option<String>,
}

impl EnergyAccount {
    /// A new account with the factors of `settings`.
    pub fn new(settings: EnergySettings, started_wall: DateTime<Utc>) -> Self {
        EnergyAccount {
            settings,
            started_wall,
            devices: BTreeMap::new(),
            zones: BTreeMap::new(),
            scopes: Vec::new(),
            finished_scopes: Vec::new(),
            process_joules: BTreeMap::new(),
            gpu_source: None,
        }
    }

    /// Names the GPU source in use, for the report.
    pub fn set_gpu_source(&mut self, name: Option<String>) {
        self.gpu_source = name;
    }

    /// The factors in force.
    pub fn settings(&self) -> &EnergySettings {
        &self.settings
    }

    /// Adds one GPU sample (or a failed one: `None`, a gap for every device) and
    /// returns the `gen_ai.*` measurements it produces.
    pub fn add_gpu_sample(&mut self, sample: Option<&GpuSample>) -> Vec<MetricMeasurement> {
        let Some(sample) = sample else {
            for device in self.devices.values_mut() {
                device.integrator.gap();
            }
            return Vec::new();
        };
        let mut closed: Vec<(String, Interval)> = Vec::new();
        for reading in &sample.devices {
            let account = self
                .devices
                .entry(reading.device_identifier.clone())
                .or_default();
            if reading.name.is_some() {
                account.name = reading.name.clone();
            }
            match reading.power_draw_watts {
                Some(watts) => {
                    let point = PowerPoint {
                        at: sample.taken_at,
                        watts,
                        counter_millijoules: reading.total_energy_millijoules,
                    };
                    if let Some(interval) = account.integrator.add(point) {
                        closed.push((reading.device_identifier.clone(), interval));
                    }
                }
                // A device with no power reading has no energy: never integrate over it.
                None => account.integrator.gap(),
            }
        }
        // A known device missing from this sample observed nothing: a gap for it.
        for (identifier, account) in &mut self.devices {
            if !sample
                .devices
                .iter()
                .any(|d| &d.device_identifier == identifier)
            {
                account.integrator.gap();
            }
        }
        for (identifier, interval) in &closed {
            self.attribute(identifier, interval, sample);
        }
        // Every device's open run now starts at this sample (or was ended as a gap),
        // so a scope that ended by now can receive no more energy.
        let (done, live): (Vec<_>, Vec<_>) = std::mem::take(&mut self.scopes)
            .into_iter()
            .partition(|scope| scope.ended.is_some_and(|(at, _)| at <= sample.taken_at));
        self.scopes = live;
        self.finished_scopes.extend(done);
        genai::sample_measurements(sample, &closed, &self.settings)
    }

    fn attribute(&mut self, identifier: &str, interval: &Interval, sample: &GpuSample) {
        for scope in &mut self.scopes {
            let until = scope.ended.map_or(interval.end.at, |(at, _)| at);
            scope.joules += interval.joules_between(scope.started, until);
        }
        let device_utilization = sample
            .devices
            .iter()
            .find(|d| d.device_identifier == identifier)
            .and_then(|d| d.compute_utilization_percent)
            .filter(|u| *u > 0.0);
        if let Some(device_utilization) = device_utilization {
            for process in sample
                .processes
                .iter()
                .filter(|p| p.device_identifier == identifier)
            {
                if let Some(utilization) = process.compute_utilization_percent {
                    let share = (utilization / device_utilization).clamp(0.0, 1.0);
                    *self.process_joules.entry(process.process_id).or_default() +=
                        interval.trapezoid_joules * share;
                }
            }
        }
    }

    /// Adds RAPL readings taken at `at`.
    pub fn add_rapl(&mut self, at: Instant, zones: &[RaplZoneReading]) {
        for zone in zones {
            match self.zones.get_mut(&zone.zone) {
                Some(account) => {
                    let (_, before) = account.last;
                    account.joules += counter_delta_joules(
                        before,
                        zone.energy_microjoules,
                        1_000_000.0,
                        account.max_range.or(zone.max_energy_range_microjoules),
                    );
                    account.last = (at, zone.energy_microjoules);
                }
                None => {
                    self.zones.insert(
                        zone.zone.clone(),
                        ZoneAccount {
                            name: zone.name.clone(),
                            last: (at, zone.energy_microjoules),
                            first_at: at,
                            max_range: zone.max_energy_range_microjoules,
                            joules: 0.0,
                        },
                    );
                }
            }
        }
    }

    /// An Agent scope went live.
    pub fn scope_started(&mut self, uuid: Uuid, name: &str, at: Instant, wall: DateTime<Utc>) {
        self.scopes.push(ScopeWindow {
            uuid,
            name: name.to_string(),
            started: at,
            started_wall: wall,
            ended: None,
            joules: 0.0,
        });
    }

    /// An Agent scope ended.
    pub fn scope_ended(&mut self, uuid: Uuid, at: Instant, wall: DateTime<Utc>) {
        if let Some(scope) = self
            .scopes
            .iter_mut()
            .find(|s| s.uuid == uuid && s.ended.is_none())
        {
            scope.ended = Some((at, wall));
        }
    }

    /// Whether any device has an open run (a reading that a later sample can close).
    pub fn has_open_run(&self) -> bool {
        self.devices.values().any(|d| d.integrator.last().is_some())
    }

    /// The report as of `now`.
    pub fn report(&self, now: DateTime<Utc>) -> EnergyReport {
        let config = &self.settings.config;
        let co2 = |kwh: f64| config.co2_tracking.then_some(kwh * config.carbon_intensity);
        let devices: Vec<DeviceEnergy> = self
            .devices
            .iter()
            .filter(|(_, account)| account.integrator.readings > 0)
            .map(|(identifier, account)| {
                let integrator = &account.integrator;
                let (energy_kwh, energy_source) = integrator.kilowatt_hours();
                DeviceEnergy {
                    device_identifier: identifier.clone(),
                    name: account.name.clone(),
                    energy_kwh,
                    energy_source,
                    counter_kwh: integrator.counter_kilowatt_hours(),
                    trapezoid_kwh: Some(integrator.trapezoid_kilowatt_hours()),
                    mean_watts: integrator.mean_watts(),
                    max_watts: integrator.max_watts,
                    covered_seconds: integrator.covered_seconds,
                    readings: integrator.readings,
                    gaps: integrator.gaps,
                    cost: energy_kwh * config.cost_per_kwh,
                    co2_grams: co2(energy_kwh),
                }
            })
            .collect();
        let gpu_energy_kwh = devices.iter().fold(0.0, |total, d| total + d.energy_kwh);
        let cpu_zones: Vec<ZoneEnergy> = self
            .zones
            .iter()
            .map(|(zone, account)| ZoneEnergy {
                zone: zone.clone(),
                name: account.name.clone(),
                energy_kwh: account.joules / JOULES_PER_KILOWATT_HOUR,
                covered_seconds: account
                    .last
                    .0
                    .saturating_duration_since(account.first_at)
                    .as_secs_f64(),
            })
            .collect();
        // Package zones only: DRAM and sub-zones are parts of or beside the package.
        let package_kwh: Vec<f64> = cpu_zones
            .iter()
            .filter(|z| z.name.starts_with("package"))
            .map(|z| z.energy_kwh)
            .collect();
        EnergyReport {
            started_at: self.started_wall,
            ended_at: now,
            gpu_source: self.gpu_source.clone(),
            total: EnergyTotals {
                gpu_energy_kwh,
                cost: gpu_energy_kwh * config.cost_per_kwh,
                co2_grams: co2(gpu_energy_kwh),
                cpu_energy_kwh: (!package_kwh.is_empty())
                    .then(|| package_kwh.iter().fold(0.0, |total, kwh| total + kwh)),
            },
            devices,
            cpu_zones,
            agent_scopes: {
                let mut scopes: Vec<&ScopeWindow> =
                    self.finished_scopes.iter().chain(&self.scopes).collect();
                scopes.sort_by_key(|scope| scope.started);
                scopes
            }
            .into_iter()
            .map(|scope| {
                let kwh = scope.joules / JOULES_PER_KILOWATT_HOUR;
                ScopeEnergy {
                    uuid: scope.uuid.to_string(),
                    name: scope.name.clone(),
                    gpu_energy_kwh: kwh,
                    cost: kwh * config.cost_per_kwh,
                    co2_grams: co2(kwh),
                    started_at: scope.started_wall,
                    ended_at: scope.ended.map(|(_, wall)| wall),
                }
            })
            .collect(),
            processes: self
                .process_joules
                .iter()
                .map(|(pid, joules)| ProcessEnergy {
                    process_id: *pid,
                    gpu_energy_kwh: joules / JOULES_PER_KILOWATT_HOUR,
                })
                .collect(),
            cost_per_kwh: Factor {
                value: config.cost_per_kwh,
                unit: format!("{}/kWh", config.currency),
                origin: self.settings.cost_origin.clone(),
            },
            currency: config.currency.clone(),
            carbon_intensity: config.co2_tracking.then(|| Factor {
                value: config.carbon_intensity,
                unit: "gCO2e/kWh".into(),
                origin: self.settings.carbon_intensity_origin.clone(),
            }),
            ignored_variables: self.settings.ignored_variables.clone(),
            diagnostics: None,
            exporter_drops: Vec::new(),
        }
    }
}
