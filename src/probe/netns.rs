//! Reading another network namespace of this host (a lab router's): a
//! thread enters `/run/netns/NAME` (what `ip netns add` creates) and reads
//! there; the rest of the process stays where it was.

use std::os::fd::AsRawFd;
use std::path::PathBuf;

/// Moves the calling thread into the network namespace `/run/netns/NAME`.
/// Only for a thread of its own: it does not come back.
pub fn enter(name: &str) -> std::io::Result<()> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("'{name}' is not a network namespace name"),
        ));
    }
    let file = std::fs::File::open(PathBuf::from("/run/netns").join(name))?;
    // SAFETY: setns on an open namespace file; affects this thread only.
    match unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// Runs `read` on a short-lived thread inside the network namespace `name`
/// and returns what it read.
pub fn read_in<T: Send>(name: &str, read: impl FnOnce() -> T + Send) -> std::io::Result<T> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                enter(name)?;
                Ok(read())
            })
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the namespace reader panicked")))
    })
}

/// The index of interface `name` in the calling thread's namespace.
pub fn ifindex_of(name: &str) -> Option<i32> {
    let name = std::ffi::CString::new(name).ok()?;
    // SAFETY: a NUL-terminated name; the call only reads it.
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    (index > 0).then_some(index as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_that_is_a_path_is_refused_before_anything_is_opened() {
        for name in ["", ".", "..", "../etc", "a/b"] {
            let e = read_in(name, || ()).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{name:?}");
        }
    }

    #[test]
    fn a_namespace_that_does_not_exist_is_an_error_not_a_reading() {
        let e = read_in("nicbench-no-such-namespace-4711", || 1).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{e}");
    }

    #[test]
    fn loopback_has_an_index_and_a_made_up_name_none() {
        assert!(ifindex_of("lo").is_some());
        assert_eq!(ifindex_of("nb-no-such-if"), None);
        assert_eq!(ifindex_of("a\0b"), None);
    }
}
