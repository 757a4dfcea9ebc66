//! A scope's joules per energy domain, kept in place: there are four domains, and a
//! map per figure per scope allocated (and later freed) a node for every scope booked,
//! a good part of what booking a short scope cost.

use wattline_model::report::EnergyDomain;

/// Every domain, in the domains' own order (a map keyed by them iterates so).
const DOMAINS: [EnergyDomain; 4] = [
    EnergyDomain::Gpu,
    EnergyDomain::CpuPackage,
    EnergyDomain::Dram,
    EnergyDomain::CpuPart,
];

/// Joules per domain; a domain never added to has none (not zero). Eight bytes and
/// no allocation until something is added (a scope carries three, most of them empty
/// with no meter, and is moved several times on its way to the report); one small
/// allocation after.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct DomainJoules(Option<Box<Slots>>);

/// Each domain's joules, zero where never added to, and which were added to.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Slots {
    joules: [f64; DOMAINS.len()],
    /// Bit `slot(domain)` is set once `domain` was added to.
    added: u8,
}

/// `domain`'s place in [`DOMAINS`].
fn slot(domain: EnergyDomain) -> usize {
    match domain {
        EnergyDomain::Gpu => 0,
        EnergyDomain::CpuPackage => 1,
        EnergyDomain::Dram => 2,
        EnergyDomain::CpuPart => 3,
    }
}

impl DomainJoules {
    /// Adds `joules` to `domain` (from zero, the first time).
    pub(crate) fn add(&mut self, domain: EnergyDomain, joules: f64) {
        let slots = self.0.get_or_insert_default();
        let slot = slot(domain);
        slots.joules[slot] += joules;
        slots.added |= 1 << slot;
    }

    /// `domain`'s joules, if it was ever added to.
    pub(crate) fn get(&self, domain: EnergyDomain) -> Option<f64> {
        let slots = self.0.as_ref()?;
        let slot = slot(domain);
        (slots.added & (1 << slot) != 0).then_some(slots.joules[slot])
    }

    /// The domains added to and their joules, in the domains' order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (EnergyDomain, f64)> + '_ {
        DOMAINS
            .into_iter()
            .filter_map(|domain| self.get(domain).map(|joules| (domain, joules)))
    }

    /// The joules of the domains added to, in the domains' order.
    pub(crate) fn values(&self) -> impl Iterator<Item = f64> + '_ {
        self.iter().map(|(_, joules)| joules)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn the_domains_are_listed_in_their_own_order_each_in_its_own_slot() {
        let mut sorted = DOMAINS.to_vec();
        sorted.sort();
        assert_eq!(sorted, DOMAINS);
        for (index, domain) in DOMAINS.into_iter().enumerate() {
            assert_eq!(slot(domain), index, "{domain:?}");
        }
    }

    #[test]
    fn it_adds_up_as_a_map_of_the_domains_does() {
        // The same additions into a map and into the slots: same entries, same order,
        // same sums (bit for bit: the order of the additions is the same).
        let additions = [
            (EnergyDomain::Dram, 1.5),
            (EnergyDomain::Gpu, 0.1),
            (EnergyDomain::Dram, -0.25),
            (EnergyDomain::Gpu, 0.2),
            (EnergyDomain::Gpu, 0.0),
        ];
        let mut map: BTreeMap<EnergyDomain, f64> = BTreeMap::new();
        let mut joules = DomainJoules::default();
        for (domain, value) in additions {
            *map.entry(domain).or_default() += value;
            joules.add(domain, value);
        }
        assert_eq!(
            joules.iter().collect::<Vec<_>>(),
            map.clone().into_iter().collect::<Vec<_>>()
        );
        assert_eq!(joules.values().sum::<f64>(), map.values().sum::<f64>());
        assert_eq!(
            joules.get(EnergyDomain::CpuPackage),
            None,
            "never added: none"
        );
        assert_eq!(
            joules.get(EnergyDomain::Gpu),
            map.get(&EnergyDomain::Gpu).copied()
        );
        let mut zero = DomainJoules::default();
        zero.add(EnergyDomain::CpuPart, 0.0);
        assert_eq!(
            zero.get(EnergyDomain::CpuPart),
            Some(0.0),
            "added zero: zero"
        );
    }
}
