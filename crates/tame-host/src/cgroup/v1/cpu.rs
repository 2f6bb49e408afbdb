//! The v1 cpu controller's bandwidth files (CFS quota per period).

use crate::cgroup::{CgroupWrite, Group, Setting};

pub const CFS_PERIOD: &str = "cpu.cfs_period_us";
/// `-1`: no cap.
pub const CFS_QUOTA: &str = "cpu.cfs_quota_us";

/// The period first: the kernel checks the quota against it.
pub(crate) fn bandwidth(g: &Group, quota_us: u64, period_us: u64) -> Vec<CgroupWrite> {
    vec![
        CgroupWrite::new(
            g.file(CFS_PERIOD),
            period_us.to_string(),
            Setting::CfsPeriod,
        ),
        CgroupWrite::new(g.file(CFS_QUOTA), quota_us.to_string(), Setting::CfsQuota),
    ]
}
