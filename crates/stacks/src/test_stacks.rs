//! Test-only stacks, compiled with the `test-stacks` feature (the runner's tests enable it
//! through their dev-dependency on this crate) and registered only when [`ENV`] is set, so the
//! other tests keep the four real stacks. `h1-copy` is HTTP/1.1 under another name: the fifth-stack
//! test uses it to show that a new stack needs no list of names outside the registry.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bench_core::{BoundServer, Client, ClientSettings, ServerSettings, Stack};

/// Set to `1` to register the test stacks (inherited by the server and load children).
pub const ENV: &str = "TBENCH_TEST_STACKS";

/// The test stacks, when [`ENV`] asks for them.
pub fn enabled() -> Vec<&'static dyn Stack> {
    if std::env::var(ENV).is_ok_and(|v| v == "1") {
        vec![&H1Copy]
    } else {
        Vec::new()
    }
}

/// HTTP/1.1 under the name `h1-copy`.
pub struct H1Copy;

static H1: stack_h1::Http1 = stack_h1::Http1;

impl Stack for H1Copy {
    fn name(&self) -> &'static str {
        "h1-copy"
    }
    fn description(&self) -> &'static str {
        "test-only copy of the HTTP/1.1 stack"
    }
    fn label(&self) -> &'static str {
        "HTTP/1.1 copy"
    }
    fn http_version(&self) -> bench_core::HttpVersion {
        H1.http_version()
    }
    fn libraries(&self) -> &'static [&'static str] {
        H1.libraries()
    }
    fn supports_plaintext(&self) -> bool {
        H1.supports_plaintext()
    }
    fn encoding(&self) -> &'static str {
        H1.encoding()
    }
    fn server_settings(&self) -> Vec<(&'static str, String)> {
        H1.server_settings()
    }
    fn bulk(&self) -> bool {
        H1.bulk()
    }
    // `async_trait`'s desugared signature, delegating to the HTTP/1.1 stack's future.
    fn bind<'life0, 'async_trait>(
        &'life0 self,
        settings: ServerSettings,
    ) -> Pin<Box<dyn Future<Output = anyhow::Result<BoundServer>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        H1.bind(settings)
    }
    fn client(&self, settings: &ClientSettings) -> anyhow::Result<Arc<dyn Client>> {
        H1.client(settings)
    }
}
