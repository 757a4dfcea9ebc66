//! RAPL powercap zones (`/sys/class/powercap/intel-rapl:*`): CPU package and DRAM
//! energy counters in microjoules, with the range at which they wrap.

use std::path::Path;

use super::{ParseError, parse_u64, read_file};
use crate::platform::error::ReadError;

use wattline_model::energy::RaplZoneReading;

/// Reads every readable RAPL zone under `root/sys/class/powercap`. Zones whose counter
/// is unreadable (root-only on recent kernels) are left out and their errors returned;
/// no powercap directory at all is an empty list.
pub fn read_rapl_zones(root: &Path) -> (Vec<RaplZoneReading>, Vec<ReadError>) {
    let base = root.join("sys/class/powercap");
    let mut zones = Vec::new();
    let mut errors = Vec::new();
    let Ok(entries) = std::fs::read_dir(&base) else {
        return (zones, errors);
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|name| name.starts_with("intel-rapl:"))
        .collect();
    names.sort();
    let mut buffer = Vec::with_capacity(64);
    for zone in names {
        let dir = base.join(&zone);
        let mut text = |file: &str| -> Result<Option<String>, ReadError> {
            let path = dir.join(file);
            Ok(read_file(&path, &mut buffer)?
                .then(|| String::from_utf8_lossy(&buffer).trim().to_string()))
        };
        let reading = (|| -> Result<Option<RaplZoneReading>, ReadError> {
            let Some(energy) = text("energy_uj")? else {
                return Ok(None);
            };
            let energy_microjoules = parse_u64("energy_uj", &energy)
                .map_err(|e: ParseError| ReadError::parse(&dir.join("energy_uj"), e))?;
            let max = match text("max_energy_range_uj")? {
                Some(max) => Some(
                    parse_u64("max_energy_range_uj", &max)
                        .map_err(|e| ReadError::parse(&dir.join("max_energy_range_uj"), e))?,
                ),
                None => None,
            };
            let name = text("name")?.unwrap_or_else(|| zone.clone());
            Ok(Some(RaplZoneReading {
                zone: zone.clone(),
                name,
                energy_microjoules,
                max_energy_range_microjoules: max,
            }))
        })();
        match reading {
            Ok(Some(reading)) => zones.push(reading),
            Ok(None) => {}
            Err(error) => errors.push(error),
        }
    }
    (zones, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zone(root: &Path, dir: &str, name: &str, energy: &str, max: &str) {
        let path = root.join("sys/class/powercap").join(dir);
        std::fs::create_dir_all(&path).unwrap();
        std::fs::write(path.join("name"), format!("{name}\n")).unwrap();
        std::fs::write(path.join("energy_uj"), format!("{energy}\n")).unwrap();
        std::fs::write(path.join("max_energy_range_uj"), format!("{max}\n")).unwrap();
    }

    #[test]
    fn reads_package_and_dram_zones_in_order() {
        let root = tempfile::tempdir().unwrap();
        zone(
            root.path(),
            "intel-rapl:0",
            "package-0",
            "123456789",
            "262143328850",
        );
        zone(root.path(), "intel-rapl:0:0", "dram", "42", "65712999613");
        std::fs::create_dir_all(root.path().join("sys/class/powercap/dtpm")).unwrap();
        let (zones, errors) = read_rapl_zones(root.path());
        assert!(errors.is_empty());
        assert_eq!(zones.len(), 2);
        assert_eq!(zones[0].name, "package-0");
        assert_eq!(zones[0].energy_microjoules, 123_456_789);
        assert_eq!(zones[0].max_energy_range_microjoules, Some(262_143_328_850));
        assert_eq!(
            (zones[1].zone.as_str(), zones[1].name.as_str()),
            ("intel-rapl:0:0", "dram")
        );
    }

    #[test]
    fn no_powercap_means_no_zones_and_garbage_is_an_error() {
        let root = tempfile::tempdir().unwrap();
        assert_eq!(read_rapl_zones(root.path()).0, Vec::new());
        zone(root.path(), "intel-rapl:1", "package-1", "lots", "1");
        let (zones, errors) = read_rapl_zones(root.path());
        assert!(zones.is_empty());
        assert_eq!(errors.len(), 1);
    }
}
