//! The store's tests run against both back ends with the same assertions:
//! [`store_test!`] makes each one a module with a `sqlite` test (an
//! in-memory database) and a `postgres` test (a throwaway server of its
//! own, [`cluster::Cluster`]). Where PostgreSQL is not installed the
//! `postgres` half skips, and fails under CI (`CI` set).

#[path = "pg_cluster.rs"]
pub mod cluster;

use std::path::Path;

use super::Store;

/// A new in-memory SQLite store.
pub fn sqlite() -> Store {
    Store::open(Path::new(":memory:")).expect("an in-memory database opens")
}

/// `started`'s server, or None where PostgreSQL is missing, outside CI
/// (under CI that fails the test).
pub fn or_skip(started: Result<cluster::Cluster, String>) -> Option<cluster::Cluster> {
    match started {
        Ok(cluster) => Some(cluster),
        Err(why) => {
            if std::env::var_os("CI").is_some() {
                panic!("{why}\nCI is set, so this fails instead of skipping: .ci/run installs postgresql");
            }
            eprintln!("SKIPPED: {why}");
            None
        }
    }
}

/// A new store in a new PostgreSQL server, with the server (keep it until
/// the store is dropped); None where PostgreSQL is missing, outside CI.
pub fn postgres() -> Option<(Store, cluster::Cluster)> {
    match cluster::Cluster::start() {
        Ok(cluster) => {
            let store = Store::open(Path::new(&cluster.url("postgres")))
                .unwrap_or_else(|e| panic!("the test server's database opens: {e}\n{}", cluster.log()));
            Some((store, cluster))
        }
        Err(why) => {
            if std::env::var_os("CI").is_some() {
                panic!("{why}\nCI is set, so this fails instead of skipping: .ci/run installs postgresql");
            }
            eprintln!("SKIPPED: {why}");
            None
        }
    }
}

/// `store_test!(fn name(store) { ... })`: the body once on each back end,
/// as the tests `name::sqlite` and `name::postgres`.
macro_rules! store_test {
    ($(#[$meta:meta])* fn $name:ident($store:pat) $body:block) => {
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            fn body($store: $crate::store::Store) $body

            #[test]
            fn sqlite() {
                body($crate::store::testing::sqlite())
            }

            #[test]
            fn postgres() {
                if let Some((store, _cluster)) = $crate::store::testing::postgres() {
                    body(store)
                }
            }
        }
    };
}
pub(crate) use store_test;
