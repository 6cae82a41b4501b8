//! Facts about the host, recorded with every result.

use std::fs;

use crate::model::HostFacts;

/// Facts about the machine this process runs on.
pub fn local_facts() -> HostFacts {
    HostFacts {
        hostname: hostname(),
        kernel: kernel_release(),
        cpu_model: cpu_model(&fs::read_to_string("/proc/cpuinfo").unwrap_or_default()),
        logical_cpus: std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(1),
        nicbench_version: env!("CARGO_PKG_VERSION").to_string(),
    }
}

pub fn hostname() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

fn kernel_release() -> String {
    fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// The first `model name` of /proc/cpuinfo.
pub fn cpu_model(cpuinfo: &str) -> String {
    cpuinfo
        .lines()
        .find_map(|l| {
            let (key, value) = l.split_once(':')?;
            (key.trim() == "model name").then(|| value.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_model_comes_from_the_first_model_name() {
        let text = "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t: x\n\nprocessor\t: 1\nmodel name\t: other\n";
        assert_eq!(cpu_model(text), "AMD EPYC 7B13");
        assert_eq!(cpu_model(""), "unknown");
    }
}
