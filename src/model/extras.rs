//! The part of a result that belongs to one workload: the datagram counts
//! of a UDP stream, the transactions of a request/response flow, a sweep's
//! points. Generic code carries it without knowing what it holds; the
//! workload that wrote it reads it back by its key (`udp`, `rr`, `sweep`),
//! which is also its key in the JSON document, beside the generic fields.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Workload-owned parts of a stream end, stream, flow total or sum, each
/// under its own key. Serialized flat into the containing object.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Extras(Map<String, Value>);

impl Extras {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn contains(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    /// The part under `key`, decoded; None when absent or not of that
    /// shape (a document from another version or tool).
    pub fn get<T: DeserializeOwned>(&self, key: &str) -> Option<T> {
        T::deserialize(self.0.get(key)?).ok()
    }

    /// Sets the part under `key` (replacing what was there).
    pub fn set<T: Serialize>(&mut self, key: &str, value: &T) {
        // Result parts are plain data (string keys, numbers): they always
        // serialize; a part that did not would be left out, not panic.
        if let Ok(v) = serde_json::to_value(value) {
            self.0.insert(key.to_string(), v);
        }
    }

    pub fn remove(&mut self, key: &str) {
        self.0.shift_remove(key);
    }

    /// The raw JSON of every part (for generic renderers and the store).
    pub fn raw(&self) -> &Map<String, Value> {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Part {
        zeta: u64,
        alpha: f64,
    }

    #[test]
    fn a_part_keeps_its_field_order_and_reads_back() {
        let mut e = Extras::default();
        e.set("part", &Part { zeta: 3, alpha: 1.5 });
        assert_eq!(serde_json::to_string(&e).unwrap(), r#"{"part":{"zeta":3,"alpha":1.5}}"#);
        assert_eq!(e.get::<Part>("part"), Some(Part { zeta: 3, alpha: 1.5 }));
        assert_eq!(e.get::<Part>("other"), None);
        assert_eq!(e.get::<String>("part"), None);
    }
}
