//! The v2 cpu controller's bandwidth file.

use crate::cgroup::{CgroupWrite, Group, Setting};

/// `QUOTA PERIOD` in µs, or `max PERIOD` for no cap.
pub const MAX: &str = "cpu.max";

pub(crate) fn bandwidth(g: &Group, quota_us: u64, period_us: u64) -> Vec<CgroupWrite> {
    vec![CgroupWrite::new(
        g.file(MAX),
        format!("{quota_us} {period_us}"),
        Setting::CpuMax,
    )]
}
