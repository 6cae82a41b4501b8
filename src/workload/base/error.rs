//! What goes wrong while a test's sockets are set up or run.

use crate::model::spec::SpecError;

/// Failures while setting up or running a workload.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Setup(String),
}

impl WorkloadError {
    pub fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> WorkloadError {
        let context = context.into();
        move |source| WorkloadError::Io { context, source }
    }
}
