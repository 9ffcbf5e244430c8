//! The runner's exit statuses ([`Status`], shared with the study through the `results`
//! crate) and why a command stopped ([`Stopped`]).

pub use results::exit::Status;

/// Why a command stopped: the one line it prints and the status it ends with, so that bad
/// input (2) and a failure after the input was accepted (1) stay apart.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Stopped {
    pub status: Status,
    pub message: String,
}

impl Stopped {
    /// Bad input: nothing was run or written.
    pub fn invalid(message: impl Into<String>) -> Stopped {
        Stopped {
            status: Status::Invalid,
            message: message.into(),
        }
    }

    /// The input was accepted, then something failed.
    pub fn failed(message: impl Into<String>) -> Stopped {
        Stopped {
            status: Status::Failed,
            message: message.into(),
        }
    }
}
