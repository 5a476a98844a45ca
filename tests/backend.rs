//! The compute backends: the CPU backend and wgpu (lavapipe in CI) give the same result.

use endotwin::compute::{self, BackendKind, BackendPref};
use endotwin::engine::device_check;

#[test]
fn cpu_backend_computes_a_known_product() {
    let cpu = compute::select(BackendPref::Cpu).unwrap();
    assert_eq!(cpu.backend, BackendKind::Flex);
    assert_eq!(device_check(&cpu), vec![19.0, 22.0, 43.0, 50.0]);
}

#[test]
fn wgpu_and_cpu_agree() {
    let gpu = match compute::select(BackendPref::Gpu) {
        Ok(c) => c,
        // CI installs lavapipe, so there an adapter must exist; elsewhere say why we skip.
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("skipping: {e}");
            return;
        }
        Err(e) => panic!("CI must have a wgpu adapter (mesa-vulkan-drivers): {e}"),
    };
    assert_eq!(gpu.backend, BackendKind::Wgpu);
    assert!(!gpu.adapter.is_empty());
    let cpu = compute::select(BackendPref::Cpu).unwrap();
    let (a, b) = (device_check(&gpu), device_check(&cpu));
    for (x, y) in a.iter().zip(&b) {
        assert!((x - y).abs() < 1e-4, "{a:?} vs {b:?}");
    }
}

#[test]
fn a_bad_backend_preference_is_reported() {
    let err = BackendPref::parse(Some("quantum")).unwrap_err();
    assert!(
        err.to_string()
            .contains("auto, gpu (or wgpu) or cpu (or flex)"),
        "{err}"
    );
    assert_eq!(BackendPref::parse(Some(" CPU ")).unwrap(), BackendPref::Cpu);
    assert_eq!(BackendPref::parse(None).unwrap(), BackendPref::Auto);
    assert_eq!(
        BackendPref::resolve(Some(BackendPref::Cpu)).unwrap(),
        BackendPref::Cpu
    );
}
