//! scripts/quic-breakdown's grouping of callgrind files, on a hand-written fixture (no
//! valgrind here): each function's own cost goes to the group its name says, neutral code
//! (memcpy, generic drops) to its callers in proportion, and system calls that are vDSO
//! calls natively are not counted.

use std::path::Path;
use std::process::Command;

#[test]
fn the_breakdown_script_groups_a_callgrind_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/quic-breakdown/fixture.callgrind");
    let out = Command::new("python3")
        .arg(root.join("scripts/quic-breakdown"))
        .arg("group")
        .arg(&fixture)
        .output()
        .expect("python3 runs scripts/quic-breakdown");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let file = json.as_object().unwrap().values().next().unwrap();
    assert!(file["cmd"].as_str().unwrap().contains(" load "));
    let groups = &file["groups"];
    let ir = |g: &str| groups[g]["ir"].as_f64().unwrap();
    let sys = |g: &str| groups[g]["syscalls"].as_f64().unwrap();
    // quinn-proto's own 1,000 plus the 300 of the memcpy it called.
    assert_eq!(ir("tls_quic_state"), 1300.0);
    assert_eq!(ir("packet_protection"), 500.0);
    // ring's static curve25519 helpers are handshake cryptography.
    assert_eq!(ir("handshake_crypto"), 900.0);
    assert_eq!(ir("setup_teardown"), 70.0);
    assert_eq!((ir("socket_io"), sys("socket_io")), (40.0, 2.0));
    // tokio's loop and clock_gettime are scheduling; clock_gettime's calls are vDSO natively.
    assert_eq!((ir("runtime"), sys("runtime")), (110.0, 0.0));
    // A neutral function nobody called has no owner.
    assert_eq!(ir("other"), 60.0);
    assert_eq!(file["syscall_functions"]["sendmsg"].as_f64(), Some(2.0));
    assert!(file["syscall_functions"]
        .get("clock_gettime@@GLIBC_2.17")
        .is_none());
}
