//! A bulk workload's settings in the words other tools share: what
//! iperf3's parameters can say about a test of bulk streams (rate, MSS,
//! NODELAY, congestion control, the fast paths). The bulk workloads
//! ([`super::bulk_streams`]) read and write them from their own params, so
//! an adapter that speaks another tool's protocol (`src/iperf3/`) asks the
//! registry instead of naming a workload's params.

use super::{find, SpecError, TestSpec};

/// The settings of a test of bulk streams that other tools also have.
/// A workload has some of them: TCP streams no GSO, UDP ones no MSS.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BulkSettings {
    /// The offered rate per stream in bits per second; None: as fast as
    /// the path allows.
    pub rate_bits_per_second: Option<u64>,
    /// TCP_MAXSEG on every stream.
    pub mss: Option<u32>,
    /// TCP_NODELAY on every stream.
    pub nodelay: bool,
    /// The congestion control algorithm (TCP_CONGESTION).
    pub congestion: Option<String>,
    /// The receivers let the kernel drop the data without copying it.
    pub discard: bool,
    /// The senders send without copying (sendfile or MSG_ZEROCOPY).
    pub zerocopy: bool,
    /// UDP segmentation offload on the senders.
    pub gso: bool,
    /// UDP receive offload (GRO) on the receivers.
    pub gro: bool,
}

/// How a bulk workload reads and writes [`BulkSettings`] in its params
/// ([`super::Workload::bulk`]).
pub trait BulkParams: Sync {
    /// The settings a spec of this workload asks for.
    fn settings(&self, spec: &TestSpec) -> Result<BulkSettings, SpecError>;
    /// Sets the spec's params to `settings`, everything else at its
    /// default; refuses a setting this workload does not have.
    fn set(&self, spec: &mut TestSpec, settings: &BulkSettings) -> Result<(), SpecError>;
}

/// The bulk settings of `spec`, for a workload of bulk streams; an error
/// naming the workload for any other.
pub fn settings_of(spec: &TestSpec) -> Result<BulkSettings, SpecError> {
    bulk_params(&spec.workload)?.settings(spec)
}

/// The [`BulkParams`] of the workload `name`.
pub fn bulk_params(name: &str) -> Result<&'static dyn BulkParams, SpecError> {
    find(name)?
        .bulk()
        .ok_or_else(|| SpecError::Invalid(format!("the '{name}' workload is not one of bulk streams")))
}

/// A setting `workload` does not have, refused by [`BulkParams::set`].
pub(crate) fn not_a_setting_of(workload: &str, setting: &str) -> SpecError {
    SpecError::Invalid(format!("the {workload} workload has no {setting} setting"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::transport::Proto;
    use crate::workload::{bulk_streams, REGISTRY};

    use crate::model::spec::tests::spec as spec_of;

    /// Every setting a bulk workload takes comes back as it was set; what
    /// it does not take is refused, not dropped.
    #[test]
    fn settings_round_trip_through_the_bulk_workloads_params() {
        let tcp = BulkSettings {
            rate_bits_per_second: Some(5_000_000),
            mss: Some(1200),
            nodelay: true,
            congestion: Some("reno".into()),
            discard: true,
            zerocopy: true,
            ..BulkSettings::default()
        };
        let udp = BulkSettings {
            rate_bits_per_second: Some(7_000_000),
            gso: true,
            gro: true,
            ..BulkSettings::default()
        };
        for (proto, settings, foreign) in [
            (
                Proto::TCP,
                tcp,
                BulkSettings {
                    gso: true,
                    ..BulkSettings::default()
                },
            ),
            (
                Proto::UDP,
                udp,
                BulkSettings {
                    mss: Some(1200),
                    ..BulkSettings::default()
                },
            ),
        ] {
            let w = bulk_streams(proto);
            let bulk = w.bulk().expect("a bulk workload has bulk settings");
            let mut spec = spec_of(w.name());
            bulk.set(&mut spec, &settings).unwrap();
            w.validate(&spec).unwrap();
            assert_eq!(settings_of(&spec).unwrap(), settings, "{}", w.name());
            let refused = bulk.set(&mut spec, &foreign).unwrap_err().to_string();
            assert!(refused.contains("has no"), "{}: {refused}", w.name());
            assert_eq!(settings_of(&spec).unwrap(), settings, "a refusal changes nothing");
        }
        let others: Vec<_> = REGISTRY.iter().filter(|w| w.bulk().is_none()).collect();
        assert!(!others.is_empty());
        for w in others {
            let why = settings_of(&spec_of(w.name())).unwrap_err().to_string();
            assert!(why.contains("not one of bulk streams"), "{why}");
        }
    }
}
