//! Model-specific registers through the msr driver (`/dev/cpu/N/msr`): the count of
//! System Management Interrupts, which stall a CPU in firmware where no kernel event
//! shows it. Intel CPUs count them in MSR_SMI_COUNT; others have no such counter.

use std::os::unix::fs::FileExt;

use crate::Root;

/// MSR_SMI_COUNT (Intel, since Nehalem): SMIs since reset, in the low 32 bits.
pub const MSR_SMI_COUNT: u64 = 0x34;

/// The SMI count of `cpu`, or why it cannot be read here (said in the report).
pub fn smi_count(root: &Root, cpu: u32) -> Result<u64, String> {
    let path = root.path(format!("/dev/cpu/{cpu}/msr"));
    let file = std::fs::File::open(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!(
            "no {}: the msr driver is not loaded (modprobe msr)",
            path.display()
        ),
        std::io::ErrorKind::PermissionDenied => format!(
            "{} cannot be opened: it needs root with CAP_SYS_RAWIO, and a kernel in lockdown refuses it",
            path.display()
        ),
        _ => format!("{} cannot be opened: {e}", path.display()),
    })?;
    let mut value = [0u8; 8];
    file.read_exact_at(&mut value, MSR_SMI_COUNT).map_err(|e| {
        if e.raw_os_error() == Some(nix::libc::EIO) {
            "this CPU has no MSR_SMI_COUNT (Intel CPUs count SMIs there; AMD's and most VMs' do not)".to_string()
        } else {
            format!("MSR_SMI_COUNT cannot be read: {e}")
        }
    })?;
    Ok(u64::from_le_bytes(value) & 0xffff_ffff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_is_read_at_its_offset_and_absence_is_said() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        let e = smi_count(&root, 0).unwrap_err();
        assert!(e.contains("modprobe msr"), "{e}");
        // A register file: the count's 8 bytes at offset 0x34, little-endian.
        std::fs::create_dir_all(dir.path().join("dev/cpu/0")).unwrap();
        let mut bytes = vec![0u8; 0x34];
        bytes.extend_from_slice(&0x1_0000_0007u64.to_le_bytes());
        std::fs::write(dir.path().join("dev/cpu/0/msr"), bytes).unwrap();
        assert_eq!(smi_count(&root, 0), Ok(7));
        // A file too short for the register reads as an error, not a panic.
        std::fs::write(dir.path().join("dev/cpu/0/msr"), [0u8; 4]).unwrap();
        assert!(smi_count(&root, 0).is_err());
    }
}
