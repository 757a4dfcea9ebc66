//! Operating-system readers. One module per OS; each exports the same readers, so the
//! samplers carry no `cfg`.

#[cfg(target_os = "linux")]
pub mod linux;
