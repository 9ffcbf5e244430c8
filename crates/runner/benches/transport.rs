//! Micro-benchmarks of the costs the sweep is made of: one handshake per stack (full and
//! resumed) in-process over loopback, JSON vs protobuf encode/decode per payload profile, and
//! the histogram record path of the load generator.

use std::hint::black_box;
use std::time::Duration;

use bench_core::testkit::{client_settings, start_server};
use bench_core::workload::{padding, validate_json_item, ItemRenderer};
use bench_core::{HandshakeVariant, PayloadProfile, Reply, Stack};
use criterion::{criterion_group, criterion_main, Criterion};
use prost::Message;

fn stacks() -> Vec<&'static dyn Stack> {
    stacks::stacks()
}

fn handshakes(c: &mut Criterion) {
    bench_core::tls::install_crypto_provider();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let certs = tempfile::tempdir().unwrap();
    let mut group = c.benchmark_group("handshake");
    group.measurement_time(Duration::from_secs(3));
    for stack in stacks() {
        let server = rt.block_on(start_server(
            stack,
            certs.path(),
            false,
            PayloadProfile::Small,
            None,
        ));
        for variant in [HandshakeVariant::Full, HandshakeVariant::Resumed] {
            let mut settings =
                client_settings(server.addr, certs.path(), false, PayloadProfile::Small);
            settings.tls.as_mut().unwrap().variant = variant;
            let client = stack.client(&settings).unwrap();
            group.bench_function(format!("{}/{}", variant.as_str(), stack.name()), |b| {
                b.iter(|| {
                    rt.block_on(async {
                        let connected = client.connect().await.unwrap();
                        connected.conn.close().await;
                    })
                })
            });
        }
        drop(server);
    }
    group.finish();
}

fn codecs(c: &mut Criterion) {
    let mut group = c.benchmark_group("codec");
    for profile in PayloadProfile::ALL {
        let renderer = ItemRenderer::new(profile);
        let json = renderer.json(123_456);
        group.bench_function(format!("json_encode/{profile}"), |b| {
            b.iter(|| black_box(renderer.json(black_box(123_456))))
        });
        group.bench_function(format!("json_decode_validate/{profile}"), |b| {
            b.iter(|| validate_json_item(black_box(&json), 123_456, profile).unwrap())
        });
        let item = stack_grpc::pb::Item {
            id: 123_456,
            name: "widget".into(),
            price_cents: 1999,
            currency: "EUR".into(),
            in_stock: true,
            tags: vec!["bench".into(), "item".into()],
            description: padding(profile),
        };
        let proto = bytes::Bytes::from(item.encode_to_vec());
        group.bench_function(format!("protobuf_encode/{profile}"), |b| {
            b.iter(|| black_box(black_box(&item).encode_to_vec()))
        });
        group.bench_function(format!("protobuf_decode/{profile}"), |b| {
            b.iter(|| stack_grpc::pb::Item::decode(black_box(proto.clone())).unwrap())
        });
    }
    group.finish();
}

fn histogram(c: &mut Criterion) {
    let mut m = load::measurements::Measurements::default();
    let reply = Reply {
        messages: 0,
        reopened: None,
        streamed: false,
        ttfb: Duration::from_micros(120),
        total: Duration::from_micros(180),
        body_bytes: 256,
    };
    let mut us = 100u64;
    c.bench_function("histogram/record_ok", |b| {
        b.iter(|| {
            us = us % 50_000 + 7;
            m.record_ok(black_box(Duration::from_micros(us)), black_box(&reply));
        })
    });
}

criterion_group!(benches, handshakes, codecs, histogram);
criterion_main!(benches);
