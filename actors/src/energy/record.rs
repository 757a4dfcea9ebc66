//! The energy stage's records made from what the samplers read: a GPU sample as a
//! [`PowerRecord`] with each device's process shares. The records themselves are the
//! model's ([`wattline_model::energy`]).

use std::collections::BTreeMap;
use std::time::Instant;

use wattline_model::energy::{DevicePower, Epoch, PowerRecord, ProcessShares, ShareBasis};
use wattline_model::snapshot::GpuSample;

/// The power record of one backend's sample: `None` is a failed sample. `shares_read`
/// says whether processes were read with it, so "no process on the device" (empty
/// shares) differs from "not asked" (no shares).
pub fn power_record(
    source: &str,
    epoch: Epoch,
    at: Instant,
    sample: Option<&GpuSample>,
    shares_read: bool,
    power_field: Option<&str>,
) -> PowerRecord {
    let devices = sample.map(|sample| {
        sample
            .devices
            .iter()
            .map(|device| DevicePower {
                // Named per device only where the record's name does not say it.
                power_field: device
                    .power_field
                    .filter(|field| Some(*field) != power_field)
                    .map(str::to_owned),
                id: device.device_identifier.clone(),
                name: device.name.clone(),
                watts: device.instant_power_watts.or(device.power_draw_watts),
                counter_millijoules: device.total_energy_millijoules,
                shares: shares_read
                    .then(|| process_shares(sample, &device.device_identifier))
                    .flatten(),
                mig_enabled: device.mig_enabled,
                at: device.power_read_at.map(|read_at| epoch.nanos(read_at)),
            })
            .collect()
    });
    PowerRecord {
        source: source.to_owned(),
        at: epoch.nanos(at),
        devices,
        power_field: power_field.map(str::to_owned),
    }
}

/// The shares of `device` in `sample`: by compute utilization where processes carry it
/// (relative to the device's own utilization), else by memory held. `None` when the
/// records carry neither (NVML's first process sample has no utilization yet).
pub fn process_shares(sample: &GpuSample, device: &str) -> Option<ProcessShares> {
    let processes: Vec<_> = sample
        .processes
        .iter()
        .filter(|process| process.device_identifier == device)
        .collect();
    if processes.is_empty() {
        // Asked, and the driver named no process: the device's per-process figures
        // hold none of it, and Agent scopes divide it as if no shares were read (the
        // driver names none when none runs, and also when it cannot see them).
        return Some(ProcessShares {
            basis: None,
            processes: BTreeMap::new(),
        });
    }
    let (basis, weights): (ShareBasis, Vec<(u32, f64)>) = if processes
        .iter()
        .any(|p| p.compute_utilization_percent.is_some())
    {
        let device_utilization = sample
            .devices
            .iter()
            .find(|d| d.device_identifier == device)
            .and_then(|d| d.compute_utilization_percent)?;
        let weights = processes
            .iter()
            .filter_map(|p| {
                let utilization = p.compute_utilization_percent?;
                let share = if device_utilization > 0.0 {
                    (utilization / device_utilization).clamp(0.0, 1.0)
                } else {
                    0.0
                };
                Some((p.process_id, share))
            })
            .collect();
        (ShareBasis::Utilization, weights)
    } else if processes.iter().any(|p| p.memory_used_bytes.is_some()) {
        let held: f64 = processes
            .iter()
            .filter_map(|p| p.memory_used_bytes)
            .map(|bytes| bytes as f64)
            .sum();
        let weights = processes
            .iter()
            .filter_map(|p| {
                let bytes = p.memory_used_bytes? as f64;
                Some((p.process_id, if held > 0.0 { bytes / held } else { 0.0 }))
            })
            .collect();
        (ShareBasis::Memory, weights)
    } else {
        return None;
    };
    // Shares never add up to more than the device: scale down when the driver's
    // numbers do (process samples and the device figure are taken at different times).
    let sum: f64 = weights.iter().map(|(_, share)| share).sum();
    let scale = if sum > 1.0 { 1.0 / sum } else { 1.0 };
    Some(ProcessShares {
        basis: Some(basis),
        processes: weights
            .into_iter()
            .map(|(pid, share)| (pid, share * scale))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use wattline_model::snapshot::{GpuDeviceReading, GpuProcessReading, GpuVendor};

    fn device(id: &str, utilization: Option<f64>) -> GpuDeviceReading {
        let mut device = GpuDeviceReading::new(GpuVendor::Nvidia, id);
        device.compute_utilization_percent = utilization;
        device
    }

    fn process(
        device: &str,
        pid: u32,
        memory_mib: Option<u64>,
        utilization: Option<f64>,
    ) -> GpuProcessReading {
        GpuProcessReading {
            vendor: GpuVendor::Nvidia,
            device_identifier: device.into(),
            device_index: None,
            process_id: pid,
            memory_used_bytes: memory_mib.map(|mib| mib * 1024 * 1024),
            compute_utilization_percent: utilization,
        }
    }

    fn sample(devices: Vec<GpuDeviceReading>, processes: Vec<GpuProcessReading>) -> GpuSample {
        GpuSample {
            devices,
            processes,
            taken_at: Instant::now(),
        }
    }

    fn share(shares: &ProcessShares, pid: u32) -> f64 {
        shares.processes[&pid]
    }

    #[test]
    fn the_record_takes_the_instant_power_over_the_gauges_figure() {
        let mut averaged = device("a", None);
        averaged.power_draw_watts = Some(350.0);
        averaged.instant_power_watts = Some(600.0);
        let mut gauge_only = device("b", None);
        gauge_only.power_draw_watts = Some(250.0);
        let epoch = Epoch::now();
        let taken = sample(vec![averaged, gauge_only], Vec::new());
        let record = power_record("nvml", epoch, taken.taken_at, Some(&taken), false, None);
        let watts: Vec<_> = record
            .devices
            .unwrap()
            .iter()
            .map(|device| device.watts)
            .collect();
        assert_eq!(watts, [Some(600.0), Some(250.0)]);
    }

    #[test]
    fn a_device_names_its_power_figure_only_where_the_record_does_not() {
        let mut instant = device("a", None);
        instant.instant_power_watts = Some(600.0);
        instant.power_field = Some("power.draw.instant");
        let mut mean = device("b", None);
        mean.power_draw_watts = Some(250.0);
        mean.power_field = Some("power.draw");
        let epoch = Epoch::now();
        let taken = sample(vec![instant, mean], Vec::new());
        let names = |record_field: Option<&str>| -> Vec<Option<String>> {
            power_record(
                "nvidia-smi",
                epoch,
                taken.taken_at,
                Some(&taken),
                false,
                record_field,
            )
            .devices
            .unwrap()
            .into_iter()
            .map(|device| device.power_field)
            .collect()
        };
        assert_eq!(
            names(None),
            [Some("power.draw.instant".into()), Some("power.draw".into())]
        );
        assert_eq!(
            names(Some("power.draw.instant")),
            [None, Some("power.draw".into())]
        );
    }

    #[test]
    fn utilization_shares_are_relative_to_the_device_and_scaled_down_past_the_whole() {
        let two = sample(
            vec![device("a", Some(50.0)), device("b", Some(80.0))],
            vec![
                process("a", 1, None, Some(20.0)),
                process("a", 2, None, Some(10.0)),
                process("b", 3, None, Some(80.0)),
            ],
        );
        let shares = process_shares(&two, "a").unwrap();
        assert_eq!(shares.basis, Some(ShareBasis::Utilization));
        assert!((share(&shares, 1) - 0.4).abs() < 1e-12);
        assert!((share(&shares, 2) - 0.2).abs() < 1e-12);
        assert!(!shares.processes.contains_key(&3));
        // 37% + 12% of a device busy 41%: more than the whole, scaled to 37/49, 12/49.
        let over = sample(
            vec![device("a", Some(41.0))],
            vec![
                process("a", 1, None, Some(37.0)),
                process("a", 2, None, Some(12.0)),
            ],
        );
        let shares = process_shares(&over, "a").unwrap();
        assert!((share(&shares, 1) - 37.0 / 49.0).abs() < 1e-12);
        assert!((share(&shares, 2) - 12.0 / 49.0).abs() < 1e-12);
        // A process over an idle device's figure holds nothing; a share above the
        // device's is capped at the whole.
        let idle = sample(
            vec![device("a", Some(0.0))],
            vec![process("a", 1, None, Some(5.0))],
        );
        assert_eq!(share(&process_shares(&idle, "a").unwrap(), 1), 0.0);
        let capped = sample(
            vec![device("a", Some(10.0))],
            vec![process("a", 1, None, Some(30.0))],
        );
        assert_eq!(share(&process_shares(&capped, "a").unwrap(), 1), 1.0);
        // Processes with utilization but no device figure: no shares.
        let unknown = sample(
            vec![device("a", None)],
            vec![process("a", 1, None, Some(30.0))],
        );
        assert_eq!(process_shares(&unknown, "a"), None);
    }

    #[test]
    fn each_basis_and_the_epoch_have_their_meaning() {
        assert_eq!(ShareBasis::Utilization.as_str(), "utilization");
        assert_eq!(ShareBasis::Memory.as_str(), "memory");
        let epoch = Epoch::now();
        let later = epoch.0 + std::time::Duration::from_millis(1500);
        assert_eq!(epoch.nanos(later), 1_500_000_000);
        // Before the epoch is zero, not a wrap.
        assert_eq!(Epoch(later).nanos(epoch.0), 0);
    }

    #[test]
    fn memory_shares_are_of_the_memory_the_processes_hold() {
        let held = sample(
            vec![device("a", None)],
            vec![
                process("a", 1, Some(300), None),
                process("a", 2, Some(900), None),
                process("a", 3, None, None),
            ],
        );
        let shares = process_shares(&held, "a").unwrap();
        assert_eq!(shares.basis, Some(ShareBasis::Memory));
        assert!((share(&shares, 1) - 0.25).abs() < 1e-12);
        assert!((share(&shares, 2) - 0.75).abs() < 1e-12);
        assert!(!shares.processes.contains_key(&3));
        let none_held = sample(
            vec![device("a", None)],
            vec![process("a", 1, Some(0), None)],
        );
        assert_eq!(share(&process_shares(&none_held, "a").unwrap(), 1), 0.0);
        // Neither figure: no shares; no process on the device: empty shares.
        let blind = sample(vec![device("a", None)], vec![process("a", 1, None, None)]);
        assert_eq!(process_shares(&blind, "a"), None);
        let empty = process_shares(&sample(vec![device("a", None)], Vec::new()), "a").unwrap();
        assert_eq!(empty.basis, None);
        assert!(empty.processes.is_empty());
    }
}
