//! Numbers from the spec never wrap: two partitions asking for 2^31 L3 ways each
//! would sum to 0 in u32 and pass the hardware check.

use tame_host::HostModel;
use tame_partition::{plan, Spec};
use tame_testing::synthetic::SyntheticHost;

#[test]
fn cache_ways_that_would_wrap_are_refused() {
    let dir = tame_testing::scratch_dir("overflow");
    SyntheticHost::two_socket_smt().write(dir.path()).unwrap();
    let root = tame_testing::fixture_root(dir.path());
    let text = r#"
[[partition]]
name = "system"
cpus = "0-3"
role = "system"

[[partition]]
name = "a"
cpus = "4"
role = "isolated"
cache_ways = 2147483648

[[partition]]
name = "b"
cpus = "5"
role = "isolated"
cache_ways = 2147483648
"#;
    let spec = Spec::parse("test.toml", text).unwrap();
    let err = plan(&spec, &HostModel::read(&root)).unwrap_err();
    let all = err.errors.join("\n");
    assert!(all.contains("cache_ways add up to more than"), "{all}");
}
