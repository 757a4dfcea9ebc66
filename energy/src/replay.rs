//! The energy report rebuilt from an event file's energy records: the same records
//! fed to the same account give the same report as the live one.

use crate::account::EnergyAccount;
use wattline_model::energy::EnergyRecord;
use wattline_model::report::EnergyReport;

/// Rebuilds the report from `records` in file order, as of the last report taken
/// (for a file whose run was cut short: as of its newest record). `None` when the
/// records hold no [`EnergyRecord::Started`].
pub fn report_from_records(
    records: impl IntoIterator<Item = EnergyRecord>,
) -> Option<EnergyReport> {
    let account = EnergyAccount::replay(records)?;
    let (at, wall) = account.last_report().unwrap_or_else(|| {
        let at = account.newest();
        (at, account.wall_time(at))
    });
    Some(account.report(at, wall))
}
