//! What bounds TLS on this host: how fast one core seals and opens records
//! with each TLS 1.3 cipher, whether the CPU has AES instructions, and
//! whether the kernel has kernel TLS.
//!
//! The speeds are measured with ring, the primitives rustls runs on, in
//! TLS's own record size (16 KiB), for [`MEASURE_SECONDS`] a cipher and
//! direction on the calling thread: the bound a single TLS stream cannot
//! pass, whatever the link. They are measured once per host and kept in
//! `$XDG_CACHE_HOME/nicbench/cipher-speeds.json` (else
//! `~/.cache/nicbench/`), keyed by the CPU, the kernel and this build;
//! another CPU or build measures again.

use std::time::{Duration, Instant};

use ring::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey};
use serde::{Deserialize, Serialize};

use crate::model::{CipherSpeed, TlsHostFacts};

/// The largest TLS record's plaintext (RFC 8446 5.1).
pub const RECORD_BYTES: usize = 16 * 1024;

/// How long each cipher and direction is timed.
pub const MEASURE_SECONDS: f64 = 0.05;

/// The TLS 1.3 ciphers, by the name `--cipher` takes.
pub const CIPHERS: [&str; 3] = ["aes128-gcm", "aes256-gcm", "chacha20-poly1305"];

fn algorithm(cipher: &str) -> Option<&'static aead::Algorithm> {
    match cipher {
        "aes128-gcm" => Some(&aead::AES_128_GCM),
        "aes256-gcm" => Some(&aead::AES_256_GCM),
        "chacha20-poly1305" => Some(&aead::CHACHA20_POLY1305),
        _ => None,
    }
}

/// Times one cipher on this thread: sealing records for `time`, then
/// sealing and opening them in turn for `time`, the opening's share being
/// the pair's time less the sealing's.
pub fn measure(cipher: &str, time: Duration) -> Result<CipherSpeed, String> {
    let algorithm = algorithm(cipher).ok_or_else(|| format!("unknown cipher '{cipher}'"))?;
    let key_bytes = vec![0x5au8; algorithm.key_len()];
    let key = LessSafeKey::new(UnboundKey::new(algorithm, &key_bytes).map_err(|_| "ring refused the key".to_string())?);
    let mut record: Vec<u8> = (0..RECORD_BYTES).map(|i| (i % 251) as u8).collect();
    let nonce = || Nonce::assume_unique_for_key([7u8; aead::NONCE_LEN]);
    let seal = |record: &mut Vec<u8>| -> Result<aead::Tag, String> {
        key.seal_in_place_separate_tag(nonce(), Aad::from([23u8, 3, 3, 0x40, 0x11]), record)
            .map_err(|_| "sealing failed".to_string())
    };
    // Warm the code and the caches, then seal alone.
    let _ = seal(&mut record)?;
    let (seals, sealing) = timed(time, || seal(&mut record).map(|_| ()))?;
    let per_seal = sealing / seals as f64;
    // Seal and open in turn: the record goes back to plain text each time.
    let (pairs, both) = timed(time, || {
        let tag = seal(&mut record)?;
        let mut sealed = std::mem::take(&mut record);
        sealed.extend_from_slice(tag.as_ref());
        let plain_len = key
            .open_in_place(nonce(), Aad::from([23u8, 3, 3, 0x40, 0x11]), &mut sealed)
            .map_err(|_| "opening a record just sealed failed".to_string())?
            .len();
        sealed.truncate(plain_len);
        record = sealed;
        Ok(())
    })?;
    let per_open = (both / pairs as f64 - per_seal).max(per_seal / 100.0);
    let bits = RECORD_BYTES as f64 * 8.0;
    Ok(CipherSpeed {
        cipher: cipher.to_string(),
        encrypt_bits_per_second: bits / per_seal,
        decrypt_bits_per_second: bits / per_open,
    })
}

/// Runs `step` until this thread has spent `time` on the CPU: how many
/// times, and the CPU seconds. CPU time, not wall time, so that a host
/// held to a CPU share (a cgroup quota) still measures its core's speed;
/// the share is a fact of its own.
fn timed(time: Duration, mut step: impl FnMut() -> Result<(), String>) -> Result<(u64, f64), String> {
    let start = thread_cpu_seconds();
    let wall = Instant::now();
    let mut n = 0u64;
    loop {
        for _ in 0..16 {
            step()?;
        }
        n += 16;
        let spent = thread_cpu_seconds() - start;
        // A clock that does not move (no thread CPU clock) falls back to wall time.
        let spent = if spent > 0.0 {
            spent
        } else {
            wall.elapsed().as_secs_f64()
        };
        if spent >= time.as_secs_f64() || wall.elapsed() > time * 100 {
            return Ok((n, spent.max(1e-9)));
        }
    }
}

/// This thread's CPU time, seconds (CLOCK_THREAD_CPUTIME_ID).
fn thread_cpu_seconds() -> f64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given.
    match unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) } {
        0 => t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9,
        _ => 0.0,
    }
}

/// Whether this kernel has kernel TLS: None if it has, else why not. Asks
/// the kernel for the `tls` upper-layer protocol on a fresh TCP socket:
/// ENOENT means no such module (no CONFIG_TLS), ENOTCONN means it exists
/// (and wants a connected socket).
pub fn ktls_unavailable() -> Option<String> {
    let socket = match socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None) {
        Ok(s) => s,
        Err(e) => return Some(format!("cannot open a TCP socket to ask: {e}")),
    };
    let name = b"tls";
    // SAFETY: a valid descriptor, and a buffer of the length given.
    let rc = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&socket),
            libc::IPPROTO_TCP,
            libc::TCP_ULP,
            name.as_ptr() as *const libc::c_void,
            name.len() as libc::socklen_t,
        )
    };
    let error = std::io::Error::last_os_error();
    match (rc, error.raw_os_error()) {
        (0, _) | (_, Some(libc::ENOTCONN)) => None,
        (_, Some(libc::ENOENT)) => Some(format!(
            "this kernel ({}) has no kernel TLS: it knows no 'tls' upper-layer protocol \
             (CONFIG_TLS is off, or the tls module cannot load)",
            crate::probe::host::kernel_release()
        )),
        _ => Some(format!("the kernel refused the 'tls' upper-layer protocol: {error}")),
    }
}

/// Whether /proc/cpuinfo lists the `aes` flag (None where it has no flags line).
pub fn cpu_aes() -> Option<bool> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let flags = text
        .lines()
        .find(|l| l.starts_with("flags") || l.starts_with("Features"))?;
    let (_, list) = flags.split_once(':')?;
    Some(list.split_whitespace().any(|f| f == "aes"))
}

/// The cache file of the cipher speeds.
fn cache_path() -> Option<std::path::PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".cache")))?;
    Some(base.join("nicbench").join("cipher-speeds.json"))
}

/// What a cached measurement holds: the host it was measured on, and the speeds.
#[derive(Serialize, Deserialize)]
struct Cached {
    cpu_model: String,
    kernel: String,
    nicbench_version: String,
    speeds: Vec<CipherSpeed>,
}

/// The key a cached measurement must match: the CPU, the kernel, this build.
fn this_host() -> (String, String, String) {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    (
        crate::probe::host::cpu_model(&cpuinfo),
        crate::probe::host::kernel_release(),
        env!("CARGO_PKG_VERSION").to_string(),
    )
}

/// Every cipher's speed on one core of this host: from the cache when it
/// was measured on this CPU, kernel and build, else measured now (about
/// 0.3 s) and cached. A cache that cannot be written is logged, not fatal.
pub fn speeds() -> Vec<CipherSpeed> {
    static SPEEDS: std::sync::OnceLock<Vec<CipherSpeed>> = std::sync::OnceLock::new();
    SPEEDS
        .get_or_init(|| {
            let (cpu_model, kernel, nicbench_version) = this_host();
            let path = cache_path();
            if let Some(cached) = path
                .as_ref()
                .and_then(|p| std::fs::read(p).ok())
                .and_then(|b| serde_json::from_slice::<Cached>(&b).ok())
            {
                if (&cached.cpu_model, &cached.kernel, &cached.nicbench_version)
                    == (&cpu_model, &kernel, &nicbench_version)
                    && cached.speeds.len() == CIPHERS.len()
                {
                    return cached.speeds;
                }
            }
            let speeds: Vec<CipherSpeed> = CIPHERS
                .iter()
                .filter_map(|c| {
                    measure(c, Duration::from_secs_f64(MEASURE_SECONDS))
                        .map_err(|e| log::warn!("cannot time {c}: {e}"))
                        .ok()
                })
                .collect();
            if let Some(path) = path {
                let cached = Cached {
                    cpu_model,
                    kernel,
                    nicbench_version,
                    speeds: speeds.clone(),
                };
                let written = path
                    .parent()
                    .map_or(Ok(()), std::fs::create_dir_all)
                    .and_then(|_| std::fs::write(&path, serde_json::to_vec_pretty(&cached).unwrap_or_default()));
                if let Err(e) = written {
                    log::info!("cannot keep the cipher speeds in {}: {e}", path.display());
                }
            }
            speeds
        })
        .clone()
}

/// This host's TLS facts, without a certificate (an agent adds its own).
pub fn facts() -> TlsHostFacts {
    TlsHostFacts {
        cipher_speeds: speeds(),
        cpu_aes: cpu_aes(),
        ktls_unavailable: ktls_unavailable(),
        certificate_sha256: None,
        certificate_source: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cipher_seals_and_opens_at_a_positive_speed() {
        for c in CIPHERS {
            let s = measure(c, Duration::from_millis(5)).unwrap();
            assert_eq!(s.cipher, c);
            assert!(s.encrypt_bits_per_second > 0.0 && s.encrypt_bits_per_second.is_finite());
            assert!(s.decrypt_bits_per_second > 0.0 && s.decrypt_bits_per_second.is_finite());
        }
        assert!(measure("rot13", Duration::from_millis(1))
            .unwrap_err()
            .contains("unknown cipher"));
    }
}
