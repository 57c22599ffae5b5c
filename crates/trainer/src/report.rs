//! `rlvmr report`: the curves of one or more `rlvmr train` runs as PNG charts (runs overlaid,
//! one colour each, with a legend) and their final figures as a Markdown table.
//!
//! Charts: `success.png` (training and evaluation success), `rewards.png` (each reward kind),
//! `tags.png` (the tag mix), `rates.png` (invalid, inadmissible and repetitive rates,
//! average actions), `optimization.png` (KL, entropy, clip fraction, gradient norm),
//! `time.png` (seconds per phase). Text is drawn with a TrueType font read at run time:
//! `$RLVMR_FONT`, else DejaVu Sans or Liberation Sans where Debian installs them.

use std::path::{Path, PathBuf};

use plotters::prelude::*;
use serde_json::Value;

use crate::config::RunConfig;
use crate::envs::Protocol;
use crate::error::{Result, TrainerError};

/// One run's metrics.
#[derive(Debug, Clone)]
pub struct Run {
    /// The legend's name: the run directory's path as given.
    pub name: String,
    pub iterations: Vec<Value>,
    pub evals: Vec<Value>,
    /// The final model's evaluation per level (`rl.final_eval`), in level order.
    pub finals: Vec<(String, Value)>,
    /// The protocol the run trained under and its environment (`DIR/config.toml`).
    pub protocol: Option<(Protocol, String)>,
}

impl Run {
    /// Reads `DIR/metrics.jsonl`; a line that is not JSON is an error naming it.
    pub fn read(dir: &Path) -> Result<Run> {
        let path = dir.join("metrics.jsonl");
        let text = std::fs::read_to_string(&path).map_err(|e| TrainerError::io(&path, e))?;
        let (mut iterations, mut evals) = (Vec::new(), Vec::new());
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let value: Value = serde_json::from_str(line).map_err(|e| TrainerError::Line {
                path: path.clone(),
                line: i + 1,
                message: format!("not a metrics line: {e}"),
            })?;
            if value.get("iteration").and_then(Value::as_u64).is_none() {
                return Err(TrainerError::Line {
                    path: path.clone(),
                    line: i + 1,
                    message: "no \"iteration\" number: not a metrics line of rlvmr train".into(),
                });
            }
            if value.get("eval").is_some() {
                evals.push(value);
            } else {
                iterations.push(value);
            }
        }
        if iterations.is_empty() {
            return Err(TrainerError::Invalid(format!(
                "{}: no iteration lines (is this an rlvmr train run directory?)",
                path.display()
            )));
        }
        let mut finals = Vec::new();
        for level in crate::config::LEVELS {
            if let Some(summary) = level_summary(dir, level)? {
                finals.push((level.to_string(), summary));
            }
        }
        let config = dir.join("config.toml");
        let protocol = match config.is_file() {
            true => {
                let config = RunConfig::from_file(&config)?;
                Some((config.env.protocol, config.env.name))
            }
            false => None,
        };
        Ok(Run { name: dir.display().to_string(), iterations, evals, finals, protocol })
    }
}

/// The value at a JSON pointer as a number.
fn number(line: &Value, pointer: &str) -> Option<f64> {
    line.pointer(pointer).and_then(Value::as_f64)
}

/// `(iteration, value)` points of `pointer` in `lines`.
fn points(lines: &[Value], pointer: &str, scale: f64) -> Vec<(f64, f64)> {
    lines
        .iter()
        .filter_map(|l| Some((number(l, "/iteration")?, number(l, pointer)? * scale)))
        .collect()
}

/// One chart of a grid: a title and what each run contributes.
struct Panel {
    title: String,
    /// (which lines, JSON pointer); evaluations are drawn with markers.
    series: Vec<(Source, &'static str)>,
    scale: f64,
}

#[derive(Clone, PartialEq)]
enum Source {
    Iterations,
    /// The evaluation lines of one level (`eval.split`).
    Evals(String),
}

fn panel(title: &str, pointer: &'static str, scale: f64) -> Panel {
    Panel { title: title.into(), series: vec![(Source::Iterations, pointer)], scale }
}

fn eval_panel(title: String, level: &str, pointer: &'static str, scale: f64) -> Panel {
    Panel { title, series: vec![(Source::Evals(level.into()), pointer)], scale }
}

/// The levels the runs evaluated on during training, in first-seen order.
fn eval_levels(runs: &[Run]) -> Vec<String> {
    let mut levels: Vec<String> = Vec::new();
    for line in runs.iter().flat_map(|r| &r.evals) {
        let level = line.pointer("/eval/split").and_then(Value::as_str).unwrap_or("?").to_string();
        if !levels.contains(&level) {
            levels.push(level);
        }
    }
    levels
}

/// `eval-<level>.png`: the behaviour on one level's test games during training, one panel
/// per measure, the runs overlaid.
fn eval_chart(level: &str) -> (String, String, Vec<Panel>) {
    let measures: [(&str, &'static str); 8] = [
        ("success (%)", "/eval/success_rate"),
        ("invalid format (%)", "/eval/invalid_rate"),
        ("inadmissible actions (%)", "/eval/inadmissible_rate"),
        ("repetitive actions (%)", "/eval/repetitive_rate"),
        ("planning (% of steps)", "/eval/tag_mix/planning"),
        ("explore (% of steps)", "/eval/tag_mix/explore"),
        ("reflection (% of steps)", "/eval/tag_mix/reflection"),
        ("monitor (% of steps)", "/eval/tag_mix/monitor"),
    ];
    let panels = measures.iter().map(|&(title, pointer)| eval_panel(title.into(), level, pointer, 100.0)).collect();
    (format!("eval-{level}.png"), format!("Evaluation on the {level} test games"), panels)
}

/// The charts `rlvmr report` draws: (file, title, panels); success has a panel per level
/// the runs evaluated on (`levels`), and each such level a chart of its own.
fn charts(levels: &[String]) -> Vec<(String, String, Vec<Panel>)> {
    let mut success = vec![panel("training episodes", "/success", 100.0)];
    for level in levels {
        success.push(eval_panel(format!("evaluation, {level} test games"), level, "/eval/success_rate", 100.0));
    }
    let fixed: Vec<(&str, &str, Vec<Panel>)> = vec![
        ("success.png", "Success (%)", success),
        (
            "rewards.png",
            "Rewards (mean per episode)",
            vec![
                panel("outcome", "/rewards/outcome", 1.0),
                panel("format penalty", "/rewards/format", 1.0),
                panel("planning", "/rewards/planning", 1.0),
                panel("exploration", "/rewards/exploration", 1.0),
                panel("reflection", "/rewards/reflection", 1.0),
                panel("monitor", "/rewards/monitor", 1.0),
            ],
        ),
        (
            "tags.png",
            "Tag mix (% of steps)",
            vec![
                panel("planning", "/tag_mix/planning", 100.0),
                panel("explore", "/tag_mix/explore", 100.0),
                panel("reflection", "/tag_mix/reflection", 100.0),
                panel("monitor", "/tag_mix/monitor", 100.0),
                panel("none (invalid format)", "/tag_mix/none", 100.0),
            ],
        ),
        (
            "rates.png",
            "Behaviour",
            vec![
                panel("invalid format (%)", "/invalid_rate", 100.0),
                panel("inadmissible actions (%)", "/inadmissible_rate", 100.0),
                panel("repetitive actions (%)", "/repetitive_rate", 100.0),
                panel("average actions", "/avg_actions", 1.0),
            ],
        ),
        (
            "optimization.png",
            "Optimization",
            vec![
                panel("KL to the reference", "/kl", 1.0),
                panel("entropy", "/entropy", 1.0),
                panel("clip fraction", "/clip_fraction", 1.0),
                panel("gradient norm", "/grad_norm", 1.0),
            ],
        ),
        (
            "time.png",
            "Seconds per iteration",
            vec![
                panel("rollout", "/time/seconds/rollout", 1.0),
                panel("scoring", "/time/seconds/scoring", 1.0),
                panel("log-probs", "/time/seconds/logprobs", 1.0),
                panel("update", "/time/seconds/update", 1.0),
            ],
        ),
    ];
    let mut all: Vec<(String, String, Vec<Panel>)> =
        fixed.into_iter().map(|(file, title, panels)| (file.to_string(), title.to_string(), panels)).collect();
    all.extend(levels.iter().map(|level| eval_chart(level)));
    all
}

/// Registers a TrueType font for the charts' text, once.
fn load_font() -> Result<()> {
    static LOADED: std::sync::OnceLock<std::result::Result<(), String>> = std::sync::OnceLock::new();
    LOADED
        .get_or_init(|| {
            let candidates: Vec<PathBuf> = std::env::var_os("RLVMR_FONT")
                .map(|p| vec![PathBuf::from(p)])
                .unwrap_or_else(|| {
                    [
                        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
                        "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
                        "/usr/share/fonts/TTF/DejaVuSans.ttf",
                        "/Library/Fonts/Arial.ttf",
                    ]
                    .map(PathBuf::from)
                    .to_vec()
                });
            let Some((path, bytes)) = candidates
                .iter()
                .find_map(|p| std::fs::read(p).ok().map(|b| (p.clone(), b)))
            else {
                return Err(format!(
                    "no font for the charts' text: set RLVMR_FONT to a .ttf file, or install one \
                     (Debian: apt-get install fonts-dejavu-core); looked at {}",
                    candidates.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
                ));
            };
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
                .map_err(|_| format!("{}: not a TrueType font", path.display()))
        })
        .clone()
        .map_err(TrainerError::Invalid)
}

fn draw_error(path: &Path, e: impl std::fmt::Display) -> TrainerError {
    TrainerError::Invalid(format!("{}: cannot draw: {e}", path.display()))
}

/// The corner of a panel whose legend box (`entries` lines high) hides the fewest of
/// `points` (upper left when several hide none): a legend drawn over the curves hid them.
fn legend_corner(
    points: impl Iterator<Item = (f64, f64)>,
    (x_lo, x_hi): (f64, f64),
    (y_lo, y_hi): (f64, f64),
    entries: usize,
) -> SeriesLabelPosition {
    // The box's share of the panel: about 40% of its width, a line of its height per entry.
    let width = 0.45;
    let height = (0.08 + 0.065 * entries as f64).min(0.9);
    let mut hidden = [0usize; 4];
    for (x, y) in points {
        let fx = (x - x_lo) / (x_hi - x_lo).max(f64::MIN_POSITIVE);
        let fy = (y - y_lo) / (y_hi - y_lo).max(f64::MIN_POSITIVE);
        let (left, right, low, high) = (fx <= width, fx >= 1.0 - width, fy <= height, fy >= 1.0 - height);
        for (count, inside) in hidden.iter_mut().zip([left && high, right && high, left && low, right && low]) {
            *count += inside as usize;
        }
    }
    let corners = [
        SeriesLabelPosition::UpperLeft,
        SeriesLabelPosition::UpperRight,
        SeriesLabelPosition::LowerLeft,
        SeriesLabelPosition::LowerRight,
    ];
    let best = (0..4).min_by_key(|&i| hidden[i]).unwrap_or(0);
    corners.into_iter().nth(best).unwrap_or(SeriesLabelPosition::UpperLeft)
}

/// The runs' legend, in one style for every chart.
fn draw_legend<'a, DB: DrawingBackend + 'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    position: SeriesLabelPosition,
    path: &Path,
) -> Result<()> {
    chart
        .configure_series_labels()
        .label_font(("sans-serif", 13))
        .background_style(WHITE.mix(0.6))
        .border_style(BLACK.mix(0.4))
        .position(position)
        .draw()
        .map_err(|e| draw_error(path, e))
}

/// The range of `values` with a margin (a flat line gets a unit-wide band).
fn range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if !lo.is_finite() || !hi.is_finite() {
        return (0.0, 1.0);
    }
    let pad = if hi > lo { (hi - lo) * 0.08 } else { 0.5 };
    // Rates, counts and norms never go below 0: no negative axis for them.
    let low = if lo >= 0.0 { (lo - pad).max(0.0) } else { lo - pad };
    (low, hi + pad)
}

fn draw_chart(path: &Path, title: &str, panels: &[Panel], runs: &[Run]) -> Result<()> {
    let cols = if panels.len() <= 2 { panels.len() } else { 2 + (panels.len() > 4) as usize };
    let rows = panels.len().div_ceil(cols);
    let size = (480 * cols as u32, 360 * rows as u32 + 40);
    let root = BitMapBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE).map_err(|e| draw_error(path, e))?;
    let root = root
        .titled(title, ("sans-serif", 26))
        .map_err(|e| draw_error(path, e))?;
    let areas = root.split_evenly((rows, cols));
    let last_iteration = runs
        .iter()
        .filter_map(|r| r.iterations.iter().filter_map(|l| number(l, "/iteration")).reduce(f64::max))
        .fold(1.0, f64::max);
    for (area, panel) in areas.iter().zip(panels) {
        let series: Vec<(usize, Source, Vec<(f64, f64)>)> = runs
            .iter()
            .enumerate()
            .flat_map(|(i, run)| {
                panel.series.iter().map(move |(source, pointer)| {
                    let lines: Vec<Value> = match source {
                        Source::Iterations => run.iterations.clone(),
                        Source::Evals(level) => run
                            .evals
                            .iter()
                            .filter(|l| l.pointer("/eval/split").and_then(Value::as_str).unwrap_or("?") == level)
                            .cloned()
                            .collect(),
                    };
                    (i, source.clone(), points(&lines, pointer, panel.scale))
                })
            })
            .collect();
        let (lo, hi) = if panel.scale == 100.0 {
            (0.0, 100.0)
        } else {
            range(series.iter().flat_map(|(_, _, p)| p.iter().map(|&(_, y)| y)))
        };
        // Enough decimals to tell apart ticks a tenth of the range apart.
        let digits = (-((hi - lo) / 10.0).log10()).ceil().clamp(0.0, 8.0) as usize;
        let mut chart = ChartBuilder::on(area)
            .caption(&panel.title, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(32)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..last_iteration.max(1.0), lo..hi)
            .map_err(|e| draw_error(path, e))?;
        chart
            .configure_mesh()
            .x_desc("iteration")
            // Iterations are whole: at most one tick per iteration, unlabelled between them.
            .x_labels((last_iteration.max(1.0) as usize + 1).min(11))
            .x_label_formatter(&|x| if x.fract() == 0.0 { format!("{x:.0}") } else { String::new() })
            .y_label_formatter(&|y| format!("{y:.digits$}"))
            .label_style(("sans-serif", 13))
            .draw()
            .map_err(|e| draw_error(path, e))?;
        let corner = legend_corner(
            series.iter().flat_map(|(_, _, p)| p.iter().copied()),
            (0.0, last_iteration.max(1.0)),
            (lo, hi),
            series.iter().filter(|(_, _, p)| !p.is_empty()).count(),
        );
        let mut labelled = false;
        for (i, source, pts) in series {
            if pts.is_empty() {
                continue;
            }
            let color = Palette99::pick(i).to_rgba();
            let style = color.stroke_width(2);
            let drawn = chart
                .draw_series(LineSeries::new(pts.clone(), style))
                .map_err(|e| draw_error(path, e))?;
            drawn
                .label(runs[i].name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
            labelled = true;
            if matches!(source, Source::Evals(_)) || pts.len() == 1 {
                chart
                    .draw_series(pts.iter().map(|&p| Circle::new(p, 4, color.filled())))
                    .map_err(|e| draw_error(path, e))?;
            }
        }
        if labelled {
            draw_legend(&mut chart, corner, path)?;
        }
    }
    root.present().map_err(|e| draw_error(path, e))
}

/// Draws every chart of `runs` into `out` (created), and `final.png` when a run has final
/// evaluations; returns the files written.
pub fn draw(runs: &[Run], out: &Path) -> Result<Vec<PathBuf>> {
    load_font()?;
    std::fs::create_dir_all(out).map_err(|e| TrainerError::io(out, e))?;
    let mut written = Vec::new();
    for (file, title, panels) in charts(&eval_levels(runs)) {
        let path = out.join(file);
        draw_chart(&path, &title, &panels, runs)?;
        written.push(path);
    }
    if runs.iter().any(|r| !r.finals.is_empty()) {
        let path = out.join("final.png");
        draw_finals(&path, runs)?;
        written.push(path);
    }
    Ok(written)
}

/// `final.png`: the final model's success on each level's test games, one bar per run
/// (grouped by level, the runs' colours as on the other charts).
fn draw_finals(path: &Path, runs: &[Run]) -> Result<()> {
    let levels = crate::config::LEVELS;
    let root = BitMapBackend::new(path, (200 + 160 * levels.len() as u32 + 40 * runs.len() as u32, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| draw_error(path, e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption("Final model, success on the test games (%)", ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(32)
        .y_label_area_size(48)
        .build_cartesian_2d(0.0..levels.len() as f64, 0.0..100.0)
        .map_err(|e| draw_error(path, e))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_label_formatter(&|_| String::new())
        .y_label_formatter(&|y| format!("{y:.0}"))
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(|e| draw_error(path, e))?;
    // Level names at the top of each group of bars.
    chart
        .draw_series(levels.iter().enumerate().map(|(slot, level)| {
            Text::new(level.to_string(), (slot as f64 + 0.45, 97.0), ("sans-serif", 16))
        }))
        .map_err(|e| draw_error(path, e))?;
    let width = 0.8 / runs.len().max(1) as f64;
    for (i, run) in runs.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let bars: Vec<Rectangle<(f64, f64)>> = run
            .finals
            .iter()
            .filter_map(|(level, summary)| {
                let slot = levels.iter().position(|l| l == level)? as f64;
                let left = slot + 0.1 + i as f64 * width;
                let success = 100.0 * number(summary, "/success_rate")?;
                Some(Rectangle::new([(left, 0.0), (left + width * 0.9, success)], color.filled()))
            })
            .collect();
        chart
            .draw_series(bars)
            .map_err(|e| draw_error(path, e))?
            .label(run.name.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled()));
    }
    draw_legend(&mut chart, SeriesLabelPosition::MiddleRight, path)?;
    root.present().map_err(|e| draw_error(path, e))
}

/// A tag's share in a tag mix (`None` without a mix). A tag missing from a mix was never
/// used: 0.
fn tag_share(mix: Option<&Value>, key: &str) -> Option<f64> {
    mix.map(|m| m.get(key).and_then(Value::as_f64).unwrap_or(0.0))
}

fn percent(line: Option<&Value>, pointer: &str) -> String {
    line.and_then(|l| number(l, pointer)).map_or("–".into(), |v| format!("{:.1}", 100.0 * v))
}

/// The final figures of each run: its last iteration's training success and rates, its last
/// evaluation, and the tag mix, as a Markdown table.
pub fn table(runs: &[Run]) -> String {
    let mut out = protocol_header(runs.iter().filter_map(|r| r.protocol.clone()));
    out.push_str(
        "| run | iterations | train success % | eval success % | eval split (iteration) | invalid % | inadmissible % | repetitive % | avg actions | planning / explore / reflection / monitor % |\n\
         |---|---:|---:|---:|---|---:|---:|---:|---:|---|\n",
    );
    for run in runs {
        let last = run.iterations.last();
        let eval = run.evals.last();
        // Behaviour from the evaluation when there is one (test games, eval temperature).
        let behaviour = |key: &str| match eval {
            Some(e) => percent(Some(e), &format!("/eval/{key}")),
            None => percent(last, &format!("/{key}")),
        };
        let tags = |key: &str| {
            let (line, mix) = match eval {
                Some(e) => (e, "/eval/tag_mix"),
                None => match last {
                    Some(l) => (l, "/tag_mix"),
                    None => return "–".to_string(),
                },
            };
            tag_share(line.pointer(mix), key).map_or("–".into(), |share| format!("{:.1}", 100.0 * share))
        };
        let actions = eval
            .and_then(|e| number(e, "/eval/avg_actions"))
            .or_else(|| last.and_then(|l| number(l, "/avg_actions")))
            .map_or("–".into(), |v| format!("{v:.2}"));
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} / {} / {} |\n",
            run.name,
            last.and_then(|l| number(l, "/iteration")).unwrap_or(0.0),
            percent(last, "/success"),
            percent(eval, "/eval/success_rate"),
            eval.map_or("–".into(), |e| format!(
                "{} ({})",
                e.pointer("/eval/split").and_then(Value::as_str).unwrap_or("?"),
                number(e, "/iteration").unwrap_or(0.0)
            )),
            behaviour("invalid_rate"),
            behaviour("inadmissible_rate"),
            behaviour("repetitive_rate"),
            actions,
            tags("planning"),
            tags("explore"),
            tags("reflection"),
            tags("monitor"),
        ));
    }
    out
}

/// Every evaluation made during training, as a Markdown table: one row per run, level and
/// iteration (the curves of `eval-<level>.png` in numbers). Empty when no run evaluated.
pub fn eval_table(runs: &[Run]) -> String {
    if runs.iter().all(|r| r.evals.is_empty()) {
        return String::new();
    }
    let mut out = String::from(
        "| run | level | iteration | episodes | success % | invalid % | inadmissible % | repetitive % | planning / explore / reflection / monitor % |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for run in runs {
        for line in &run.evals {
            let eval = line.get("eval");
            let tag = |key: &str| {
                tag_share(line.pointer("/eval/tag_mix"), key).map_or("–".into(), |v| format!("{:.1}", 100.0 * v))
            };
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} / {} / {} / {} |\n",
                run.name,
                line.pointer("/eval/split").and_then(Value::as_str).unwrap_or("?"),
                number(line, "/iteration").unwrap_or(0.0),
                number(line, "/eval/episodes").unwrap_or(0.0),
                percent(eval, "/success_rate"),
                percent(eval, "/invalid_rate"),
                percent(eval, "/inadmissible_rate"),
                percent(eval, "/repetitive_rate"),
                tag("planning"),
                tag("explore"),
                tag("reflection"),
                tag("monitor"),
            ));
        }
    }
    out
}

/// One level's final evaluation of a run: `DIR/eval/<level>.json` (written by `rlvmr train`'s
/// `rl.final_eval`) or `DIR/<level>/summary.json` (written by `rlvmr eval --out DIR/<level>`,
/// for a model without RL). `None` when the run has neither.
fn level_summary(dir: &Path, level: &str) -> Result<Option<Value>> {
    let candidates = [dir.join("eval").join(format!("{level}.json")), dir.join(level).join("summary.json")];
    let Some(path) = candidates.iter().find(|p| p.is_file()) else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(path).map_err(|e| TrainerError::io(path, e))?;
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| TrainerError::context(format!("{}: not an evaluation summary", path.display()), e))?;
    if number(&value, "/success_rate").is_none() {
        return Err(TrainerError::Invalid(format!("{}: no \"success_rate\": not an evaluation summary", path.display())));
    }
    Ok(Some(value))
}

/// The method a run directory stands for: its name without a `-seed<N>` suffix, so the
/// seeds of one method share a row.
pub fn method_of(dir: &Path) -> String {
    let name = dir.file_name().map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into_owned());
    match name.rsplit_once("-seed") {
        Some((method, seed)) if !method.is_empty() && !seed.is_empty() && seed.bytes().all(|b| b.is_ascii_digit()) => {
            method.to_string()
        }
        _ => name,
    }
}

/// `mean ± sd` in percent over the runs that have the value (sample standard deviation;
/// the mean alone for one run, `–` for none), with `digits` decimals after scaling.
fn mean_sd(values: &[f64], scale: f64, digits: usize) -> String {
    match values.len() {
        0 => "–".into(),
        1 => format!("{:.digits$}", scale * values[0]),
        n => {
            let mean = values.iter().sum::<f64>() / n as f64;
            let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            format!("{:.digits$} ± {:.digits$}", scale * mean, scale * var.sqrt())
        }
    }
}

/// Final evaluations of one run, per level (L0, L1, L2).
type Levels = [Option<Value>; 3];

/// The protocols (`summary.json`'s `protocol`) the runs' evaluations name, in first-seen
/// order; `–` for runs whose summaries name none (the expert, a hub model).
fn protocols_of(runs: &[Levels]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for levels in runs {
        for summary in levels.iter().flatten() {
            let name = summary.get("protocol").and_then(Value::as_str).unwrap_or("–").to_string();
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    names
}

/// The (protocol, environment) pairs the runs' evaluation summaries name.
fn protocol_envs(runs: &[Levels]) -> Vec<(Protocol, String)> {
    runs.iter()
        .flat_map(|levels| levels.iter().flatten())
        .filter_map(|summary| {
            let protocol = Protocol::from_name(summary.get("protocol")?.as_str()?)?;
            let env = summary.get("env").and_then(Value::as_str).unwrap_or("alfworld");
            Some((protocol, env.to_string()))
        })
        .collect()
}

/// One line per distinct protocol, in first-seen order, saying what it means, then a blank
/// line; nothing without a protocol (the header of every table that reports L2).
fn protocol_header(protocols: impl IntoIterator<Item = (Protocol, String)>) -> String {
    let mut seen: Vec<(Protocol, String)> = Vec::new();
    for p in protocols {
        if !seen.contains(&p) {
            seen.push(p);
        }
    }
    let mut out: String = seen.iter().map(|(p, env)| format!("{}\n", p.describe(env))).collect();
    if !out.is_empty() {
        out.push('\n');
    }
    out
}

/// The comparison table of final evaluations: one row per method (run directories named
/// `<method>-seed<N>` are that method's seeds; any other name is its own method), success on
/// each level as mean ± standard deviation over the seeds, and the L2 test games' behaviour
/// (invalid, inadmissible and repetitive rates, average actions, tag mix), the level the
/// methods are compared on. A run without any final evaluation is an error naming it.
pub fn comparison(dirs: &[PathBuf]) -> Result<String> {
    let mut methods: Vec<(String, Vec<Levels>)> = Vec::new();
    for dir in dirs {
        let levels = [
            level_summary(dir, crate::config::LEVELS[0])?,
            level_summary(dir, crate::config::LEVELS[1])?,
            level_summary(dir, crate::config::LEVELS[2])?,
        ];
        if levels.iter().all(Option::is_none) {
            return Err(TrainerError::Invalid(format!(
                "{}: no final evaluation (eval/L0.json .. eval/L2.json of rlvmr train, or L0/summary.json .. of rlvmr eval --out)",
                dir.display()
            )));
        }
        let method = method_of(dir);
        match methods.iter_mut().find(|(m, _)| *m == method) {
            Some((_, runs)) => runs.push(levels),
            None => methods.push((method, vec![levels])),
        }
    }
    let named = methods.iter().flat_map(|(_, runs)| protocol_envs(runs));
    let mut out = protocol_header(named);
    out.push_str(
        "| method | protocol | runs | L0 success % | L1 success % | L2 success % | L2 invalid % | L2 inadmissible % | L2 repetitive % | L2 avg actions | L2 planning / explore / reflection / monitor % |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for (method, runs) in &methods {
        let values = |level: usize, pointer: &str| -> Vec<f64> {
            runs.iter().filter_map(|r| r[level].as_ref().and_then(|v| number(v, pointer))).collect()
        };
        let tag = |key: &str| -> String {
            let shares: Vec<f64> = runs
                .iter()
                .filter_map(|r| r[2].as_ref())
                .map(|v| tag_share(v.pointer("/tag_mix"), key).unwrap_or(0.0))
                .collect();
            mean_sd(&shares, 100.0, 1)
        };
        out.push_str(&format!(
            "| {method} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} / {} / {} |\n",
            protocols_of(runs).join(", "),
            runs.len(),
            mean_sd(&values(0, "/success_rate"), 100.0, 1),
            mean_sd(&values(1, "/success_rate"), 100.0, 1),
            mean_sd(&values(2, "/success_rate"), 100.0, 1),
            mean_sd(&values(2, "/invalid_rate"), 100.0, 1),
            mean_sd(&values(2, "/inadmissible_rate"), 100.0, 1),
            mean_sd(&values(2, "/repetitive_rate"), 100.0, 1),
            mean_sd(&values(2, "/avg_actions"), 1.0, 2),
            tag("planning"),
            tag("explore"),
            tag("reflection"),
            tag("monitor"),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_legend_goes_where_it_hides_fewest_points() {
        let corner = |points: &[(f64, f64)]| legend_corner(points.iter().copied(), (0.0, 10.0), (0.0, 100.0), 3);
        // Nothing anywhere near a corner: the usual upper left.
        assert!(matches!(corner(&[(5.0, 50.0)]), SeriesLabelPosition::UpperLeft));
        // Curves high on the left: upper right.
        assert!(matches!(corner(&[(0.0, 95.0), (1.0, 90.0), (5.0, 50.0)]), SeriesLabelPosition::UpperRight));
        // High everywhere, low on the right only: lower left.
        assert!(matches!(
            corner(&[(0.0, 95.0), (10.0, 95.0), (9.0, 5.0), (10.0, 2.0)]),
            SeriesLabelPosition::LowerLeft
        ));
    }

    fn summary(success: f64, invalid: f64) -> String {
        serde_json::json!({"split": "L2", "protocol": "published", "episodes": 38, "success_rate": success, "invalid_rate": invalid,
            "inadmissible_rate": 0.5, "repetitive_rate": 0.25, "avg_actions": 20.0,
            "tag_mix": {"planning": 0.1, "explore": 0.2, "monitor": 0.7}})
        .to_string()
    }

    #[test]
    fn the_comparison_groups_seeds_and_reads_both_summary_layouts() {
        let root = std::env::temp_dir().join(format!("report-compare-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for (run, success) in [("rlvmr-seed0", 0.2), ("rlvmr-seed1", 0.4)] {
            std::fs::create_dir_all(root.join(run).join("eval")).unwrap();
            for level in ["L0", "L2"] {
                std::fs::write(root.join(run).join("eval").join(format!("{level}.json")), summary(success, 0.1)).unwrap();
            }
        }
        std::fs::create_dir_all(root.join("sft-only").join("L2")).unwrap();
        std::fs::write(root.join("sft-only/L2/summary.json"), summary(0.05, 0.3)).unwrap();
        let dirs = [root.join("rlvmr-seed0"), root.join("rlvmr-seed1"), root.join("sft-only")];
        let table = comparison(&dirs).unwrap();
        // 20% and 40%: mean 30, sample sd 14.1; no L1 summary: –.
        assert!(
            table.starts_with(crate::envs::Protocol::Published.describe("alfworld")) && table.contains("| rlvmr | published | 2 | 30.0 ± 14.1 | – | 30.0 ± 14.1 | 10.0 ± 0.0 | 50.0 ± 0.0 | 25.0 ± 0.0 | 20.00 ± 0.00 | 10.0 ± 0.0 / 20.0 ± 0.0 / 0.0 ± 0.0 / 70.0 ± 0.0 |"),
            "{table}"
        );
        assert!(table.contains("| sft-only | published | 1 | – | – | 5.0 | 30.0 | 50.0 | 25.0 | 20.00 | 10.0 / 20.0 / 0.0 / 70.0 |"), "{table}");
        // A train run's final evaluations come with its curves (final.png).
        std::fs::write(root.join("rlvmr-seed0/metrics.jsonl"), "{\"iteration\": 1, \"success\": 0.5}\n").unwrap();
        let run = Run::read(&root.join("rlvmr-seed0")).unwrap();
        let levels: Vec<&str> = run.finals.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(levels, ["L0", "L2"]);
        assert_eq!(number(&run.finals[1].1, "/success_rate"), Some(0.2));
        std::fs::create_dir_all(root.join("empty")).unwrap();
        let err = comparison(&[root.join("empty")]).unwrap_err().to_string();
        assert!(err.contains("empty") && err.contains("no final evaluation"), "{err}");
        std::fs::write(root.join("sft-only/L2/summary.json"), "{\"episodes\": 3}").unwrap();
        let err = comparison(&[root.join("sft-only")]).unwrap_err().to_string();
        assert!(err.contains("summary.json") && err.contains("success_rate"), "{err}");
        let _ = std::fs::remove_dir_all(&root);
    }

    /// A PNG's (width, height), from its header.
    fn png_size(path: &Path) -> (u32, u32) {
        let bytes = std::fs::read(path).unwrap();
        let be = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
        (be(16), be(20))
    }

    #[test]
    fn success_has_an_evaluation_panel_only_when_a_run_evaluated() {
        let dir = std::env::temp_dir().join(format!("rlvmr-report-evals-{}", std::process::id()));
        let iteration = serde_json::json!({"iteration": 1, "success": 0.25});
        let mut run = Run {
            name: "a".into(),
            iterations: vec![iteration],
            evals: vec![],
            finals: vec![],
            protocol: None,
        };
        draw(std::slice::from_ref(&run), &dir).unwrap();
        assert_eq!(png_size(&dir.join("success.png")).0, 480, "one panel");
        assert!(!dir.join("eval-L2.png").exists());
        run.evals.push(serde_json::json!({"iteration": 1, "eval": {"split": "L2", "success_rate": 0.5}}));
        draw(std::slice::from_ref(&run), &dir).unwrap();
        assert_eq!(png_size(&dir.join("success.png")), (960, 400), "two panels");
        assert!(dir.join("eval-L2.png").is_file());
        // Two levels: a success panel for each (a grid of two rows) and a chart for each.
        run.evals.push(serde_json::json!({"iteration": 1, "eval": {"split": "L0", "success_rate": 0.25}}));
        let written = draw(&[run], &dir).unwrap();
        assert_eq!(png_size(&dir.join("success.png")), (960, 760), "three panels");
        assert!(written.contains(&dir.join("eval-L0.png")) && written.contains(&dir.join("eval-L2.png")));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_seed_suffix_names_the_method() {
        assert_eq!(method_of(Path::new("runs/cmp/grpo-seed12")), "grpo");
        assert_eq!(method_of(Path::new("runs/cmp/grpo-tagged-seed0")), "grpo-tagged");
        assert_eq!(method_of(Path::new("runs/cmp/grpo-seedling")), "grpo-seedling");
        assert_eq!(method_of(Path::new("runs/cmp/-seed1")), "-seed1");
        assert_eq!(method_of(Path::new("runs/cmp/sft-only")), "sft-only");
    }

    #[test]
    fn a_bad_metrics_line_is_named() {
        let dir = std::env::temp_dir().join(format!("report-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("metrics.jsonl"), "{\"iteration\": 1, \"success\": 0.5}\n{oops\n").unwrap();
        let err = Run::read(&dir).unwrap_err().to_string();
        assert!(err.contains("metrics.jsonl") && err.contains("line 2"), "{err}");
        std::fs::write(dir.join("metrics.jsonl"), "{\"step\": 1, \"loss\": 0.5}\n").unwrap();
        let err = Run::read(&dir).unwrap_err().to_string();
        assert!(err.contains("line 1") && err.contains("iteration"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_table_reads_the_last_iteration_and_evaluation() {
        let run = Run {
            name: "a".into(),
            iterations: vec![
                serde_json::json!({"iteration": 1, "success": 0.25}),
                serde_json::json!({"iteration": 2, "success": 0.5, "invalid_rate": 0.1}),
            ],
            finals: Vec::new(),
            protocol: Some((Protocol::Strict, "alfworld".to_string())),
            evals: vec![serde_json::json!({"iteration": 2, "eval": {"split": "L2", "success_rate": 0.75,
                "invalid_rate": 0.05, "inadmissible_rate": 0.2, "repetitive_rate": 0.1, "avg_actions": 9.5,
                "tag_mix": {"planning": 0.1, "explore": 0.2, "reflection": 0.3, "monitor": 0.4}}})],
        };
        let evals = eval_table(std::slice::from_ref(&run));
        assert!(evals.contains("| a | L2 | 2 | 0 | 75.0 | 5.0 | 20.0 | 10.0 | 10.0 / 20.0 / 30.0 / 40.0 |"), "{evals}");
        let table = table(&[run]);
        assert!(table.starts_with(Protocol::Strict.describe("alfworld")), "{table}");
        assert!(
            table.contains("| a | 2 | 50.0 | 75.0 | L2 (2) | 5.0 | 20.0 | 10.0 | 9.50 | 10.0 / 20.0 / 30.0 / 40.0 |"),
            "{table}"
        );
    }
}
