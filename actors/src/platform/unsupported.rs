//! The readers on an OS wattline does not read yet: the same modules, functions and
//! types as [`super::linux`], each read answering [`ReadError::Unsupported`] so every
//! category says "not supported on this OS" instead of failing to build.
//!
//! The data types are the Linux readers' own: plain data, with parsers that make no
//! OS call, so they build everywhere.

use std::path::Path;

use super::ReadError;

fn unsupported(path: &Path) -> ReadError {
    ReadError::Unsupported {
        path: path.to_path_buf(),
    }
}

/// Control groups.
pub mod cgroup {
    use std::path::Path;

    pub use crate::platform::linux::cgroup::{CgroupLayout, ExclusiveGroup};
    use crate::platform::linux::cgroup_files::CgroupReadings;

    use super::{ReadError, unsupported};

    /// Not supported on this OS.
    pub fn read_cgroup_layout(root: &Path) -> Result<Option<CgroupLayout>, ReadError> {
        Err(unsupported(root))
    }

    /// Not supported on this OS.
    pub fn find_exclusive_group(
        root: &Path,
        _layout: &CgroupLayout,
        _pids: &[u32],
        _foreign_witness: Option<u32>,
    ) -> Result<Option<ExclusiveGroup>, ReadError> {
        Err(unsupported(root))
    }

    /// Not supported on this OS: nothing read, nothing to report beyond the layout.
    pub fn read_cgroup_readings(_group: &ExclusiveGroup) -> (CgroupReadings, Vec<ReadError>) {
        (CgroupReadings::default(), Vec::new())
    }
}

/// A fresh cgroup for a measured command.
pub mod cgroup_command {
    use std::path::{Path, PathBuf};

    pub use crate::platform::linux::cgroup_command::{CommandCgroup, CommandCgroupError};

    use super::{ReadError, unsupported};
    use crate::platform::linux::cgroup::CgroupLayout;

    /// Not supported on this OS.
    pub fn create_command_cgroup(
        root: &Path,
        _layout: &CgroupLayout,
        _own_pid: u32,
        _name: &str,
    ) -> Result<CommandCgroup, CommandCgroupError> {
        Err(CommandCgroupError::OwnGroup(unsupported(root)))
    }

    /// Not supported on this OS.
    pub fn read_group_members(group: &Path) -> Result<Vec<u32>, ReadError> {
        Err(unsupported(group))
    }

    /// Nothing was made on this OS: nothing to remove.
    pub fn remove_command_cgroup(_cgroup: &CommandCgroup) -> Vec<(PathBuf, std::io::Error)> {
        Vec::new()
    }
}

/// Pressure stall information.
pub mod pressure {
    use std::path::Path;

    pub use crate::platform::linux::pressure::{Pressure, PressureResource};

    use super::{ReadError, unsupported};

    /// Not supported on this OS.
    pub fn read_system_pressure(
        root: &Path,
        _resource: PressureResource,
    ) -> Result<Option<Pressure>, ReadError> {
        Err(unsupported(root))
    }
}

/// Listing processes.
pub mod process_list {
    use std::path::Path;

    use super::{ReadError, unsupported};

    /// Not supported on this OS.
    pub fn list_all_process_ids(root: &Path) -> Result<Vec<u32>, ReadError> {
        Err(unsupported(root))
    }

    /// Not supported on this OS.
    pub fn read_children(
        root: &Path,
        _pid: u32,
        _children: &mut Vec<u32>,
    ) -> Result<(), ReadError> {
        Err(unsupported(root))
    }

    /// Not supported on this OS.
    pub fn read_children_of(
        root: &Path,
        _stat: &crate::platform::linux::process_stat::ProcessStat,
        _children: &mut Vec<u32>,
    ) -> Result<(), ReadError> {
        Err(unsupported(root))
    }
}

/// A process's scheduling and CPU counters.
pub mod process_stat {
    use std::path::Path;

    pub use crate::platform::linux::process_stat::ProcessStat;

    use super::{ReadError, unsupported};

    /// Not supported on this OS.
    pub fn read_process_stat(
        root: &Path,
        _pid: u32,
        _buf: &mut Vec<u8>,
    ) -> Result<ProcessStat, ReadError> {
        Err(unsupported(root))
    }
}

/// Filesystem capacity.
pub mod filesystem {
    use std::path::Path;

    pub use crate::platform::linux::filesystem::FsCapacity;

    use super::{ReadError, unsupported};

    /// Not supported on this OS.
    pub fn statvfs(path: &Path) -> Result<FsCapacity, ReadError> {
        Err(unsupported(path))
    }
}

/// A process's storage counters.
pub mod process_io {
    use std::path::Path;

    pub use crate::platform::linux::process_io::ProcessIo;

    use super::{ReadError, unsupported};

    /// Not supported on this OS.
    pub fn read_process_io(
        root: &Path,
        _pid: u32,
        _buf: &mut Vec<u8>,
    ) -> Result<Option<ProcessIo>, ReadError> {
        Err(unsupported(root))
    }
}

/// Network interface counters.
pub mod net_dev {
    use std::path::Path;

    pub use crate::platform::linux::net_dev::NetDevStats;

    use super::{ReadError, unsupported};

    /// Not supported on this OS.
    pub fn read_net_dev(root: &Path) -> Result<Option<Vec<NetDevStats>>, ReadError> {
        Err(unsupported(root))
    }
}

/// Open file descriptors.
pub mod fd_count {
    use std::path::Path;

    use super::{ReadError, unsupported};

    /// How a root tells descriptor counts (only by listing, where there is any).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum FdCountSource {
        /// Counted from a listing.
        Listing,
    }

    /// Always [`FdCountSource::Listing`] here.
    pub fn fd_count_source(_root: &Path) -> FdCountSource {
        FdCountSource::Listing
    }

    /// Not supported on this OS.
    pub fn read_fd_count(
        root: &Path,
        _pid: u32,
        _source: FdCountSource,
    ) -> Result<Option<u64>, ReadError> {
        Err(unsupported(root))
    }
}

/// System memory.
pub mod meminfo {
    use std::path::Path;

    pub use crate::platform::linux::meminfo::MemInfo;

    use super::{ReadError, unsupported};

    /// Not supported on this OS.
    pub fn read_meminfo(root: &Path) -> Result<Option<MemInfo>, ReadError> {
        Err(unsupported(root))
    }
}

/// The host's name.
pub mod host_name {
    use std::path::Path;

    use super::{ReadError, unsupported};

    /// Not supported on this OS.
    pub fn read_host_name(root: &Path) -> Result<Option<String>, ReadError> {
        Err(unsupported(root))
    }
}

/// A process's memory sizes.
pub mod process_status {
    use std::path::Path;

    pub use crate::platform::linux::process_status::ProcessStatus;

    use super::{ReadError, unsupported};

    /// Not supported on this OS.
    pub fn read_process_status(
        root: &Path,
        _pid: u32,
        _buf: &mut Vec<u8>,
    ) -> Result<Option<ProcessStatus>, ReadError> {
        Err(unsupported(root))
    }
}

/// A process's private memory.
pub mod smaps_rollup {
    use std::path::Path;

    pub use crate::platform::linux::smaps_rollup::SmapsRollup;

    use super::{ReadError, unsupported};

    /// Not supported on this OS.
    pub fn read_smaps_rollup(
        root: &Path,
        _pid: u32,
        _buf: &mut Vec<u8>,
    ) -> Result<Option<SmapsRollup>, ReadError> {
        Err(unsupported(root))
    }
}

/// Whole-machine CPU time.
pub mod system_stat {
    use std::path::Path;

    pub use crate::platform::linux::system_stat::SystemCpuTimes;

    use super::{ReadError, unsupported};

    /// Not supported on this OS.
    pub fn read_system_cpu_times(root: &Path) -> Result<SystemCpuTimes, ReadError> {
        Err(unsupported(root))
    }
}

/// Kernel constants. Unknown here: the conventional values, which no reading uses
/// since every read above fails.
pub mod system_constants {
    /// The conventional 100 Hz.
    pub fn clock_ticks_per_second() -> u64 {
        100
    }

    /// The conventional 4 KiB.
    pub fn page_size_bytes() -> u64 {
        4096
    }
}

/// CPU package power.
pub mod rapl {
    use std::path::Path;

    use wattline_model::energy::RaplZoneReading;

    use super::{ReadError, unsupported};

    /// Not supported on this OS: no zones, and one error saying so.
    pub fn read_rapl_zones(root: &Path) -> (Vec<RaplZoneReading>, Vec<ReadError>) {
        (Vec::new(), vec![unsupported(root)])
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::platform::ReadErrorClass;

    #[test]
    fn every_read_says_not_supported_and_names_what_it_would_read() {
        let root = Path::new("/fixture-root");
        let errors = [
            meminfo::read_meminfo(root).err(),
            host_name::read_host_name(root).err(),
            system_stat::read_system_cpu_times(root).err(),
            process_list::list_all_process_ids(root).err(),
            process_stat::read_process_stat(root, 1, &mut Vec::new()).err(),
            net_dev::read_net_dev(root).err(),
            cgroup::read_cgroup_layout(root).err(),
            filesystem::statvfs(root).err(),
        ];
        for error in errors {
            let error = error.expect("an unsupported read fails");
            assert_eq!(error.class(), ReadErrorClass::Unavailable);
            assert_eq!(error.path(), root);
            let message = error.to_string();
            assert!(
                message.contains("/fixture-root") && message.contains("not supported on"),
                "{message}"
            );
        }
        let (zones, errors) = rapl::read_rapl_zones(root);
        assert!(zones.is_empty());
        assert_eq!(errors.len(), 1);
    }
}
