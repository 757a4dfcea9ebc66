//! Linux readers: pure functions of a root directory (`/` in production, a fixture tree
//! in tests). Each reads one OS source and returns base units.

pub mod error;
pub mod process_list;
pub mod process_stat;
pub mod system_constants;
pub mod system_stat;

pub use error::{ReadError, ReadErrorClass};
