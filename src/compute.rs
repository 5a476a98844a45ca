//! The one place that decides where tensors run.
//!
//! burn 0.22 tensors carry no backend type: a [`Device`] picks the backend at run time. We use
//! burn-wgpu when a hardware adapter exists (in the GUI, on the very wgpu device egui renders
//! with) and burn-flex, the pure-Rust CPU backend, otherwise. A software adapter (lavapipe,
//! llvmpipe, SwiftShader) counts as "no adapter" for `Auto`: it is correct but an order of
//! magnitude slower than flex on the same cores. `--backend gpu` still forces it.

use burn::tensor::Device;
use burn::tensor::wgpu::{WgpuSetup, wgpu};
use std::fmt;

/// The user's wish, from `--backend` or `ENDOTWIN_BACKEND`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum BackendPref {
    /// wgpu on a hardware adapter when there is one, else the CPU.
    #[default]
    Auto,
    /// wgpu on any adapter, software ones included; an error when there is none.
    Gpu,
    /// The CPU backend (burn-flex).
    Cpu,
}

impl BackendPref {
    /// Environment variable that sets the preference when no flag is given.
    pub const ENV: &'static str = "ENDOTWIN_BACKEND";

    /// The flag when given, else the environment variable, else `Auto`.
    pub fn resolve(flag: Option<BackendPref>) -> Result<BackendPref, ComputeError> {
        match flag {
            Some(flag) => Ok(flag),
            None => Self::parse(std::env::var(Self::ENV).ok().as_deref()),
        }
    }

    /// The preference an `ENDOTWIN_BACKEND` value names (`None`: unset, so `Auto`).
    pub fn parse(value: Option<&str>) -> Result<BackendPref, ComputeError> {
        match value.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
            None | Some("" | "auto") => Ok(BackendPref::Auto),
            Some("gpu" | "wgpu") => Ok(BackendPref::Gpu),
            Some("cpu" | "flex") => Ok(BackendPref::Cpu),
            Some(other) => Err(ComputeError::BadPreference(other.to_string())),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    Wgpu,
    Flex,
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BackendKind::Wgpu => "burn-wgpu",
            BackendKind::Flex => "burn-flex (CPU)",
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ComputeError {
    #[error("ENDOTWIN_BACKEND must be auto, gpu (or wgpu) or cpu (or flex), not '{0}'")]
    BadPreference(String),
    #[error("GPU requested, but no wgpu adapter was found ({0})")]
    NoAdapter(String),
    #[error("GPU requested, but the adapter refused a device: {0}")]
    Device(String),
    #[error("burn could not use the wgpu device: {0}")]
    Burn(String),
}

/// The chosen backend, its burn device and what to tell the user about it.
#[derive(Clone)]
pub struct Compute {
    pub device: Device,
    pub backend: BackendKind,
    /// Adapter name and API for wgpu; the CPU description for flex.
    pub adapter: String,
    /// Why this choice was made when it may surprise (e.g. a software adapter skipped).
    pub note: Option<String>,
}

impl fmt::Debug for Compute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Compute")
            .field("backend", &self.backend)
            .field("adapter", &self.adapter)
            .finish()
    }
}

impl Compute {
    pub fn cpu(note: Option<String>) -> Compute {
        let threads = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        Compute {
            device: Device::flex(),
            backend: BackendKind::Flex,
            adapter: format!("CPU, {threads} threads"),
            note,
        }
    }

    /// The memory one training step may take: the free main memory when tensors live there
    /// (flex); `None` on a GPU, whose free memory wgpu does not tell.
    pub fn training_memory(&self) -> Option<u64> {
        match self.backend {
            BackendKind::Flex => crate::plumbing::available_memory(),
            _ => None,
        }
    }

    /// One line for the status bar and `endotwin info`.
    pub fn summary(&self) -> String {
        format!("{} on {}", self.backend, self.adapter)
    }
}

/// Whether an adapter is a software rasteriser.
pub fn is_software(info: &wgpu::AdapterInfo) -> bool {
    info.device_type == wgpu::DeviceType::Cpu
}

fn software_skipped(info: &wgpu::AdapterInfo) -> String {
    format!(
        "software adapter {} skipped; --backend gpu forces it",
        info.name
    )
}

fn describe(info: &wgpu::AdapterInfo) -> String {
    format!("{} ({:?}, {:?})", info.name, info.backend, info.device_type)
}

/// The device descriptor that lets burn share a device with egui: burn's kernels are compiled
/// for the *adapter's* features and limits, so the device must enable them all.
/// `MAPPABLE_PRIMARY_BUFFERS` is left out: it slows down every buffer on discrete GPUs.
pub fn shared_device_descriptor(adapter: &wgpu::Adapter) -> wgpu::DeviceDescriptor<'static> {
    device_descriptor(adapter.features(), adapter.limits())
}

/// [`shared_device_descriptor`] for an adapter offering `features` and `limits`. An NVIDIA
/// adapter on Vulkan offers wgpu's experimental features (cooperative matrices, mesh shaders,
/// ray tracing), and wgpu refuses a device that asks for them without the experimental token:
/// that refusal once kept every NVIDIA GPU out of EndoTwin. The token is given exactly when an
/// experimental feature is asked for, as burn's own device creation (cubecl-wgpu) gives it.
pub fn device_descriptor(
    features: wgpu::Features,
    limits: wgpu::Limits,
) -> wgpu::DeviceDescriptor<'static> {
    let required_features = features - wgpu::Features::MAPPABLE_PRIMARY_BUFFERS;
    let experimental_features =
        if required_features.intersects(wgpu::Features::all_experimental_mask()) {
            // SAFETY: the same token burn's kernels run under when burn creates its device
            // (cubecl-wgpu's `try_request_device`); EndoTwin's own drawing (egui) uses none of
            // the experimental features.
            unsafe { wgpu::ExperimentalFeatures::enabled() }
        } else {
            wgpu::ExperimentalFeatures::disabled()
        };
    wgpu::DeviceDescriptor {
        label: Some("endotwin shared device"),
        required_features,
        required_limits: limits,
        experimental_features,
        ..Default::default()
    }
}

/// Chooses the backend outside the GUI (CLI, tests): probes for an adapter and creates a
/// wgpu device of our own when it should be used.
pub fn select(pref: BackendPref) -> Result<Compute, ComputeError> {
    select_on(
        pref,
        wgpu::InstanceDescriptor::new_without_display_handle_from_env(),
    )
}

/// As [`select`], beside a window drawn with OpenGL (eframe's glow renderer): wgpu's own
/// OpenGL backend is left out, so that burn never touches the window thread's GL context.
pub fn select_beside_gl(pref: BackendPref) -> Result<Compute, ComputeError> {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
    desc.backends -= wgpu::Backends::GL;
    select_on(pref, desc)
}

fn select_on(pref: BackendPref, desc: wgpu::InstanceDescriptor) -> Result<Compute, ComputeError> {
    if pref == BackendPref::Cpu {
        return Ok(Compute::cpu(None));
    }
    let instance = wgpu::Instance::new(desc);
    let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
        power_preference: wgpu::PowerPreference::HighPerformance,
        ..Default::default()
    }));
    let adapter = match adapter {
        Ok(a) => a,
        Err(e) if pref == BackendPref::Gpu => return Err(ComputeError::NoAdapter(e.to_string())),
        Err(_) => return Ok(Compute::cpu(Some("no GPU adapter found".into()))),
    };
    let info = adapter.get_info();
    if pref == BackendPref::Auto && is_software(&info) {
        return Ok(Compute::cpu(Some(software_skipped(&info))));
    }
    let (device, queue) =
        pollster::block_on(adapter.request_device(&shared_device_descriptor(&adapter)))
            .map_err(|e| ComputeError::Device(e.to_string()))?;
    let mut compute = register_wgpu(instance, adapter, device, queue)?;
    if is_software(&info) {
        compute.note = Some(software_forced(&info));
    }
    Ok(compute)
}

/// What a user who forced a software adapter waits for (round 16 N20: a query that the CPU
/// backend answers in a second printed nothing for minutes).
fn software_forced(info: &wgpu::AdapterInfo) -> String {
    format!(
        "{} is a software adapter, used because the gpu backend was asked for: it compiles \
         every kernel on the CPU at first use, minutes before the first answer (--backend cpu \
         answers sooner)",
        info.name
    )
}

/// Chooses the backend inside the GUI, given the handles egui renders with. On `Auto` with a
/// software adapter, or `Cpu`, burn runs on flex and egui keeps the adapter to itself.
pub fn select_shared(
    pref: BackendPref,
    instance: wgpu::Instance,
    adapter: wgpu::Adapter,
    device: wgpu::Device,
    queue: wgpu::Queue,
) -> Result<Compute, ComputeError> {
    let info = adapter.get_info();
    match pref {
        BackendPref::Cpu => Ok(Compute::cpu(None)),
        BackendPref::Auto if is_software(&info) => Ok(Compute::cpu(Some(software_skipped(&info)))),
        _ => register_wgpu(instance, adapter, device, queue),
    }
}

fn register_wgpu(
    instance: wgpu::Instance,
    adapter: wgpu::Adapter,
    device: wgpu::Device,
    queue: wgpu::Queue,
) -> Result<Compute, ComputeError> {
    let info = adapter.get_info();
    let setup = WgpuSetup {
        instance,
        backend: info.backend,
        adapter,
        device,
        queue,
    };
    let device = Device::wgpu_options()
        .setup(setup)
        .init()
        .map_err(|e| ComputeError::Burn(e.to_string()))?;
    Ok(Compute {
        device,
        backend: BackendKind::Wgpu,
        adapter: describe(&info),
        note: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What an NVIDIA adapter on Vulkan offers (experimental features among them) must give a
    /// descriptor wgpu accepts: the experimental token with them, none without.
    #[test]
    fn experimental_features_come_with_their_token() {
        let nvidia = wgpu::Features::SHADER_F16
            | wgpu::Features::MAPPABLE_PRIMARY_BUFFERS
            | wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX
            | wgpu::Features::EXPERIMENTAL_MESH_SHADER;
        let d = device_descriptor(nvidia, wgpu::Limits::default());
        assert!(d.experimental_features.is_enabled());
        assert!(
            d.required_features
                .contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX)
        );
        assert!(
            !d.required_features
                .contains(wgpu::Features::MAPPABLE_PRIMARY_BUFFERS)
        );
        let plain = device_descriptor(wgpu::Features::SHADER_F16, wgpu::Limits::default());
        assert!(!plain.experimental_features.is_enabled());
    }
}
