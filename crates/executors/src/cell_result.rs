//! What one cell measured: the executors' sites produce a [`CellResult`], the runner's cell
//! loop completes it and its output writes it (`cells.csv`, `requests.csv`, the logs).

use experiment::plan::Cell;
use load::measurements::Measurements;
use load::sampler::ResourceSummary;

/// Everything measured for one cell.
pub struct CellResult {
    pub cell: Cell,
    pub measured: Measurements,
    pub elapsed_s: f64,
    /// Wall-clock start of the measured phase (seconds since the Unix epoch); `None` when
    /// the cell did not run. With `elapsed_s` it is the window the `.hlog` file records and
    /// `runner merge` unites.
    pub measured_start_unix_s: Option<f64>,
    /// Load generators whose measurements this result adds up: 1 for a cell this runner ran,
    /// the sum of the inputs' for a cell of `runner merge`.
    pub agents: u32,
    pub cut_short: bool,
    /// Whole request budgets the measured phase sent to meet `min_cell_seconds` (1 without a
    /// repeat); `None` for a time-bound cell, a cell that did not run, and in runs from before.
    pub budget_repeats: Option<u64>,
    /// The phase sent more than one request budget: whole budgets (`budget_repeats` > 1), or,
    /// in runs from before `budget_repeats`, past its budget by time.
    pub extended: bool,
    /// The window in which every worker was active (no ramp-up, no drain).
    pub steady: Option<load::measurements::SteadyWindow>,
    pub warmup: Measurements,
    pub server: ResourceSummary,
    pub client: ResourceSummary,
    /// The server's exit status if it died during the cell.
    pub server_exit: Option<String>,
    /// Why the cell could not run at all (server failed to start, etc.).
    pub error: Option<String>,
    /// The load stopped because the cell's first requests all failed alike (why): the run
    /// stops after this cell.
    pub hopeless: Option<String>,
    /// With network emulation: packets the emulator delayed and dropped.
    pub emulated_packets: Option<(u64, u64)>,
    /// Load average and steal time around the cell (`None` when the cell did not run).
    pub environment: Option<crate::measure::environment::CellEnvironment>,
    /// With agents: what each measured (their histograms are already merged above).
    pub per_agent: Vec<load::measurements::AgentOutcome>,
    /// On an edge or sidecar path: what its proxies used and what they were.
    pub proxies: Option<crate::measure::proxies::ProxyReadings>,
}

impl CellResult {
    /// `cell` with nothing measured (one load generator, cut short): the start of a cell that
    /// could not run, or of one completed from elsewhere (`runner merge`).
    pub fn unmeasured(cell: Cell) -> Self {
        CellResult {
            cell,
            measured: Measurements::default(),
            elapsed_s: 0.0,
            measured_start_unix_s: None,
            agents: 1,
            cut_short: true,
            extended: false,
            budget_repeats: None,
            steady: None,
            warmup: Measurements::default(),
            server: ResourceSummary::default(),
            client: ResourceSummary::default(),
            server_exit: None,
            error: None,
            hopeless: None,
            emulated_packets: None,
            environment: None,
            per_agent: Vec::new(),
            proxies: None,
        }
    }

    pub fn success_rate(&self) -> f64 {
        if self.measured.sent == 0 {
            0.0
        } else {
            self.measured.ok as f64 / self.measured.sent as f64
        }
    }

    /// Successes per second inside the steady window; `None` without one (fewer requests
    /// than workers, or a cell that did not run).
    pub fn throughput_steady_rps(&self) -> Option<f64> {
        self.steady
            .filter(|w| w.elapsed_s > 0.0)
            .map(|w| w.ok as f64 / w.elapsed_s)
    }

    pub fn throughput_rps(&self) -> f64 {
        if self.elapsed_s > 0.0 {
            self.measured.ok as f64 / self.elapsed_s
        } else {
            0.0
        }
    }

    /// The bulk workload's goodput: application bytes of the objects moved ÷ elapsed
    /// (`goodput_bytes_per_s`); `None` for the item workload or a cell that did not run.
    pub fn goodput_bytes_per_s(&self) -> Option<f64> {
        (self.cell.settings.object.is_some() && self.elapsed_s > 0.0)
            .then(|| self.measured.body_bytes as f64 / self.elapsed_s)
    }
}
