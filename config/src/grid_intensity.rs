//! The grid carbon-intensity table shipped with wattline
//! (`config/data/grid_carbon_intensity.csv`, provenance in `config/data/README.md`):
//! one yearly factor per country from a published dataset, found by ISO 3166-1 code.
//!
//! The table is compiled in and parsed once, on first use. Its `# dataset:` and
//! `# licence:` header lines travel with every factor taken from it, so a report can
//! name where the number came from.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// The table's text, compiled in.
const BUILTIN_TABLE: &str = include_str!("../data/grid_carbon_intensity.csv");
/// The column line every table starts its rows with.
const HEADER: &str = "iso2,iso3,name,gco2e_per_kwh,year";
/// What a `carbon_region` value must be, for error messages.
pub const REGION_RULE: &str = "must be an ISO 3166-1 alpha-2 or alpha-3 country code \
     listed in wattline's grid carbon-intensity table, e.g. DE or DEU";

/// One country's row.
#[derive(Debug, Clone, PartialEq)]
pub struct GridIntensityRow {
    /// ISO 3166-1 alpha-2 code, upper case.
    pub iso2: String,
    /// ISO 3166-1 alpha-3 code, upper case.
    pub iso3: String,
    /// The country's name in the dataset.
    pub name: String,
    /// Carbon intensity of electricity generation, gCO2e per kWh.
    pub gco2e_per_kwh: f64,
    /// The year the figure is for.
    pub year: u16,
}

/// A parsed table: the rows and the dataset they come from.
#[derive(Debug, Clone, PartialEq)]
pub struct GridIntensityTable {
    /// Short name of the dataset (`# dataset:`), e.g. `Ember/OWID`.
    pub dataset: String,
    /// Its licence (`# licence:`), e.g. `CC BY 4.0`.
    pub licence: String,
    /// Who published it (`# source:`).
    pub source: String,
    /// One row per country, in file order.
    pub rows: Vec<GridIntensityRow>,
}

/// A table that cannot be used: the line (1-based) and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("grid carbon-intensity table, line {line}: {problem}")]
pub struct TableError {
    /// The offending line, 1-based; 0 for the table as a whole.
    pub line: usize,
    /// What is wrong.
    pub problem: String,
}

/// Why a region code gives no factor.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegionError {
    /// The code is in no row of the table.
    #[error("{REGION_RULE} (got {0:?})")]
    Unknown(String),
    /// The compiled-in table itself is broken.
    #[error(transparent)]
    Table(#[from] TableError),
}

/// Parses a table: `#` comment lines (`# dataset:`, `# licence:` and `# source:` are
/// required), the header line, then one row per country.
pub fn parse_table(text: &str) -> Result<GridIntensityTable, TableError> {
    let mut dataset = None;
    let mut licence = None;
    let mut source = None;
    let mut header_seen = false;
    let mut rows: Vec<GridIntensityRow> = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let error = |problem: String| TableError { line, problem };
        let content = raw.trim();
        if content.is_empty() {
            continue;
        }
        if let Some(comment) = content.strip_prefix('#') {
            if let Some((key, value)) = comment.split_once(':') {
                let value = value.trim().to_string();
                match key.trim() {
                    "dataset" => dataset = Some(value),
                    "licence" => licence = Some(value),
                    "source" => source = Some(value),
                    _ => {}
                }
            }
            continue;
        }
        if !header_seen {
            if content != HEADER {
                return Err(error(format!(
                    "expected the header {HEADER:?}, got {content:?}"
                )));
            }
            header_seen = true;
            continue;
        }
        let row = parse_row(content).map_err(error)?;
        if let Some(earlier) = rows
            .iter()
            .find(|earlier| earlier.iso2 == row.iso2 || earlier.iso3 == row.iso3)
        {
            return Err(error(format!(
                "{}/{} is listed twice (also {}/{})",
                row.iso2, row.iso3, earlier.iso2, earlier.iso3
            )));
        }
        rows.push(row);
    }
    let whole = |problem: &str| TableError {
        line: 0,
        problem: problem.into(),
    };
    if rows.is_empty() {
        return Err(whole("no rows"));
    }
    let required = |value: Option<String>, key: &str| {
        value
            .filter(|value| !value.is_empty())
            .ok_or_else(|| whole(&format!("no \"# {key}:\" line")))
    };
    Ok(GridIntensityTable {
        dataset: required(dataset, "dataset")?,
        licence: required(licence, "licence")?,
        source: required(source, "source")?,
        rows,
    })
}

/// One data line: `iso2,iso3,name,gco2e_per_kwh,year`.
fn parse_row(content: &str) -> Result<GridIntensityRow, String> {
    let fields: Vec<&str> = content.split(',').map(str::trim).collect();
    let [iso2, iso3, name, intensity, year] = fields[..] else {
        return Err(format!(
            "expected 5 comma-separated fields, got {}: {content:?}",
            fields.len()
        ));
    };
    let letters = |code: &str, length: usize| {
        code.len() == length && code.bytes().all(|byte| byte.is_ascii_uppercase())
    };
    if !letters(iso2, 2) {
        return Err(format!("iso2 {iso2:?} is not two upper-case letters"));
    }
    if !letters(iso3, 3) {
        return Err(format!("iso3 {iso3:?} is not three upper-case letters"));
    }
    if name.is_empty() {
        return Err(format!("{iso3}: the name is empty"));
    }
    let gco2e_per_kwh = intensity
        .parse::<f64>()
        .ok()
        .filter(|value| value.is_finite() && *value >= 0.0)
        .ok_or_else(|| format!("{iso3}: gco2e_per_kwh {intensity:?} is not a number >= 0"))?;
    let year = year
        .parse::<u16>()
        .ok()
        .filter(|year| (1990..=2100).contains(year))
        .ok_or_else(|| format!("{iso3}: year {year:?} is not a year between 1990 and 2100"))?;
    Ok(GridIntensityRow {
        iso2: iso2.into(),
        iso3: iso3.into(),
        name: name.into(),
        gco2e_per_kwh,
        year,
    })
}

impl GridIntensityTable {
    /// The row of `code`: an ISO 3166-1 alpha-2 or alpha-3 code, in any case,
    /// surrounding blanks ignored.
    pub fn find(&self, code: &str) -> Option<&GridIntensityRow> {
        let code = code.trim();
        self.rows
            .iter()
            .find(|row| row.iso2.eq_ignore_ascii_case(code) || row.iso3.eq_ignore_ascii_case(code))
    }

    /// The factor for `code`, with the dataset it comes from.
    pub fn region(&self, code: &str) -> Result<RegionIntensity, RegionError> {
        let row = self
            .find(code)
            .ok_or_else(|| RegionError::Unknown(code.to_string()))?;
        Ok(RegionIntensity {
            code: row.iso2.clone(),
            iso3: row.iso3.clone(),
            country: row.name.clone(),
            gco2e_per_kwh: row.gco2e_per_kwh,
            year: row.year,
            dataset: self.dataset.clone(),
            licence: self.licence.clone(),
        })
    }
}

/// The table compiled into wattline, parsed on first use.
pub fn builtin_table() -> Result<&'static GridIntensityTable, TableError> {
    static TABLE: OnceLock<Result<GridIntensityTable, TableError>> = OnceLock::new();
    TABLE
        .get_or_init(|| parse_table(BUILTIN_TABLE))
        .as_ref()
        .map_err(Clone::clone)
}

/// The compiled-in table's factor for `code` (alpha-2 or alpha-3, any case).
pub fn region_intensity(code: &str) -> Result<RegionIntensity, RegionError> {
    builtin_table()?.region(code)
}

/// A country's grid factor as settings, reports and energy records carry it: the
/// figure, its year, and the dataset and licence it comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegionIntensity {
    /// ISO 3166-1 alpha-2 code.
    pub code: String,
    /// ISO 3166-1 alpha-3 code.
    pub iso3: String,
    /// The country's name in the dataset.
    pub country: String,
    /// Carbon intensity of electricity generation, gCO2e per kWh.
    pub gco2e_per_kwh: f64,
    /// The year the figure is for.
    pub year: u16,
    /// The dataset's short name, e.g. `Ember/OWID`.
    pub dataset: String,
    /// The dataset's licence, e.g. `CC BY 4.0`.
    pub licence: String,
}

impl RegionIntensity {
    /// Whether `code` (alpha-2 or alpha-3, any case) names this region.
    pub fn matches(&self, code: &str) -> bool {
        let code = code.trim();
        self.code.eq_ignore_ascii_case(code) || self.iso3.eq_ignore_ascii_case(code)
    }

    /// `region DE, Ember/OWID 2023, CC BY 4.0`: where the figure comes from, in words.
    pub fn label(&self) -> String {
        format!(
            "region {}, {} {}, {}",
            self.code, self.dataset, self.year, self.licence
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = "# dataset: Test set\n# licence: CC0\n# source: a test\n\
        iso2,iso3,name,gco2e_per_kwh,year\nDE,DEU,Germany,380.95,2023\nFR,FRA,France,56.039,2023\n";

    fn error_of(text: &str) -> TableError {
        parse_table(text).expect_err("the table is malformed")
    }

    #[test]
    fn a_table_parses_with_its_dataset_and_rows() {
        let table = parse_table(SMALL).unwrap();
        assert_eq!(table.dataset, "Test set");
        assert_eq!(table.licence, "CC0");
        assert_eq!(table.source, "a test");
        assert_eq!(table.rows.len(), 2);
        assert_eq!(
            table.rows[0],
            GridIntensityRow {
                iso2: "DE".into(),
                iso3: "DEU".into(),
                name: "Germany".into(),
                gco2e_per_kwh: 380.95,
                year: 2023,
            }
        );
    }

    #[test]
    fn a_malformed_row_names_its_line_and_problem() {
        let with_row = |row: &str| format!("{SMALL}{row}\n");
        let error = error_of(&with_row("IT,ITA,Italy,lots,2023"));
        assert_eq!(error.line, 7);
        assert!(error.problem.contains("\"lots\""), "{error}");
        for (row, named) in [
            ("IT,ITA,Italy,-1,2023", "-1"),
            ("it,ITA,Italy,1,2023", "iso2"),
            ("IT,IT,Italy,1,2023", "iso3"),
            ("IT,ITA,,1,2023", "name"),
            ("IT,ITA,Italy,1,23", "year"),
            ("IT,ITA,Italy,1", "5"),
            ("IT,ITA,Korea, Republic of,1,2023", "6"),
        ] {
            let error = error_of(&with_row(row));
            assert!(error.problem.contains(named), "{row}: {error}");
        }
        let twice = error_of(&with_row("DE,DEX,Germany again,1,2023"));
        assert!(twice.problem.contains("twice"), "{twice}");
        assert_eq!(
            error_of(&with_row("IT,ITA,Italy,nan,2023")).to_string(),
            "grid carbon-intensity table, line 7: ITA: gco2e_per_kwh \"nan\" is not a number >= 0"
        );
    }

    #[test]
    fn header_and_provenance_are_required() {
        let error = error_of("# dataset: x\n# licence: y\n# source: z\nDE,DEU,Germany,1,2023\n");
        assert_eq!(error.line, 4);
        assert!(error.problem.contains("header"));
        assert!(
            error_of(&SMALL.replace("# licence: CC0\n", ""))
                .problem
                .contains("licence")
        );
        assert!(
            error_of(&SMALL.replace("# dataset: Test set\n", ""))
                .problem
                .contains("dataset")
        );
        assert!(
            error_of(&SMALL.replace("# source: a test\n", ""))
                .problem
                .contains("source")
        );
        assert!(
            error_of(
                "# dataset: x\n# licence: y\n# source: z\niso2,iso3,name,gco2e_per_kwh,year\n"
            )
            .problem
            .contains("no rows")
        );
    }

    #[test]
    fn the_builtin_table_parses_and_names_its_dataset() {
        let table = builtin_table().unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(table.dataset, "Ember/OWID");
        assert_eq!(table.licence, "CC BY 4.0");
        assert!(
            table.source.contains("Our World in Data"),
            "{}",
            table.source
        );
        assert!(table.rows.len() >= 200, "{} rows", table.rows.len());
        let germany = table.find("DE").unwrap();
        assert_eq!((germany.iso3.as_str(), germany.year), ("DEU", 2023));
        assert_eq!(germany.gco2e_per_kwh, 380.95);
    }

    #[test]
    fn regions_are_found_by_alpha_2_or_alpha_3_in_any_case() {
        let table = parse_table(SMALL).unwrap();
        for code in ["DE", "de", "DEU", "deu", " De "] {
            assert_eq!(
                table.find(code).map(|row| row.iso2.as_str()),
                Some("DE"),
                "{code}"
            );
        }
        for unknown in ["", "D", "DEUT", "XX", "Germany"] {
            assert!(table.find(unknown).is_none(), "{unknown}");
        }
        let france = table.region("fra").unwrap();
        assert_eq!(france.code, "FR");
        assert_eq!(france.label(), "region FR, Test set 2023, CC0");
        assert!(france.matches("fr") && france.matches("FRA") && !france.matches("DE"));
        assert_eq!(
            table.region("XX").unwrap_err().to_string(),
            format!("{REGION_RULE} (got \"XX\")")
        );
    }
}
