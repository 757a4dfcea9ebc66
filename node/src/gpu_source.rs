//! A GPU source written in JavaScript (`setGpuSource(() => source)`): each sample the
//! pipeline takes (on a blocking worker) asks the JavaScript thread through a
//! threadsafe function and waits for `deliverGpuSample` with the answer as JSON. The
//! records' rules are the crate's (`wattline::embedded::gpu_records`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, mpsc};
use std::time::Duration;

use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;
use wattline::embedded::GpuSourceHook;
use wattline::embedded::gpu_records::LanguageGpuSource;

/// The JavaScript side's `(id) => void`: runs `source.sample()` and answers through
/// `deliverGpuSample(id, ...)`. Weak: a pipeline holding it does not keep Node alive.
pub type GpuSampler = ThreadsafeFunction<u32, (), u32, Status, false, true>;

/// How long a sample waits for `sample()` to settle: `nvidia-smi`'s own limit in the
/// spec. A busy or blocked event loop then reads as nothing observed.
const SAMPLE_LIMIT: Duration = Duration::from_secs(10);

type Answer = std::result::Result<Option<String>, String>;

fn pending() -> MutexGuard<'static, HashMap<u32, mpsc::Sender<Answer>>> {
    static PENDING: OnceLock<Mutex<HashMap<u32, mpsc::Sender<Answer>>>> = OnceLock::new();
    PENDING
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One `sample()` of the JavaScript source, as JSON text.
fn ask(sampler: &GpuSampler) -> Answer {
    static NEXT: AtomicU32 = AtomicU32::new(1);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    let (sender, receiver) = mpsc::channel();
    pending().insert(id, sender);
    let status = sampler.call(id, ThreadsafeFunctionCallMode::NonBlocking);
    if status != Status::Ok {
        pending().remove(&id);
        return Err(format!("sample() could not be called ({status})"));
    }
    match receiver.recv_timeout(SAMPLE_LIMIT) {
        Ok(answer) => answer,
        Err(_) => {
            pending().remove(&id);
            Err(format!(
                "sample() did not settle within {} s",
                SAMPLE_LIMIT.as_secs()
            ))
        }
    }
}

/// The source hook of a pipeline started with `sampler`.
pub fn hook(sampler: GpuSampler, name: Option<String>) -> GpuSourceHook {
    let sampler = Arc::new(sampler);
    let name = name.unwrap_or_else(|| "node".to_owned());
    GpuSourceHook(Arc::new(move || {
        let sampler = Arc::clone(&sampler);
        Some(
            Box::new(LanguageGpuSource::new(name.clone(), move || ask(&sampler)))
                as Box<dyn wattline::gpu::GpuSource>,
        )
    }))
}

/// The answer to sample request `id`: the devices as JSON (`null`: nothing observed),
/// or the error `sample()` raised. An answer nobody waits for any more is dropped.
#[napi]
pub fn deliver_gpu_sample(id: u32, devices_json: Option<String>, error: Option<String>) {
    if let Some(waiting) = pending().remove(&id) {
        let answer = match error {
            Some(error) => Err(format!("sample() failed: {error}")),
            None => Ok(devices_json),
        };
        let _ = waiting.send(answer);
    }
}
