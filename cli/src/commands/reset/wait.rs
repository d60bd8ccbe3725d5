//! Following a request until it ends: `flow reset --wait`, `flow reset --dry-run`, `flow reset undo
//! --wait` (until it is finished) and `flow rebuild --wait` (until it is finished and caught up).
//!
//! Progress goes to stderr through the command's [`Reporter`] as it changes; the final status is
//! the command's result, for stdout. Each API call is bounded and a transient failure tried again
//! (`super::find::Poller`).

use std::time::{Duration, Instant};

use super::find::{Poller, Scope, Stop, flows, search};
use super::report::{self, Rates, Report};
use crate::cluster::Cluster;
use crate::exit::{self, Failure, Output};
use crate::output::Format;
use crate::reporter::Reporter;

/// Until when a command follows a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Until {
    /// The request is finished (`flow reset --wait`, `--dry-run`, `flow reset undo --wait`).
    Finished,
    /// The request is finished and every group it reset has caught up (`flow rebuild --wait`),
    /// with each group's burn-down (records left, rate, time to zero) on stderr.
    CaughtUp,
}

/// The request a command waits for, and how.
#[derive(Clone, Copy, Debug)]
pub struct Target<'a> {
    /// Namespace of the AnkkaFlow.
    pub ns: &'a str,
    /// The AnkkaFlow's name.
    pub pipeline: &'a str,
    /// The request id.
    pub id: &'a str,
    /// `--timeout`; none: as long as it takes.
    pub timeout: Option<Duration>,
    /// `-o`, for the final status.
    pub format: Format,
    /// Until when.
    pub until: Until,
}

impl<'a> Target<'a> {
    /// Request `id` of `pipeline` in `ns`, followed until it is finished.
    pub fn new(ns: &'a str, pipeline: &'a str, id: &'a str, timeout: Option<Duration>, format: Format) -> Self {
        Target { ns, pipeline, id, timeout, format, until: Until::Finished }
    }
}

/// How long a request may stay `Requested` (no operator took it up) before the wait says what that
/// usually means, once: no operator runs, or none watches the namespace.
const NOT_TAKEN_UP_HINT: Duration = Duration::from_secs(15);

/// What the wait says, once, of a request still `Requested` after [`NOT_TAKEN_UP_HINT`].
fn not_taken_up(id: &str, ns: &str) -> String {
    format!(
        "reset {id} is still Requested after {}: no operator has taken it up; is the operator running, and does it \
         watch namespace '{ns}' (its FLOW_WATCH_NAMESPACE, the chart's watchNamespaces)? See \
         \"A reset is taken up late\" in the troubleshooting guide",
        humantime::format_duration(NOT_TAKEN_UP_HINT)
    )
}

/// Waits until the request of `t` ends as `t.until` says, reading it every second and saying its
/// progress on `out` (stderr) whenever it changes, then renders its status in `t.format` with
/// `render`, as the command's result.
///
/// # Errors
/// The cluster cannot be read (a final failure), or the request disappears; and, with its own exit
/// code, a request that was refused or superseded, one done with groups that failed, and the
/// timeout running out (which names the catch-up when a rebuild itself is done); `render`'s.
pub async fn wait(
    cluster: &Cluster,
    out: &Reporter,
    t: Target<'_>,
    render: &dyn Fn(&Report, Format) -> Result<String, Failure>,
) -> Result<Output, Failure> {
    let Target { ns, pipeline, id, timeout, format, until } = t;
    let scope = Scope::Namespace(ns.to_string());
    let deadline = timeout.map(|t| Instant::now() + t);
    let mut poller = Poller::retrying(cluster, deadline, out);
    let (mut shown, mut shown_burn_down) = (String::new(), String::new());
    let mut last: Option<(Report, Instant)> = None;
    let mut rates = Rates::new();
    let (started, mut hinted) = (Instant::now(), false);
    loop {
        let found = match poller.call(|| flows(cluster, &scope, Some(pipeline))).await {
            Ok(found) => found,
            Err(Stop::Deadline) => {
                let last = last.as_ref().map(|(r, _)| r);
                return Err(timed_out(last, (ns, pipeline, id), (timeout, format), until, render)?);
            }
            Err(stop) => return Err(stop.failure(cluster)),
        };
        let r = search(&found, &scope, Some(pipeline), id)?;
        let now = Instant::now();
        if let Some((prev, at)) = &last
            && prev != &r
        {
            report::update_rates(&mut rates, prev, *at, &r, now);
        }
        // The progress line when it changes, then (for a rebuild) each change of the burn-down.
        let line = r.progress();
        if line != shown {
            out.say(&line);
            shown = line;
        }
        if !hinted && r.phase == flow_core::resource::RequestPhase::Requested && started.elapsed() >= NOT_TAKEN_UP_HINT
        {
            out.say(&not_taken_up(id, ns));
            hinted = true;
        }
        if until == Until::CaughtUp {
            let burn_down = report::catch_up_lines(&r, &rates);
            if burn_down != shown_burn_down {
                burn_down.lines().for_each(|l| out.say(l));
                shown_burn_down = burn_down;
            }
        }
        if r.finished() {
            if let Some((code, problem)) = r.ending(ns) {
                return Err(Failure::with_code(code, render(&r, format)?, problem));
            }
            if until == Until::Finished || r.caught_up() {
                return Ok(Output::from(render(&r, format)?));
            }
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(timed_out(Some(&r), (ns, pipeline, id), (timeout, format), until, render)?);
        }
        if last.as_ref().is_none_or(|(l, _)| l != &r) {
            last = Some((r, now));
        }
        let pause = deadline.map_or(Duration::from_secs(1), |d| {
            d.saturating_duration_since(Instant::now()).min(Duration::from_secs(1))
        });
        tokio::time::sleep(pause).await;
    }
}

/// The failure of a wait whose `timeout` ran out, `last` the request as last read (none when the
/// API server never answered in time): its status on stdout, exit code [`exit::TIMED_OUT`].
///
/// # Errors
/// `render`'s.
fn timed_out(
    last: Option<&Report>,
    (ns, pipeline, id): (&str, &str, &str),
    (timeout, format): (Option<Duration>, Format),
    until: Until,
    render: &dyn Fn(&Report, Format) -> Result<String, Failure>,
) -> Result<Failure, Failure> {
    let waited = match (until, last) {
        (Until::Finished, _) => format!("for reset {id}"),
        (Until::CaughtUp, Some(r)) if r.finished() => format!("for the catch-up of rebuild {id}"),
        (Until::CaughtUp, _) => format!("for rebuild {id}"),
    };
    let phase = last.map_or_else(|| "the API server did not answer in time".to_string(), |r| r.phase.to_string());
    let stdout = match last {
        Some(r) => render(r, format)?,
        None => String::new(),
    };
    Ok(Failure::with_code(
        exit::TIMED_OUT,
        stdout,
        format!(
            "timed out after {} waiting {waited} of '{pipeline}' ({phase}); the request stays and the operator \
             carries it on: flow reset status {id} -n {ns} --watch",
            humantime::format_duration(timeout.unwrap_or_default()),
        ),
    ))
}
