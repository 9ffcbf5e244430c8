//! The suite's exit statuses: one type for every command (the runner's and the study's) and
//! one mapping to codes, so a script reads the same code for the same outcome whichever
//! command it ran.

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
    /// A run stopped early because a cell's first requests all failed alike (nothing could
    /// be measured until that is fixed); the finished rows are kept.
    NothingMeasurable,
    /// `compare --fail-on-regression`: a significant regression exceeds the limit.
    Regression,
    /// A run in which a threshold failed (k6's code).
    ThresholdFailed,
    /// Ctrl-C stopped the run (the shell's 128 + SIGINT); the finished rows are kept.
    Interrupted,
}

impl Status {
    /// Every status, in the order of [`Status::table`].
    pub const ALL: [Status; 7] = [
        Status::Success,
        Status::Failed,
        Status::Regression,
        Status::Invalid,
        Status::NothingMeasurable,
        Status::ThresholdFailed,
        Status::Interrupted,
    ];

    /// The process exit code of this status.
    pub const fn code(self) -> u8 {
        match self {
            Status::Success => 0,
            Status::Failed | Status::Regression => 1,
            Status::Invalid => 2,
            Status::NothingMeasurable => 3,
            Status::ThresholdFailed => 99,
            Status::Interrupted => 130,
        }
    }

    /// What the code means to a user, in one line (README's and `--help`'s table).
    pub const fn meaning(self) -> &'static str {
        match self {
            Status::Success => "done; failed requests are results, not errors",
            Status::Failed => "the input was accepted, then something failed (results could not be written, a child process failed); finished rows are kept",
            Status::Regression => "compare --fail-on-regression: a significant regression beyond the limit",
            Status::Invalid => "bad input (flags, experiment file, results folder): one line names it and the fix; nothing was measured or written",
            Status::NothingMeasurable => "a run stopped early: a cell's first requests all failed alike (--keep-going measures them anyway); fix the cause, then --resume finishes the run",
            Status::ThresholdFailed => "a threshold of the experiment failed (--no-thresholds-exit: 0)",
            Status::Interrupted => "interrupted (Ctrl-C, SIGTERM); --resume finishes the run",
        }
    }

    /// The table of exit statuses, one `CODE  MEANING` line each: printed by `--help` and
    /// quoted in README (a test holds the two to this).
    pub fn table() -> String {
        Status::ALL
            .iter()
            .map(|s| format!("{:>3}  {}", s.code(), s.meaning()))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl From<Status> for ExitCode {
    fn from(status: Status) -> ExitCode {
        ExitCode::from(status.code())
    }
}

/// Why a command stopped: the one line it prints and the status it ends with, so that bad
/// input (2) and a failure after the input was accepted (1) stay apart. The runner's commands
/// return it, and its `main` prints it once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stopped {
    pub status: Status,
    pub message: String,
}

impl std::fmt::Display for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Stopped {}

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
        let codes = Status::ALL.map(Status::code);
        assert_eq!(codes, [0, 1, 1, 2, 3, 99, 130]);
    }
}
