//! The rows a run writes, from what it planned and measured: the one place a `cells.csv` or
//! `requests.csv` row reads a [`Cell`], its settings or its measurements (the row types
//! themselves, their columns and readers, are the `results` crate's).

use bench_core::FailureClass;
use results::rows::{steady_window_valid_for, CellRow, RequestRow};

use executors::cell_result::CellResult;
use experiment::plan::Cell;
use load::measurements::{LatencySummary, RequestMeasurements};

/// The columns a cell's plan fixes: coordinates and settings. The one place a row reads
/// a [`Cell`] or its experiment, so a change of the settings model is adapted here.
pub fn planned(cell: &Cell) -> CellRow {
    let e = &cell.settings;
    let open = cell.rate().is_some();
    let proxied = e.path != experiment::settings::MeshPath::Direct;
    let carried = stacks::find(&cell.stack)
        .filter(|_| proxied)
        .and_then(|s| experiment::settings::mesh::carries(e.proxy, e.path, s).ok());
    // Only exponential draws use the seed.
    let seeded = e
        .service_time
        .as_ref()
        .is_some_and(|t| matches!(t.value(), bench_core::ServiceTime::Exponential(_)));
    CellRow {
        cell_key: cell.key(),
        variant: cell.variant.clone(),
        stage: cell.stage.as_str().to_string(),
        stack: cell.stack.clone(),
        regime: cell.regime.to_string(),
        concurrency: cell.concurrency,
        repetition: cell.repetition,
        payload: cell.payload().to_string(),
        plaintext: cell.plaintext(),
        handshake: cell.handshake().as_str().to_string(),
        client: stacks::find(&cell.stack)
            .map(|s| s.client_implementation(cell.settings.client).to_string()),
        server: Some(e.server.as_str().to_string()),
        connections: cell.connections(),
        requests: cell.duration_s().is_none().then_some(cell.requests()),
        duration_s: cell.duration_s(),
        mode: if open { "open" } else { "closed" }.to_string(),
        rate_rps: cell.rate(),
        pacing: open.then(|| e.pacing.as_str().to_string()),
        netem: e.netem.as_ref().map(|n| n.text().to_string()),
        port_range: e.port_range.as_ref().map(|r| r.text().to_string()),
        tcp_tw_reuse: e.tcp_tw_reuse,
        somaxconn: e.somaxconn,
        tcp_congestion: e.tcp_congestion.clone(),
        backlog: e.backlog,
        client_nofile: e.client_nofile,
        request_timeout_ms: e.request_timeout_ms,
        connect_timeout_ms: e.connect_timeout_ms,
        handshake_timeout_ms: e.handshake_timeout_ms,
        quic_initial_rtt_ms: e.quic_initial_rtt_ms,
        udp_buffer_bytes: e.udp_buffer_bytes.map(|v| v as u64),
        quic_receive_window: e.quic_receive_window,
        quic_server_endpoints: e.quic_server_endpoints,
        quic_offload: e.quic_offload,
        quic_mtu_discovery: e.quic_mtu_discovery,
        quic_endpoint: Some(e.quic_endpoint.as_str().to_string()),
        grpc_call: stacks::find(&cell.stack)
            .filter(|s| s.grpc_calls().len() > 1)
            .map(|_| e.grpc_call.as_str().to_string()),
        stream_messages: e.grpc_call.is_streaming().then_some(e.stream_messages),
        object: e.object.as_ref().map(|o| o.text().to_string()),
        object_message_bytes: stacks::find(&cell.stack)
            .filter(|s| e.object.is_some() && s.api() == bench_core::user_service::Api::Grpc)
            .map(|_| e.object_message_bytes),
        linger_zero: e.linger_zero,
        source_addresses: Some(e.source_addresses),
        path: Some(e.path.as_str().to_string()),
        proxy: proxied.then(|| e.proxy.as_str().to_string()),
        pool: proxied.then(|| e.pool.as_str().to_string()),
        proxy_threads: proxied.then_some(e.proxy_threads),
        client_protocol: carried.map(|c| c.front.alpn().to_string()),
        upstream_protocol: carried.map(|c| c.protocol.alpn().to_string()),
        server_threads: e.server_threads,
        min_cell_seconds: e.min_cell_seconds,
        service_time: e.service_time.as_ref().map(|t| t.text().to_string()),
        service_time_seed: seeded.then_some(e.service_time_seed),
        service_cpu_us: e.service_cpu_us,
        ..CellRow::default()
    }
}

/// The whole row of a finished (or failed) cell.
pub fn finished(r: &CellResult) -> CellRow {
    let m = &r.measured;
    let lags = LatencySummary::of(&m.pacing_lag);
    let lag = |v: u64| (!m.pacing_lag.is_empty()).then_some(v);
    let per = |num: f64, den: u64| if den > 0 { num / den as f64 } else { 0.0 };
    let cpu_per_1k = |cpu_s: f64| per(cpu_s * 1000.0 * 1000.0, m.ok);
    let [latency, ttfb, connect, handshake] =
        [&m.latency, &m.ttfb, &m.connect, &m.handshake].map(LatencySummary::of);
    let fail = |c: FailureClass| m.failures[c.index()];
    let gap = LatencySummary::of(&m.message_gap);
    let gaps = |v: u64| (!m.message_gap.is_empty()).then_some(v);
    let env = r.environment;
    let emulation = env.and_then(|e| e.emulation);
    let net = env.and_then(|e| e.net);
    let counter = |column: &str| net.and_then(|n| n.deltas.get(column));
    let (server, client) = (&r.server, &r.client);
    // The bulk workload: every success moved one object, counted exactly (`body_bytes`).
    let bulk = r.cell.settings.object.is_some();
    let moved = bulk.then_some(m.body_bytes);
    let per_gib = |cpu_s: f64| {
        let gib = m.body_bytes as f64 / f64::from(1u32 << 30);
        (gib > 0.0).then(|| cpu_s / gib)
    };
    let proxy_client = r.proxies.as_ref().and_then(|p| p.client);
    let proxy_server = r.proxies.as_ref().and_then(|p| p.server);
    CellRow {
        late: m.late,
        pacing_lag_p50_us: lag(lags.p50),
        pacing_lag_p99_us: lag(lags.p99),
        pacing_lag_max_us: lag(lags.max),
        agents: Some(r.agents),
        sent: m.sent,
        ok: m.ok,
        failed: m.failed(),
        success_rate: r.success_rate(),
        elapsed_s: r.elapsed_s,
        measured_start_unix_s: r.measured_start_unix_s,
        throughput_rps: r.throughput_rps(),
        throughput_steady_rps: r.throughput_steady_rps(),
        steady_s: r.steady.map(|w| w.elapsed_s),
        steady_window_valid: r
            .steady
            .map(|w| steady_window_valid(w.ok as f64, w.elapsed_s, r)),
        cut_short: r.cut_short,
        extended: r.extended,
        budget_repeats: r.budget_repeats,
        warmup_sent: r.warmup.sent,
        warmup_ok: r.warmup.ok,
        latency_min_us: latency.min,
        latency_p50_us: latency.p50,
        latency_p90_us: latency.p90,
        latency_p95_us: latency.p95,
        latency_p99_us: latency.p99,
        latency_p999_us: latency.p999,
        latency_max_us: latency.max,
        latency_mean_us: latency.mean,
        ttfb_min_us: ttfb.min,
        ttfb_p50_us: ttfb.p50,
        ttfb_p90_us: ttfb.p90,
        ttfb_p95_us: ttfb.p95,
        ttfb_p99_us: ttfb.p99,
        ttfb_p999_us: ttfb.p999,
        ttfb_max_us: ttfb.max,
        ttfb_mean_us: ttfb.mean,
        connect_min_us: connect.min,
        connect_p50_us: connect.p50,
        connect_p90_us: connect.p90,
        connect_p95_us: connect.p95,
        connect_p99_us: connect.p99,
        connect_p999_us: connect.p999,
        connect_max_us: connect.max,
        connect_mean_us: connect.mean,
        handshake_min_us: handshake.min,
        handshake_p50_us: handshake.p50,
        handshake_p90_us: handshake.p90,
        handshake_p95_us: handshake.p95,
        handshake_p99_us: handshake.p99,
        handshake_p999_us: handshake.p999,
        handshake_max_us: handshake.max,
        handshake_mean_us: handshake.mean,
        connections_attempted: Some(m.connections_attempted),
        connections_established: m.connections_established,
        connections_resumed: m.connections_resumed,
        requests_moved: Some(m.moved),
        fail_connect_refused: fail(FailureClass::ConnectRefused),
        fail_connect_timeout: fail(FailureClass::ConnectTimeout),
        fail_addr_unavailable: fail(FailureClass::AddrUnavailable),
        fail_fd_exhausted: fail(FailureClass::FdExhausted),
        fail_conn_reset: fail(FailureClass::ConnReset),
        fail_tls_failed: fail(FailureClass::TlsFailed),
        fail_handshake_timeout: fail(FailureClass::HandshakeTimeout),
        fail_quic_idle_timeout: fail(FailureClass::QuicIdleTimeout),
        fail_request_timeout: fail(FailureClass::RequestTimeout),
        fail_bad_status: fail(FailureClass::BadStatus),
        fail_bad_body: fail(FailureClass::BadBody),
        fail_missing_data: fail(FailureClass::MissingData),
        fail_other: fail(FailureClass::Other),
        server_rss_peak_bytes: server.sampled.then_some(server.rss_peak_bytes),
        server_rss_hwm_bytes: server.rss_hwm_bytes,
        server_rss_mean_bytes: server.rss_mean_bytes,
        server_cpu_pct_mean: server.cpu_pct_mean,
        server_cpu_s: server.sampled.then_some(server.cpu_s),
        server_cpu_ms_per_1k_ok: server.sampled.then(|| cpu_per_1k(server.cpu_s)),
        client_rss_peak_bytes: client.rss_peak_bytes,
        client_rss_hwm_bytes: client.rss_hwm_bytes,
        client_rss_mean_bytes: client.rss_mean_bytes,
        client_cpu_pct_mean: client.cpu_pct_mean,
        client_cpu_s: client.cpu_s,
        client_cpu_ms_per_1k_ok: cpu_per_1k(client.cpu_s),
        proxy_client_rss_hwm_bytes: proxy_client.map(|p| p.rss_hwm_bytes),
        proxy_client_cpu_s: proxy_client.map(|p| p.cpu_s),
        proxy_server_rss_hwm_bytes: proxy_server.map(|p| p.rss_hwm_bytes),
        proxy_server_cpu_s: proxy_server.map(|p| p.cpu_s),
        // Only on a proxied path: a server nobody here wrote is recorded with the proxies
        // (its program and configuration) but measured as the server.
        proxy_cpu_ms_per_1k_ok: r
            .proxies
            .as_ref()
            .filter(|_| r.cell.settings.path != experiment::settings::MeshPath::Direct)
            .map(|_| {
                cpu_per_1k(
                    proxy_client.map_or(0.0, |p| p.cpu_s) + proxy_server.map_or(0.0, |p| p.cpu_s),
                )
            }),
        short_phase: server.short_phase || client.short_phase,
        wire_sent_bytes: m.wire.sent,
        wire_received_bytes: m.wire.received,
        wire_sent_bytes_per_request: per(m.wire.sent as f64, m.sent),
        wire_received_bytes_per_request: per(m.wire.received as f64, m.sent),
        body_bytes_per_ok: per(m.body_bytes as f64, m.ok),
        streamed_ok: (m.streamed_ok > 0).then_some(m.streamed_ok),
        messages_per_call_mean: (m.streamed_ok > 0).then(|| per(m.messages as f64, m.streamed_ok)),
        messages_per_s: (m.streamed_ok > 0 && r.elapsed_s > 0.0)
            .then(|| m.messages as f64 / r.elapsed_s),
        message_gap_p50_us: gaps(gap.p50),
        message_gap_p99_us: gaps(gap.p99),
        message_gap_p999_us: gaps(gap.p999),
        message_gap_max_us: gaps(gap.max),
        object_bytes_moved: moved,
        goodput_bytes_per_s: r.goodput_bytes_per_s(),
        client_cpu_s_per_gib: moved.and_then(|_| per_gib(client.cpu_s)),
        server_cpu_s_per_gib: moved
            .filter(|_| server.sampled)
            .and_then(|_| per_gib(server.cpu_s)),
        tcp_time_wait_before: client.tcp_time_wait.map(|t| t.before),
        tcp_time_wait_after: client.tcp_time_wait.map(|t| t.after),
        tcp_time_wait_peak: client.tcp_time_wait.map(|t| t.peak),
        loadavg1_before: env.map(|v| v.loadavg1_before),
        loadavg1_after: env.map(|v| v.loadavg1_after),
        steal_pct: env.map(|v| v.steal_pct),
        emulated_packets_delayed: r.emulated_packets.map(|p| p.0),
        emulated_packets_dropped: r.emulated_packets.map(|p| p.1),
        emulator: emulation.map(|e| e.kind.as_str().to_string()),
        emulator_cpu_s: emulation.and_then(|e| e.cpu_s),
        net_tcp_retrans_segs: counter("net_tcp_retrans_segs"),
        net_tcp_timeouts: counter("net_tcp_timeouts"),
        net_listen_overflows: counter("net_listen_overflows"),
        net_listen_drops: counter("net_listen_drops"),
        net_tcp_out_rsts: counter("net_tcp_out_rsts"),
        net_tcp_estab_resets: counter("net_tcp_estab_resets"),
        net_syncookies_sent: counter("net_syncookies_sent"),
        net_udp_rcvbuf_errors: counter("net_udp_rcvbuf_errors"),
        net_udp_sndbuf_errors: counter("net_udp_sndbuf_errors"),
        net_udp_in_errors: counter("net_udp_in_errors"),
        net_tcp_active_opens: counter("net_tcp_active_opens"),
        net_tcp_passive_opens: counter("net_tcp_passive_opens"),
        net_counters_scope: net.map(|n| n.scope.as_str().to_string()),
        server_exit: r.server_exit.clone(),
        error: r.error.clone(),
        ..planned(&r.cell)
    }
}

fn steady_window_valid(ok: f64, window_s: f64, r: &CellResult) -> bool {
    steady_window_valid_for(ok, window_s, r.cell.concurrency, r.elapsed_s)
}

/// One `requests.csv` row per name of the cell's request mix that the cell sent (none
/// without a mix).
pub fn requests(r: &CellResult) -> Vec<RequestRow> {
    let key = r.cell.key();
    r.measured
        .by_request
        .iter()
        .filter(|m| m.sent > 0)
        .map(|m| request(&key, m))
        .collect()
}

/// One name's row of a cell's `requests.csv`, from what it measured.
pub fn request(cell_key: &str, r: &RequestMeasurements) -> RequestRow {
    let l = LatencySummary::of(&r.latency);
    let some = |v: u64| (r.ok > 0).then_some(v);
    RequestRow {
        cell_key: cell_key.to_string(),
        request: r.name.clone(),
        sent: r.sent,
        ok: r.ok,
        failed: r.sent.saturating_sub(r.ok),
        success_rate: if r.sent == 0 {
            0.0
        } else {
            r.ok as f64 / r.sent as f64
        },
        latency_min_us: some(l.min),
        latency_p50_us: some(l.p50),
        latency_p90_us: some(l.p90),
        latency_p95_us: some(l.p95),
        latency_p99_us: some(l.p99),
        latency_p999_us: some(l.p999),
        latency_max_us: some(l.max),
        latency_mean_us: (r.ok > 0).then_some(l.mean),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn net_counter_and_failure_columns_are_cell_row_columns() {
        let read: Vec<&str> = executors::measure::netcounters::COUNTERS
            .iter()
            .map(|c| c.column)
            .collect();
        let columns: Vec<&str> = results::rows::net_counter_columns().collect();
        assert_eq!(
            read, columns,
            "the counters read are the net_* columns, in order"
        );
        for c in executors::measure::netcounters::COUNTERS {
            assert_eq!(
                <CellRow as results::rows::Row>::numeric(c.column),
                Some(true),
                "{}",
                c.column
            );
        }
        assert!(<CellRow as results::rows::Row>::COLUMNS
            .contains(&executors::measure::netcounters::SCOPE_COLUMN));
        for class in FailureClass::ALL {
            let column = format!("fail_{}", class.as_str());
            assert_eq!(
                <CellRow as results::rows::Row>::numeric(&column),
                Some(true),
                "{column}"
            );
        }
    }
}
