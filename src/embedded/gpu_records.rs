//! A GPU source written in the host language (`setGpuSource` in Node.js,
//! `set_gpu_source` in Python): its `sample()` answers device records in the units of
//! the `gen_ai.gpu.*` table (%, MiB, °C, W, MHz); they cross as JSON with snake_case
//! names and become the pipeline's [`GpuSample`]. The packages only call the
//! language's function; the rules live here once.

use std::time::Instant;

use serde::Deserialize;

use wattline_gpu::{GpuSampleRequest, GpuSource};
use wattline_model::snapshot::{GpuDeviceReading, GpuSample, GpuVendor};

/// Bytes in a MiB: memory figures come in MiB, as `nvidia-smi` gives them.
const BYTES_PER_MIB: f64 = 1024.0 * 1024.0;

/// One device as a language's `sample()` gives it; each figure optional.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeviceRecord {
    index: Option<u32>,
    uuid: Option<String>,
    name: Option<String>,
    vendor: Option<GpuVendor>,
    utilization: Option<f64>,
    memory_utilization: Option<f64>,
    memory_used: Option<f64>,
    memory_total: Option<f64>,
    temperature: Option<f64>,
    power_draw: Option<f64>,
    power_limit: Option<f64>,
    sm_clock: Option<f64>,
    memory_clock: Option<f64>,
    fan_speed: Option<f64>,
}

fn mib_to_bytes(mib: Option<f64>) -> Option<u64> {
    // A negative or non-finite figure is not a reading.
    mib.filter(|mib| mib.is_finite() && *mib >= 0.0)
        .map(|mib| (mib * BYTES_PER_MIB).round() as u64)
}

fn finite(value: Option<f64>) -> Option<f64> {
    value.filter(|value| value.is_finite())
}

/// The devices of one answer (a JSON array of records, or `null`: nothing observed).
/// A device without `uuid` is named `gpu-<index>` (its position when it has no index
/// either). An error names the record and the field.
pub fn sample_from_json(json: &str) -> Result<Option<GpuSample>, String> {
    let records: Option<Vec<serde_json::Value>> = serde_json::from_str(json)
        .map_err(|error| format!("sample(): not an array of device records: {error}"))?;
    let Some(records) = records else {
        return Ok(None);
    };
    let mut devices = Vec::with_capacity(records.len());
    for (position, record) in records.into_iter().enumerate() {
        let record: DeviceRecord = serde_json::from_value(record)
            .map_err(|error| format!("sample(): device record {position}: {error}"))?;
        let identifier = record
            .uuid
            .unwrap_or_else(|| format!("gpu-{}", record.index.unwrap_or(position as u32)));
        let mut device =
            GpuDeviceReading::new(record.vendor.unwrap_or(GpuVendor::Nvidia), identifier);
        device.device_index = record.index;
        device.name = record.name;
        device.compute_utilization_percent = finite(record.utilization);
        device.memory_utilization_percent = finite(record.memory_utilization);
        device.memory_used_bytes = mib_to_bytes(record.memory_used);
        device.memory_total_bytes = mib_to_bytes(record.memory_total);
        device.temperature_celsius = finite(record.temperature);
        device.power_draw_watts = finite(record.power_draw);
        device.power_limit_watts = finite(record.power_limit);
        device.sm_clock_mhz = finite(record.sm_clock);
        device.memory_clock_mhz = finite(record.memory_clock);
        device.fan_speed_percent = finite(record.fan_speed);
        devices.push(device);
    }
    Ok(Some(GpuSample {
        devices,
        processes: Vec::new(),
        taken_at: Instant::now(),
    }))
}

/// A source whose every sample is one call of `answer`, the language's `sample()`
/// turned into JSON text (`None` when it failed or did not answer in time: nothing is
/// observed then, and why is logged).
pub struct LanguageGpuSource<F> {
    name: String,
    answer: F,
    last_problem: Option<String>,
}

impl<F> LanguageGpuSource<F>
where
    F: FnMut() -> Result<Option<String>, String> + Send,
{
    /// A source named `name` (the backend name in reports) answering with `answer`.
    pub fn new(name: impl Into<String>, answer: F) -> Self {
        LanguageGpuSource {
            name: name.into(),
            answer,
            last_problem: None,
        }
    }
}

impl<F> GpuSource for LanguageGpuSource<F>
where
    F: FnMut() -> Result<Option<String>, String> + Send,
{
    fn name(&self) -> &str {
        &self.name
    }

    fn sample(&mut self, request: &GpuSampleRequest) -> Option<GpuSample> {
        let answer = (self.answer)().and_then(|json| match json {
            Some(json) => sample_from_json(&json),
            None => Ok(None),
        });
        match answer {
            Ok(Some(mut sample)) => {
                self.last_problem = None;
                sample.devices.retain(|device| {
                    request.selects_device(&device.device_identifier, device.device_index)
                });
                Some(sample)
            }
            Ok(None) => None,
            Err(problem) => {
                if self.last_problem.as_ref() != Some(&problem) {
                    tracing::warn!(source = %self.name, "GPU source: {problem}");
                }
                self.last_problem = Some(problem);
                None
            }
        }
    }

    fn unavailable_reason(&self) -> Option<String> {
        self.last_problem.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_become_devices_in_base_units() {
        let sample = sample_from_json(
            r#"[{"index": 0, "uuid": "GPU-a", "name": "H200", "utilization": 40,
                 "memory_used": 2048, "memory_total": 143771, "power_draw": 250.5,
                 "temperature": 46}, {"index": 3}]"#,
        )
        .unwrap()
        .unwrap();
        let first = &sample.devices[0];
        assert_eq!(first.device_identifier, "GPU-a");
        assert_eq!(first.vendor, GpuVendor::Nvidia);
        assert_eq!(first.memory_used_bytes, Some(2048 * 1024 * 1024));
        assert_eq!(first.memory_total_bytes, Some(143_771 * 1024 * 1024));
        assert_eq!(first.power_draw_watts, Some(250.5));
        assert_eq!(first.compute_utilization_percent, Some(40.0));
        assert_eq!(first.temperature_celsius, Some(46.0));
        let second = &sample.devices[1];
        assert_eq!(second.device_identifier, "gpu-3");
        assert_eq!(second.power_draw_watts, None, "absent is unread, never 0");
    }

    #[test]
    fn the_configured_devices_are_kept_and_a_failure_is_the_reason() {
        let answer = || {
            Ok(Some(
                r#"[{"index": 0, "uuid": "GPU-a"}, {"index": 1, "uuid": "GPU-b"}]"#.to_owned(),
            ))
        };
        let mut source = LanguageGpuSource::new("test", answer);
        let request = GpuSampleRequest {
            device_selectors: vec!["1".into()],
            ..GpuSampleRequest::all(wattline_model::series::SamplingSeries::OnDemand)
        };
        let sample = source.sample(&request).unwrap();
        let kept: Vec<&str> = sample
            .devices
            .iter()
            .map(|d| d.device_identifier.as_str())
            .collect();
        assert_eq!(kept, ["GPU-b"]);
        let mut failing =
            LanguageGpuSource::new("test", || Err("sample() failed: boom".to_owned()));
        assert!(
            failing
                .sample(&GpuSampleRequest::all(
                    wattline_model::series::SamplingSeries::OnDemand
                ))
                .is_none()
        );
        assert_eq!(
            failing.unavailable_reason().as_deref(),
            Some("sample() failed: boom")
        );
    }

    #[test]
    fn null_is_nothing_observed_and_bad_records_are_named() {
        assert!(sample_from_json("null").unwrap().is_none());
        let error = sample_from_json(r#"[{"index": 0}, {"powerDraw": 1}]"#).unwrap_err();
        assert!(
            error.contains("device record 1") && error.contains("powerDraw"),
            "{error}"
        );
        assert!(sample_from_json("{}").unwrap_err().contains("not an array"));
    }
}
