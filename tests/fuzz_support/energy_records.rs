//! Energy records as a run's ATOF file can carry them, for the fuzz tests of every
//! reader of those files (`exporters/tests/fuzz_atof.rs`, `tests/fuzz_report.rs`):
//! finite or any floats, any instants, walls anywhere chrono reaches. Included by
//! `#[path]` beside `fuzz_support`, which it uses.

#![allow(dead_code)]

use chrono::{DateTime, Utc};
use proptest::option;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::json;
use uuid::Uuid;
use wattline_config::energy::{EnergySettings, FactorOrigin};
use wattline_model::energy::EnergyRecord;
use wattline_model::energy::{DevicePower, PowerRecord, ProcessShares, ShareBasis};

use crate::fuzz_support::edge_u64;

/// Any instant the writer stamps.
pub fn timestamp() -> impl Strategy<Value = DateTime<Utc>> + Clone {
    // Every instant an i64 of nanoseconds holds (1677 to 2262), as the writer stamps.
    any::<i64>().prop_map(DateTime::from_timestamp_nanos)
}

/// Any wall-clock time chrono holds, year -262143 to 262142.
pub fn any_wall() -> impl Strategy<Value = DateTime<Utc>> + Clone {
    let (min, max) = (
        DateTime::<Utc>::MIN_UTC.timestamp(),
        DateTime::<Utc>::MAX_UTC.timestamp(),
    );
    prop_oneof![
        timestamp(),
        (min..=max, 0..1_000_000_000u32)
            .prop_map(|(secs, nanos)| DateTime::from_timestamp(secs, nanos).unwrap_or_default()),
        select(vec![
            DateTime::<Utc>::MIN_UTC,
            DateTime::<Utc>::MAX_UTC,
            DateTime::UNIX_EPOCH
        ]),
    ]
}

/// A finite float, often an edge one.
pub fn finite() -> impl Strategy<Value = f64> + Clone {
    prop_oneof![
        any::<f64>().prop_filter("finite", |v| v.is_finite()),
        select(&[0.0, -0.0, -1.0, 1e-300, 1e308, f64::MAX, f64::MIN_POSITIVE][..]),
    ]
}

/// Energy settings as a file can carry them: any finite factor, any interval.
pub fn settings(
    float: impl Strategy<Value = f64> + Clone,
) -> impl Strategy<Value = EnergySettings> {
    let origin = select(vec![
        FactorOrigin::Default,
        FactorOrigin::Code,
        FactorOrigin::File("/etc/wattline/plugins.toml".into()),
        FactorOrigin::Environment("GENAI_POWER_COST_PER_KWH".into()),
    ]);
    (
        (float.clone(), float.clone(), float, any::<bool>()),
        (
            edge_u64(),
            edge_u64(),
            option::of(select(&["DE", "fra", "ZZ", "", "\u{fffd}"][..])),
        ),
        (origin.clone(), origin.clone(), origin),
    )
        .prop_map(
            |(
                (cost, carbon, pue, co2),
                (interval, power_sample, region),
                (cost_origin, carbon_origin, region_origin),
            )| {
                let mut settings = EnergySettings::default();
                settings.config.cost_per_kwh = cost;
                settings.config.carbon_intensity = carbon;
                settings.config.pue = pue;
                settings.config.co2_tracking = co2;
                settings.config.interval_millis = interval;
                settings.config.power_sample_millis = power_sample;
                settings.config.carbon_region = region.map(str::to_owned);
                settings.cost_origin = cost_origin;
                settings.carbon_intensity_origin = carbon_origin;
                settings.carbon_region_origin = region_origin;
                settings
            },
        )
}

/// One device's power reading with values from `float`.
pub fn device_power(
    float: impl Strategy<Value = f64> + Clone,
) -> impl Strategy<Value = DevicePower> {
    let shares = (
        option::of(select(&[ShareBasis::Utilization, ShareBasis::Memory][..])),
        proptest::collection::btree_map(0..6u32, float.clone(), 0..3),
    )
        .prop_map(|(basis, processes)| ProcessShares { basis, processes });
    (
        select(&["GPU-a", "GPU-b", "0000:03:00.0"][..]),
        option::of(select(
            &[
                "NVIDIA H100 80GB HBM3",
                "Radeon \u{1F525} Pro with a name longer than forty characters",
            ][..],
        )),
        option::of(float),
        option::of(edge_u64()),
        option::of(shares),
        option::of(any::<bool>()),
        option::of(edge_u64()),
        option::of(select(&["power.draw", "power.draw.instant"][..])),
    )
        .prop_map(
            |(id, name, watts, counter, shares, mig, at, field)| DevicePower {
                power_field: field.map(str::to_owned),
                id: id.to_owned(),
                name: name.map(str::to_owned),
                watts,
                counter_millijoules: counter,
                shares,
                mig_enabled: mig,
                at,
            },
        )
}

/// RAPL zones, built through serde: their type is the OS readers', private here.
pub fn rapl_record() -> impl Strategy<Value = EnergyRecord> {
    let zone = (
        select(&["intel-rapl:0", "intel-rapl:0:0", "intel-rapl:1"][..]),
        select(&["package-0", "dram", "core", "psys"][..]),
        edge_u64(),
        option::of(edge_u64()),
    );
    (edge_u64(), proptest::collection::vec(zone, 0..3)).prop_filter_map("a RAPL record", |(at, zones)| {
        let zones: Vec<_> = zones
            .into_iter()
            .map(|(zone, name, energy, max)| json!({"zone": zone, "name": name, "energy_microjoules": energy, "max_energy_range_microjoules": max}))
            .collect();
        serde_json::from_value(json!({"record": "rapl", "at": at, "zones": zones})).ok()
    })
}

/// Any energy record with values from `float` and walls from `wall`.
pub fn energy_record(
    float: impl Strategy<Value = f64> + Clone + 'static,
    wall: impl Strategy<Value = DateTime<Utc>> + Clone + 'static,
) -> impl Strategy<Value = EnergyRecord> {
    let power = (
        select(&["nvml", "nvidia-smi", "drm"][..]),
        edge_u64(),
        option::of(proptest::collection::vec(device_power(float.clone()), 0..3)),
        option::of(select(&["power.draw", "power.draw.instant"][..])),
    )
        .prop_map(|(source, at, devices, field)| {
            EnergyRecord::Power(PowerRecord {
                source: source.into(),
                at,
                devices,
                power_field: field.map(str::to_owned),
            })
        });
    let text =
        || option::of(select(&["no NVIDIA driver", "", "\u{fffd}"][..]).prop_map(str::to_owned));
    prop_oneof![
        6 => power,
        2 => rapl_record(),
        1 => (edge_u64(), settings(float), wall.clone()).prop_map(|(at, settings, wall)| EnergyRecord::Started { at, wall, settings: Box::new(settings) }),
        1 => (edge_u64(), wall.clone()).prop_map(|(at, wall)| EnergyRecord::MeasuringFrom { at, wall }),
        1 => (0..3u128, select(&["planner", ""][..]), edge_u64(), wall.clone())
            .prop_map(|(uuid, name, at, wall)| EnergyRecord::ScopeStarted { uuid: Uuid::from_u128(uuid), name: name.into(), at, wall, parent: None, process_id: None, weight: None, traceparent: None }),
        1 => (0..3u128, edge_u64(), wall.clone()).prop_map(|(uuid, at, wall)| EnergyRecord::ScopeEnded { uuid: Uuid::from_u128(uuid), at, wall, remote_call: None }),
        1 => (select(&["nvml+drm", "none"][..]), text()).prop_map(|(configured, unavailable)| EnergyRecord::GpuStatus { configured: configured.into(), unavailable, selection: None }),
        1 => text().prop_map(|unavailable| EnergyRecord::CpuStatus { unavailable }),
        1 => edge_u64().prop_map(|at| EnergyRecord::LateBoundariesFrom { at }),
        1 => (edge_u64(), wall).prop_map(|(at, wall)| EnergyRecord::Report { at, wall }),
    ]
}

/// A run's records: usually opened by `Started`, as a file's are.
pub fn run_records(
    float: impl Strategy<Value = f64> + Clone + 'static,
    wall: impl Strategy<Value = DateTime<Utc>> + Clone + 'static,
) -> impl Strategy<Value = Vec<EnergyRecord>> {
    (
        option::weighted(0.9, (edge_u64(), settings(float.clone()), wall.clone())),
        proptest::collection::vec(energy_record(float, wall), 0..16),
    )
        .prop_map(|(start, mut records)| {
            if let Some((at, settings, wall)) = start {
                records.insert(
                    0,
                    EnergyRecord::Started {
                        at,
                        wall,
                        settings: Box::new(settings),
                    },
                );
            }
            records
        })
}

/// The bytes of a file holding `lines`.
pub fn file_of(lines: &[String]) -> Vec<u8> {
    lines
        .iter()
        .flat_map(|line| format!("{line}\n").into_bytes())
        .collect()
}
