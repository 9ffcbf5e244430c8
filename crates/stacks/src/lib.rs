//! The one list of stacks: every stack the suite runs, in report order. A new stack is its
//! crate plus one line here (and its dependency line in this crate's Cargo.toml;
//! docs/developing.md, "Adding a stack", lists what else the fifth, grpc-h3, took besides).

#[cfg(feature = "test-stacks")]
pub mod test_stacks;

use bench_core::Stack;

/// Every stack the suite knows, in report order.
pub fn stacks() -> Vec<&'static dyn Stack> {
    #[allow(unused_mut)]
    let mut stacks: Vec<&'static dyn Stack> = vec![
        &stack_h1::Http1,
        &stack_h2::Http2,
        &stack_h3::Http3,
        &stack_grpc::Grpc,
        &stack_grpc_h3::GrpcH3,
    ];
    #[cfg(feature = "test-stacks")]
    stacks.extend(crate::test_stacks::enabled());
    stacks
}

pub fn find(name: &str) -> Option<&'static dyn Stack> {
    stacks().into_iter().find(|s| s.name() == name)
}

pub fn names() -> Vec<&'static str> {
    stacks().iter().map(|s| s.name()).collect()
}
