//! Children that follow their runner: a runner killed with SIGKILL runs no cleanup, so each
//! server (`runner serve`) and load generator (`runner load`) it starts ends by itself once
//! the runner is gone. A child started by hand has no parent to follow and runs on.

use std::time::Duration;

/// Set on a child by [`follow_me`]: the runner's pid, whose end the child follows.
const PARENT_VAR: &str = "TBENCH_PARENT";

/// Marks `cmd` as a child that ends with this process.
pub fn follow_me(cmd: &mut tokio::process::Command) {
    cmd.env(PARENT_VAR, std::process::id().to_string());
}

/// In a child: if it was started by [`follow_me`], ends it (status 1, one line naming `role`)
/// once its parent is gone (it was reparented), checked four times a second on a thread of
/// its own.
pub fn follow(role: &'static str) {
    let Some(parent) = std::env::var(PARENT_VAR)
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
    else {
        return;
    };
    let spawned = std::thread::Builder::new()
        .name("parent-watch".into())
        .spawn(move || loop {
            if nix::unistd::getppid().as_raw() as u32 != parent {
                eprintln!("{role}: the runner (pid {parent}) is gone; stopping");
                std::process::exit(1);
            }
            std::thread::sleep(Duration::from_millis(250));
        });
    if let Err(e) = spawned {
        eprintln!("warning: {role}: cannot watch the runner (pid {parent}): {e}");
    }
}
