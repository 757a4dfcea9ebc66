//! The live sampler actors by category, shared by the supervisor (which replaces a
//! restarted one) and the merger (which asks them for samples).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use ractor::ActorRef;

use crate::samplers::actor::SamplerMessage;
use wattline_model::category::SamplerCategory;

/// Sampler actors by category; a category being restarted has no entry.
#[derive(Clone, Default)]
pub struct SamplerRegistry {
    inner: Arc<RwLock<HashMap<SamplerCategory, ActorRef<SamplerMessage>>>>,
}

impl SamplerRegistry {
    /// The actor of `category`, if it is running.
    pub fn get(&self, category: SamplerCategory) -> Option<ActorRef<SamplerMessage>> {
        match self.inner.read() {
            Ok(map) => map.get(&category).cloned(),
            Err(poisoned) => poisoned.into_inner().get(&category).cloned(),
        }
    }

    /// Sets or clears the actor of `category`.
    pub fn set(&self, category: SamplerCategory, actor: Option<ActorRef<SamplerMessage>>) {
        let mut map = match self.inner.write() {
            Ok(map) => map,
            Err(poisoned) => poisoned.into_inner(),
        };
        match actor {
            Some(actor) => map.insert(category, actor),
            None => map.remove(&category),
        };
    }
}
