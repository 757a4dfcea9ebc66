//! `wattline run -- CMD ARGS…`: launches a command, measures it, forwards signals to
//! it, prints the energy/cost report at the end, and exits with the command's code.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use wattline::config::{MeasurementScopeSetting, ResourceMetricsConfig};
use wattline::gpu::visible_devices::gpu_selection_for_command;

use super::report_output::ReportFormat;
use super::status::{StatusSink, status_line};
use super::{ScopeArgument, cli_resource_metrics, load_configuration};

/// Arguments of `wattline run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// A plugins.toml (or a directory holding one) to use instead of the user's.
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Milliseconds between polls (default: the configuration's, 5000).
    #[arg(long, value_name = "MS")]
    pub interval: Option<u64>,
    /// Write ATOF JSON lines into this directory.
    #[arg(long, value_name = "DIR")]
    pub atof: Option<PathBuf>,
    /// Send OTLP metrics to this collector: gRPC (`http://host:4317`), or HTTP/protobuf
    /// when the URL ends in `/v1/metrics`.
    #[arg(long, value_name = "URL")]
    pub otlp: Option<String>,
    /// Also send a span per Agent scope, with its energy, to the OTLP collector(s)
    /// (the `opentelemetry` component's `spans`); needs `--otlp` or a configured one.
    #[arg(long)]
    pub otlp_spans: bool,
    /// The report's format.
    #[arg(long, value_enum, default_value = "table")]
    pub report: ReportFormat,
    /// Also append the report as a CSV row to this file (header written when new).
    #[arg(long, value_name = "FILE")]
    pub csv_file: Option<PathBuf>,
    /// Also write the report as one self-contained HTML page with charts to this file.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Write the report (in `--report`'s format) to this file instead of stdout or
    /// stderr, apart from the command's own output.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Exit 3 instead of the command's code when an exporter lost data.
    #[arg(long)]
    pub strict: bool,
    /// What to measure; default global (the CLI's runtime_default), or the launched
    /// command's tree.
    #[arg(long, value_enum)]
    pub scope: Option<ScopeArgument>,
    /// The GPUs to count: indices, `GPU-` UUIDs (or unique prefixes), `MIG-`
    /// identifiers, PCI addresses, `all` or `none`, comma-separated. Default: those the
    /// command can use (`CUDA_VISIBLE_DEVICES`, else `NVIDIA_VISIBLE_DEVICES`, else the
    /// configuration's `gpu.devices`).
    #[arg(long, value_name = "LIST")]
    pub gpus: Option<String>,
    /// Leave the command in wattline's own cgroup instead of a fresh one (whose
    /// fields then describe the command alone; made where wattline may create groups).
    #[arg(long)]
    pub no_cgroup: bool,
    /// No live status line.
    #[arg(long)]
    pub quiet: bool,
    /// Also print the OpenTelemetry metrics on stdout at every poll (debugging).
    #[arg(long)]
    pub metrics_stdout: bool,
    /// The command and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    pub command: Vec<String>,
}

/// Runs `run`.
pub fn run(args: RunArgs) -> Result<ExitCode, String> {
    let (layers, mut effective) = load_configuration(args.config.clone())?;
    if let Some(0) = args.interval {
        return Err("--interval: must be greater than zero (got 0)".into());
    }
    let measured = what_run_measures(&layers, &effective, args.interval);
    if let Some(notice) = &measured.notice {
        super::output::print_stderr(&format!("wattline: {notice}\n"))?;
    }
    let setting = args
        .scope
        .map(MeasurementScopeSetting::from)
        .or(measured
            .resource
            .as_ref()
            .map(|resource| resource.measurement_scope))
        .unwrap_or_default();
    effective.resource_metrics = measured.resource;
    apply_exporter_flags(&args, &mut effective)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|error| format!("cannot start the async runtime: {error}"))?;
    runtime.block_on(run_async(args, effective, setting))
}

/// What `run` measures and, when that is less than usual, why.
#[derive(Debug, Clone, PartialEq)]
struct RunMeasures {
    /// The resource component to run, `None` when a file switched it off.
    resource: Option<ResourceMetricsConfig>,
    /// What to tell the user before the command starts.
    notice: Option<String>,
}

/// `run` polls resources unless a file says otherwise: the default component when no
/// file mentions it, polling on unless a file sets `polling.enabled = false`
/// (`--interval` turns it back on: the flag is the newer word).
fn what_run_measures(
    layers: &[wattline::config::PluginsDocument],
    effective: &wattline::config::EffectiveConfig,
    interval: Option<u64>,
) -> RunMeasures {
    let energy = if effective.energy.is_some() {
        "energy only"
    } else {
        "nothing but the exit code (energy is off too)"
    };
    let mut resource = match cli_resource_metrics(layers, effective) {
        Ok(resource) => resource,
        Err(source) => {
            return RunMeasures {
                resource: None,
                notice: Some(format!(
                    "resource_metrics is disabled in {source}: measuring {energy}"
                )),
            };
        }
    };
    let mut notice = None;
    match (wattline::config::polling_setting(layers), interval) {
        (_, Some(interval)) => {
            resource.polling.enabled = true;
            resource.polling.interval_millis = interval;
        }
        (Some((source, false)), None) => {
            resource.polling.enabled = false;
            notice = Some(format!(
                "polling is off in {source}: no resource marks or summary; measuring {energy}"
            ));
        }
        (Some((_, true)) | None, None) => resource.polling.enabled = true,
    }
    RunMeasures {
        resource: Some(resource),
        notice,
    }
}

/// `--atof DIR` and `--otlp URL` turn those exporters on over the configuration's.
fn apply_exporter_flags(
    args: &RunArgs,
    config: &mut wattline::config::EffectiveConfig,
) -> Result<(), String> {
    if let Some(directory) = &args.atof {
        wattline::overrides::enable_atof(config, directory, "--atof")
            .map_err(|error| error.to_string())?;
    }
    if let Some(url) = &args.otlp {
        wattline::overrides::enable_otlp(config, url, "--otlp")
            .map_err(|error| error.to_string())?;
    }
    if args.otlp_spans {
        let opentelemetry = config.opentelemetry.as_mut().ok_or(
            "--otlp-spans: no OTLP collector to send spans to; give --otlp URL or configure the opentelemetry component",
        )?;
        opentelemetry.spans = true;
    }
    Ok(())
}

async fn run_async(
    args: RunArgs,
    config: wattline::config::EffectiveConfig,
    setting: MeasurementScopeSetting,
) -> Result<ExitCode, String> {
    let (program, arguments) = args.command.split_first().ok_or("no command to run")?;
    let report_file = args
        .output
        .as_deref()
        .map(super::report_output::ReportFile::create)
        .transpose()?;
    // Everything that can fail on configuration or I/O (exporters: the ATOF file, the
    // OTLP endpoints) before the command starts, so a bad flag never starts it.
    let RunSetup {
        mut prepared,
        status,
        series,
        cgroup,
    } = prepare_run(&args, config).await?;
    let host = start_host(&prepared)?;
    // Watch the signals before the child exists, so none arrives unhandled.
    let signals = Signals::new()?;
    let started_command = start_command(
        program,
        arguments,
        host.as_ref(),
        cgroup.as_ref(),
        &mut prepared,
    )
    .await?;
    let StartedCommand {
        mut child,
        pid,
        started,
        exit_stamp,
    } = started_command;
    let (target, pipeline) = match start_pipeline(prepared, setting, pid, started).await {
        Ok(running) => running,
        Err(error) => {
            let _ = child.kill().await;
            return Err(error);
        }
    };
    if let Some(host) = &host {
        host.attach(pipeline.scope_control());
    }

    let show_status = !args.quiet && stderr_is_terminal();
    let status_for_summary = Arc::clone(&status);
    let exit = wait_forwarding_signals(
        &mut child,
        pid,
        signals,
        started,
        show_status.then_some(status),
    )
    .await?;
    // The window closes when the command did, not when the shutdown below gets there
    // (a poll in flight, workers stopping), nor when the runtime got round to the
    // exit: the report is as of the exit.
    let seen = Instant::now();
    pipeline.measuring_until(exit_stamp.map_or(seen, |stamp| stamp.window_end(seen)));
    if show_status {
        eprint!("\r\x1b[2K");
    }
    let report = stop_measuring(&pipeline, host, cgroup).await?;
    let run_description = wattline::report::csv::RunDescription {
        scope: Some(target.measurement_scope().name()),
        command: Some(&args.command),
    };
    let lost_data = match report {
        Some(report) => print_report(
            &args,
            report_file.as_ref(),
            &report,
            started,
            &status_for_summary,
            &series,
            run_description,
        )?,
        None => false,
    };
    if lost_data && args.strict {
        return Ok(ExitCode::from(EXIT_DATA_LOST));
    }
    Ok(exit)
}

/// What `run` sets up before the command starts.
struct RunSetup {
    /// The pipeline, its GPU source already answering.
    prepared: wattline::PreparedPipeline,
    /// The live status line's figures (and the resource summary's).
    status: Arc<StatusSink>,
    /// The power, CPU and memory series for the sparklines and `--html`.
    series: Arc<wattline::report::series::SeriesRecorder>,
    /// The command's own cgroup, when one could be made.
    cgroup: Option<super::command_cgroup::RunCgroup>,
}

/// Builds the pipeline of `config` with the flags of `args` and prepares it (its
/// exporters open, its GPU source answering).
async fn prepare_run(
    args: &RunArgs,
    config: wattline::config::EffectiveConfig,
) -> Result<RunSetup, String> {
    let poll = Duration::from_millis(
        config
            .resource_metrics
            .as_ref()
            .map_or(5000, |resource| resource.polling.interval_millis),
    );
    let configured_devices = config
        .resource_metrics
        .as_ref()
        .map(|resource| resource.gpu.devices.clone())
        .unwrap_or_default();
    // The command inherits this process's environment: its CUDA_VISIBLE_DEVICES is ours.
    let gpu_selection = gpu_selection_for_command(
        args.gpus.as_deref(),
        |name| std::env::var(name).ok(),
        &configured_devices,
    )
    .map_err(|error| error.to_string())?;
    let status = Arc::new(StatusSink::default());
    let series = Arc::new(wattline::report::series::SeriesRecorder::default());
    let mut builder = wattline::Pipeline::builder()
        .config(config)
        .event_sink(status.clone())
        .event_sink(series.clone());
    // Exports are named after what was measured: `python3`, `train.sh`.
    if let Some(program) = args
        .command
        .first()
        .and_then(|program| std::path::Path::new(program).file_name())
    {
        builder = builder.default_service_name(program.to_string_lossy());
    }
    if let Some(selection) = gpu_selection {
        builder = builder.gpu_selection(selection);
    }
    // A fresh group for the command, when this host lets wattline make one.
    let cgroup = (!args.no_cgroup).then(super::command_cgroup::RunCgroup::create);
    if let Some(cgroup) = &cgroup {
        builder = builder.command_cgroup(match cgroup {
            Ok(run) => run.cgroup().ok_or_else(String::new),
            Err(reason) => Err(reason.clone()),
        });
    }
    let cgroup = cgroup.and_then(Result::ok);
    if args.metrics_stdout {
        builder = builder.stdout_metrics(poll);
    }
    let prepared = builder.prepare().await.map_err(|error| error.to_string())?;
    Ok(RunSetup {
        prepared,
        status,
        series,
        cgroup,
    })
}

/// The endpoint the command reports diagnostics and marks its own Agent scopes over
/// (WATTLINE_HOST_* in its environment), served before it starts. Without it the
/// command is still measured; only its own steps go unmarked.
fn start_host(
    prepared: &wattline::PreparedPipeline,
) -> Result<Option<wattline::host::program::ProgramEndpoint>, String> {
    let context = prepared.diagnostics_context();
    match wattline::host::program::ProgramEndpoint::start(context, None) {
        Ok(host) => Ok(Some(host)),
        Err(error) => {
            super::output::print_stderr(&format!(
                "wattline: {error}: the command runs without WATTLINE_HOST_* (no agent steps \
                 or diagnostics from it)\n"
            ))?;
            Ok(None)
        }
    }
}

/// The command, running.
struct StartedCommand {
    child: tokio::process::Child,
    pid: u32,
    /// When it had exec'd: the measured window opens here.
    started: Instant,
    /// When it exits, as a thread waiting on it sees (`None` when none could start).
    exit_stamp: Option<super::exit_stamp::ExitStamp>,
}

/// Starts the command in its cgroup with the host's environment, reading GPU power
/// right before and right after, so the interval holding the start is short.
async fn start_command(
    program: &str,
    arguments: &[String],
    host: Option<&wattline::host::program::ProgramEndpoint>,
    cgroup: Option<&super::command_cgroup::RunCgroup>,
    prepared: &mut wattline::PreparedPipeline,
) -> Result<StartedCommand, String> {
    let mut command = tokio::process::Command::new(program);
    command
        .args(arguments)
        .envs(host.iter().flat_map(|host| host.environment()));
    if let Some(group) = cgroup.and_then(|run| run.cgroup()) {
        super::command_cgroup::join_before_exec(&mut command, group);
    }
    prepared.read_gpu_power_now().await;
    let child = command
        .spawn()
        .map_err(|error| format!("cannot run {program:?}: {error}"))?;
    // The window opens when the command runs: `spawn` returns once it has exec'd,
    // after joining its cgroup (which can take milliseconds on v1), not before.
    let started = Instant::now();
    // Watched from now, so a command that ends at once is stamped at its exit too.
    let exit_stamp = child.id().and_then(super::exit_stamp::ExitStamp::watch);
    prepared.read_gpu_power_now().await;
    let pid = child
        .id()
        .ok_or("the command exited before it could be measured")?;
    Ok(StartedCommand {
        child,
        pid,
        started,
        exit_stamp,
    })
}

/// Spawns the pipeline over the command `pid` (process-tree polls start only now
/// that it exists), counting energy from its start: readings taken while preparing
/// cover it.
async fn start_pipeline(
    prepared: wattline::PreparedPipeline,
    setting: MeasurementScopeSetting,
    pid: u32,
    started: Instant,
) -> Result<(wattline::ScopeTarget, wattline::Pipeline), String> {
    let target = wattline::resolve_target(setting, MeasurementScopeSetting::Global, Some(pid))
        .map_err(|error| error.to_string())?;
    let pipeline = prepared
        .scope(target)
        .measuring_from(started)
        .spawn()
        .await
        .map_err(|error| error.to_string())?;
    Ok((target, pipeline))
}

/// Closes the host endpoint (ending the scopes the command left open), shuts the
/// pipeline down for its report, and removes the command's cgroup.
async fn stop_measuring(
    pipeline: &wattline::Pipeline,
    host: Option<wattline::host::program::ProgramEndpoint>,
    cgroup: Option<super::command_cgroup::RunCgroup>,
) -> Result<Option<wattline::EnergyReport>, String> {
    let left_open = match host {
        Some(host) => host.close().await,
        None => 0,
    };
    if left_open > 0 {
        super::output::print_stderr(&format!(
            "wattline: the command left {left_open} agent scope(s) open; ended at its exit \
             (flagged wattline.ended_at_program_exit)\n"
        ))?;
    }
    let report = pipeline
        .shutdown()
        .await
        .map_err(|error| error.to_string())?;
    if let Some(message) = cgroup.and_then(super::command_cgroup::RunCgroup::finish) {
        super::output::print_stderr(&format!("wattline: {message}\n"))?;
    }
    Ok(report)
}

/// Says what was lost, prints the resource summary and the report, and writes the
/// report's files; `true` when data was lost (an exporter's, or a stopped part).
fn print_report(
    args: &RunArgs,
    report_file: Option<&super::report_output::ReportFile>,
    report: &wattline::EnergyReport,
    started: Instant,
    status: &StatusSink,
    series: &wattline::report::series::SeriesRecorder,
    run_description: wattline::report::csv::RunDescription<'_>,
) -> Result<bool, String> {
    let mut lost_data = false;
    // Said first and loudly: numbers that never reached their destination.
    for exporter in report.exporters.iter().filter(|e| e.lost_data()) {
        lost_data = true;
        super::output::print_stderr(&format!(
            "wattline: DATA LOST by exporter {}: {}\n",
            exporter.name,
            exporter.loss_description()
        ))?;
    }
    for problem in &report.health {
        lost_data = true;
        super::output::print_stderr(&format!(
            "wattline: PIPELINE STOPPED IN PART: {} {} (measurements after it may be missing)\n",
            problem.component, problem.detail
        ))?;
    }
    if args.report == ReportFormat::Table
        && let Some(summary) =
            super::status::resource_summary(started.elapsed().as_secs_f64(), &status.figures())
    {
        super::output::print_stderr(&summary)?;
    }
    let outputs = super::report_output::ReportOutputs {
        format: args.report,
        table_on_stderr: true,
        output: report_file,
        csv_file: args.csv_file.as_deref(),
        html: args.html.as_deref(),
    };
    // The report was printed; a file that cannot be written is said, and the
    // command's exit code stands.
    for problem in
        super::report_output::write_report(&outputs, report, &series.series(), run_description)?
    {
        super::output::print_stderr(&format!("wattline: {problem}\n"))?;
    }
    Ok(lost_data)
}

/// `run --strict`'s exit code when an exporter lost data.
pub const EXIT_DATA_LOST: u8 = 3;

fn stderr_is_terminal() -> bool {
    // SAFETY: isatty only inspects the descriptor.
    unsafe { libc::isatty(libc::STDERR_FILENO) == 1 }
}

/// True when SIGINT most likely came from this terminal's Ctrl-C, which the kernel
/// already delivered to the whole foreground process group, the child included.
fn interrupt_came_from_terminal() -> bool {
    // SAFETY: isatty, tcgetpgrp and getpgrp only inspect process state.
    unsafe {
        libc::isatty(libc::STDIN_FILENO) == 1
            && libc::tcgetpgrp(libc::STDIN_FILENO) == libc::getpgrp()
    }
}

/// The signals `run` forwards to its command.
struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> Result<Self, String> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt())
                .map_err(|e| format!("cannot watch SIGINT: {e}"))?,
            terminate: signal(SignalKind::terminate())
                .map_err(|e| format!("cannot watch SIGTERM: {e}"))?,
        })
    }
}

async fn wait_forwarding_signals(
    child: &mut tokio::process::Child,
    pid: u32,
    signals: Signals,
    started: Instant,
    status: Option<Arc<StatusSink>>,
) -> Result<ExitCode, String> {
    let Signals {
        mut interrupt,
        mut terminate,
    } = signals;
    let mut ticker = tokio::time::interval(Duration::from_millis(500));
    let forward = |signal: libc::c_int| {
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return;
        };
        // SAFETY: kill sends a signal to our own child.
        unsafe { libc::kill(pid, signal) };
    };
    loop {
        tokio::select! {
            exit = child.wait() => {
                let exit = exit.map_err(|error| format!("waiting for the command: {error}"))?;
                return Ok(exit_code(exit));
            }
            _ = interrupt.recv() => {
                if !interrupt_came_from_terminal() {
                    forward(libc::SIGINT);
                }
            }
            _ = terminate.recv() => forward(libc::SIGTERM),
            _ = ticker.tick(), if status.is_some() => {
                if let Some(status) = &status {
                    eprint!("\r\x1b[2K{}", status_line(started.elapsed().as_secs_f64(), &status.figures()));
                }
            }
        }
    }
}

/// The command's exit code; a command killed by a signal gives 128 + the signal.
fn exit_code(status: std::process::ExitStatus) -> ExitCode {
    use std::os::unix::process::ExitStatusExt;
    let code = status
        .code()
        .or_else(|| status.signal().map(|signal| 128 + signal))
        .unwrap_or(1);
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
