#!/usr/bin/env python3
"""Regenerates config/data/grid_carbon_intensity.csv, the per-country grid carbon
intensity table wattline ships (the `carbon_region` setting picks a row).

Input, read from an installed Python environment (nothing is downloaded):
  - codecarbon's data/private_infra/global_energy_mix.json: per ISO 3166-1 alpha-3
    code, `carbon_intensity` (gCO2e/kWh), `year` and `country_name`. codecarbon's own
    notebook (data/private_infra/our_world_in_data.ipynb in mlco2/codecarbon) takes
    these from Our World in Data's energy dataset (owid/energy-data, column
    carbon_intensity_elec), which OWID adapts from Ember and the Energy Institute.
  - pycountry's databases/iso3166-1.json (Debian iso-codes data), only to add each
    country's alpha-2 code.

Usage:
  scripts/grid-carbon-intensity.py [--site-packages DIR] [--output FILE]

DIR defaults to the environment running the script; for the environment the CI
installs, .ci/venv-genai/lib/python3.11/site-packages (codecarbon 3.3.2, pycountry
26.2.16). The output is sorted by alpha-2 code so regenerating from the same input
gives the same bytes.
"""

import argparse
import hashlib
import importlib.util
import json
import math
import pathlib
import sys

DATASET = "Ember/OWID"
LICENCE = "CC BY 4.0"
SOURCE = (
    'Our World in Data, "Carbon intensity of electricity generation" '
    "(owid/energy-data, column carbon_intensity_elec), adapted from Ember's Yearly "
    "Electricity Data and the Energy Institute's Statistical Review of World Energy"
)
HEADER = "iso2,iso3,name,gco2e_per_kwh,year"


def package_directory(site_packages, name):
    """The directory of package `name`, under `site_packages` when given."""
    if site_packages is not None:
        directory = pathlib.Path(site_packages) / name
        if not directory.is_dir():
            sys.exit(f"{name} is not installed in {site_packages}")
        return directory
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"{name} is not installed here; pass --site-packages")
    return pathlib.Path(next(iter(spec.submodule_search_locations)))


def installed_version(package_dir, name):
    """The version in the package's .dist-info next to it, or 'unknown'."""
    for metadata in package_dir.parent.glob(f"{name}-*.dist-info/METADATA"):
        for line in metadata.read_text(encoding="utf-8").splitlines():
            if line.startswith("Version: "):
                return line[len("Version: "):].strip()
    return "unknown"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site-packages")
    parser.add_argument(
        "--output",
        default=str(
            pathlib.Path(__file__).resolve().parent.parent
            / "config"
            / "data"
            / "grid_carbon_intensity.csv"
        ),
    )
    arguments = parser.parse_args()

    codecarbon = package_directory(arguments.site_packages, "codecarbon")
    pycountry = package_directory(arguments.site_packages, "pycountry")
    mix_path = codecarbon / "data" / "private_infra" / "global_energy_mix.json"
    mix_bytes = mix_path.read_bytes()
    energy_mix = json.loads(mix_bytes)
    iso = json.loads((pycountry / "databases" / "iso3166-1.json").read_text("utf-8"))
    alpha2_of = {entry["alpha_3"]: entry["alpha_2"] for entry in iso["3166-1"]}

    rows = []
    for iso3, entry in energy_mix.items():
        if iso3 not in alpha2_of:
            sys.exit(f"{iso3} is not an ISO 3166-1 alpha-3 code")
        intensity = float(entry["carbon_intensity"])
        if not math.isfinite(intensity) or intensity < 0:
            sys.exit(f"{iso3}: carbon_intensity {intensity!r} is not a number >= 0")
        name = entry["country_name"].strip()
        # The table is plain comma-separated text: a name may not need quoting.
        if not name or any(character in name for character in ',"\n#'):
            sys.exit(f"{iso3}: country name {name!r} cannot be written unquoted")
        rows.append((alpha2_of[iso3], iso3, name, intensity, int(entry["year"])))
    rows.sort()

    years = sorted({row[4] for row in rows})
    lines = [
        "# Grid carbon intensity of electricity generation, gCO2e per kWh, per country:",
        "# a yearly average factor, not a reading of the grid at any moment.",
        f"# dataset: {DATASET}",
        f"# licence: {LICENCE}",
        f"# source: {SOURCE}",
        "# source url: https://ourworldindata.org/grapher/carbon-intensity-electricity",
        f"# retrieved: codecarbon {installed_version(codecarbon, 'codecarbon')}, "
        "codecarbon/data/private_infra/global_energy_mix.json "
        f"(sha256 {hashlib.sha256(mix_bytes).hexdigest()})",
        f"# alpha-2 codes: ISO 3166-1 table of pycountry "
        f"{installed_version(pycountry, 'pycountry')}",
        f"# years: {', '.join(str(year) for year in years)} (per row, see the year column)",
        "# generated by: scripts/grid-carbon-intensity.py",
        HEADER,
    ]
    for iso2, iso3, name, intensity, year in rows:
        lines.append(f"{iso2},{iso3},{name},{intensity!r},{year}")
    output = pathlib.Path(arguments.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{output}: {len(rows)} countries, years {years[0]}-{years[-1]}")


if __name__ == "__main__":
    main()
