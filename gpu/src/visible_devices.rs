//! Which GPUs a measured command can use, as device selectors.
//!
//! A selector is a device's identifier (an NVML UUID `GPU-…`, or a unique prefix of
//! one, as CUDA accepts; a DRM PCI address), its NVML index in decimal, a MIG
//! identifier (`MIG-<uuid>`, or the older `MIG-GPU-<uuid>/<gi>/<ci>`), which selects
//! the board that holds that instance, or one of the words `all` and `none`. An empty
//! list selects every device.
//!
//! The lists come from `--gpus`, from `CUDA_VISIBLE_DEVICES` and
//! `NVIDIA_VISIBLE_DEVICES` as the command will see them, or from the configuration's
//! `gpu.devices`; [`gpu_selection_for_command`] says which applies. The selection
//! itself, as a report and an event file carry it, is the model's
//! ([`wattline_model::gpu_selection`]).

use wattline_model::gpu_selection::{
    ALL_DEVICES, CONFIG_DEVICES_ORIGIN, CUDA_VISIBLE_DEVICES, GPUS_FLAG_ORIGIN, GpuSelection,
    NO_DEVICE, NVIDIA_VISIBLE_DEVICES, is_no_device_word,
};

/// The identity a selector is matched against.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeviceIdentity<'a> {
    /// The backend identifier (NVML UUID, PCI address).
    pub identifier: &'a str,
    /// The NVML index, where the backend has one.
    pub index: Option<u32>,
    /// The UUIDs of the MIG instances on the device (`MIG-…`), where read.
    pub mig_instances: &'a [String],
}

/// Whether `selectors` select `device`: an empty list selects every device; otherwise
/// any one selector matching is enough.
pub fn selectors_select_device(selectors: &[String], device: &DeviceIdentity<'_>) -> bool {
    selectors.is_empty()
        || selectors
            .iter()
            .any(|selector| selector_selects(selector.trim(), device))
}

/// Whether matching `selectors` needs the MIG instance UUIDs of each device (a
/// `MIG-<uuid>` selector names an instance, not its board).
pub fn needs_mig_instances(selectors: &[String]) -> bool {
    selectors.iter().any(|selector| {
        let selector = selector.trim();
        starts_with_ignoring_case(selector, "MIG-")
            && !starts_with_ignoring_case(selector, "MIG-GPU-")
    })
}

fn selector_selects(selector: &str, device: &DeviceIdentity<'_>) -> bool {
    if selector.eq_ignore_ascii_case(ALL_DEVICES) {
        return true;
    }
    if is_no_device_word(selector) || selector.is_empty() {
        return false;
    }
    if selector.eq_ignore_ascii_case(device.identifier)
        || device
            .index
            .is_some_and(|index| selector == index.to_string())
    {
        return true;
    }
    // `MIG-GPU-<uuid>/<gi>/<ci>` (drivers before R470) names its board in the text.
    if let Some(rest) = strip_prefix_ignoring_case(selector, "MIG-GPU-") {
        let board = rest.split('/').next().unwrap_or_default();
        return format!("GPU-{board}").eq_ignore_ascii_case(device.identifier);
    }
    if starts_with_ignoring_case(selector, "MIG-") {
        return device
            .mig_instances
            .iter()
            .any(|instance| is_unique_prefix_candidate(selector, instance));
    }
    // CUDA takes a UUID's prefix (`GPU-8932f937`) when it names one device.
    starts_with_ignoring_case(selector, "GPU-")
        && is_unique_prefix_candidate(selector, device.identifier)
}

/// Whether `selector` is `identifier` or a prefix of it longer than the bare `GPU-` or
/// `MIG-` word.
fn is_unique_prefix_candidate(selector: &str, identifier: &str) -> bool {
    selector.len() > 4 && starts_with_ignoring_case(identifier, selector)
}

fn starts_with_ignoring_case(text: &str, prefix: &str) -> bool {
    strip_prefix_ignoring_case(text, prefix).is_some()
}

fn strip_prefix_ignoring_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

/// `CUDA_VISIBLE_DEVICES` as the CUDA runtime reads it: a comma-separated list of
/// indices, UUIDs (or unique prefixes) and MIG identifiers; the list ends at the first
/// entry that is none of these (so `-1` hides every device), and an empty value hides
/// every device.
pub fn selectors_from_cuda_visible_devices(value: &str) -> Vec<String> {
    let mut selectors = Vec::new();
    for entry in value.split(',').map(str::trim) {
        let valid = entry.parse::<u32>().is_ok()
            || starts_with_ignoring_case(entry, "GPU-")
            || starts_with_ignoring_case(entry, "MIG-");
        if !valid {
            break;
        }
        selectors.push(entry.to_owned());
    }
    if selectors.is_empty() {
        vec![NO_DEVICE.to_owned()]
    } else {
        selectors
    }
}

/// `NVIDIA_VISIBLE_DEVICES` as the NVIDIA container runtime reads it: `all`, `none`
/// or `void` (no device, empty too), or a comma-separated list of indices, UUIDs and
/// MIG identifiers.
pub fn selectors_from_nvidia_visible_devices(value: &str) -> Vec<String> {
    let value = value.trim();
    if value.eq_ignore_ascii_case(ALL_DEVICES) {
        return Vec::new();
    }
    if value.is_empty() || is_no_device_word(value) {
        return vec![NO_DEVICE.to_owned()];
    }
    value
        .split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .map(str::to_owned)
        .collect()
}

/// An entry of `--gpus` that is none of the accepted forms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "--gpus: entry {position} {entry:?} is not a device index, a `GPU-` UUID, a `MIG-` identifier, \
     a PCI address, `all` or `none`"
)]
pub struct GpuListError {
    /// 1-based position of the entry in the list.
    pub position: usize,
    /// The entry as given.
    pub entry: String,
}

/// `--gpus LIST`: like `CUDA_VISIBLE_DEVICES`, plus DRM PCI addresses (`0000:03:00.0`),
/// but an entry that is none of the accepted forms is an error rather than the end
/// of the list.
pub fn selectors_from_gpus_flag(value: &str) -> Result<Vec<String>, GpuListError> {
    let value = value.trim();
    if value.eq_ignore_ascii_case(ALL_DEVICES) {
        return Ok(Vec::new());
    }
    if is_no_device_word(value) {
        return Ok(vec![NO_DEVICE.to_owned()]);
    }
    value
        .split(',')
        .map(str::trim)
        .enumerate()
        .map(|(position, entry)| {
            let valid = entry.parse::<u32>().is_ok()
                || starts_with_ignoring_case(entry, "GPU-")
                || starts_with_ignoring_case(entry, "MIG-")
                || is_pci_address(entry);
            if valid {
                Ok(entry.to_owned())
            } else {
                Err(GpuListError {
                    position: position + 1,
                    entry: entry.to_owned(),
                })
            }
        })
        .collect()
}

/// `DDDD:BB:DD.F` (domain, bus, device, function in hex), as DRM names devices.
fn is_pci_address(entry: &str) -> bool {
    let mut parts = entry.split([':', '.']);
    let widths = [4, 2, 2, 1];
    widths.iter().all(|width| {
        parts
            .next()
            .is_some_and(|part| part.len() == *width && part.chars().all(|c| c.is_ascii_hexdigit()))
    }) && parts.next().is_none()
}

/// The devices `wattline run` counts for a command: `--gpus` when given, else
/// `CUDA_VISIBLE_DEVICES` as the command will see it, else `NVIDIA_VISIBLE_DEVICES`,
/// else the configuration's `gpu.devices`; `None` when nothing narrows the choice.
/// `environment` looks a variable up in the command's environment.
pub fn gpu_selection_for_command(
    gpus_flag: Option<&str>,
    environment: impl Fn(&str) -> Option<String>,
    config_devices: &[String],
) -> Result<Option<GpuSelection>, GpuListError> {
    if let Some(flag) = gpus_flag {
        return Ok(Some(GpuSelection {
            selectors: selectors_from_gpus_flag(flag)?,
            origin: GPUS_FLAG_ORIGIN.to_owned(),
            given: flag.to_owned(),
        }));
    }
    if let Some(value) = environment(CUDA_VISIBLE_DEVICES) {
        return Ok(Some(GpuSelection {
            selectors: selectors_from_cuda_visible_devices(&value),
            origin: CUDA_VISIBLE_DEVICES.to_owned(),
            given: value,
        }));
    }
    if let Some(value) = environment(NVIDIA_VISIBLE_DEVICES) {
        return Ok(Some(GpuSelection {
            selectors: selectors_from_nvidia_visible_devices(&value),
            origin: NVIDIA_VISIBLE_DEVICES.to_owned(),
            given: value,
        }));
    }
    Ok(configured_selection(config_devices))
}

/// The configuration's `gpu.devices` as a selection; `None` when it is empty.
pub fn configured_selection(config_devices: &[String]) -> Option<GpuSelection> {
    (!config_devices.is_empty()).then(|| GpuSelection {
        selectors: config_devices.to_vec(),
        origin: CONFIG_DEVICES_ORIGIN.to_owned(),
        given: config_devices.join(","),
    })
}

/// Whether a device with `identifier` and `index` matches `selectors`: an empty list
/// selects every device; otherwise one selector (an identifier or a unique `GPU-`
/// prefix of it, ASCII case ignored, the index in decimal, a `MIG-GPU-<uuid>/…`
/// identifier of its board, or `all`) selects it.
pub fn selector_matches(selectors: &[String], identifier: &str, index: Option<u32>) -> bool {
    selectors_select_device(
        selectors,
        &DeviceIdentity {
            identifier,
            index,
            mig_instances: &[],
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const H100: &str = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";
    const RTX: &str = "GPU-11111111-2222-3333-4444-555555555555";

    fn device(identifier: &str, index: u32) -> DeviceIdentity<'_> {
        DeviceIdentity {
            identifier,
            index: Some(index),
            mig_instances: &[],
        }
    }

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn indices_uuids_and_prefixes_select_their_device_only() {
        let selectors = strings(&["1"]);
        assert!(selectors_select_device(&selectors, &device(H100, 1)));
        assert!(!selectors_select_device(&selectors, &device(RTX, 0)));
        let selectors = strings(&["gpu-AAAAAAAA"]);
        assert!(selectors_select_device(&selectors, &device(H100, 1)));
        assert!(!selectors_select_device(&selectors, &device(RTX, 0)));
        // The bare word is no prefix of anything.
        assert!(!selectors_select_device(
            &strings(&["GPU-"]),
            &device(H100, 1)
        ));
    }

    #[test]
    fn all_none_and_empty() {
        assert!(selectors_select_device(&[], &device(RTX, 0)));
        assert!(selectors_select_device(&strings(&["all"]), &device(RTX, 0)));
        assert!(!selectors_select_device(
            &strings(&["none"]),
            &device(RTX, 0)
        ));
        assert!(!selectors_select_device(
            &strings(&["void"]),
            &device(RTX, 0)
        ));
    }

    #[test]
    fn mig_identifiers_select_the_board_that_holds_the_instance() {
        let instances = strings(&["MIG-5c89bcf0-7a4c-5a41-9b7e-2f3c1d2e3f40"]);
        let board = DeviceIdentity {
            identifier: H100,
            index: Some(1),
            mig_instances: &instances,
        };
        let new_form = strings(&["MIG-5c89bcf0-7a4c-5a41-9b7e-2f3c1d2e3f40"]);
        assert!(needs_mig_instances(&new_form));
        assert!(selectors_select_device(&new_form, &board));
        assert!(!selectors_select_device(&new_form, &device(RTX, 0)));
        let old_form = strings(&["MIG-GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee/1/0"]);
        assert!(!needs_mig_instances(&old_form));
        assert!(selectors_select_device(&old_form, &device(H100, 1)));
        assert!(!selectors_select_device(&old_form, &device(RTX, 0)));
    }

    #[test]
    fn cuda_visible_devices_ends_at_the_first_invalid_entry() {
        assert_eq!(
            selectors_from_cuda_visible_devices("0,2"),
            strings(&["0", "2"])
        );
        assert_eq!(
            selectors_from_cuda_visible_devices("1,-1,0"),
            strings(&["1"])
        );
        assert_eq!(
            selectors_from_cuda_visible_devices("-1"),
            strings(&["none"])
        );
        assert_eq!(selectors_from_cuda_visible_devices(""), strings(&["none"]));
        assert_eq!(
            selectors_from_cuda_visible_devices(" GPU-aaaa , MIG-GPU-x/1/0"),
            strings(&["GPU-aaaa", "MIG-GPU-x/1/0"])
        );
    }

    #[test]
    fn nvidia_visible_devices_words() {
        assert!(selectors_from_nvidia_visible_devices("all").is_empty());
        assert_eq!(
            selectors_from_nvidia_visible_devices("void"),
            strings(&["none"])
        );
        assert_eq!(
            selectors_from_nvidia_visible_devices(""),
            strings(&["none"])
        );
        assert_eq!(
            selectors_from_nvidia_visible_devices("0, GPU-aaaa"),
            strings(&["0", "GPU-aaaa"])
        );
    }

    #[test]
    fn the_flag_names_a_bad_entry_and_takes_pci_addresses() {
        assert_eq!(
            selectors_from_gpus_flag("0,0000:03:00.0").unwrap(),
            strings(&["0", "0000:03:00.0"])
        );
        let error = selectors_from_gpus_flag("0,gpu0").unwrap_err();
        assert_eq!(error.position, 2);
        assert!(error.to_string().contains("\"gpu0\""), "{error}");
        assert!(selectors_from_gpus_flag("ALL").unwrap().is_empty());
    }

    #[test]
    fn the_flag_wins_then_cuda_then_nvidia_then_the_configuration() {
        let environment = |name: &str| match name {
            CUDA_VISIBLE_DEVICES => Some("1".to_owned()),
            NVIDIA_VISIBLE_DEVICES => Some("all".to_owned()),
            _ => None,
        };
        let config = strings(&["0"]);
        let flag = gpu_selection_for_command(Some("none"), environment, &config)
            .unwrap()
            .unwrap();
        assert_eq!(flag.origin, "--gpus");
        assert!(flag.selects_nothing());
        let cuda = gpu_selection_for_command(None, environment, &config)
            .unwrap()
            .unwrap();
        assert_eq!(cuda.describe(), "CUDA_VISIBLE_DEVICES=1");
        let nvidia = gpu_selection_for_command(
            None,
            |name| (name == NVIDIA_VISIBLE_DEVICES).then(|| "all".to_owned()),
            &config,
        )
        .unwrap()
        .unwrap();
        assert!(nvidia.selectors.is_empty());
        let configured = gpu_selection_for_command(None, |_| None, &config)
            .unwrap()
            .unwrap();
        assert_eq!(configured.origin, CONFIG_DEVICES_ORIGIN);
        assert_eq!(
            gpu_selection_for_command(None, |_| None, &[]).unwrap(),
            None
        );
    }
}
