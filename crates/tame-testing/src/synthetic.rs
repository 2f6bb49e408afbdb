//! Synthetic host trees: machines we do not have (two sockets, NUMA, cgroup v2
//! partitions, resctrl, hundreds of CPUs and thousands of IRQs) written as the
//! files the host layer reads. Used for the committed fixtures under
//! `fixtures/hosts/` (see the `synthetic_host` example) and generated at test
//! and benchmark time for the largest one.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use tame_host::irq::{render_interrupts, InterruptLine, InterruptsTable};
use tame_host::kernel::render_config;
use tame_host::CpuList;

/// How a cgroup tree is set up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CgroupLayout {
    /// v1 hierarchies per controller, v2 mounted without controllers (this dev VM's shape).
    V1,
    /// Only v2 at /sys/fs/cgroup with cpuset enabled; partitions (path, cpus, partition file text).
    V2 {
        partitions: Vec<(String, CpuList, String)>,
    },
}

/// A machine description; `write` turns it into a tree.
#[derive(Clone, Debug)]
pub struct SyntheticHost {
    pub sockets: u32,
    pub cores_per_socket: u32,
    pub threads_per_core: u32,
    pub release: String,
    /// `uname -v`.
    pub version: String,
    pub config: BTreeMap<String, String>,
    /// Write the config as /proc/config.gz (else /boot/config-RELEASE).
    pub config_gz: bool,
    pub cmdline: String,
    /// Device IRQs in total (legacy + managed storage queues + NIC queues).
    pub irqs: u32,
    /// Of which managed storage queues (NVMe I/O queues).
    pub managed_irqs: u32,
    /// CPUs that device IRQs may use by default (irqaffinity=); all when None.
    pub irq_cpus: Option<CpuList>,
    /// CPUs that managed IRQs avoid (isolcpus=managed_irq).
    pub managed_avoid: Option<CpuList>,
    pub cgroups: CgroupLayout,
    pub resctrl: bool,
    pub cpufreq: Option<(String, String)>,
    pub boost: Option<bool>,
    /// (name, exit latency µs, residency µs, disabled).
    pub idle_states: Vec<(String, u64, u64, bool)>,
    pub cpuidle_driver: String,
    pub hypervisor: Option<String>,
    /// irqbalance running, with the banned list in /etc/default/irqbalance.
    pub irqbalance: Option<Option<CpuList>>,
    pub thp: String,
    pub swap: bool,
    pub numa_balancing: bool,
    pub rt_runtime_us: i64,
    pub fair_server_runtime_ns: Option<u64>,
    /// CPUs whose fair server is set to 0.
    pub fair_server_off: CpuList,
    pub timer_migration: bool,
    pub nmi_watchdog: bool,
    pub soft_watchdog: bool,
    pub clocksource: String,
    pub isolated: CpuList,
    pub nohz_full: Option<CpuList>,
    pub lockdown: String,
    /// RT threads: (comm, priority, affinity).
    pub rt_threads: Vec<(String, u32, CpuList)>,
    pub pci_devices: u32,
}

impl SyntheticHost {
    pub fn cpu_count(&self) -> u32 {
        self.sockets * self.cores_per_socket * self.threads_per_core
    }

    fn all_cpus(&self) -> CpuList {
        CpuList::from_cpus(0..self.cpu_count())
    }

    /// Linux's usual x86 numbering: first threads of every core, then the siblings.
    fn place(&self, cpu: u32) -> (u32, u32, u32) {
        let cores = self.sockets * self.cores_per_socket;
        let thread = cpu / cores;
        let core_global = cpu % cores;
        (
            core_global / self.cores_per_socket,
            core_global % self.cores_per_socket,
            thread,
        )
    }

    fn siblings(&self, cpu: u32) -> CpuList {
        let cores = self.sockets * self.cores_per_socket;
        let base = cpu % cores;
        CpuList::from_cpus((0..self.threads_per_core).map(|t| base + t * cores))
    }

    fn socket_cpus(&self, socket: u32) -> CpuList {
        CpuList::from_cpus((0..self.cpu_count()).filter(|&c| self.place(c).0 == socket))
    }

    /// A general-purpose two-socket server: 2 × 12 cores × 2 threads, 2 NUMA
    /// nodes, cgroup v2 with cpuset partitions (one isolated, one invalid),
    /// resctrl with L3 CAT and MBA, ~300 IRQs of which 96 are managed NVMe queues.
    pub fn two_socket_smt() -> Self {
        let mut config = base_config();
        config.insert("PREEMPT_VOLUNTARY".into(), "y".into());
        config.insert("NO_HZ_FULL".into(), "y".into());
        config.insert("X86_CPU_RESCTRL".into(), "y".into());
        SyntheticHost {
            sockets: 2,
            cores_per_socket: 12,
            threads_per_core: 2,
            release: "6.8.0-45-generic".into(),
            version: "#45-Ubuntu SMP PREEMPT_DYNAMIC Fri Aug 30 12:02:04 UTC 2024".into(),
            config,
            config_gz: false,
            cmdline:
                "BOOT_IMAGE=/boot/vmlinuz-6.8.0-45-generic root=/dev/mapper/vg-root ro quiet splash"
                    .into(),
            irqs: 300,
            managed_irqs: 96,
            irq_cpus: None,
            managed_avoid: None,
            cgroups: CgroupLayout::V2 {
                partitions: vec![
                    ("/system.slice".into(), CpuList::new(), "member".into()),
                    ("/rt0".into(), parse("12-23"), "isolated".into()),
                    (
                        "/broken".into(),
                        parse("20-21"),
                        "isolated invalid (Cpu list in cpuset.cpus not exclusive)".into(),
                    ),
                ],
            },
            resctrl: true,
            cpufreq: Some(("intel_pstate".into(), "powersave".into())),
            boost: Some(true),
            idle_states: vec![
                ("POLL".into(), 0, 0, false),
                ("C1".into(), 2, 2, false),
                ("C1E".into(), 10, 20, false),
                ("C6".into(), 133, 600, false),
            ],
            cpuidle_driver: "intel_idle".into(),
            hypervisor: None,
            irqbalance: Some(None),
            thp: "always".into(),
            swap: true,
            numa_balancing: true,
            rt_runtime_us: 950_000,
            fair_server_runtime_ns: None,
            fair_server_off: CpuList::new(),
            timer_migration: true,
            nmi_watchdog: true,
            soft_watchdog: true,
            clocksource: "tsc".into(),
            isolated: CpuList::new(),
            nohz_full: Some(CpuList::new()),
            lockdown: "[none] integrity confidentiality".into(),
            rt_threads: vec![],
            pci_devices: 12,
        }
    }

    /// A small PREEMPT_RT box already set up for real time: 8 CPUs, CPUs 2-7
    /// isolated with isolcpus=managed_irq,domain, nohz_full and rcu_nocbs,
    /// performance governor, shallow idle only, no swap, irqbalance banned from 2-7.
    pub fn rt_8cpu() -> Self {
        let mut config = base_config();
        config.insert("PREEMPT_RT".into(), "y".into());
        config.insert("NO_HZ_FULL".into(), "y".into());
        let iso = parse("2-7");
        SyntheticHost {
            sockets: 1,
            cores_per_socket: 8,
            threads_per_core: 1,
            release: "6.12.43-rt12".into(),
            version: "#1 SMP PREEMPT_RT Tue Sep  2 10:00:00 UTC 2025".into(),
            config,
            config_gz: true,
            cmdline: "BOOT_IMAGE=/boot/vmlinuz-6.12.43-rt12 root=/dev/sda2 ro isolcpus=managed_irq,domain,2-7 nohz_full=2-7 rcu_nocbs=2-7 irqaffinity=0-1 skew_tick=1 tsc=reliable nosoftlockup nmi_watchdog=0 processor.max_cstate=1 intel_idle.max_cstate=0 idle=poll".into(),
            irqs: 40,
            managed_irqs: 8,
            irq_cpus: Some(parse("0-1")),
            managed_avoid: Some(iso.clone()),
            cgroups: CgroupLayout::V2 {
                partitions: vec![("/rt".into(), iso.clone(), "isolated".into())],
            },
            resctrl: false,
            cpufreq: Some(("intel_cpufreq".into(), "performance".into())),
            boost: Some(false),
            idle_states: vec![("POLL".into(), 0, 0, false), ("C1".into(), 1, 1, false)],
            cpuidle_driver: "intel_idle".into(),
            hypervisor: None,
            irqbalance: Some(Some(iso.clone())),
            thp: "never".into(),
            swap: false,
            numa_balancing: false,
            rt_runtime_us: -1,
            fair_server_runtime_ns: Some(50_000_000),
            fair_server_off: iso.clone(),
            timer_migration: false,
            nmi_watchdog: false,
            soft_watchdog: false,
            clocksource: "tsc".into(),
            isolated: iso.clone(),
            nohz_full: Some(iso.clone()),
            lockdown: "[none] integrity confidentiality".into(),
            rt_threads: vec![("control_loop".into(), 80, parse("3"))],
            pci_devices: 4,
        }
    }

    /// A large machine for scale: 2 sockets × 64 cores × 2 threads = 256 CPUs, 2000 IRQs.
    pub fn big_256() -> Self {
        let mut h = Self::two_socket_smt();
        h.cores_per_socket = 64;
        h.irqs = 2000;
        h.managed_irqs = 1024;
        h.pci_devices = 64;
        h.cgroups = CgroupLayout::V2 {
            partitions: vec![("/rt0".into(), parse("64-127"), "isolated".into())],
        };
        h
    }

    /// The scale target: 4 sockets × 128 cores × 2 threads = 1024 CPUs (4 NUMA
    /// nodes), 4096 IRQs of which 2048 are managed NVMe queues (two devices with a
    /// queue per CPU), cgroup v2 with cpuset enabled and no partition yet, resctrl.
    /// Its /proc/interrupts has 1024 count columns, about 46 MB, as on such a machine.
    pub fn big_1024() -> Self {
        let mut h = Self::two_socket_smt();
        h.sockets = 4;
        h.cores_per_socket = 128;
        h.irqs = 4096;
        h.managed_irqs = 2048;
        h.pci_devices = 128;
        h.cgroups = CgroupLayout::V2 { partitions: vec![] };
        h
    }

    /// The same machine before anything partitioned it: no cgroup partitions (v2).
    pub fn unpartitioned(mut self) -> Self {
        self.cgroups = CgroupLayout::V2 {
            partitions: Vec::new(),
        };
        self
    }

    /// Written to a scratch fixture tree and read back (the tree lives as long as the
    /// directory returned).
    pub fn model(&self) -> (tempfile::TempDir, tame_host::HostModel) {
        let dir = crate::scratch_dir("synthetic-");
        self.write(dir.path())
            .expect("a scratch fixture tree is writable");
        let model = tame_host::HostModel::read(&tame_host::Root::new(dir.path()));
        (dir, model)
    }

    /// Write the tree below `dir`.
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        let mut w = Writer {
            base: dir.to_path_buf(),
            made: PathBuf::new(),
        };
        let n = self.cpu_count();
        let all = self.all_cpus();
        let last = n - 1;
        w.put("/proc/sys/kernel/osrelease", &format!("{}\n", self.release))?;
        w.put("/proc/sys/kernel/version", &format!("{}\n", self.version))?;
        w.put("/proc/cmdline", &format!("{}\n", self.cmdline))?;
        let config = render_config(&self.config);
        if self.config_gz {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            gz.write_all(config.as_bytes())?;
            w.put_bytes("/proc/config.gz", &gz.finish()?)?;
        } else {
            w.put(&format!("/boot/config-{}", self.release), &config)?;
        }
        w.put(
            "/sys/kernel/security/lockdown",
            &format!("{}\n", self.lockdown),
        )?;
        self.write_cpus(&mut w, &all, last)?;
        self.write_irqs(&mut w, &all)?;
        self.write_mounts_and_cgroups(&mut w, &all)?;
        self.write_sysctls(&mut w)?;
        self.write_tasks(&mut w, &all)?;
        Ok(())
    }

    fn write_cpus(&self, w: &mut Writer, all: &CpuList, last: u32) -> std::io::Result<()> {
        let sys = "/sys/devices/system/cpu";
        let all_s = format!("{all}\n");
        for f in ["online", "possible", "present"] {
            w.put(&format!("{sys}/{f}"), &all_s)?;
        }
        w.put(&format!("{sys}/offline"), "\n")?;
        w.put(&format!("{sys}/isolated"), &format!("{}\n", self.isolated))?;
        if let Some(nf) = &self.nohz_full {
            w.put(&format!("{sys}/nohz_full"), &format!("{nf}\n"))?;
        }
        let smt = self.threads_per_core > 1;
        w.put(
            &format!("{sys}/smt/control"),
            if smt { "on\n" } else { "notsupported\n" },
        )?;
        w.put(
            &format!("{sys}/smt/active"),
            if smt { "1\n" } else { "0\n" },
        )?;
        w.put(
            &format!("{sys}/cpuidle/current_driver"),
            &format!("{}\n", self.cpuidle_driver),
        )?;
        w.put(&format!("{sys}/cpuidle/current_governor"), "menu\n")?;
        if let Some(b) = self.boost {
            w.put(
                &format!("{sys}/cpufreq/boost"),
                if b { "1\n" } else { "0\n" },
            )?;
        }
        let mut flags = "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat constant_tsc nonstop_tsc tsc_deadline_timer".to_string();
        if self.hypervisor.is_some() {
            flags.push_str(" hypervisor");
        }
        if self.resctrl {
            flags.push_str(" rdt_a cat_l3 mba cqm_llc");
        }
        let mut cpuinfo = String::new();
        let mut stat = String::from("cpu  0 0 0 0 0 0 0 0 0 0\n");
        // Once per socket, not per CPU (each is a pass over every CPU).
        let socket_cpus: Vec<CpuList> = (0..self.sockets).map(|s| self.socket_cpus(s)).collect();
        for cpu in 0..=last {
            let (socket, core, _) = self.place(cpu);
            cpuinfo.push_str(&format!(
                "processor\t: {cpu}\nvendor_id\t: GenuineIntel\nmodel name\t: Synthetic Xeon {}S\nphysical id\t: {socket}\ncore id\t\t: {core}\nflags\t\t: {flags}\n\n",
                self.sockets
            ));
            stat.push_str(&format!("cpu{cpu} 1000 0 500 100000 10 5 5 0 0 0\n"));
            let base = format!("{sys}/cpu{cpu}");
            let t = format!("{base}/topology");
            let sib = self.siblings(cpu);
            w.put(&format!("{t}/physical_package_id"), &format!("{socket}\n"))?;
            w.put(&format!("{t}/die_id"), "0\n")?;
            w.put(&format!("{t}/core_id"), &format!("{core}\n"))?;
            w.put(&format!("{t}/thread_siblings_list"), &format!("{sib}\n"))?;
            let package = &socket_cpus[socket as usize];
            w.put(&format!("{t}/package_cpus_list"), &format!("{package}\n"))?;
            let caches = [
                (1, "Data", "48K", 12, sib.clone()),
                (1, "Instruction", "32K", 8, sib.clone()),
                (2, "Unified", "2048K", 16, sib.clone()),
                (3, "Unified", "36864K", 12, package.clone()),
            ];
            for (i, (level, kind, size, ways, shared)) in caches.iter().enumerate() {
                let d = format!("{base}/cache/index{i}");
                w.put(&format!("{d}/level"), &format!("{level}\n"))?;
                w.put(&format!("{d}/type"), &format!("{kind}\n"))?;
                w.put(&format!("{d}/size"), &format!("{size}\n"))?;
                w.put(&format!("{d}/ways_of_associativity"), &format!("{ways}\n"))?;
                let id = if *level == 3 {
                    socket
                } else {
                    socket * 1000 + core
                };
                w.put(&format!("{d}/id"), &format!("{id}\n"))?;
                w.put(&format!("{d}/shared_cpu_list"), &format!("{shared}\n"))?;
            }
            if let Some((driver, governor)) = &self.cpufreq {
                let f = format!("{base}/cpufreq");
                w.put(&format!("{f}/scaling_driver"), &format!("{driver}\n"))?;
                w.put(&format!("{f}/scaling_governor"), &format!("{governor}\n"))?;
                w.put(&format!("{f}/scaling_min_freq"), "800000\n")?;
                w.put(&format!("{f}/scaling_max_freq"), "3900000\n")?;
                w.put(&format!("{f}/cpuinfo_max_freq"), "3900000\n")?;
            }
            for (i, (name, lat, res, dis)) in self.idle_states.iter().enumerate() {
                let d = format!("{base}/cpuidle/state{i}");
                w.put(&format!("{d}/name"), &format!("{name}\n"))?;
                w.put(&format!("{d}/latency"), &format!("{lat}\n"))?;
                w.put(&format!("{d}/residency"), &format!("{res}\n"))?;
                w.put(&format!("{d}/disable"), if *dis { "1\n" } else { "0\n" })?;
            }
            w.put(&format!("{base}/power/pm_qos_resume_latency_us"), "0\n")?;
        }
        w.put("/proc/cpuinfo", &cpuinfo)?;
        w.put("/proc/stat", &stat)?;
        let node_sys = "/sys/devices/system/node";
        for socket in 0..self.sockets {
            let d = format!("{node_sys}/node{socket}");
            w.put(
                &format!("{d}/cpulist"),
                &format!("{}\n", self.socket_cpus(socket)),
            )?;
            w.put(
                &format!("{d}/meminfo"),
                &format!("Node {socket} MemTotal:       131072000 kB\nNode {socket} MemFree:        120000000 kB\n"),
            )?;
        }
        w.put(
            &format!("{node_sys}/online"),
            &format!("0-{}\n", self.sockets - 1),
        )?;
        for i in 0..self.pci_devices {
            let socket = i % self.sockets;
            let d = format!(
                "/sys/bus/pci/devices/0000:{:02x}:00.0",
                socket * 0x80 + i / self.sockets + 1
            );
            let class = if i % 3 == 0 { "0x010802" } else { "0x020000" };
            w.put(&format!("{d}/class"), &format!("{class}\n"))?;
            w.put(&format!("{d}/vendor"), "0x8086\n")?;
            w.put(&format!("{d}/device"), "0x1593\n")?;
            w.put(&format!("{d}/numa_node"), &format!("{socket}\n"))?;
        }
        Ok(())
    }

    fn write_irqs(&self, w: &mut Writer, all: &CpuList) -> std::io::Result<()> {
        let cpus: Vec<u32> = all.iter().collect();
        let ncpu = cpus.len();
        let irq_cpus: Vec<u32> = self
            .irq_cpus
            .clone()
            .unwrap_or_else(|| all.clone())
            .iter()
            .collect();
        let managed_cpus: Vec<u32> = match &self.managed_avoid {
            Some(avoid) => all.difference(avoid).iter().collect(),
            None => cpus.clone(),
        };
        let mut lines = Vec::new();
        let legacy = [
            (0, "IO-APIC 2-edge timer"),
            (1, "IO-APIC 1-edge i8042"),
            (4, "IO-APIC 4-edge ttyS0"),
            (8, "IO-APIC 8-edge rtc0"),
            (9, "IO-APIC 9-fasteoi acpi"),
        ];
        let mut number = 0u32;
        let emit = |w: &mut Writer,
                    number: u32,
                    text: String,
                    affinity: CpuList,
                    effective: u32,
                    managed: bool,
                    lines: &mut Vec<InterruptLine>|
         -> std::io::Result<()> {
            let mut counts = vec![0u64; ncpu];
            if let Some(col) = cpus.iter().position(|&c| c == effective) {
                counts[col] = 1000 + u64::from(number) * 7;
            }
            lines.push(InterruptLine {
                label: number.to_string(),
                counts,
                text,
            });
            let d = format!("/proc/irq/{number}");
            w.put(&format!("{d}/smp_affinity_list"), &format!("{affinity}\n"))?;
            w.put(
                &format!("{d}/effective_affinity_list"),
                &format!("{effective}\n"),
            )?;
            w.put(&format!("{d}/node"), "0\n")?;
            let flags = if managed {
                "flags:    0x0\n             IRQD_AFFINITY_SET\n             IRQD_AFFINITY_MANAGED\n"
            } else {
                "flags:    0x0\n             IRQD_AFFINITY_SET\n"
            };
            w.put(
                &format!("/sys/kernel/debug/irq/irqs/{number}"),
                &format!("handler:  handle_edge_irq\ndevice:   0000:00:00.0\n{flags}"),
            )
        };
        let default_aff = CpuList::from_cpus(irq_cpus.iter().copied());
        for (n, text) in legacy.iter().take(self.irqs as usize) {
            emit(
                w,
                *n,
                text.to_string(),
                default_aff.clone(),
                irq_cpus[0],
                false,
                &mut lines,
            )?;
            number = number.max(*n + 1);
        }
        number = number.max(24);
        let nlegacy = legacy.len().min(self.irqs as usize) as u32;
        // Managed NVMe queues: spread over the allowed CPUs, one CPU (or a few) per queue.
        let per_dev = managed_cpus.len().max(1) as u32;
        let mut q = 0u32;
        while q < self.managed_irqs {
            let dev = q / per_dev;
            let qi = q % per_dev;
            if qi == 0 {
                emit(
                    w,
                    number,
                    format!("PCI-MSIX-0000:{:02x}:00.0 0-edge nvme{dev}q0", dev + 1),
                    default_aff.clone(),
                    irq_cpus[(dev as usize) % irq_cpus.len()],
                    false,
                    &mut lines,
                )?;
                number += 1;
            }
            let cpu = managed_cpus[(qi as usize) % managed_cpus.len()];
            emit(
                w,
                number,
                format!(
                    "PCI-MSIX-0000:{:02x}:00.0 {}-edge nvme{dev}q{}",
                    dev + 1,
                    qi + 1,
                    qi + 1
                ),
                CpuList::from_cpus([cpu]),
                cpu,
                true,
                &mut lines,
            )?;
            number += 1;
            q += 1;
        }
        let nic = self
            .irqs
            .saturating_sub(nlegacy + self.managed_irqs + self.managed_irqs.div_ceil(per_dev));
        for i in 0..nic {
            let port = i / 64;
            let cpu = irq_cpus[(i as usize) % irq_cpus.len()];
            emit(
                w,
                number,
                format!(
                    "PCI-MSIX-0000:{:02x}:00.0 {}-edge ens{port}f0-TxRx-{}",
                    0x40 + port,
                    i % 64,
                    i % 64
                ),
                default_aff.clone(),
                cpu,
                false,
                &mut lines,
            )?;
            number += 1;
        }
        for (name, desc) in [
            ("NMI", "Non-maskable interrupts"),
            ("LOC", "Local timer interrupts"),
            ("SPU", "Spurious interrupts"),
            ("PMI", "Performance monitoring interrupts"),
            ("IWI", "IRQ work interrupts"),
            ("RES", "Rescheduling interrupts"),
            ("CAL", "Function call interrupts"),
            ("TLB", "TLB shootdowns"),
            ("TRM", "Thermal event interrupts"),
            ("MCE", "Machine check exceptions"),
        ] {
            let counts = cpus
                .iter()
                .map(|&c| {
                    if self.isolated.contains(c) && name != "LOC" {
                        0
                    } else {
                        10_000 + u64::from(c)
                    }
                })
                .collect();
            lines.push(InterruptLine {
                label: name.into(),
                counts,
                text: desc.into(),
            });
        }
        for name in ["ERR", "MIS"] {
            lines.push(InterruptLine {
                label: name.into(),
                counts: vec![0],
                text: String::new(),
            });
        }
        w.put(
            "/proc/interrupts",
            &render_interrupts(&InterruptsTable { cpus, lines }),
        )?;
        w.put(
            "/proc/irq/default_smp_affinity",
            &format!("{}\n", default_aff.to_mask(all.len() as u32)),
        )?;
        Ok(())
    }

    fn write_mounts_and_cgroups(&self, w: &mut Writer, all: &CpuList) -> std::io::Result<()> {
        let mut mounts = String::from(
            "sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0\nproc /proc proc rw,nosuid,nodev,noexec,relatime 0 0\n/dev/sda2 / ext4 rw,relatime 0 0\nsecurityfs /sys/kernel/security securityfs rw,nosuid,nodev,noexec,relatime 0 0\ndebugfs /sys/kernel/debug debugfs rw,nosuid,nodev,noexec,relatime 0 0\ntracefs /sys/kernel/tracing tracefs rw,nosuid,nodev,noexec,relatime 0 0\n",
        );
        let nodes = format!("0-{}\n", self.sockets - 1);
        match &self.cgroups {
            CgroupLayout::V1 => {
                for c in ["cpu", "cpuset", "memory"] {
                    mounts.push_str(&format!(
                        "cgroup /sys/fs/cgroup/{c} cgroup rw,relatime,{c} 0 0\n"
                    ));
                }
                mounts.push_str("cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n");
                w.put("/sys/fs/cgroup/unified/cgroup.controllers", "\n")?;
                let d = "/sys/fs/cgroup/cpuset";
                w.put(&format!("{d}/cpuset.cpus"), &format!("{all}\n"))?;
                w.put(&format!("{d}/cpuset.effective_cpus"), &format!("{all}\n"))?;
                w.put(&format!("{d}/cpuset.mems"), &nodes)?;
                w.put(&format!("{d}/cpuset.cpu_exclusive"), "1\n")?;
            }
            CgroupLayout::V2 { partitions } => {
                mounts.push_str("cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime,nsdelegate,memory_recursiveprot 0 0\n");
                let d = "/sys/fs/cgroup";
                w.put(
                    &format!("{d}/cgroup.controllers"),
                    "cpuset cpu io memory hugetlb pids rdma misc\n",
                )?;
                w.put(
                    &format!("{d}/cgroup.subtree_control"),
                    "cpuset cpu io memory pids\n",
                )?;
                let mut taken = CpuList::new();
                for (_, cpus, state) in partitions {
                    if !state.contains("invalid") && !state.starts_with("member") {
                        taken = taken.union(cpus);
                    }
                }
                let rest = all.difference(&taken);
                w.put(&format!("{d}/cpuset.cpus.effective"), &format!("{rest}\n"))?;
                w.put(&format!("{d}/cpuset.mems.effective"), &nodes)?;
                w.put(&format!("{d}/cpuset.cpus.isolated"), &format!("{taken}\n"))?;
                for (path, cpus, state) in partitions {
                    let c = format!("{d}{path}");
                    w.put(&format!("{c}/cpuset.cpus"), &format!("{cpus}\n"))?;
                    let eff = if state.contains("invalid") || cpus.is_empty() {
                        rest.clone()
                    } else {
                        cpus.clone()
                    };
                    w.put(&format!("{c}/cpuset.cpus.effective"), &format!("{eff}\n"))?;
                    w.put(&format!("{c}/cpuset.mems"), "\n")?;
                    w.put(&format!("{c}/cpuset.cpus.partition"), &format!("{state}\n"))?;
                }
            }
        }
        if self.resctrl {
            mounts.push_str("resctrl /sys/fs/resctrl resctrl rw,relatime 0 0\n");
            let d = "/sys/fs/resctrl";
            w.put(&format!("{d}/info/L3/num_closids"), "16\n")?;
            w.put(&format!("{d}/info/L3/cbm_mask"), "fff\n")?;
            w.put(&format!("{d}/info/L3/min_cbm_bits"), "1\n")?;
            w.put(&format!("{d}/info/MB/num_closids"), "8\n")?;
            w.put(&format!("{d}/info/MB/bandwidth_gran"), "10\n")?;
            w.put(&format!("{d}/info/MB/min_bandwidth"), "10\n")?;
            w.put(&format!("{d}/info/L3_MON/num_rmids"), "224\n")?;
            let l3: Vec<String> = (0..self.sockets).map(|s| format!("{s}=fff")).collect();
            let mb: Vec<String> = (0..self.sockets).map(|s| format!("{s}=100")).collect();
            w.put(
                &format!("{d}/schemata"),
                &format!("L3:{}\nMB:{}\n", l3.join(";"), mb.join(";")),
            )?;
            w.put(&format!("{d}/cpus_list"), &format!("{all}\n"))?;
            w.put(&format!("{d}/rt0/cpus_list"), "\n")?;
            w.put(
                &format!("{d}/rt0/schemata"),
                &format!("L3:{}\n", l3.join(";").replace("fff", "00f")),
            )?;
        }
        let tr = "/sys/kernel/tracing";
        w.put(
            &format!("{tr}/available_tracers"),
            "timerlat osnoise hwlat blk function_graph wakeup_rt wakeup function nop\n",
        )?;
        w.put(&format!("{tr}/current_tracer"), "nop\n")?;
        for g in [
            "irq",
            "irq_vectors",
            "sched",
            "timer",
            "workqueue",
            "ipi",
            "osnoise",
            "syscalls",
        ] {
            w.put(&format!("{tr}/events/{g}/enable"), "0\n")?;
        }
        w.put("/proc/mounts", &mounts)
    }

    fn write_sysctls(&self, w: &mut Writer) -> std::io::Result<()> {
        let k = "/proc/sys/kernel";
        let b = |v: bool| if v { "1\n" } else { "0\n" };
        w.put(
            &format!("{k}/sched_rt_runtime_us"),
            &format!("{}\n", self.rt_runtime_us),
        )?;
        w.put(&format!("{k}/sched_rt_period_us"), "1000000\n")?;
        w.put(&format!("{k}/timer_migration"), b(self.timer_migration))?;
        w.put(&format!("{k}/nmi_watchdog"), b(self.nmi_watchdog))?;
        w.put(
            &format!("{k}/watchdog"),
            b(self.nmi_watchdog || self.soft_watchdog),
        )?;
        w.put(&format!("{k}/soft_watchdog"), b(self.soft_watchdog))?;
        w.put(&format!("{k}/watchdog_thresh"), "10\n")?;
        let wd = self
            .all_cpus()
            .difference(&self.nohz_full.clone().unwrap_or_default());
        w.put(&format!("{k}/watchdog_cpumask"), &format!("{wd}\n"))?;
        w.put(&format!("{k}/numa_balancing"), b(self.numa_balancing))?;
        w.put("/proc/sys/vm/swappiness", "60\n")?;
        w.put("/proc/sys/vm/stat_interval", "1\n")?;
        w.put("/sys/kernel/mm/ksm/run", "0\n")?;
        let thp = ["always", "madvise", "never"]
            .iter()
            .map(|m| {
                if *m == self.thp {
                    format!("[{m}]")
                } else {
                    m.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join(" ");
        w.put(
            "/sys/kernel/mm/transparent_hugepage/enabled",
            &format!("{thp}\n"),
        )?;
        w.put(
            "/sys/kernel/mm/transparent_hugepage/defrag",
            "always defer defer+madvise [madvise] never\n",
        )?;
        let mut swaps = String::from("Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n");
        if self.swap {
            swaps.push_str(
                "/swap.img                               file\t\t8388604\t\t1024\t\t-2\n",
            );
        }
        w.put("/proc/swaps", &swaps)?;
        let cs = "/sys/devices/system/clocksource/clocksource0";
        w.put(
            &format!("{cs}/current_clocksource"),
            &format!("{}\n", self.clocksource),
        )?;
        w.put(
            &format!("{cs}/available_clocksource"),
            "tsc hpet acpi_pm \n",
        )?;
        if let Some(rt) = self.fair_server_runtime_ns {
            for cpu in self.all_cpus().iter() {
                let d = format!("/sys/kernel/debug/sched/fair_server/cpu{cpu}");
                let runtime = if self.fair_server_off.contains(cpu) {
                    0
                } else {
                    rt
                };
                w.put(&format!("{d}/runtime"), &format!("{runtime}\n"))?;
                w.put(&format!("{d}/period"), "1000000000\n")?;
            }
        }
        if let Some(ib) = &self.irqbalance {
            let text = match ib {
                Some(banned) => format!("#Configuration for the irqbalance daemon\nIRQBALANCE_BANNED_CPULIST={banned}\n"),
                None => "#Configuration for the irqbalance daemon\n#IRQBALANCE_BANNED_CPULIST=\n".to_string(),
            };
            w.put("/etc/default/irqbalance", &text)?;
        }
        Ok(())
    }

    fn write_tasks(&self, w: &mut Writer, all: &CpuList) -> std::io::Result<()> {
        let housekeeping = match &self.irq_cpus {
            Some(h) => h.clone(),
            None => all.difference(&self.isolated),
        };
        let mut pid = 1u32;
        let mut task = |w: &mut Writer,
                        comm: &str,
                        kthread: bool,
                        per_cpu: bool,
                        policy: u32,
                        prio: u32,
                        aff: &CpuList|
         -> std::io::Result<u32> {
            let this = pid;
            pid += 1;
            let mut flags: u64 = if kthread { 0x0020_8040 } else { 0x0040_0100 };
            if per_cpu {
                flags |= 0x0400_0000;
            }
            let cpu = aff.first().unwrap_or(0);
            let stat = format!(
                "{this} ({comm}) S {} {this} {this} 0 -1 {flags} 0 0 0 0 0 0 0 0 {} 0 1 0 100 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 {cpu} {prio} {policy} 0 0 0 0 0 0 0 0 0 0 0\n",
                if kthread { 2 } else { 1 },
                if policy == 0 { 20 } else { -1 - prio as i64 }
            );
            let d = format!("/proc/{this}/task/{this}");
            w.put(&format!("{d}/stat"), &stat)?;
            w.put(&format!("{d}/status"), &format!("Name:\t{comm}\nState:\tS (sleeping)\nTgid:\t{this}\nPid:\t{this}\nCpus_allowed_list:\t{aff}\n"))?;
            Ok(this)
        };
        task(w, "systemd", false, false, 0, 0, &housekeeping)?;
        task(w, "kthreadd", true, false, 0, 0, &housekeeping)?;
        task(w, "rcu_preempt", true, false, 1, 1, &housekeeping)?;
        for cpu in all.iter() {
            let one = CpuList::from_cpus([cpu]);
            task(w, &format!("cpuhp/{cpu}"), true, true, 0, 0, &one)?;
            task(w, &format!("migration/{cpu}"), true, true, 1, 99, &one)?;
            task(w, &format!("ksoftirqd/{cpu}"), true, true, 0, 0, &one)?;
            task(w, &format!("kworker/{cpu}:0H"), true, true, 0, 0, &one)?;
        }
        task(w, "kworker/u64:1", true, false, 0, 0, &housekeeping)?;
        task(w, "sshd", false, false, 0, 0, &housekeeping)?;
        // Boot isolation keeps even unpinned user processes off the isolated CPUs.
        let journald_cpus = if self.isolated.is_empty() {
            all.clone()
        } else {
            housekeeping.clone()
        };
        task(w, "journald", false, false, 0, 0, &journald_cpus)?;
        if self.irqbalance.is_some() {
            task(w, "irqbalance", false, false, 0, 0, &housekeeping)?;
        }
        for (comm, prio, aff) in &self.rt_threads {
            task(w, comm, false, false, 1, *prio, aff)?;
        }
        Ok(())
    }
}

fn parse(s: &str) -> CpuList {
    CpuList::parse(s).unwrap_or_default()
}

fn base_config() -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for (k, v) in [
        ("HZ", "1000"),
        ("HZ_1000", "y"),
        ("NO_HZ_COMMON", "y"),
        ("NO_HZ_FULL", "n"),
        ("RCU_NOCB_CPU", "y"),
        ("CPU_ISOLATION", "y"),
        ("PREEMPT_RT", "n"),
        ("PREEMPT_DYNAMIC", "n"),
        ("GENERIC_IRQ_DEBUGFS", "y"),
        ("SECURITY_LOCKDOWN_LSM", "y"),
        ("X86_CPU_RESCTRL", "n"),
    ] {
        m.insert(k.to_string(), v.to_string());
    }
    m
}

struct Writer {
    base: PathBuf,
    /// The directory the last file went to: it exists (files come in runs per directory,
    /// and a big host has a hundred thousand of them).
    made: PathBuf,
}

impl Writer {
    fn put(&mut self, host_path: &str, text: &str) -> std::io::Result<()> {
        self.put_bytes(host_path, text.as_bytes())
    }

    fn put_bytes(&mut self, host_path: &str, bytes: &[u8]) -> std::io::Result<()> {
        let p = self.base.join(host_path.trim_start_matches('/'));
        if let Some(parent) = p.parent() {
            if parent != self.made {
                std::fs::create_dir_all(parent)?;
                self.made = parent.to_path_buf();
            }
        }
        std::fs::write(p, bytes)
    }
}
