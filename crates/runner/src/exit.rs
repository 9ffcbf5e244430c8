//! The runner's exit statuses: one type for every command and one mapping to codes, so a
//! script reads the same code for the same outcome whichever command it ran.

use std::process::ExitCode;

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Everything asked was done.
    Success,
    /// The input was accepted, then running, writing or a child process failed.
    Failed,
    /// Bad input (flags, experiment files, runs that cannot be merged or compared): one line
    /// names the problem, and nothing was run or written.
    Invalid,
    /// `compare --fail-on-regression`: a significant regression exceeds the limit.
    Regression,
    /// A run in which a threshold failed (k6's code).
    ThresholdFailed,
    /// Ctrl-C stopped the run (the shell's 128 + SIGINT); the finished rows are kept.
    Interrupted,
}

impl Status {
    /// The process exit code of this status.
    pub const fn code(self) -> u8 {
        match self {
            Status::Success => 0,
            Status::Failed | Status::Regression => 1,
            Status::Invalid => 2,
            Status::ThresholdFailed => 99,
            Status::Interrupted => 130,
        }
    }
}

impl From<Status> for ExitCode {
    fn from(status: Status) -> ExitCode {
        ExitCode::from(status.code())
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_the_documented_ones() {
        let codes = [
            Status::Success,
            Status::Failed,
            Status::Invalid,
            Status::Regression,
            Status::ThresholdFailed,
            Status::Interrupted,
        ]
        .map(Status::code);
        assert_eq!(codes, [0, 1, 2, 1, 99, 130]);
    }
}
