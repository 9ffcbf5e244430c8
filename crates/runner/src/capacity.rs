//! `runner capacity`: per stack and regime (and variant and level), the highest offered rate at
//! which an SLO holds, found by a ladder then a bisection over open-loop probes, the passing end
//! confirmed by repeated probes, within a budget of requests and time. Each probe is a cell of
//! the run (key `…/q<rate>/r<n>`); the result goes to `summary.json` (docs/capacity.md).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::output::capacity::{Outcome, Probe, Record, Search, Settings, Slo};
use crate::output::row_of;
use executors::cell_result::CellResult;
use experiment::plan::{Cell, Stage};
use experiment::settings::{Experiment, Regime};

/// The quantile the SLO bounds, for the probe-length rule.
pub const SLO_QUANTILE: f64 = 0.99;
/// A free worker sending this late at p99 means the load generator fell behind its schedule
/// (its timer or its CPU), when the SLO states no pacing-lag bound of its own.
pub const DEFAULT_PACING_LAG_LIMIT_US: u64 = 1_000;
/// Late requests above this share of those sent mean no worker was free when requests fell due.
pub const LATE_SHARE: f64 = 0.01;
/// Workers count as too few (the instrument's limit, not the server's) when the rate times the
/// unloaded latency needs at least this share of them (Little's law).
pub const WORKERS_NEEDED_SHARE: f64 = 0.8;

/// Probes at one rate before a miss there ends the ladder or narrows the bisection: a single
/// missed probe is probed again, and the rate fails only when most of its probes missed.
pub const MISSES_TO_FAIL: usize = 2;

/// Probes a rate needs before its misses make it fail under `settings`: [`MISSES_TO_FAIL`], or
/// one when `--confirmations 1` asks for no confirmation.
fn misses_to_fail(settings: &Settings) -> usize {
    MISSES_TO_FAIL.min(settings.confirmations as usize)
}

/// Requests one probe at `rate_rps` measures: enough that `tail_samples` requests lie above the
/// p99 (`tail_samples / (1 − 0.99)`), and at least `probe_seconds` of the schedule.
pub fn probe_requests(settings: &Settings, rate_rps: f64) -> u64 {
    let tail = (settings.tail_samples as f64 / (1.0 - SLO_QUANTILE)).ceil();
    let timed = (rate_rps * settings.probe_seconds).ceil();
    tail.max(timed).max(1.0) as u64
}

/// Whether a probe's figures meet the SLO: the parts it missed.
fn missed(slo: &Slo, p: &Probe) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(e) = &p.error {
        out.push(format!("the cell could not run: {e}"));
        return out;
    }
    let p99_ms = p.latency_p99_us as f64 / 1000.0;
    if p99_ms > slo.latency_p99_max_ms {
        out.push(format!(
            "latency p99 {p99_ms:.3} ms > {} ms",
            slo.latency_p99_max_ms
        ));
    }
    if p.success_rate * 100.0 < slo.success_min_pct {
        out.push(format!(
            "success {:.3} % < {} %",
            p.success_rate * 100.0,
            slo.success_min_pct
        ));
    }
    if let (Some(limit), Some(lag)) = (slo.pacing_lag_p99_max_us, p.pacing_lag_p99_us) {
        if lag > limit {
            out.push(format!("pacing lag p99 {lag} µs > {limit} µs"));
        }
    }
    out
}

/// What kept the load generator from offering the rate (empty: the probe measured the server).
/// `unloaded_latency_us`: the p50 at the search's lowest passing probe (else this probe's
/// minimum), for Little's law; `client_cores`: the cores the load generator's threads may use.
fn instrument_limits(
    slo: &Slo,
    p: &Probe,
    concurrency: u32,
    unloaded_latency_us: f64,
    client_cores: usize,
) -> Vec<String> {
    let mut out = Vec::new();
    let lag_limit = slo
        .pacing_lag_p99_max_us
        .unwrap_or(DEFAULT_PACING_LAG_LIMIT_US);
    if let Some(lag) = p.pacing_lag_p99_us.filter(|l| *l > lag_limit) {
        out.push(format!(
            "pacing lag p99 {lag} µs > {lag_limit} µs: free workers sent late (the load generator's timer or CPU fell behind)"
        ));
    }
    if let Some(cpu) = p.client_cpu_pct_mean {
        if load::sampler::client_saturated(cpu, client_cores) {
            out.push(format!(
                "client CPU {cpu:.0} % of {client_cores} cores: the load generator was saturated"
            ));
        }
    }
    if p.sent > 0 && p.late as f64 > LATE_SHARE * p.sent as f64 {
        let needed = p.offered_rps * unloaded_latency_us / 1e6;
        if needed >= WORKERS_NEEDED_SHARE * f64::from(concurrency) {
            out.push(format!(
                "{:.1} % of requests late: {concurrency} workers are too few for {} req/s at the unloaded latency ({needed:.0} needed by Little's law); raise --concurrency",
                100.0 * p.late as f64 / p.sent as f64,
                p.offered_rps
            ));
        }
    }
    out
}

/// The probe of a finished cell, judged.
fn probe_of(result: &CellResult, step: &str) -> Probe {
    let row = row_of::finished(result);
    Probe {
        cell_key: row.cell_key.clone(),
        step: step.to_string(),
        offered_rps: row.rate_rps.unwrap_or_default(),
        achieved_rps: row.throughput_rps,
        sent: row.sent + row.warmup_sent,
        elapsed_s: row.elapsed_s,
        latency_p99_us: row.latency_p99_us,
        success_rate: row.success_rate,
        late: row.late,
        pacing_lag_p99_us: row.pacing_lag_p99_us,
        client_cpu_pct_mean: row.client_cpu_pct_mean,
        slo_met: false,
        missed: Vec::new(),
        instrument_limits: Vec::new(),
        error: row.error.clone().filter(|e| !e.is_empty()),
    }
}

/// One search's coordinates and its probes so far.
struct Searching {
    variant: String,
    stack: String,
    regime: Regime,
    concurrency: u32,
    settings: Arc<Experiment>,
    probes: Vec<Probe>,
    outcome: Option<Outcome>,
    started: Option<Instant>,
    seconds: f64,
    /// Probes a rate needs before its misses make it fail ([`misses_to_fail`]).
    misses_to_fail: usize,
}

/// The next step of a search from its probes: a rate to probe, or its outcome.
enum Next {
    Probe(f64, &'static str),
    Done(Outcome),
}

impl Searching {
    /// The rates probed so far, each once, in increasing order.
    fn rates(&self) -> Vec<f64> {
        let mut rates: Vec<f64> = self.probes.iter().map(|p| p.offered_rps).collect();
        rates.sort_by(f64::total_cmp);
        rates.dedup();
        rates
    }

    /// Probes at `rate` that met and that missed the SLO.
    fn met_and_missed_at(&self, rate: f64) -> (usize, usize) {
        self.probes
            .iter()
            .filter(|p| p.offered_rps == rate)
            .fold((0, 0), |(met, missed), p| {
                if p.slo_met {
                    (met + 1, missed)
                } else {
                    (met, missed + 1)
                }
            })
    }

    /// A rate's verdict: the majority of its probes; a miss counts only once
    /// `misses_to_fail` probes are in, so one stall of a shared machine does not cap the
    /// search (`None`: undecided, probe again).
    fn verdict_at(&self, rate: f64) -> Option<bool> {
        let (met, missed) = self.met_and_missed_at(rate);
        if met > missed {
            Some(true)
        } else if missed > met && met + missed >= self.misses_to_fail {
            Some(false)
        } else {
            None
        }
    }

    /// The highest passing rate below the lowest failing one, and that failing rate.
    fn rates_passing_and_failing(&self) -> (Option<f64>, Option<f64>) {
        let rates = self.rates();
        let failing = rates
            .iter()
            .copied()
            .find(|r| self.verdict_at(*r) == Some(false));
        let passing = rates
            .iter()
            .copied()
            .filter(|r| failing.is_none_or(|f| *r < f))
            .filter(|r| self.verdict_at(*r) == Some(true))
            .reduce(f64::max);
        (passing, failing)
    }

    fn probes_at(&self, rate: f64) -> usize {
        self.probes.iter().filter(|p| p.offered_rps == rate).count()
    }

    fn instrument_at(&self, rate: f64) -> bool {
        self.probes
            .iter()
            .any(|p| p.offered_rps == rate && !p.slo_met && !p.instrument_limits.is_empty())
    }

    fn next(&self, s: &Settings) -> Next {
        // A rate with a single miss, or as many misses as passes, is probed again first.
        if let Some(rate) = self
            .rates()
            .into_iter()
            .find(|r| self.verdict_at(*r).is_none())
        {
            return Next::Probe(rate, "recheck");
        }
        let (lo, hi) = self.rates_passing_and_failing();
        let confirm = |rate: f64, done: Outcome| {
            if self.probes_at(rate) < s.confirmations as usize {
                Next::Probe(rate, "confirm")
            } else {
                Next::Done(done)
            }
        };
        match (lo, hi) {
            (None, None) => Next::Probe(s.start_rps, "ladder"),
            (None, Some(f)) => Next::Done(if self.instrument_at(f) {
                Outcome::InstrumentLimit
            } else {
                Outcome::BelowStart
            }),
            (Some(p), None) => {
                let next = (p * s.factor).min(s.ceiling_rps).round();
                // At the ceiling, or a step that rounds back to `p` (a fractional ceiling, a
                // factor close to 1): nothing higher to probe.
                if p >= s.ceiling_rps || next <= p {
                    confirm(p, Outcome::AtCeiling)
                } else {
                    Next::Probe(next, "ladder")
                }
            }
            (Some(p), Some(f)) => {
                let mid = (p * f).sqrt().round();
                if f > p * (1.0 + s.resolution_pct / 100.0) && mid > p && mid < f {
                    Next::Probe(mid, "bisect")
                } else if self.instrument_at(f) {
                    confirm(p, Outcome::InstrumentLimit)
                } else {
                    confirm(p, Outcome::Found)
                }
            }
        }
    }

    /// The search's record, with `outcome`.
    fn record(&self, slo: &Slo, outcome: Outcome) -> Search {
        let (lo, hi) = self.rates_passing_and_failing();
        let key_at = |rate: Option<f64>, met: bool| {
            rate.and_then(|r| {
                self.probes
                    .iter()
                    .rev()
                    .find(|p| p.offered_rps == r && p.slo_met == met)
                    .map(|p| p.cell_key.clone())
            })
        };
        let limited_by = hi.map(|f| {
            if self.instrument_at(f) {
                "instrument"
            } else {
                "server"
            }
            .to_string()
        });
        let slo_text = format!(
            "p99 ≤ {} ms, success ≥ {} %{}",
            slo.latency_p99_max_ms,
            slo.success_min_pct,
            slo.pacing_lag_p99_max_us
                .map(|l| format!(", pacing lag p99 ≤ {l} µs"))
                .unwrap_or_default()
        );
        let rate = |r: Option<f64>| r.map_or("—".to_string(), |r| format!("{r} req/s"));
        let tally = |r: Option<f64>| {
            let (met, missed) = r.map_or((0, 0), |r| self.met_and_missed_at(r));
            format!("met in {met} of {} probes", met + missed)
        };
        let note = match outcome {
            Outcome::Found => format!(
                "the server meets {slo_text} at {} ({}) and not at {} ({}): its capacity lies between",
                rate(lo),
                tally(lo),
                rate(hi),
                tally(hi)
            ),
            Outcome::InstrumentLimit => format!(
                "the instrument reached its limit at {}, not the server: the server met {slo_text} up to {}, so its capacity is at least that; to go further, spread the load over agents (the hosts executor, docs/hosts-and-kubernetes.md)",
                rate(hi),
                rate(lo)
            ),
            Outcome::BelowStart => format!(
                "even the start rate {} misses {slo_text}: lower --start-rps",
                rate(hi)
            ),
            Outcome::AtCeiling => format!(
                "{slo_text} holds up to the ceiling {}: raise --ceiling-rps",
                rate(lo)
            ),
            Outcome::BudgetExhausted => format!(
                "the budget ran out before the bracket was narrow and confirmed: between {} (passing) and {} (failing)",
                rate(lo),
                rate(hi)
            ),
            Outcome::Interrupted => "interrupted".to_string(),
        };
        Search {
            variant: self.variant.clone(),
            stack: self.stack.clone(),
            regime: self.regime.to_string(),
            concurrency: self.concurrency,
            slo: slo.clone(),
            outcome,
            capacity_rps: lo,
            interval_rps: [lo, hi],
            bracket: [key_at(lo, true), key_at(hi, false)],
            limited_by,
            note,
            requests_spent: self.probes.iter().map(|p| p.sent).sum(),
            seconds_spent: self.seconds,
            probes: self.probes.clone(),
        }
    }
}

/// Every search of a capacity run and the budget they share: the run's cell source.
pub struct Capacity {
    settings: Settings,
    slo: Slo,
    searches: Vec<Searching>,
    current: usize,
    /// The probe issued last: (search index, its cell key, its step).
    pending: Option<(usize, String, &'static str)>,
    /// How many results the source has seen.
    seen: usize,
    requests_spent: u64,
    started: Instant,
    budget_stop: bool,
    client_cores: usize,
    issued: std::collections::HashMap<String, u32>,
}

impl Capacity {
    /// The searches of `exp`'s plan (stress groups: variant, regime, level, stack), none run.
    pub fn new(exp: &Experiment, settings: Settings, slo: Slo, client_cores: usize) -> Self {
        let mut searches = Vec::new();
        for (variant, v) in exp.variant_experiments() {
            let v = Arc::new(v);
            for regime in &v.regimes {
                for concurrency in &v.concurrency {
                    for stack in &v.stacks {
                        searches.push(Searching {
                            variant: variant.clone(),
                            stack: stack.clone(),
                            regime: *regime,
                            concurrency: *concurrency,
                            settings: v.clone(),
                            probes: Vec::new(),
                            outcome: None,
                            started: None,
                            seconds: 0.0,
                            misses_to_fail: misses_to_fail(&settings),
                        });
                    }
                }
            }
        }
        Capacity {
            settings,
            slo,
            searches,
            current: 0,
            pending: None,
            seen: 0,
            requests_spent: 0,
            started: Instant::now(),
            budget_stop: false,
            client_cores,
            issued: Default::default(),
        }
    }

    /// Takes in the result of the probe issued last.
    fn ingest(&mut self, finished: &[CellResult]) {
        let new = &finished[self.seen.min(finished.len())..];
        self.seen = finished.len();
        let Some((index, key, step)) = self.pending.take() else {
            return;
        };
        let Some(result) = new.iter().find(|r| r.cell.key() == key) else {
            return;
        };
        let mut probe = probe_of(result, step);
        self.requests_spent += probe.sent;
        let search = &mut self.searches[index];
        if let Some(t) = search.started {
            search.seconds = t.elapsed().as_secs_f64();
        }
        probe.missed = missed(&self.slo, &probe);
        probe.slo_met = probe.missed.is_empty();
        // Little's law's unloaded latency: the lowest passing probe's p50, else this one's minimum.
        let unloaded = search
            .probes
            .iter()
            .filter(|p| p.slo_met)
            .min_by(|a, b| a.offered_rps.total_cmp(&b.offered_rps))
            .and_then(|p| {
                finished
                    .iter()
                    .find(|r| r.cell.key() == p.cell_key)
                    .map(|r| row_of::finished(r).latency_p50_us as f64)
            })
            .unwrap_or_else(|| row_of::finished(result).latency_min_us as f64);
        probe.instrument_limits = instrument_limits(
            &self.slo,
            &probe,
            search.concurrency,
            unloaded,
            self.client_cores,
        );
        search.probes.push(probe);
    }

    /// The cell of a probe at `rate` for search `index`: its requests by the probe rule, its
    /// time bounded by what is left of the time budget.
    fn probe_cell(&mut self, index: usize, rate: f64) -> Cell {
        let search = &self.searches[index];
        let requests = probe_requests(&self.settings, rate);
        let left_s = (self.settings.budget_seconds - self.started.elapsed().as_secs_f64()).max(1.0);
        let exp = Experiment {
            requests_reuse: requests,
            requests_new_conn: requests,
            duration_seconds: None,
            rate: None,
            rates: None,
            max_cell_seconds: search
                .settings
                .max_cell_seconds
                .min(left_s.ceil() as u64)
                .max(1),
            ..(*search.settings).clone()
        };
        let key = format!(
            "{}/{}/{}/{}",
            search.variant, search.stack, search.regime, rate
        );
        let repetition = {
            let n = self.issued.entry(key).or_insert(0);
            *n += 1;
            *n
        };
        Cell {
            variant: search.variant.clone(),
            stage: Stage::Stress,
            stack: search.stack.clone(),
            regime: search.regime,
            concurrency: search.concurrency,
            repetition,
            swept_rate_rps: Some(rate),
            settings: Arc::new(exp),
        }
    }

    /// Whether a probe of `requests` (warm-up included) fits what is left of the budget.
    fn fits(&self, cell: &Cell) -> bool {
        let requests = cell.requests() + cell.warmup_requests();
        self.requests_spent + requests <= self.settings.budget_requests
            && self.started.elapsed().as_secs_f64() < self.settings.budget_seconds
    }

    /// The capacity record: each search's outcome (`interrupted` when the run was).
    pub fn record(&self, interrupted: bool) -> Record {
        let searches = self
            .searches
            .iter()
            .map(|s| {
                let outcome = match s.outcome {
                    Some(o) => o,
                    None if interrupted => Outcome::Interrupted,
                    None => Outcome::BudgetExhausted,
                };
                s.record(&self.slo, outcome)
            })
            .collect();
        Record {
            settings: self.settings.clone(),
            searches,
        }
    }

    /// The probes one search is expected to take (for progress): the ladder, the bisection,
    /// the confirmations and the rechecks of missed probes.
    fn probes_per_search(&self) -> usize {
        let s = &self.settings;
        let ladder = ((s.ceiling_rps / s.start_rps).ln() / s.factor.ln()).ceil() as usize + 1;
        let bisect = ((s.factor.ln() / (1.0 + s.resolution_pct / 100.0).ln())
            .log2()
            .ceil() as usize)
            + 1;
        // A missed probe is probed again: the ladder's top and about half the bisection.
        let rechecks = 1 + bisect / 2;
        ladder + bisect + s.confirmations as usize + rechecks
    }
}

/// The run's cell source over a shared [`Capacity`], which the command reads after the run.
pub struct Source(pub Arc<Mutex<Capacity>>);

impl crate::run::CellSource for Source {
    fn next_cell(&mut self, finished: &[CellResult]) -> Option<Cell> {
        let mut c = self.0.lock().expect("not poisoned");
        c.ingest(finished);
        while c.current < c.searches.len() {
            if c.budget_stop {
                return None;
            }
            let index = c.current;
            match c.searches[index].next(&c.settings) {
                Next::Done(outcome) => {
                    c.searches[index].outcome = Some(outcome);
                    c.current += 1;
                }
                Next::Probe(rate, step) => {
                    let cell = c.probe_cell(index, rate);
                    if !c.fits(&cell) {
                        c.budget_stop = true;
                        return None;
                    }
                    let search = &mut c.searches[index];
                    search.started.get_or_insert_with(Instant::now);
                    c.pending = Some((index, cell.key(), step));
                    return Some(cell);
                }
            }
        }
        None
    }

    fn expected(&self) -> usize {
        let c = self.0.lock().expect("not poisoned");
        c.searches.len() * c.probes_per_search()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Settings {
        Settings {
            start_rps: 100.0,
            ceiling_rps: 10_000.0,
            factor: 2.0,
            resolution_pct: 5.0,
            confirmations: 2,
            tail_samples: 50,
            probe_seconds: 2.0,
            budget_requests: 1_000_000,
            budget_seconds: 600.0,
        }
    }

    fn slo() -> Slo {
        Slo {
            latency_p99_max_ms: 10.0,
            success_min_pct: 99.0,
            pacing_lag_p99_max_us: None,
        }
    }

    /// A search against a simulated server whose capacity is `capacity` req/s: a probe passes
    /// below it; `instrument_above` makes probes above that rate fail as the instrument's.
    fn simulate(capacity: f64, instrument_above: f64) -> Search {
        simulate_with(instrument_above, |rate, _| rate <= capacity)
    }

    /// As [`simulate`], with `meets(rate, n)` saying whether the n-th probe (from 0) at a rate
    /// meets the SLO below the instrument's limit: noise can be injected.
    fn simulate_with(instrument_above: f64, meets: impl Fn(f64, usize) -> bool) -> Search {
        search_with(settings(), instrument_above, meets)
    }

    /// As [`simulate_with`], with the search's settings `s`.
    fn search_with(
        s: Settings,
        instrument_above: f64,
        meets: impl Fn(f64, usize) -> bool,
    ) -> Search {
        let mut search = Searching {
            variant: "default".into(),
            stack: "h1".into(),
            regime: Regime::Reuse,
            concurrency: 100,
            settings: Arc::new(Experiment::default()),
            probes: Vec::new(),
            outcome: None,
            started: None,
            seconds: 0.0,
            misses_to_fail: misses_to_fail(&s),
        };
        for _ in 0..100 {
            match search.next(&s) {
                Next::Done(o) => return search.record(&slo(), o),
                Next::Probe(rate, step) => {
                    let n = search.probes_at(rate);
                    let met = meets(rate, n) && rate <= instrument_above;
                    search.probes.push(Probe {
                        cell_key: format!("h1/reuse/c100/q{rate}/r{}", n + 1),
                        step: step.into(),
                        offered_rps: rate,
                        achieved_rps: rate,
                        sent: probe_requests(&s, rate),
                        elapsed_s: 2.0,
                        latency_p99_us: if met { 1000 } else { 50_000 },
                        success_rate: 1.0,
                        late: 0,
                        pacing_lag_p99_us: Some(if rate > instrument_above { 5000 } else { 10 }),
                        client_cpu_pct_mean: None,
                        slo_met: met,
                        missed: Vec::new(),
                        instrument_limits: if rate > instrument_above {
                            vec!["pacing lag".into()]
                        } else {
                            Vec::new()
                        },
                        error: None,
                    });
                }
            }
        }
        panic!("the search did not end");
    }

    #[test]
    fn the_search_brackets_a_known_capacity_to_the_resolution_and_confirms_it() {
        for capacity in [150.0, 777.0, 3000.0, 9_999.0] {
            let r = simulate(capacity, f64::MAX);
            assert_eq!(r.outcome, Outcome::Found, "{capacity}: {}", r.note);
            let [lo, hi] = r.interval_rps;
            let (lo, hi) = (lo.unwrap(), hi.unwrap());
            assert!(lo <= capacity && capacity < hi, "{capacity}: [{lo}, {hi}]");
            assert!(hi <= lo * 1.05 + 1.0, "{capacity}: [{lo}, {hi}] too wide");
            let at_lo = r.probes.iter().filter(|p| p.offered_rps == lo).count();
            assert!(at_lo >= 2, "confirmed: {at_lo} probes at {lo}");
            assert_eq!(r.limited_by.as_deref(), Some("server"));
            assert!(r.bracket[0].is_some() && r.bracket[1].is_some());
        }
    }

    /// The steps of a search's probes at `rate`, in order.
    fn steps_at(search: &Search, rate: f64) -> Vec<&str> {
        search
            .probes
            .iter()
            .filter(|p| p.offered_rps == rate)
            .map(|p| p.step.as_str())
            .collect()
    }

    #[test]
    fn one_missed_probe_below_the_capacity_does_not_cap_the_search() {
        // The first probe at 400 req/s misses (a stall of the machine); the capacity is 3000.
        let r = simulate_with(f64::MAX, |rate, n| {
            rate <= 3000.0 && !(rate == 400.0 && n == 0)
        });
        assert_eq!(r.outcome, Outcome::Found, "{}", r.note);
        let [lo, hi] = r.interval_rps;
        assert!(
            lo.unwrap() <= 3000.0 && 3000.0 < hi.unwrap(),
            "{:?}",
            r.interval_rps
        );
        // One miss and one pass are a tie: a third probe decides.
        assert_eq!(steps_at(&r, 400.0), ["ladder", "recheck", "recheck"]);
        // A rate that misses twice fails: the ladder stops there.
        let r = simulate_with(f64::MAX, |rate, _| rate < 400.0);
        assert_eq!(r.interval_rps[1], Some(400.0), "{}", r.note);
        assert_eq!(steps_at(&r, 400.0), ["ladder", "recheck"]);
        // A miss at the passing end during confirmation: the majority decides (2 of 3 met).
        let r = simulate_with(f64::MAX, |rate, n| {
            rate <= 3000.0 && !(rate > 2900.0 && n == 1)
        });
        assert_eq!(r.outcome, Outcome::Found, "{}", r.note);
        let lo = r.capacity_rps.unwrap();
        assert!(lo > 2900.0, "{}", r.note);
        let at_lo = r.probes.iter().filter(|p| p.offered_rps == lo).count();
        assert_eq!(at_lo, 3, "{}", r.note);
        assert!(r.note.contains("met in 2 of 3 probes"), "{}", r.note);
        // With --confirmations 1, one miss fails a rate, as before the majority rule.
        let once = Settings {
            confirmations: 1,
            ..settings()
        };
        let r = search_with(once, f64::MAX, |rate, n| {
            rate <= 3000.0 && !(rate == 400.0 && n == 0)
        });
        assert_eq!(r.interval_rps[1], Some(400.0), "{}", r.note);
        assert_eq!(
            r.probes.iter().filter(|p| p.offered_rps == 400.0).count(),
            1
        );
    }

    #[test]
    fn the_ends_and_the_instrument_are_named() {
        assert_eq!(simulate(50.0, f64::MAX).outcome, Outcome::BelowStart);
        let top = simulate(f64::MAX, f64::MAX);
        assert_eq!(top.outcome, Outcome::AtCeiling);
        assert_eq!(top.capacity_rps, Some(10_000.0));
        // The server would carry 5000, the load generator stops at 1000: the instrument's limit.
        let r = simulate(5000.0, 1000.0);
        assert_eq!(r.outcome, Outcome::InstrumentLimit, "{}", r.note);
        assert_eq!(r.limited_by.as_deref(), Some("instrument"));
        assert!(r.capacity_rps.unwrap() <= 1000.0);
        assert!(r.note.contains("agents"), "{}", r.note);
        // A ceiling the ladder's rounding cannot pass: at the ceiling, not probed forever.
        let fractional = Settings {
            ceiling_rps: 150.4,
            ..settings()
        };
        let r = search_with(fractional, f64::MAX, |_, _| true);
        assert_eq!(r.outcome, Outcome::AtCeiling, "{}", r.note);
        assert_eq!(r.capacity_rps, Some(150.0));
        assert!(r.probes.len() <= 3, "{} probes", r.probes.len());
    }

    #[test]
    fn the_probe_rule_covers_the_tail_and_the_time() {
        let s = settings();
        // 50 requests above the p99: 5000; at 10k req/s, 2 s of schedule: 20000.
        assert_eq!(probe_requests(&s, 100.0), 5000);
        assert_eq!(probe_requests(&s, 10_000.0), 20_000);
    }

    #[test]
    fn late_requests_are_the_instruments_only_when_the_workers_were_too_few() {
        let probe = Probe {
            cell_key: String::new(),
            step: "ladder".into(),
            offered_rps: 1000.0,
            achieved_rps: 800.0,
            sent: 1000,
            elapsed_s: 1.0,
            latency_p99_us: 100_000,
            success_rate: 1.0,
            late: 200,
            pacing_lag_p99_us: Some(50),
            client_cpu_pct_mean: Some(20.0),
            slo_met: false,
            missed: Vec::new(),
            instrument_limits: Vec::new(),
            error: None,
        };
        // 4 workers at 20 ms unloaded: 20 needed for 1000 req/s: the workers were too few.
        assert_eq!(instrument_limits(&slo(), &probe, 4, 20_000.0, 2).len(), 1);
        // 100 workers at 1 ms: 1 needed; the server held them: not the instrument.
        assert!(instrument_limits(&slo(), &probe, 100, 1_000.0, 2).is_empty());
        // Client CPU saturated, and pacing lag over the bound.
        let busy = Probe {
            client_cpu_pct_mean: Some(190.0),
            pacing_lag_p99_us: Some(5_000),
            late: 0,
            ..probe
        };
        assert_eq!(instrument_limits(&slo(), &busy, 100, 1_000.0, 2).len(), 2);
    }
}
